"""One file of a followed session: where it was read to, and its complete lines read from there.

A `FilePosition` is what the watch keeps of a file (`watch_state`): its inode, the byte offset
read to and the lines before it. A `FollowedFile` is a file being read (`follow`): its position
moves past the complete lines read (`complete_lines`), a partial last line waits for its
newline, and a line longer than a record may be is passed over. One read takes at most
`READ_BYTES`, so a long backlog is taken in steps. `position_at_end` is where a file is
taken up from its end.
"""

from __future__ import annotations

import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any, Final

from transcript_otel.reading.lines import MAX_RECORD_BYTES, TranscriptReadWarning
from transcript_otel.sessions.regular import open_regular
from transcript_otel.sessions.rewrites import fingerprint

# Bytes read from one file in one poll: a long backlog is taken in steps, memory stays flat
# (`SessionFollower.behind`: the watch polls it again at once).
READ_BYTES: Final = 1 << 20
_TAIL_BYTES: Final = 64 * 1024


@dataclass(slots=True)
class FilePosition:
    """Where a file was read to: its inode (a replaced file has another), byte offset, and the
    lines (newlines) before it, where known."""

    inode: int
    offset: int
    lines: int | None = None
    # A session's main file: what the session's runs counted up to here (`SessionFollower`).
    carried: dict[str, Any] | None = None
    # What tells the file read from one written anew (`rewrites.py`), where known: the bytes
    # just before `offset` (other bytes there: written anew in place), and the session its
    # first lines name ("": none; another: another session's file put in its place).
    tail: str | None = None
    session: str | None = None


@dataclass(slots=True)
class FollowedFile:
    """A file of a followed session being read: where it is read to, and what reading it found."""

    path: Path
    source: str
    position: FilePosition
    latest_ns: int = 0  # the time of its last line: later lines without one keep it
    lines: int = 0  # lines read, to number them
    skipping: bool = False  # inside a line too long to hold, until its newline
    # While skipping: where that line began, the position kept (a watch started again never
    # begins inside a line: it passes over the whole line again).
    line_start: int = 0
    more: bool = False  # the last read stopped at `READ_BYTES`: the file may hold more already
    unreadable: bool = False  # said once, until it can be read again
    repaired: bool = False  # lines not UTF-8 read (`say_repaired`): said once


def read_position(path: Path, kept: FilePosition | None) -> FilePosition:
    """Where to read `path` from: a copy of `kept` (what is read moves it; the kept position
    stays until those lines are written), or its start."""
    if kept is None:
        return FilePosition(_inode(path), 0)
    return FilePosition(kept.inode, kept.offset, kept.lines, tail=kept.tail, session=kept.session)


def _inode(path: Path) -> int:
    try:
        return os.stat(path).st_ino
    except FileNotFoundError:
        return 0


def position_at_end(path: Path) -> FilePosition:
    """Where `path`'s last whole line ends, where a watch's first start takes the file up: a
    line still being written is not the past (read from its start once whole, not from the
    middle); with what tells the file from one written anew (`rewrites.py`)."""
    try:
        with open_regular(path) as stream:
            status = os.fstat(stream.fileno())
            inode, end = status.st_ino, status.st_size
            while end > 0:
                start = max(0, end - _TAIL_BYTES)
                stream.seek(start)
                newline = stream.read(end - start).rfind(b"\n")
                if newline >= 0:
                    offset = start + newline + 1  # (whose file it is: read at its first new line)
                    return FilePosition(inode, offset, tail=fingerprint(stream, offset))
                end = start
            return FilePosition(inode, 0)
    except OSError:  # gone meanwhile (or not a file now): a file that comes back is read from its start
        return FilePosition(0, 0)


def counted(path: Path, position: FilePosition) -> FilePosition:
    """`position` with the lines before its offset (counted once, where a state written before
    they were kept does not say)."""
    if position.lines is None:
        position.lines = 0 if position.offset == 0 else _lines_before(path, position)
    return position


def _lines_before(path: Path, position: FilePosition) -> int | None:
    try:
        with open_regular(path) as stream:
            if os.fstat(stream.fileno()).st_ino != position.inode:
                return None
            lines, left = 0, position.offset
            while left > 0 and (chunk := stream.read(min(READ_BYTES, left))):
                lines += chunk.count(b"\n")
                left -= len(chunk)
            return lines
    except OSError:
        return None


def after_lines(file: FollowedFile) -> int | None:
    """The byte after the first `file.position.lines` lines of what is at `file.path` now; None
    if it holds fewer (or the lines read are not known)."""
    wanted = file.position.lines
    if wanted is None:
        return None
    offset = 0
    with open_regular(file.path) as stream:
        while wanted > 0 and (chunk := stream.read(READ_BYTES)):
            found = chunk.count(b"\n")
            if found < wanted:
                wanted -= found
                offset += len(chunk)
                continue
            end = -1
            for _ in range(wanted):
                end = chunk.index(b"\n", end + 1)
            return offset + end + 1
    return offset if wanted == 0 else None


def complete_lines(stream: IO[bytes], file: FollowedFile) -> bytes:
    """The complete lines from the file's offset (without their last newline), the offset moved
    past them; a partial last line stays for the next poll. A line longer than a record may be
    (`MAX_RECORD_BYTES`) is passed over, with a warning, as its newline comes."""
    chunk = stream.read(READ_BYTES)
    full = len(chunk) == READ_BYTES  # the last read stopped at its limit: there may be more
    if file.skipping:
        end = chunk.find(b"\n")
        file.position.offset += len(chunk) if end < 0 else end + 1
        if end < 0:
            file.more = full
            return b""
        _passed(file.position, 1)
        file.skipping = False
        chunk = chunk[end + 1 :]
    held = bytearray(chunk)
    while b"\n" not in held and full:  # one line longer than a read
        if len(held) > MAX_RECORD_BYTES:
            warnings.warn(
                f"{file.path}: skipped a line longer than {MAX_RECORD_BYTES} bytes", TranscriptReadWarning, 2
            )
            file.line_start = file.position.offset
            file.position.offset += len(held)
            file.skipping = file.more = True
            return b""
        chunk = stream.read(READ_BYTES)
        full = len(chunk) == READ_BYTES
        held += chunk
    file.more = full
    end = held.rfind(b"\n")
    if end < 0:
        return b""
    file.position.offset += end + 1
    _passed(file.position, held.count(b"\n", 0, end + 1))
    return bytes(held[:end])


def _passed(position: FilePosition, lines: int) -> None:
    if position.lines is not None:
        position.lines += lines
