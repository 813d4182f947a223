"""An entry's `transcript.entry` record, built on the writer from what the agent thread queued.

Bad input is repaired and noted as the record's problems, never raised: a type that is not
canonical, a bad source or timestamp, a detail that is not a dict, content that JSON cannot hold.
The content policy and redaction apply here, before any sink sees the entry.
"""

from __future__ import annotations

import json
import time
from typing import Any, Final

import orjson

from transcript_otel.model.entries import (
    CANONICAL_ENTRY_TYPES,
    MAIN_SOURCE,
    DetailInRaw,
    EntryType,
    RawJson,
    TranscriptEvent,
    is_valid_source,
)
from transcript_otel.records.content import ContentPolicy
from transcript_otel.records.content_search import BATCH_SEARCH_MAX_BYTES, DeferredSearch, search_alone
from transcript_otel.records.prepared import PreparedRecord, with_trace
from transcript_otel.records.queued import EntryPlacement, QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.serialize import (
    dumps,
    iso_timestamp,
    plain_json,
    preview,
    repaired_json,
    safe_text,
)


def prepare_entry(
    item: QueuedItem,
    redactor: Redactor | None = None,
    policy: ContentPolicy | None = None,
    deferred: list[DeferredSearch] | None = None,
) -> PreparedRecord:
    """Build the `transcript.entry` record; bad input is repaired and noted, never raised.

    `policy` decides how much content is kept; then `redactor` replaces secrets in
    `detail` and `raw`. With a `deferred` list, the searches of a small entry's content
    are left to `search_batch`, which the caller must run before any sink sees the record.
    """
    _, run, entry_type, source, timestamp_ns, detail, raw, otel_context = item
    problems: list[str] = []
    finite = False  # known to hold no NaN or infinity
    if type(detail) is DetailInRaw:
        detail, finite = _detail_from_raw(detail, raw, problems)
    placed_detail = detail
    # The common case, a canonical str and `main`, costs two checks; the rest is repaired.
    if type(entry_type) is str and entry_type in CANONICAL_ENTRY_TYPES:
        entry_type_text = entry_type
    else:
        entry_type_text, detail = _checked_entry_type(entry_type, detail, problems)
    if type(source) is str and source == MAIN_SOURCE:
        source_text = source
    else:
        source_text = _checked_source(source, problems)
    # `usable_timestamp`, inline: this runs for every entry (a call costs more than the test).
    if type(timestamp_ns) is not int or not 0 <= timestamp_ns <= _LAST_TIMESTAMP_NS:
        got = f"{type(timestamp_ns).__name__} {safe_text(preview(timestamp_ns))[0]}"
        problems.append(f"timestamp_ns must be nanoseconds since the epoch, got {got}")
        timestamp_ns = time.time_ns()
    timestamp_ns = run.not_before_last(source_text, timestamp_ns)
    if isinstance(otel_context, EntryPlacement):
        otel_context = otel_context.place(entry_type, source, placed_detail, timestamp_ns)
    timestamp = iso_timestamp(timestamp_ns)
    context: dict[str, Any] = {
        "prompt_name": run.prompt_name,
        "adapter": run.adapter,
        "entry_type": entry_type_text,
        "sequence_number": 0,  # taken last (below), once nothing can fail: numbers have no gaps
        "source": source_text,
        "timestamp": timestamp,
    }
    if run.session_id is not None:
        context["session_id"] = run.session_id
    detail_json: bytes | None = None
    detail_is_json = False
    check_null = False  # a `null` in the detail's JSON may have been a NaN or an infinity
    # The policy, when it keeps less than everything of this entry: no raw, a reduced detail.
    reducing = None
    if policy is not None and not policy.keeps_everything and policy.mode_for(entry_type_text) != "full":
        reducing = policy
    if reducing is not None:
        raw = None
    # Whether the user's redaction rules apply: they see the detail's strings, and after the
    # built-in rules (`searched_later`). A plain attribute, read twice per entry.
    user_rules = redactor is not None and redactor.has_user_rules
    if detail is not None:
        if type(detail) is not dict:
            detail = _detail_dict(detail, problems)
        if reducing is not None:
            detail = reducing.detail(entry_type_text, detail)
        if user_rules and redactor is not None:
            detail = redactor.user_value(detail)
        detail_json = plain_json(detail)  # whether a NaN became a null is asked below
        detail_is_json = detail_json is not None
        check_null = detail_is_json and not finite
        if detail_json is None:
            detail_json, problem = repaired_json(detail, finite=finite)
            detail_is_json = problem is None
            if problem:
                problems.append(f"detail: {problem}")
    raw_text: str | None = None
    if raw is not None:
        if isinstance(raw, RawJson):
            encoded_raw = dumps(raw.value)
            if encoded_raw.problem:
                problems.append(f"raw: {encoded_raw.problem}")
            raw = encoded_raw.data
        if type(raw) is str and raw.isascii():
            raw_text = raw  # `safe_text`'s common case, inline
        else:
            raw_text, problem = safe_text(raw)
            if problem:
                problems.append(f"raw: {problem}")
    if detail_json is not None:
        context["detail"] = orjson.Fragment(detail_json)
    if raw_text is not None:
        context["raw"] = raw_text
    # Positional: keyword arguments cost the writer more, on every entry.
    record = PreparedRecord(
        TranscriptEvent.ENTRY,
        run,
        timestamp_ns,
        timestamp,
        context,
        detail_json,
        detail,
        detail_is_json,
        redactor,
        otel_context,
        problems,
    )
    searched_later = (
        deferred is not None
        and not user_rules  # theirs apply after the built-in rules
        and len(detail_json or b"") + len(raw_text or "") <= BATCH_SEARCH_MAX_BYTES
    )
    if not searched_later:
        search_alone(record, check_null)
    if otel_context:  # an empty Context (no span was current) is falsy: no ids to look up
        with_trace(record)
    context["sequence_number"] = run.count_entry(entry_type_text, source_text, timestamp_ns)
    if deferred is not None and searched_later:
        deferred.append(DeferredSearch(record, check_null))
    return record


