"""One run's records as a weakincentives debug bundle, which `wink query` and `wink debug` open.

`write_bundle(records, target)` turns the structured-log records of one run (a JSONL
mirror as `read_records` yields it) into a zip in the layout weakincentives 0.26+
writes itself, every member under `debug_bundle/`:

- `manifest.json`: a `BundleManifest` (format 1.0.0): bundle id, creation time, the
  request (`request_id` = our run id, session id, status `success` / `failed` when
  the run has an `error` entry / `incomplete` when it has no `transcript.stop`, start
  and end times), capture, prompt (`ns:key` split; any other name is the key),
  `files` (every other member, sorted, as weakincentives lists them), SHA-256
  checksums of every other member, and `build.version` = transcript-otel's version.
  This member is the one thing `wink` requires of a bundle.
- `README.txt`: what the bundle is, who made it, how to open it.
- `logs/app.jsonl`: every record, one per line, in the line format of weakincentives'
  log collector (keys `timestamp, level, logger, event, message, context` first, in
  that order; `json.dumps(..., ensure_ascii=False)` with its default separators).
- `transcript.jsonl`: the `transcript.entry` lines of `logs/app.jsonl`, byte for
  byte (what weakincentives writes, and what `wink query` reads first).
- `transcript/`: the optional section of the transcript specification (phase 4),
  present when the run has entries:
  - one JSONL per source, `transcript/main.jsonl` and `transcript/subagent-<id>.jsonl`
    (other sources `transcript/source-<name>.jsonl`), again the same lines. Each agent's
    conversation can be read on its own, in its own sequence, without filtering an
    interleaved log: parallel subagents are interleaved line by line in
    `transcript.jsonl`. It is the layout of Claude Code's own transcripts (main file
    plus `subagents/agent-<id>.jsonl`), and each file is itself a JSONL transcript
    that `read_records` and `transcript-otel show` read. (Past 1000 sources, the
    rest share `transcript/other-sources.jsonl`.)
  - `transcript/index.json`: the run (ids, prompt, adapter, status, times, entry and
    skipped counts) and, per source, its exact source string (file names are
    sanitized, so this is the only way back from a name to its source), file, entry
    count, first and last sequence number, whether the numbers run 1, 2, 3… without
    a gap, first and last capture time, counts by type, and the count the emitter
    reported for it in `transcript.stop` with its `dropped_entries`. So a reader sees
    at once which agents ran and whether anything is missing, without SQL.

Member names are fixed strings plus sanitized stems (`[A-Za-z0-9_-]`, unique even
on case-insensitive file systems): no source or prompt name can reach outside
`debug_bundle/`.

Streaming: records are written as they come; `logs/app.jsonl` goes straight into
its zip member, while the entry lines are spooled to temporary files next to the
target (a zip takes one member at a time) and copied in at the end. Checksums are
computed as the bytes are written. Memory does not grow with the run.

Atomic: everything is written under a temporary directory in the target's
directory and the finished zip is moved into place with `os.replace`; on any
failure (including one raised by `records`) the temporary directory is removed and
nothing appears at the target. The bundle is private (0600), as the JSONL mirror is.

Lines are written so that any line splitter reads them back: U+2028, U+2029 and
U+0085 are written as `\\u` escapes (JSON allows both spellings), because
weakincentives reads `transcript.jsonl` with `str.splitlines()`, which splits at
them and loses the entry (its own writer has that bug); lone surrogates are written
escaped as well.

`iter_bundle_records(path)` reads a bundle back (ours or one weakincentives wrote).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import tempfile
import time
import uuid
import zipfile
from collections import Counter, OrderedDict
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from transcript_otel.exports import destination
from transcript_otel.reading.lines import MAX_RECORD_BYTES as MAX_LINE_BYTES  # the readers' one cap
from transcript_otel.reading.lines import LineReader
from transcript_otel.records.serialize import loads
from transcript_otel.version import __version__

__all__ = [
    "BUNDLE_FORMAT_VERSION",
    "BUNDLE_ROOT",
    "MAX_MEMBER_BYTES",
    "BundleInfo",
    "iter_bundle_records",
    "write_bundle",
]

BUNDLE_ROOT: Final = "debug_bundle"
BUNDLE_FORMAT_VERSION: Final = "1.0.0"  # weakincentives' BUNDLE_FORMAT_VERSION (0.22 to 0.27)
MAX_MEMBER_BYTES: Final = 4 << 30  # a member declaring more is refused when read (zip bomb)
_MAX_MANIFEST_BYTES: Final = 16 << 20

MANIFEST: Final = "manifest.json"
README: Final = "README.txt"
APP_LOG: Final = "logs/app.jsonl"
TRANSCRIPT: Final = "transcript.jsonl"
TRANSCRIPT_DIR: Final = "transcript"
TRANSCRIPT_INDEX: Final = "transcript/index.json"

_ENTRY: Final = "transcript.entry"
_STOP: Final = "transcript.stop"
_LINE_KEYS: Final = ("timestamp", "level", "logger", "event", "message", "context")
_LINE_DEFAULTS: Final[Mapping[str, Any]] = {
    "timestamp": "",
    "level": "",
    "logger": "",
    "message": "",
}
# JSON text may hold these raw inside strings, but `str.splitlines()` splits at them.
_LINE_BREAKS: Final = {0x2028: "\\u2028", 0x2029: "\\u2029", 0x85: "\\u0085"}
_ENCODER: Final = json.JSONEncoder(ensure_ascii=False)  # = json.dumps(..., ensure_ascii=False)
_RUN_KEYS: Final = ("run_id", "prompt_name", "adapter", "session_id", "trace_id")
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_-]+")
_STEM_LIMIT: Final = 80
# Bounds that keep a hostile run from growing memory or open files without limit.
MAX_SOURCE_FILES: Final = 1000  # sources beyond: `transcript/other-sources.jsonl`
_MAX_TYPES_PER_SOURCE: Final = 100  # more distinct entry types are counted as "(other)"
_OPEN_SPOOLS: Final = 32
_CHUNK: Final = 1 << 20
_WRITE_BUFFER: Final = 1 << 16
_FILE_MODE: Final = 0o100644 << 16  # regular file, rw-r--r-- once extracted


@dataclass(frozen=True, slots=True)
class BundleInfo:
    """What `write_bundle` wrote."""

    path: Path
    bundle_id: str
    entries: int  # `transcript.entry` records
    skipped: int  # records that were not objects with an `event`, or not JSON-encodable
    members: tuple[str, ...]  # every zip member name, sorted
    status: str  # as in the manifest: success, failed or incomplete


def write_bundle(records: Iterable[Mapping[str, Any]], target: str | os.PathLike[str]) -> BundleInfo:
    """Write the records of one run, in file order, as a debug-bundle zip at `target`.

    `target` is the zip to write (replaced if it exists), or an existing directory,
    in which the bundle is named `<bundle_id>_<YYYYmmdd_HHMMSS>.zip` (the run's start,
    UTC) as weakincentives names its own. Records that are not objects with an
    `event` string are skipped and counted. Raises `ValueError` for a run without
    records; whatever fails, nothing is left behind.
    """
    target_path = Path(target)
    into_directory = target_path.is_dir()
    directory = target_path if into_directory else destination.scratch_directory(target_path)
    if not directory.is_dir():
        raise FileNotFoundError(f"{directory}: no such directory to write the bundle in")
    workdir = Path(tempfile.mkdtemp(prefix=".transcript-otel-bundle-", dir=directory))
    try:
        writer = _BundleWriter(workdir)
        writer.write_records(records)
        final = destination.put_in_place(
            workdir / "bundle.zip", target_path / writer.default_name() if into_directory else target_path
        )
        return BundleInfo(
            path=final,
            bundle_id=writer.bundle_id,
            entries=writer.entries,
            skipped=writer.skipped,
            members=tuple(sorted(writer.members)),
            status=writer.status(),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


def iter_bundle_records(path: str | os.PathLike[str]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Stream the records of a bundle, each with its `<zip>!<member>:<line>` location.

    Reads `debug_bundle/logs/app.jsonl`, or `debug_bundle/transcript.jsonl` in a
    bundle without logs. Lines that are not JSON objects, or longer than
    `MAX_LINE_BYTES`, are skipped with a `TranscriptReadWarning`. Raises `ValueError`
    (at once, not on first use) for a file that is not a zip or not a debug bundle,
    and for a member declaring more than `MAX_MEMBER_BYTES` uncompressed, or more
    than `MAX_INFLATE_RATIO` times its compressed size (a zip bomb).
    """
    name = os.fspath(path)
    member = _check_bundle(path, name)
    return _iter_member(path, name, member)


