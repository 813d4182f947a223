"""A session's files read as one stream, in the order things happened.

Within a file, file order is the truth (the CLIs stamp some lines a little before the line
they follow, docs/session-logs.md); across the files of one session (a Claude session and
its subagents, which run at the same time) lines are merged by time. Each file is read a
line at a time: memory does not grow with the files' size.
"""

from __future__ import annotations

import heapq
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import NamedTuple

from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.model.entries import EntryType
from transcript_otel.reading.lines import LineReader, TranscriptReadWarning
from transcript_otel.sessions.regular import open_regular

# One line of a session file (the bytes, the source of its file) -> what it says.
MapLine = Callable[[bytes, str], SessionLine]


class TimedLine(NamedTuple):
    at_ns: int  # when it happened: its own time, never earlier than its file's previous line
    file_index: int
    number: int  # its line number in its file
    source: str
    said: SessionLine
    size: int  # its length in bytes


def never_raising(map_line: MapLine) -> MapLine:
    """`map_line`, but a line it fails on (a bug of ours) is kept whole as an `unknown` entry that
    says why: the rest of the session is still read, and `watch` goes on past it."""

    def map_or_keep(line: bytes, source: str) -> SessionLine:
        try:
            return map_line(line, source)
        except Exception as exc:
            why = f"could not map a session line: {type(exc).__name__}: {exc}"
            text = line.decode("utf-8", "backslashreplace")
            entry = MappedEntry(EntryType.UNKNOWN.value, {"mapping_error": why}, text, source)
            return SessionLine([entry], failure=why)

    return map_or_keep


def say_repaired(path: Path) -> None:
    """Said once for a file whose lines hold bytes that are not UTF-8 (`SessionLine.repaired`)."""
    warnings.warn(
        f"{path}: lines holding bytes that are not UTF-8 are read with U+FFFD in their place, "
        "each said by a transcript.error of its run",
        TranscriptReadWarning,
        stacklevel=3,
    )


def timeline(files: list[tuple[Path, str]], map_line: MapLine) -> Iterator[TimedLine]:
    """Every line of `files` (path, source), mapped, in time order; file order within a file."""
    return in_time_order(
        [_file_lines(path, source, index, map_line) for index, (path, source) in enumerate(files)]
    )


def in_time_order(streams: Iterable[Iterable[TimedLine]]) -> Iterator[TimedLine]:
    """The lines of `streams` (each in its file's order) merged by time; ties go to the earlier
    file (the main one first), then to file order."""
    return heapq.merge(*streams, key=lambda line: (line.at_ns, line.file_index, line.number))


def _file_lines(path: Path, source: str, file_index: int, map_line: MapLine) -> Iterator[TimedLine]:
    latest = 0
    repaired = False
    with open_regular(path) as stream:  # a FIFO or a device in its place meanwhile: not read
        for number, line in LineReader(str(path)).lines(stream):
            said = map_line(line.rstrip(b"\r\n"), source)
            if said.repaired and not repaired:
                repaired = True
                say_repaired(path)
            if said.timestamp_ns is not None:
                latest = max(latest, said.timestamp_ns)
            yield TimedLine(latest, file_index, number, source, said, len(line))
