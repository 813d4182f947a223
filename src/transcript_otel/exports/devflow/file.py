"""Where a devflow transcript is written: the file, named or chosen, gzipped or not, put in place atomically.

A target is a directory (`transcript.json`, or `transcript.json.gz` once the document
reaches `GZIP_THRESHOLD`; the other one, left by an earlier export, is removed) or a
file (gzipped when its name ends in `.gz`). The document is written to a temporary
file in the target's directory and moved into place with `os.replace` (created 0600,
like the mirror's files); the gzip decision is taken on the encoded size, holding at
most the first 100 KiB in memory.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import tempfile
from pathlib import Path

from transcript_otel.exports import destination
from transcript_otel.exports.devflow.format import GZIP_NAME, GZIP_THRESHOLD, PLAIN_NAME

__all__ = ["DevflowFile", "devflow_target"]


class DevflowFile:
    """A transcript file written atomically; with `compress=None`, gzipped once it reaches the threshold.

    Until then (automatic mode) the bytes are held in memory, so at most
    `GZIP_THRESHOLD` bytes are ever held.
    """

    def __init__(self, directory: Path, name: str | None, compress: bool | None) -> None:
        self._directory = directory
        self._name = name
        self._compress = compress
        self._pending: bytearray | None = bytearray() if compress is None else None
        self._temp: Path | None = None
        self._raw: io.BufferedWriter | None = None
        self._stream: io.BufferedIOBase | None = None
        if compress is not None:
            self._open(compress)

    def _open(self, compress: bool) -> None:
        scratch = destination.scratch_directory(self._directory / (self._name or PLAIN_NAME))
        handle, temp = tempfile.mkstemp(dir=scratch, prefix=".transcript-", suffix=".tmp")
        self._temp = Path(temp)
        self._raw = os.fdopen(handle, "wb")
        self._compress = compress
        if compress:
            inner = (self._name or GZIP_NAME).removesuffix(".gz")
            self._stream = gzip.GzipFile(
                filename=inner, mode="wb", fileobj=self._raw, compresslevel=6, mtime=0
            )
        else:
            self._stream = self._raw

    def write(self, data: bytes) -> None:
        if self._pending is None:
            assert self._stream is not None
            self._stream.write(data)
            return
        self._pending += data
        if len(self._pending) >= GZIP_THRESHOLD:
            self._open(compress=True)
            assert self._stream is not None
            self._stream.write(self._pending)
            self._pending = None

    def commit(self) -> Path:
        if self._pending is not None:
            self._open(compress=False)
            assert self._stream is not None
            self._stream.write(self._pending)
            self._pending = None
        assert self._stream is not None
        assert self._raw is not None
        assert self._temp is not None
        if self._stream is not self._raw:
            self._stream.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        named = self._directory / (self._name or (GZIP_NAME if self._compress else PLAIN_NAME))
        final = destination.put_in_place(self._temp, named)
        self._temp = None
        if self._name is None:  # a stale other form would be read instead of this one
            other = self._directory / (PLAIN_NAME if self._compress else GZIP_NAME)
            with contextlib.suppress(FileNotFoundError):
                other.unlink()
        return final

    def discard(self) -> None:
        for stream in (self._stream, self._raw):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        if self._temp is not None:
            with contextlib.suppress(FileNotFoundError):
                self._temp.unlink()
            self._temp = None


def devflow_target(target: str | os.PathLike[str]) -> tuple[Path, str | None, bool | None]:
    """(directory, file name or None for automatic, gzip or None for automatic)."""
    path = Path(target)
    if path.is_dir() or (not path.exists() and not path.name.endswith((".json", ".gz"))):
        path.mkdir(parents=True, exist_ok=True)
        return path, None, None
    path.parent.mkdir(parents=True, exist_ok=True)
    real = destination.real_path(path)  # through a symlink: the file it names is written
    return real.parent, real.name, path.name.endswith(".gz")
