"""A debug bundle read back: the records of a run kept as a weakincentives debug-bundle zip.

`iter_bundle_records(path)` streams the records of a bundle, ours (`exports/bundle/writer.py`
writes them) or one weakincentives wrote: `debug_bundle/logs/app.jsonl`, or
`debug_bundle/transcript.jsonl` in a bundle without logs. A zip is checked before
anything is read, so a file that is not a bundle, or a member that would inflate
without bound (a zip bomb), is refused at once.

The member names a reader looks for are defined here, and the writer names its own
members with them.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterator
from typing import Any, Final

from transcript_otel.reading.lines import MAX_RECORD_BYTES as MAX_LINE_BYTES  # the readers' one cap
from transcript_otel.reading.lines import LineReader
from transcript_otel.records.serialize import loads

__all__ = [
    "APP_LOG",
    "BUNDLE_ROOT",
    "MANIFEST",
    "MAX_INFLATE_RATIO",
    "MAX_MEMBER_BYTES",
    "TRANSCRIPT",
    "iter_bundle_records",
]

BUNDLE_ROOT: Final = "debug_bundle"
MANIFEST: Final = "manifest.json"
APP_LOG: Final = "logs/app.jsonl"
TRANSCRIPT: Final = "transcript.jsonl"

MAX_MEMBER_BYTES: Final = 4 << 30  # a member declaring more is refused when read (zip bomb)
_MAX_MANIFEST_BYTES: Final = 16 << 20
# A member may inflate to this many times its compressed size, past its first MiB: ours
# deflate 2 to 10 times (30 for the most repetitive run of the tests); a zip bomb, up to
# deflate's 1032. zipfile reads no more than the size a member declares (and fails its
# CRC if the data goes on), so checking the declared sizes bounds what is read.
MAX_INFLATE_RATIO: Final = 200
_INFLATE_FREE_BYTES: Final = 1 << 20


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
