"""A captured run as a devflow transcript (seed 003, ADR-011; the format is `format.py`'s).

`write_devflow(source, target)` reads the run twice and never holds it whole: a
first pass feeds a `RunDigest` (metadata: times, status, token totals, cost,
errors, and how many entries each source has), a second writes the turns as they
come (`turns.py`: which entry becomes which turn, and which turns are held
until they can be written) into the file `file.py` puts in place. A source
without any record is a `ValueError`; a run without entries is a transcript with no
turns.

Metadata: `flowId` = the prompt name (else `transcript`), `nodeId` = the adapter,
`startedAt`/`endedAt` = the run's first and last record (`endedAt` left out while
`running`), `status` = `failed` when the run has an error entry, `completed` when it
stopped without one, `running` when there is no `transcript.stop` record (a
captured run never says `canceled`); token totals and `totalCost` as `summary`
counts them. `runId` = `devflow_run_id(start, flow, the first 8 characters of the
session id)` (of the run id when there is no session id).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

from transcript_otel.exports.devflow.file import DevflowFile, devflow_target
from transcript_otel.exports.devflow.format import go_json, go_time
from transcript_otel.exports.devflow.turns import TurnWriter
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.reconstruct import entry_from_context

if TYPE_CHECKING:
    from transcript_otel.reading.sources import RecordSource

__all__ = ["devflow_run_id", "write_devflow"]

_DEFAULT_FLOW: Final = "transcript"
_SHORT_ID: Final = 8
_SLUG_OUT: Final = re.compile(r"[^A-Za-z0-9_]+")


# -- run ids ------------------------------------------------------------------------------


def _slug(value: str, what: str) -> str:
    slug = _SLUG_OUT.sub("-", value).strip("-")
    if not slug:
        raise ValueError(f"the run id's {what} {value!r} has no letter or digit")
    return slug


def devflow_run_id(started: datetime, flow: str, identifier: str, suffix: str | None = None) -> str:
    """`{date}-{flow}-{identifier}[-{suffix}]`, e.g. `2025-01-15-ticket-to-pr-TK421`.

    The date is the start's (in UTC when it has a time zone); each part is slugged:
    runs of anything but ASCII letters, digits and `_` become one `-`, none at the
    ends (case is kept). A part with no letter or digit is a `ValueError`.
    """
    if started.tzinfo is not None:
        started = started.astimezone(UTC)
    parts = [started.strftime("%Y-%m-%d"), _slug(flow, "flow"), _slug(identifier, "identifier")]
    if suffix is not None:
        parts.append(_slug(suffix, "suffix"))
    return "-".join(parts)


def _short_identifier(digest: RunDigest) -> str:
    for candidate in (digest.session_id, digest.run_id):
        if candidate and _SLUG_OUT.sub("", candidate):
            return _slug(candidate, "identifier")[:_SHORT_ID].strip("-")
    assert digest.started is not None
    return digest.started.astimezone(UTC).strftime("%H%M%S")


# -- writing ------------------------------------------------------------------------------


def _metadata(digest: RunDigest, flow_id: str, node_id: str) -> dict[str, Any]:
    assert digest.started is not None
    status = {"failed": "failed", "completed": "completed", "interrupted": "canceled"}.get(
        digest.status, "running"
    )
    tokens = digest.tokens
    metadata: dict[str, Any] = {"flowId": flow_id}
    if node_id:
        metadata["nodeId"] = node_id
    metadata["startedAt"] = go_time(digest.started)
    if status != "running" and digest.ended is not None:
        metadata["endedAt"] = go_time(digest.ended)
    metadata["status"] = status
    metadata["totalTokensIn"] = tokens.get("input", 0)
    metadata["totalTokensOut"] = tokens.get("output", 0)
    metadata["totalCost"] = round(digest.cost_usd, 6)
    if digest.errors:
        metadata["error"] = digest.errors[0]
    return metadata


def write_devflow(
    source: RecordSource,
    target: str | os.PathLike[str],
    *,
    flow_id: str | None = None,
    run_id: str | None = None,
    node_id: str | None = None,
) -> Path:
    """Write the run `source` reads as a devflow transcript; returns the file written.

    `target` is a directory (existing, or a path whose name ends in neither `.json`
    nor `.gz`, created): `transcript.json` is written there, or `transcript.json.gz`
    when the document is 100 KiB or more (the other one, left by an earlier export,
    is removed). Otherwise `target` is the file, gzipped when its name ends in `.gz`.
    `flow_id` (default: the prompt name), `run_id` (default: `devflow_run_id` of the
    start, the flow and the run's id) and `node_id` (default: the adapter; `""`
    leaves it out) override the defaults. A source with no records at all is a
    `ValueError`; a run with no entries gives a transcript without turns.
    """
    digest = RunDigest.of(source.records())
    if digest.started is None:
        raise ValueError("nothing to export: the run has no transcript records")
    flow = flow_id if flow_id is not None else (digest.prompt_name or _DEFAULT_FLOW)
    if run_id is None:
        run_id = devflow_run_id(digest.started, flow, _short_identifier(digest))
    elif not run_id:
        raise ValueError("the run id is empty")
    metadata = _metadata(digest, flow, node_id if node_id is not None else digest.adapter)

    directory, name, compress = devflow_target(target)
    out = DevflowFile(directory, name, compress)
    try:
        out.write(
            b'{\n  "runId": %s,\n  "metadata": %s,\n  "turns": [' % (go_json(run_id, 0), go_json(metadata, 1))
        )
        turns = TurnWriter(out, digest.by_source, digest.turn_tokens())
        records = source.records()
        try:
            # As many records as the first pass read: a run still being written gains some.
            for record in islice(records, digest.records):
                if record.get("event") != TranscriptEvent.ENTRY.value:
                    continue
                context = record.get("context")
                try:
                    entry = entry_from_context(context if isinstance(context, Mapping) else {})
                except ValueError:
                    continue  # malformed: `validate` says what is wrong with it
                turns.add(entry)
        finally:
            close = getattr(records, "close", None)
            if callable(close):
                close()  # the file under a generator stopped early
        turns.finish()
        out.write(b"\n  ]\n}\n" if turns.written else b"]\n}\n")
        return out.commit()
    except BaseException:
        out.discard()
        raise