# --- writing -------------------------------------------------------------------------


def _encode_line(record: Mapping[str, Any]) -> bytes:
    """One app.jsonl line (with its newline) in weakincentives' key order and format."""
    ordered: dict[str, Any] = {}
    for key in _LINE_KEYS:
        if key in record:
            ordered[key] = record[key]
        elif key == "context":
            ordered[key] = {}
        else:
            ordered[key] = _LINE_DEFAULTS[key]
    for key, value in record.items():
        if key not in ordered:
            ordered[key] = value
    text = _ENCODER.encode(ordered)
    if "\u2028" in text or "\u2029" in text or "\x85" in text:
        text = text.translate(_LINE_BREAKS)
    try:
        return text.encode("utf-8") + b"\n"
    except UnicodeEncodeError:  # lone surrogates: escape them as ensure_ascii does
        return json.dumps(ordered).encode("ascii") + b"\n"


def _safe_stem(source: str | None) -> str:
    """A file-name stem for a source: `main`, `subagent-<id>`, `source-<name>`, `no-source`."""
    if source is None:
        return "no-source"
    if source == "main":
        return "main"
    prefix, rest = "source", source
    if source.startswith("subagent:"):
        prefix, rest = "subagent", source[len("subagent:") :]
    slug = _UNSAFE_NAME.sub("-", rest).strip("-")[:_STEM_LIMIT].strip("-")
    return f"{prefix}-{slug}" if slug else prefix


