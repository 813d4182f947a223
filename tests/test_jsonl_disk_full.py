"""A full disk under the JSONL mirror, then space again (issue 30, point 3).

The disk is `os.write` on the mirror's files made to behave as a file system that runs
out of room: the write that fills it writes what fits and returns short, every later one
fails with ENOSPC, until room is given back. Asserted is what a user finds in the file
afterwards: whole JSON lines (in a file only this process writes, the line cut short is
removed; in a shared file it is ended with a newline), one `transcript.error` in the
run's envelope that counts what is missing, the entries written once space returned,
and the agent never seeing an exception.
"""

from __future__ import annotations

import errno
import json
import logging
import os
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import (
    TranscriptEmitter,
    TranscriptPipeline,
    TranscriptReadWarning,
    check_invariants,
    read_records,
)
from transcript_otel.sinks import JsonlMirror

MakePipeline = Callable[..., TranscriptPipeline]
_real_write = os.write


class FillingDisk:
    """`os.write` for the files in `directory`: `room` bytes still fit there (None: no limit).

    A write larger than the room writes what fits and returns short; with no room left
    it fails with ENOSPC, as a real file system does. Other files are written as usual."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory
        self.room: int | None = None
        self.refused = 0  # writes that failed

    def write(self, fd: int, data: Any) -> int:
        if self.room is None or not self._is_ours(fd):
            return _real_write(fd, data)
        if self.room == 0:
            self.refused += 1
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
        written = _real_write(fd, memoryview(data)[: self.room])
        self.room -= written
        return written

    def _is_ours(self, fd: int) -> bool:
        target = os.fstat(fd)
        if not self.directory.is_dir():
            return False
        for entry in os.scandir(self.directory):
            found = entry.stat()
            if (found.st_dev, found.st_ino) == (target.st_dev, target.st_ino):
                return True
        return False


@pytest.fixture
def disk(monkeypatch: pytest.MonkeyPatch, runs_dir: Path) -> FillingDisk:
    filling = FillingDisk(runs_dir)
    monkeypatch.setattr(os, "write", filling.write)  # undone after the test, by monkeypatch
    return filling


def emit(emitter: TranscriptEmitter, numbers: range) -> None:
    # Fixed-width details: every entry's line has the same length once sequence numbers have two digits.
    for number in numbers:
        emitter.emit("user_message", detail={"n": f"{number:04d}"})


def lines_of(path: str | Path) -> list[bytes]:
    data = Path(path).read_bytes()
    assert data.endswith(b"\n"), "the file ends on a line boundary"
    return data.split(b"\n")[:-1]


def parsed(lines: list[bytes]) -> list[dict[str, Any]]:
    """Every line as a record: fails if one is not whole JSON."""
    return [json.loads(line) for line in lines]


def sequence_numbers(records: list[dict[str, Any]], prompt: str | None = None) -> list[int]:
    return [
        r["context"]["sequence_number"]
        for r in records
        if r["event"] == "transcript.entry" and prompt in (None, r["context"]["prompt_name"])
    ]


def gap_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == "transcript.error" and r["context"].get("sink") == "jsonl"]


def test_disk_full_then_space_again_leaves_whole_lines_and_one_gap_record(
    make_pipeline: MakePipeline, runs_dir: Path, disk: FillingDisk
) -> None:
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    emitter = TranscriptEmitter(prompt_name="full", adapter="a", pipeline=pipeline)
    emitter.start()
    emit(emitter, range(1, 11))
    assert emitter.flush()
    disk.room = 100  # the next line is cut after 100 bytes, then nothing fits
    emit(emitter, range(11, 21))
    assert emitter.flush()
    emit(emitter, range(21, 31))  # still full: counted with the others
    assert emitter.flush()
    assert disk.refused
    disk.room = None  # space again
    emit(emitter, range(31, 36))
    emitter.stop()

    assert emitter.jsonl_path is not None
    lines = lines_of(emitter.jsonl_path)
    records = parsed(lines)  # no broken line: the cut one was removed (only this process writes the file)
    assert sequence_numbers(records) == [*range(1, 11), *range(31, 36)]
    (gap,) = gap_records(records)
    assert gap["level"] == "WARNING"
    context = gap["context"]
    assert context["run_id"] == emitter.run_id
    assert (context["prompt_name"], context["adapter"]) == ("full", "a")
    assert context["unwritten_entries"] == 20
    assert context["unwritten_records"] == 20
    entry_line = next(line for line in lines if b'"sequence_number":10,' in line)
    assert context["unwritten_bytes"] == 20 * (len(entry_line) + 1)  # whole lines, newline included
    assert context["missing_sequence_numbers"] == {"main": [11, 30]}
    assert context["partial_lines_removed"] == 1
    assert "No space left on device" in context["error"]
    assert "11-30" in context["error"]
    # In its place: after the last entry written before the failure, before the first one after.
    position = records.index(gap)
    assert records[position - 1]["context"].get("sequence_number") == 10
    assert records[position + 1]["context"].get("sequence_number") == 31
    assert records[-1]["event"] == "transcript.stop"
    assert records[-1]["context"]["total_entries"] == 35
    assert check_invariants(records) == []  # the gap record declares the missing numbers


def test_in_a_shared_file_the_cut_line_is_ended_and_the_gap_follows_it(
    make_pipeline: MakePipeline, runs_dir: Path, disk: FillingDisk
) -> None:
    # Other processes may append to a fixed path: the cut line is not truncated away (that
    # could take their lines with it) but ended, so it is one line readers skip, with a warning.
    shared = runs_dir / "shared.jsonl"
    pipeline = make_pipeline([JsonlMirror(path=shared)])
    emitter = TranscriptEmitter(prompt_name="shared", adapter="a", pipeline=pipeline)
    emitter.start()
    emit(emitter, range(1, 11))
    assert emitter.flush()
    disk.room = 100
    emit(emitter, range(11, 21))
    assert emitter.flush()
    disk.room = None
    emit(emitter, range(21, 26))
    emitter.stop()

    lines = lines_of(shared)
    unreadable = []
    for number, line in enumerate(lines):
        try:
            json.loads(line)
        except ValueError:
            unreadable.append(number)
    assert len(unreadable) == 1
    (cut,) = unreadable
    assert len(lines[cut]) == 100  # what fitted of entry 11, alone on its line
    gap = json.loads(lines[cut + 1])  # the gap record comes right after it, and explains it
    assert gap["event"] == "transcript.error"
    assert gap["context"]["partial_lines_ended"] == 1
    assert gap["context"]["missing_sequence_numbers"] == {"main": [11, 20]}
    assert gap["context"]["unwritten_entries"] == 10
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always", TranscriptReadWarning)
        records = list(read_records(shared))
    (warning,) = caught  # the one line readers skip, named
    assert str(warning.message).startswith(f"{shared}:{cut + 1}: skipped")
    assert sequence_numbers(records) == [*range(1, 11), *range(21, 26)]
    assert check_invariants(records) == []  # the gap record declares the missing numbers


def test_a_gap_record_cut_short_in_its_turn_is_written_again_whole(
    make_pipeline: MakePipeline, runs_dir: Path, disk: FillingDisk
) -> None:
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    emitter = TranscriptEmitter(prompt_name="twice", adapter="a", pipeline=pipeline)
    emitter.start()
    emit(emitter, range(1, 11))
    assert emitter.flush()
    disk.room = 100
    emit(emitter, range(11, 21))
    assert emitter.flush()
    disk.room = 60  # some space back, too little for the gap record: it is cut in its turn
    emit(emitter, range(21, 31))
    assert emitter.flush()
    disk.room = None
    emit(emitter, range(31, 36))
    emitter.stop()

    assert emitter.jsonl_path is not None
    records = parsed(lines_of(emitter.jsonl_path))
    assert sequence_numbers(records) == [*range(1, 11), *range(31, 36)]
    (gap,) = gap_records(records)  # one record for the whole outage, not a cut one and a whole one
    assert gap["context"]["missing_sequence_numbers"] == {"main": [11, 30]}
    assert gap["context"]["unwritten_entries"] == 20
    assert gap["context"]["partial_lines_removed"] == 1  # entry 11's; the cut gap record is written again


def test_each_run_in_a_shared_file_gets_its_own_gap_record(
    make_pipeline: MakePipeline, runs_dir: Path, disk: FillingDisk
) -> None:
    shared = runs_dir / "shared.jsonl"
    pipeline = make_pipeline([JsonlMirror(path=shared)])
    first = TranscriptEmitter(prompt_name="first", adapter="a", pipeline=pipeline)
    second = TranscriptEmitter(prompt_name="second", adapter="a", pipeline=pipeline)
    first.start()
    second.start()
    emit(first, range(1, 4))
    emit(second, range(1, 3))
    assert pipeline.flush(10.0)
    disk.room = 0
    emit(first, range(4, 9))
    emit(second, range(3, 5))
    second.stop(wait=False)
    assert pipeline.flush(10.0)
    disk.room = None
    emit(first, range(9, 11))
    first.stop()

    records = parsed(lines_of(shared))  # nothing was cut: the failure came at a line boundary
    gaps = {gap["context"]["run_id"]: gap["context"] for gap in gap_records(records)}
    assert set(gaps) == {first.run_id, second.run_id}
    assert gaps[first.run_id]["missing_sequence_numbers"] == {"main": [4, 8]}
    assert gaps[first.run_id]["unwritten_entries"] == 5
    assert gaps[second.run_id]["missing_sequence_numbers"] == {"main": [3, 4]}
    assert gaps[second.run_id]["unwritten_entries"] == 2
    assert gaps[second.run_id]["unwritten_records"] == 3  # its transcript.stop too
    assert gaps[second.run_id]["prompt_name"] == "second"
    assert "partial_lines_ended" not in gaps[first.run_id]
    assert sequence_numbers(records, "first") == [1, 2, 3, 9, 10]
    assert sequence_numbers(records, "second") == [1, 2]


def test_large_entries_lost_in_a_write_mid_batch_are_counted_and_reported(
    make_pipeline: MakePipeline, runs_dir: Path, disk: FillingDisk
) -> None:
    # Entries past a MiB are written out while the batch is still being taken (`BufferedFile.add`).
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    emitter = TranscriptEmitter(prompt_name="large", adapter="a", pipeline=pipeline)
    emitter.start()
    emit(emitter, range(1, 3))
    assert emitter.flush()
    disk.room = 1000
    for number in range(3, 6):
        emitter.emit("tool_result", detail={"n": number, "text": "x" * 450_000})
    assert emitter.flush()
    disk.room = None
    emit(emitter, range(6, 8))
    emitter.stop()

    assert emitter.jsonl_path is not None
    records = parsed(lines_of(emitter.jsonl_path))
    assert sequence_numbers(records) == [1, 2, 6, 7]
    (gap,) = gap_records(records)
    assert gap["context"]["missing_sequence_numbers"] == {"main": [3, 5]}
    assert gap["context"]["unwritten_bytes"] > 3 * 450_000
    assert pipeline.sink_failures["jsonl"] >= 1  # reported to the pipeline: a warning, the other sinks


def test_a_disk_that_stays_full_leaves_whole_lines_and_one_warning(
    make_pipeline: MakePipeline, runs_dir: Path, disk: FillingDisk, caplog: pytest.LogCaptureFixture
) -> None:
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    emitter = TranscriptEmitter(prompt_name="stays", adapter="a", pipeline=pipeline)
    emitter.start()
    emit(emitter, range(1, 11))
    assert emitter.flush()
    disk.room = 100
    with caplog.at_level(logging.WARNING, logger="transcript_otel.capture.pipeline"):
        emit(emitter, range(11, 21))  # never raises, never waits for the disk
        emitter.stop()
        pipeline.shutdown(5.0)

    assert emitter.jsonl_path is not None
    records = parsed(lines_of(emitter.jsonl_path))  # the cut line was removed at once
    assert sequence_numbers(records) == list(range(1, 11))
    assert gap_records(records) == []  # no room to say so in the file: the warning says it
    warned = [r.getMessage() for r in caplog.records if "sink 'jsonl'" in r.getMessage()]
    assert len(warned) == 1
    assert os.strerror(errno.ENOSPC) in warned[0]
