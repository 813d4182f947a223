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

Here: the zip and its members, as the records stream in. The `transcript/` files are
`sources.py`'s, the manifest, index and README `metadata.py`'s; reading a
bundle back is `reading/bundle.py`'s.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import time
import uuid
import zipfile
from collections import OrderedDict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any, Final

from transcript_otel.exports import destination
from transcript_otel.exports.bundle import metadata as bundle_metadata
from transcript_otel.exports.bundle.metadata import RunNotes
from transcript_otel.exports.bundle.sources import TRANSCRIPT_DIR, SourceFiles
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.bundle import APP_LOG, BUNDLE_ROOT, MANIFEST, TRANSCRIPT

__all__ = ["BundleInfo", "write_bundle"]

README: Final = "README.txt"
TRANSCRIPT_INDEX: Final = f"{TRANSCRIPT_DIR}/index.json"

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
_OPEN_SPOOLS: Final = 32  # a hostile run's many sources do not hold as many files open
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
            entries=writer.notes.entries,
            skipped=writer.notes.skipped,
            members=tuple(sorted(writer.members)),
            status=writer.notes.status(),
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)


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
        self.notes = RunNotes()
        self.members: list[str] = []
        self.checksums: dict[str, str] = {}
        self.sources = SourceFiles(workdir)
        self._spools = _Spools()
        self._transcript_spool = workdir / "transcript.spool"
        self._date_time = time.localtime(self.created.timestamp())[:6]

    def default_name(self) -> str:
        started = _parse_time(self.notes.started_at) or self.created
        return f"{self.bundle_id}_{started.strftime('%Y%m%d_%H%M%S')}.zip"

    def write_records(self, records: Iterable[Mapping[str, Any]]) -> None:
        notes = self.notes
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
            if notes.records == 0:
                skipped = f" ({notes.skipped} skipped: not objects with an event)" if notes.skipped else ""
                raise ValueError(f"the run has no records{skipped}: nothing to bundle")
            if notes.entries:
                self._copy_spool(archive, self._transcript_spool, TRANSCRIPT)
                for source in self.sources.all():
                    self._copy_spool(archive, source.spool, source.member)
                index = bundle_metadata.index(notes, self.sources.all())
                self._write_member(archive, TRANSCRIPT_INDEX, json.dumps(index, indent=2).encode("ascii"))
            readme = bundle_metadata.readme(notes, self.bundle_id, self.created)
            self._write_member(archive, README, readme.encode("utf-8", "backslashreplace"))
            manifest = bundle_metadata.manifest(notes, self.bundle_id, self.created, self.checksums)
            with archive.open(self._info(MANIFEST), "w") as member:
                member.write(json.dumps(manifest, indent=2).encode("ascii"))  # as weakincentives
            self.members.append(f"{BUNDLE_ROOT}/{MANIFEST}")
        os.chmod(self.workdir / "bundle.zip", 0o600)

    def _add(self, record: Any, sink: _HashingSink) -> None:
        if not isinstance(record, Mapping):
            self.notes.skipped += 1
            return
        event = record.get("event")
        if not isinstance(event, str) or not event:
            self.notes.skipped += 1
            return
        try:
            line = _encode_line(record)
        except (TypeError, ValueError, RecursionError):  # not JSON-encodable (objects, cycles)
            self.notes.skipped += 1
            return
        sink.write(line)
        context = record.get("context")
        if not isinstance(context, Mapping):
            context = {}
        self.notes.note(record, context, event)
        if event == TranscriptEvent.ENTRY:
            self._spools.append(self._transcript_spool, line)
            source = self.sources.of(context.get("source"))
            source.add(context)
            self._spools.append(source.spool, line)

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


def _parse_time(value: str) -> datetime | None:
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed.astimezone(UTC) if parsed.tzinfo is not None else parsed
