"""Finding and reading a captured run, whatever form it was kept in.

A RUN given to the command line is one of:

* a JSONL mirror file (what the local mirror writes: one structured-log record per line);
* a debug bundle (`.zip` with `debug_bundle/manifest.json`);
* an OTLP JSON export (the OpenTelemetry Collector's `file` exporter: one
  `ExportLogsServiceRequest` in OTLP/JSON per line, `{"resourceLogs": …}`);
* a run id, session id or a part of a mirror file name, looked up in the mirror
  directory (`TRANSCRIPT_OTEL_JSONL_DIR`, else the default), or `last` for the run that
  started last (not the file written last: an import writes old sessions' runs today).

`open_run()` tells which and returns a `RunSource`, whose records stream: nothing is
read until they are iterated, and never all at once.
"""

from __future__ import annotations

import os
import re
import warnings
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Final, Literal, Protocol

from transcript_otel.environment_variables import TRANSCRIPT_OTEL_JSONL_DIR
from transcript_otel.mappings.session_lines import timestamp_ns
from transcript_otel.reading.bundle import iter_bundle_records
from transcript_otel.reading.errors import NotARunError, RunNotFoundError
from transcript_otel.reading.lines import LineReader, TranscriptReadWarning
from transcript_otel.reading.otlp_records import NotOtlpError, records_from_otlp
from transcript_otel.records.serialize import loads
from transcript_otel.sinks.jsonl_files import default_directory

RunKind = Literal["jsonl", "bundle", "otlp-json"]
LATEST: Final = "last"
_SNIFF_BYTES: Final = 4096
# What a run-id lookup reads of each file's first and last line: enough for a
# `transcript.start` or `transcript.stop` record, and never a hostile line whole.
_EDGE_BYTES: Final = 1 << 16
# A mirror file's name begins with its run's UTC start time (`sinks.jsonl_files.run_file_name`).
_STARTED: Final = re.compile(r"(\d{8}T\d{6}Z)_")
_SECOND_NS: Final = 1_000_000_000


class RecordSource(Protocol):
    """Anything whose records can be read, from the start, as many times as asked."""

    def records(self) -> Iterator[dict[str, Any]]: ...


@dataclass(frozen=True, slots=True)
class RunSource:
    """One captured run (or a file of several), and how to read its records."""

    path: Path
    kind: RunKind

    def located_records(self) -> Iterator[tuple[str, dict[str, Any]]]:
        """Each record with where it came from (`file:line`), in file order.

        Raises `NotARunError` at the end of a file with content but not one record (random
        bytes, another program's log): corrupt input, not an empty run.
        """
        if self.kind == "bundle":
            yield from iter_bundle_records(self.path)
            return
        read = 0
        for located in (
            _otlp_json_records(self.path) if self.kind == "otlp-json" else _jsonl_records(self.path)
        ):
            read += 1
            yield located
        if not read and _has_content(self.path):
            raise NotARunError(f"{self.path} is not a transcript: not one record could be read from it")

    def records(self) -> Iterator[dict[str, Any]]:
        for _, record in self.located_records():
            yield record


def mirror_directory() -> Path:
    """Where the local mirror writes its per-run files."""
    configured = os.environ.get(TRANSCRIPT_OTEL_JSONL_DIR)
    return Path(configured) if configured else default_directory()


def open_run(spec: str | os.PathLike[str], *, directory: Path | None = None) -> RunSource:
    """The run `spec` names: a file (mirror, bundle, OTLP JSON), or an id looked up in `directory`."""
    path = Path(spec)
    if path.is_file():
        return RunSource(path, _kind_of(path))
    if path.exists():
        raise RunNotFoundError(
            f"{path} is not a file (a run is a JSONL mirror, a bundle or an OTLP JSON file)"
        )
    return RunSource(_find_in_mirror(str(spec), directory or mirror_directory()), "jsonl")


def _kind_of(path: Path) -> RunKind:
    if zipfile.is_zipfile(path):
        return "bundle"
    with open(path, "rb") as handle:
        start = handle.read(_SNIFF_BYTES).lstrip()
    return "otlp-json" if start.startswith(b"{") and b'"resourceLogs"' in start[:200] else "jsonl"