class _HashingSink:
    """Buffers bytes into a binary writer, hashing and counting them as they pass."""

    def __init__(self, raw: IO[bytes]) -> None:
        self.raw = raw
        self.sha256 = hashlib.sha256()
        self.size = 0
        self._buffer = bytearray()

    def write(self, data: bytes) -> None:
        self.sha256.update(data)
        self.size += len(data)
        self._buffer += data
        if len(self._buffer) >= _WRITE_BUFFER:
            self.flush()

    def flush(self) -> None:
        if self._buffer:
            self.raw.write(self._buffer)
            del self._buffer[:]


@dataclass(slots=True)
class _Source:
    """One source's entries: their spool file and what the index says about them."""

    source: str | None  # None: entries without a source string (or `several`)
    member: str
    spool: Path
    several: bool = False  # the entries of every source beyond MAX_SOURCE_FILES
    entries: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    contiguous: bool = True
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    by_type: Counter[str] = field(default_factory=Counter)

    def add(self, context: Mapping[str, Any]) -> None:
        self.entries += 1
        sequence = context.get("sequence_number")
        if not isinstance(sequence, int) or isinstance(sequence, bool):
            self.contiguous = False
        else:
            self.contiguous = self.contiguous and sequence == self.entries  # 1, 2, 3… in file order
            if self.first_sequence is None:
                self.first_sequence = sequence
            self.last_sequence = sequence
        stamp = context.get("timestamp")
        if isinstance(stamp, str):
            if self.first_timestamp is None:
                self.first_timestamp = stamp
            self.last_timestamp = stamp
        entry_type = context.get("entry_type")
        key = entry_type if isinstance(entry_type, str) else "(none)"
        if key not in self.by_type and len(self.by_type) >= _MAX_TYPES_PER_SOURCE:
            key = "(other)"
        self.by_type[key] += 1


