"""The lines of a captured run, each bounded: how every reader takes records from a JSONL
mirror, an OTLP JSON file or a bundle member.

A record is one line of JSON, and no line is held past `MAX_RECORD_BYTES`: a longer one
is read on in chunks, dropped as it goes, and skipped with one warning naming where it
is and its size; the lines after it are read as usual. Memory does not grow with the
longest line. Blank lines cost next to nothing: runs of whitespace are passed over by C
code (`bytes.isspace`, `re`, `bytes.count`), never a Python step per line.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterator
from typing import IO, Any, Final

from transcript_otel.records.serialize import loads


class TranscriptReadWarning(UserWarning):
    """A line of a JSONL transcript could not be read and was skipped."""


# Far above what a record of ours weighs (a `run` line is recorded in 1 MiB pieces; an OTLP
# request of collector-config/'s 512 log records, ~8 MiB), low enough that a hostile line
# costs tens of MiB to pass over, not its own size several times over.
MAX_RECORD_BYTES: Final = 32 << 20
_READ_BYTES: Final = 1 << 20  # one read: a multiple of what most lines weigh, no more
_BLANK: Final = b" \t\n\r\x0b\x0c"  # what `bytes.strip()` strips, and `rb"\s"` matches
_NOT_BLANK: Final = re.compile(rb"\S")


class LineReader:
    """Cuts bytes, given as they are read, into their non-blank lines, numbered from 1.

    A line keeps its newline; the last one without it is partial (a writer that died
    mid-line). Leading whitespace is dropped (JSON ignores it). `where` names the input
    in warnings (`where:line`).
    """

    def __init__(self, where: str, *, max_bytes: int = MAX_RECORD_BYTES) -> None:
        self.where = where
        self.max_bytes = max_bytes
        self.number = 0  # the newlines passed: the line being read is number + 1
        self._held = bytearray()  # the start of a line that goes on in the next chunk
        self._dropped = 0  # > 0: the bytes so far of a line too long to hold

    def lines(self, stream: IO[bytes]) -> Iterator[tuple[int, bytes]]:
        """Every line of `stream`, read to its end."""
        while chunk := stream.read(_READ_BYTES):
            yield from self.feed(chunk)
        yield from self.finish()

    def values(self, stream: IO[bytes], *, invalid: str = "invalid JSON") -> Iterator[tuple[str, Any]]:
        """The JSON value of every line with its `where:line`; a line that is not JSON is
        skipped with a warning (`skipped {invalid} (why)`, or `skipped partial last line`)."""
        for number, line in self.lines(stream):
            location = f"{self.where}:{number}"
            try:
                value = loads(line)
            except ValueError as exc:
                reason = f"{invalid} ({exc})" if line.endswith(b"\n") else "partial last line"
                _warn(f"{location}: skipped {reason}")
                continue
            yield location, value

    def objects(self, stream: IO[bytes]) -> Iterator[tuple[str, dict[str, Any]]]:
        """The records of a JSONL stream: `values` that are JSON objects (others are skipped
        with a warning)."""
        for location, value in self.values(stream):
            if isinstance(value, dict):
                yield location, value
            else:
                _warn(f"{location}: skipped a line that is not a JSON object")

    def feed(self, chunk: bytes) -> Iterator[tuple[int, bytes]]:
        """The lines `chunk` completes (consume them all before the next `feed`)."""
        position = 0
        if self._held or self._dropped:  # a line begun in an earlier chunk
            end = chunk.find(b"\n")
            if end < 0:
                self._keep(memoryview(chunk))
                return
            position = end + 1
            self._keep(memoryview(chunk)[:end])
            yield from self._end_line(b"\n")
        elif chunk.isspace():  # all blank (a hostile file's megabytes of newlines)
            self.number += chunk.count(b"\n")
            return
        size = len(chunk)
        while position < size:
            start = position
            if chunk[position] in _BLANK:
                found = _NOT_BLANK.search(chunk, position)
                if found is None:
                    break
                start = found.start()
                self.number += chunk.count(b"\n", position, start)
            end = chunk.find(b"\n", start)
            if end < 0:
                self._keep(memoryview(chunk)[start:])
                return
            self.number += 1
            if end - start > self.max_bytes:
                self._too_long(self.number, end - start)
            else:
                yield self.number, chunk[start : end + 1]
            position = end + 1
        self.number += chunk.count(b"\n", position)

    def finish(self) -> Iterator[tuple[int, bytes]]:
        """At the end of the input: its last line, if it has no newline."""
        if self._held or self._dropped:
            yield from self._end_line(b"")

    def _keep(self, piece: memoryview) -> None:
        """Holds `piece` of the current line, or drops the line once it is too long."""
        if self._dropped:
            self._dropped += len(piece)
        elif len(self._held) + len(piece) > self.max_bytes:
            self._dropped = len(self._held) + len(piece)
            self._held = bytearray()  # gives the memory back now, not at the line's end
        else:
            self._held += piece

    def _end_line(self, newline: bytes) -> Iterator[tuple[int, bytes]]:
        if newline:
            self.number += 1
        number = self.number + (not newline)  # a last line without newline: not counted yet
        if self._dropped:
            self._too_long(number, self._dropped)
        else:
            self._held += newline
            yield number, bytes(self._held)
        self._held = bytearray()
        self._dropped = 0

    def _too_long(self, number: int, size: int) -> None:
        _warn(
            f"{self.where}:{number}: skipped a line longer than the "
            f"{_amount(self.max_bytes)} a record may take ({size:,} bytes)"
        )


def _amount(size: int) -> str:
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if size >= 1 << shift and not size % (1 << shift):
            return f"{size >> shift} {unit}"
    return f"{size:,} bytes"


def _warn(message: str) -> None:
    warnings.warn(message, TranscriptReadWarning, stacklevel=2)