# `datetime` ends with the year 9999.
_LAST_TIMESTAMP_NS: Final = 253_402_300_799 * 1_000_000_000


def usable_timestamp(value: Any) -> int | None:
    """`value` if it is an int of nanoseconds since the epoch that a record can show."""
    if type(value) is int and 0 <= value <= _LAST_TIMESTAMP_NS:
        return value
    return None


def _checked_entry_type(entry_type: Any, detail: Any, problems: list[str]) -> tuple[str, Any]:
    """`entry_type` as text and `detail`; a type that is not canonical becomes `unknown`,
    its name kept in the detail as `original_entry_type`."""
    entry_type_text, problem = safe_text(entry_type)
    if problem:
        problems.append(f"entry_type: {problem}")
    if entry_type_text in CANONICAL_ENTRY_TYPES:
        return entry_type_text, detail
    problems.append(f"entry_type {entry_type_text!r} is not canonical; recorded as 'unknown'")
    known = {} if detail is None else _detail_dict(detail, problems)
    return EntryType.UNKNOWN.value, {**known, "original_entry_type": entry_type_text}


def _checked_source(source: Any, problems: list[str]) -> str:
    source_text, problem = safe_text(source)
    if problem:
        problems.append(f"source: {problem}")
    if not is_valid_source(source_text):
        problems.append(f"source {source_text!r} is neither 'main' nor 'subagent:<id>': recorded as 'main'")
        return MAIN_SOURCE
    return source_text


class _NonFinite(Exception):
    pass


def _refuse_constant(name: str) -> float:
    raise _NonFinite(name)  # "NaN", "Infinity" or "-Infinity"


# `json`, not orjson: the exact inverse of the `json.dumps` that made `raw` (orjson
# reads NaN as an error and a 20-digit integer as a float). Refusing NaN and infinities
# first tells a detail that holds none, whose encoding need not be searched for one
# (`dumps(finite=True)`); the rare raw
# that holds one is read again with `json`'s defaults.
_FINITE_DECODER: Final = json.JSONDecoder(parse_constant=_refuse_constant)


def _parsed_raw(raw: Any) -> tuple[Any, bool]:
    """`raw` parsed, and whether it surely holds only finite floats."""
    try:
        if type(raw) is str:
            return _FINITE_DECODER.decode(raw), True
        return json.loads(raw, parse_constant=_refuse_constant), True
    except _NonFinite:
        return json.loads(raw), False


def _detail_from_raw(spec: DetailInRaw, raw: Any, problems: list[str]) -> tuple[dict[str, Any], bool]:
    """The detail `spec` names, taken out of `raw` (a JSON string), and whether it surely holds
    only finite floats; what is not there is named in `problems` (the record still carries
    `raw`, which holds it)."""
    detail: dict[str, Any] = {}
    finite = False
    try:
        holder, finite = _parsed_raw(raw)
        for key, raw_key in spec.fields:
            detail[key] = holder[raw_key]
    except Exception as exc:
        problems.append(f"detail: not found in raw: {type(exc).__name__}: {str(exc)[:200]}")
    detail.update(spec.constants)
    return detail, finite


def _detail_dict(detail: Any, problems: list[str]) -> dict[Any, Any]:
    if isinstance(detail, dict):
        return detail
    problems.append(f"detail must be a dict, got {type(detail).__name__}; wrapped as 'value'")
    return {"value": detail}