class _Spools:
    """Append-only temporary files, at most `_OPEN_SPOOLS` of them open at a time."""

    def __init__(self) -> None:
        self._open: OrderedDict[Path, IO[bytes]] = OrderedDict()

    def append(self, path: Path, data: bytes) -> None:
        handle = self._open.get(path)
        if handle is None:
            if len(self._open) >= _OPEN_SPOOLS:
                _, oldest = self._open.popitem(last=False)
                oldest.close()
            handle = self._open[path] = open(path, "ab")  # noqa: SIM115 (closed by close())
        else:
            self._open.move_to_end(path)
        handle.write(data)

    def close(self) -> None:
        while self._open:
            _, handle = self._open.popitem()
            handle.close()


class _BundleWriter:
    """Streams one run into `<workdir>/bundle.zip`, spooling entry lines in `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self.workdir = workdir
        self.bundle_id = str(uuid.uuid4())
        self.created = datetime.now(UTC)
        self.entries = 0
        self.skipped = 0
        self.records = 0
        self.members: list[str] = []
        self.checksums: dict[str, str] = {}
        self.run: dict[str, str] = {}  # first non-empty run_id, prompt_name, adapter, session_id, trace_id
        self.started_at = ""
        self.ended_at = ""
        self.has_stop = False
        self.has_error = False
        self.stop_context: dict[str, Any] = {}
        self.sources: dict[str | None, _Source] = {}
        self._overflow: _Source | None = None  # the sources beyond MAX_SOURCE_FILES, together
        self._stems: set[str] = set()
        self._spools = _Spools()
        self._transcript_spool = workdir / "transcript.spool"
        self._date_time = time.localtime(self.created.timestamp())[:6]

    # The run ---------------------------------------------------------------------------

    def status(self) -> str:
        if self.has_error:
            return "failed"
        return "success" if self.has_stop else "incomplete"

    def default_name(self) -> str:
        started = _parse_time(self.started_at) or self.created
        return f"{self.bundle_id}_{started.strftime('%Y%m%d_%H%M%S')}.zip"

    def write_records(self, records: Iterable[Mapping[str, Any]]) -> None:
        with zipfile.ZipFile(self.workdir / "bundle.zip", "w", zipfile.ZIP_DEFLATED) as archive:
            try:
                with archive.open(self._info(APP_LOG), "w", force_zip64=True) as member:
                    sink = _HashingSink(member)
                    for record in records:
                        self._add(record, sink)
                    sink.flush()
            finally:
                self._spools.close()
            self._finish_member(APP_LOG, sink)
            if self.records == 0:
                skipped = f" ({self.skipped} skipped: not objects with an event)" if self.skipped else ""
                raise ValueError(f"the run has no records{skipped}: nothing to bundle")
            if self.entries:
                self._copy_spool(archive, self._transcript_spool, TRANSCRIPT)
                for source in self.all_sources():
                    self._copy_spool(archive, source.spool, source.member)
                self._write_member(archive, TRANSCRIPT_INDEX, self._index())
            self._write_member(archive, README, self._readme().encode("utf-8", "backslashreplace"))
            manifest = json.dumps(self._manifest(), indent=2).encode("ascii")  # as weakincentives
            with archive.open(self._info(MANIFEST), "w") as member:
                member.write(manifest)
            self.members.append(f"{BUNDLE_ROOT}/{MANIFEST}")
        os.chmod(self.workdir / "bundle.zip", 0o600)

    def _add(self, record: Any, sink: _HashingSink) -> None:
        if not isinstance(record, Mapping):
            self.skipped += 1
            return
        event = record.get("event")
        if not isinstance(event, str) or not event:
            self.skipped += 1
            return
        try:
            line = _encode_line(record)
        except (TypeError, ValueError, RecursionError):  # not JSON-encodable (objects, cycles)
            self.skipped += 1
            return
        sink.write(line)
        self.records += 1
        context = record.get("context")
        if not isinstance(context, Mapping):
            context = {}
        self._note_run(record, context, event)
        if event == _ENTRY:
            self.entries += 1
            if context.get("entry_type") == "error":
                self.has_error = True
            self._spools.append(self._transcript_spool, line)
            source = self._source(context.get("source"))
            source.add(context)
            self._spools.append(source.spool, line)

    def _note_run(self, record: Mapping[str, Any], context: Mapping[str, Any], event: str) -> None:
        if len(self.run) < len(_RUN_KEYS):
            for key in _RUN_KEYS:
                if key not in self.run:
                    value = context.get(key)
                    if isinstance(value, str) and value:
                        self.run[key] = value
        stamp = record.get("timestamp")
        if not self.started_at and isinstance(stamp, str):
            self.started_at = stamp
        if event == _STOP:
            self.has_stop = True
            self.ended_at = stamp if isinstance(stamp, str) else ""
            self.stop_context = dict(context)

    def _source(self, value: Any) -> _Source:
        key: str | None = value if isinstance(value, str) and value else None
        found = self.sources.get(key)
        if found is not None:
            return found
        if len(self.sources) < MAX_SOURCE_FILES:
            found = self.sources[key] = self._new_source(key, _safe_stem(key))
        elif self._overflow is None:
            found = self._overflow = self._new_source(None, "other-sources", several=True)
        else:
            found = self._overflow
        return found

    def _new_source(self, source: str | None, stem: str, *, several: bool = False) -> _Source:
        stem = self._unique_stem(stem)
        spool = self.workdir / f"source-{len(self._stems)}.spool"
        return _Source(source=source, member=f"{TRANSCRIPT_DIR}/{stem}.jsonl", spool=spool, several=several)

    def all_sources(self) -> list[_Source]:
        return [*self.sources.values(), *([self._overflow] if self._overflow else [])]

    def _unique_stem(self, stem: str) -> str:
        candidate, number = stem, 1
        while candidate.lower() in self._stems:  # unique on case-insensitive file systems too
            number += 1
            candidate = f"{stem}-{number}"
        self._stems.add(candidate.lower())
        return candidate

    # Members ---------------------------------------------------------------------------

    def _info(self, name: str) -> zipfile.ZipInfo:
        info = zipfile.ZipInfo(f"{BUNDLE_ROOT}/{name}", date_time=self._date_time)
        info.compress_type = zipfile.ZIP_DEFLATED
        info.external_attr = _FILE_MODE
        return info

    def _finish_member(self, name: str, sink: _HashingSink) -> None:
        self.members.append(f"{BUNDLE_ROOT}/{name}")
        self.checksums[name] = sink.sha256.hexdigest()

    def _write_member(self, archive: zipfile.ZipFile, name: str, data: bytes) -> None:
        with archive.open(self._info(name), "w") as member:
            sink = _HashingSink(member)
            sink.write(data)
            sink.flush()
        self._finish_member(name, sink)

    def _copy_spool(self, archive: zipfile.ZipFile, spool: Path, name: str) -> None:
        info = self._info(name)
        info.file_size = spool.stat().st_size  # lets zipfile choose ZIP64 only when needed
        with archive.open(info, "w") as member, open(spool, "rb") as handle:
            sink = _HashingSink(member)
            while chunk := handle.read(_CHUNK):
                sink.write(chunk)
            sink.flush()
        spool.unlink()
        self._finish_member(name, sink)

    # Metadata --------------------------------------------------------------------------

    def _prompt(self) -> dict[str, str]:
        name = self.run.get("prompt_name", "")
        ns, colon, key = name.partition(":")
        if not colon:
            ns, key = "", name
        return {"ns": ns, "key": key, "adapter": self.run.get("adapter", "")}

    def _manifest(self) -> dict[str, Any]:
        files = sorted(self.checksums)
        return {
            "format_version": BUNDLE_FORMAT_VERSION,
            "bundle_id": self.bundle_id,
            "created_at": self.created.isoformat(),
            "request": {
                "request_id": self.run.get("run_id", ""),
                "session_id": self.run.get("session_id"),
                "status": self.status(),
                "started_at": self.started_at,
                "ended_at": self.ended_at,
            },
            "capture": {
                "mode": "full",
                "trigger": "export",
                "limits_applied": {"filesystem_truncated": False},
            },
            "prompt": self._prompt(),
            "files": files,
            "integrity": {"algorithm": "sha256", "checksums": {name: self.checksums[name] for name in files}},
            "build": {"version": __version__, "commit": ""},
        }

    def _index(self) -> bytes:
        expected = self.stop_context.get("entries_by_source")
        sources = []
        for source in self.all_sources():
            item: dict[str, Any] = {
                "source": source.source,
                "file": source.member,
                "entries": source.entries,
                "first_sequence": source.first_sequence,
                "last_sequence": source.last_sequence,
                "contiguous": source.contiguous,
                "first_timestamp": source.first_timestamp,
                "last_timestamp": source.last_timestamp,
                "entries_by_type": dict(source.by_type),
            }
            if source.several:
                item["several_sources"] = True  # every source after the first MAX_SOURCE_FILES
            elif isinstance(expected, Mapping) and source.source is not None:
                item["stop_entries"] = expected.get(source.source)
            sources.append(item)
        index = {
            "generator": f"transcript-otel {__version__}",
            "run": {
                **{key: self.run.get(key) for key in ("run_id", "prompt_name", "adapter", "session_id")},
                "trace_id": self.run.get("trace_id"),
                "status": self.status(),
                "started_at": self.started_at,
                "ended_at": self.ended_at,
                "records": self.records,
                "entries": self.entries,
                "skipped_records": self.skipped,
                "stop_total_entries": self.stop_context.get("total_entries"),
                "dropped_entries": self.stop_context.get("dropped_entries"),
            },
            "sources": sources,
        }
        return json.dumps(index, indent=2).encode("ascii")

    def _readme(self) -> str:
        def shown(key: str, missing: str) -> str:
            value = self.run.get(key, "")
            if not value.isprintable():
                value = value.encode("unicode_escape").decode("ascii")
            return value or missing

        transcript = [
            "transcript.jsonl    The transcript.entry lines of logs/app.jsonl",
            "transcript/         The same entries split by source:",
            "  main.jsonl          the main agent",
            "  subagent-<id>.jsonl each subagent (source subagent:<id>)",
            "  index.json          sources, counts, sequence ranges, completeness",
        ]
        lines = [
            "Debug Bundle (transcript-otel)",
            "=" * 60,
            "",
            f"The transcript of one agent run, captured by transcript-otel {__version__} and",
            "written in the weakincentives debug-bundle layout (format 1.0.0).",
            "",
            f"Bundle ID: {self.bundle_id}",
            f"Created: {self.created.isoformat()}",
            f"Run: {shown('run_id', '(unknown)')}",
            f"Prompt: {shown('prompt_name', '(unknown)')}",
            f"Adapter: {shown('adapter', '(unknown)')}",
            f"Session: {shown('session_id', '(none)')}",
            f"Status: {self.status()}",
            f"Records: {self.records}, transcript entries: {self.entries}, skipped: {self.skipped}",
            "",
            "Contents",
            "-" * 60,
            "",
            "manifest.json       Bundle metadata and integrity checksums (SHA-256)",
            "README.txt          This file",
            "logs/app.jsonl      Every record of the run, one JSON object per line",
            *(transcript if self.entries else []),
            "",
            "Open it",
            "-" * 60,
            "",
            '  wink query BUNDLE.zip "SELECT transcript_source, sequence_number, entry_type,',
            '      content FROM transcript ORDER BY rowid" --table',
            '  wink query BUNDLE.zip "SELECT * FROM transcript_tools" --table',
            "  wink debug BUNDLE.zip              (web UI; needs weakincentives[wink])",
            "  transcript-otel show BUNDLE.zip    (the human-readable transcript)",
            "",
            "wink writes its SQLite cache next to the zip (BUNDLE.zip.sqlite).",
            "",
        ]
        return "\n".join(lines)


def _parse_time(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed


# --- reading -------------------------------------------------------------------------

# A member may inflate to this many times its compressed size, past its first MiB: ours
# deflate 2 to 10 times (30 for the most repetitive run of the tests); a zip bomb, up to
# deflate's 1032. zipfile reads no more than the size a member declares (and fails its
# CRC if the data goes on), so checking the declared sizes bounds what is read.
MAX_INFLATE_RATIO: Final = 200
_INFLATE_FREE_BYTES: Final = 1 << 20


def _check_bundle(path: str | os.PathLike[str], name: str) -> str:
    """The member to read: app.jsonl, else transcript.jsonl. Raises ValueError if none."""
    try:
        archive = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ValueError(f"{name}: not a debug bundle: not a zip file ({exc})") from exc
    with archive:
        names = set(archive.namelist())
        manifest = f"{BUNDLE_ROOT}/{MANIFEST}"
        if manifest not in names:
            raise ValueError(f"{name}: not a debug bundle: no {manifest} in the zip")
        if archive.getinfo(manifest).file_size > _MAX_MANIFEST_BYTES:
            raise ValueError(f"{name}!{manifest}: larger than {_MAX_MANIFEST_BYTES >> 20} MiB; not read")
        try:
            parsed = loads(archive.read(manifest))
        except ValueError as exc:
            raise ValueError(f"{name}!{manifest}: not valid JSON ({exc})") from exc
        if not isinstance(parsed, dict):
            raise ValueError(f"{name}!{manifest}: not a JSON object")
        for candidate in (f"{BUNDLE_ROOT}/{APP_LOG}", f"{BUNDLE_ROOT}/{TRANSCRIPT}"):
            if candidate in names:
                _check_member_size(archive.getinfo(candidate), f"{name}!{candidate}")
                return candidate
    raise ValueError(f"{name}: debug bundle without {BUNDLE_ROOT}/{APP_LOG} or {BUNDLE_ROOT}/{TRANSCRIPT}")


def _check_member_size(info: zipfile.ZipInfo, where: str) -> None:
    """Raises ValueError for a member that would inflate too far to read (a zip bomb)."""
    size = info.file_size
    if size > MAX_MEMBER_BYTES:
        raise ValueError(
            f"{where}: declares {size} bytes uncompressed, more than the "
            f"{MAX_MEMBER_BYTES >> 30} GiB a bundle member may hold; not read"
        )
    if size > _INFLATE_FREE_BYTES + MAX_INFLATE_RATIO * info.compress_size:
        raise ValueError(
            f"{where}: declares {size} bytes uncompressed from {info.compress_size} compressed, "
            f"more than {MAX_INFLATE_RATIO} times as many (a zip bomb?); not read. "
            "If you trust it, unzip it and read that file"
        )


def _iter_member(
    path: str | os.PathLike[str], name: str, member: str
) -> Iterator[tuple[str, dict[str, Any]]]:
    reader = LineReader(f"{name}!{member}", max_bytes=MAX_LINE_BYTES)
    try:
        with zipfile.ZipFile(path) as archive, archive.open(member) as handle:
            yield from reader.objects(handle)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, RuntimeError, NotImplementedError, EOFError) as exc:
        raise ValueError(f"{reader.where}:{reader.number}: cannot read the bundle: {exc}") from exc