def _find_in_mirror(spec: str, directory: Path) -> Path:
    runs = sorted(run for run in directory.glob("*.jsonl") if run.is_file()) if directory.is_dir() else []
    if not runs:
        raise RunNotFoundError(f"no file {spec!r}, and no runs in {directory} to look it up in")
    if spec == LATEST:
        return _started_last(runs)
    matches = [run for run in runs if spec in run.name] or [run for run in runs if _has_run_id(run, spec)]
    if not matches:
        raise RunNotFoundError(f"no run {spec!r} in {directory} (give a file, a run id, or {LATEST!r})")
    if len(matches) > 1:
        names = ", ".join(run.name for run in matches[:5])
        raise RunNotFoundError(f"{spec!r} matches {len(matches)} runs in {directory}: {names}")
    return matches[0]


def runs_newest_first(directory: Path) -> list[Path]:
    """The runs of the mirror `directory`, the one that started last first (as `last` picks it;
    each file's first record read, for runs of one second and files named otherwise)."""
    runs = [run for run in directory.glob("*.jsonl") if run.is_file()] if directory.is_dir() else []
    started = {run: _start_ns(run, _named_start_ns(run)) for run in runs}
    return sorted(runs, key=lambda run: (started[run], run.name), reverse=True)


def _started_last(runs: list[Path]) -> Path:
    """The run that started last: by the start time its name begins with; runs of that second,
    and files named otherwise, by their first record's time (else their modification time).
    Only those first records are read, not every run's."""
    named = {run: _named_start_ns(run) for run in runs}
    newest = max((started for started in named.values() if started is not None), default=None)
    contenders = [run for run, started in named.items() if started is None or started == newest]
    return max(contenders, key=lambda run: (_start_ns(run, named[run]), run.name))


def _named_start_ns(path: Path) -> int | None:
    found = _STARTED.match(path.name)
    if found is None:
        return None
    try:
        started = datetime.strptime(found.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    except ValueError:
        return None
    return int(started.timestamp()) * _SECOND_NS


def _start_ns(path: Path, named_ns: int | None) -> int:
    """When the run began: its first record's time (within the second its name says, if it
    says one), else that second, else the file's modification time."""
    record = _first_record(path)
    stamp = record.get("timestamp") if isinstance(record, dict) else None
    recorded = timestamp_ns(stamp)
    if recorded is not None and (named_ns is None or 0 <= recorded - named_ns < _SECOND_NS):
        return recorded
    return named_ns if named_ns is not None else path.stat().st_mtime_ns


def _has_run_id(path: Path, wanted: str) -> bool:
    """Whether the run's first or last record names `wanted` as its run, session or trace id
    (file names carry the session id only when it was known at the start)."""
    for record in (_first_record(path), _last_record(path)):
        context = record.get("context") if isinstance(record, dict) else None
        if isinstance(context, dict) and wanted in (
            context.get("run_id"),
            context.get("session_id"),
            context.get("trace_id"),
        ):
            return True
    return False


def _first_record(path: Path) -> Any:
    with open(path, "rb") as handle:
        return _parse(handle.readline(_EDGE_BYTES))  # a longer first line is cut: not JSON


def _last_record(path: Path) -> Any:
    with open(path, "rb") as handle:
        size = handle.seek(0, os.SEEK_END)
        handle.seek(max(0, size - _EDGE_BYTES))
        lines = handle.read().splitlines()
    return _parse(lines[-1]) if lines else None


def _parse(line: bytes) -> Any:
    try:
        return loads(line)
    except ValueError:
        return None


def _has_content(path: Path) -> bool:
    with open(path, "rb") as handle:
        return bool(handle.read(_SNIFF_BYTES).strip())


def _jsonl_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The records of a JSONL mirror file, one per line."""
    with open(path, "rb") as handle:
        yield from LineReader(os.fspath(path)).objects(handle)


def _otlp_json_records(path: Path) -> Iterator[tuple[str, dict[str, Any]]]:
    """The transcript records of an OTLP/JSON file: one export request per line."""
    with open(path, "rb") as handle:
        for location, request in LineReader(os.fspath(path)).values(handle, invalid="not OTLP JSON"):
            try:
                for record in records_from_otlp([request]):
                    yield location, record
            except NotOtlpError as exc:
                warnings.warn(
                    f"{location}: skipped the rest of the line: {exc}", TranscriptReadWarning, stacklevel=2
                )
