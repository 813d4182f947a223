"""The two halves of `transcript-otel run`'s capture, in process: the relay's copy of the
output (`cli.relay.CaptureCopy`) and the wrapper's reading of it (`cli.capture`).

The relay never waits for capture: what capture has not taken is held up to a bound, and
output beyond it is dropped from the copy, with a gap frame where it was. The capture side
records every line it gets, loses the line a gap cut through (and only that one), and
counts every line it could not record, so that a run reports its losses exactly, once.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.cli import capture, relay
from transcript_otel.cli.capture import LineCounts, LineRecorder, OutputCapture
from transcript_otel.instrumentation._agent_run import AgentRun
from transcript_otel.mappings.lines import PlainAdapter
from transcript_otel.pipeline import TranscriptPipeline

from helpers import run_records


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return relay.HEADER.pack(kind, len(payload)) + payload


def frames(data: bytes) -> list[tuple[bytes, bytes]]:
    found = []
    while data:
        kind, size = relay.HEADER.unpack_from(data)
        found.append((kind, data[relay.HEADER.size : relay.HEADER.size + size]))
        data = data[relay.HEADER.size + size :]
    return found


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


# -- the relay's side ----------------------------------------------------------------------------


def test_the_copy_is_held_up_to_its_bound_then_dropped_with_a_gap_in_its_place(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(relay, "MAX_HELD_BYTES", 90)
    read_end, write_end = os.pipe()
    copy = relay.CaptureCopy(write_end)  # nothing is sent before finish(): all of it is held
    held = [b"one\ntwo\n", b"x" * 80]  # 88 bytes of output held
    for chunk in held:
        copy.add(chunk)
    copy.add(b"three\nfour")  # over the bound: dropped, counted
    copy.add(b" more\nfive\n")  # over the bound too; it ends a line
    copy.report(relay.EXITED, relay.STATUS.pack(0))
    copy.finish()  # the capture side reads now: everything held, the gap, in order
    received = frames(read_all(read_end))
    assert received == [
        (relay.EXITED, relay.STATUS.pack(0)),  # reports go ahead of held output
        (relay.DATA, b"one\ntwo\n"),
        (relay.DATA, b"x" * 80),
        (relay.GAP, relay.COUNTS.pack(21, 3, True)),
    ]


def test_a_report_waits_for_a_frame_partly_written(monkeypatch: pytest.MonkeyPatch) -> None:
    read_end, write_end = os.pipe()
    copy = relay.CaptureCopy(write_end)
    big = b"y" * (4 << 20)  # more than the pipe holds: the frame is left partly written
    copy.add(big)
    copy.send()
    copy.report(relay.PID, relay.NUMBER.pack(42))
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(read_all(read_end)))
    reader.start()
    copy.finish()
    reader.join()
    assert frames(result[0]) == [(relay.DATA, big), (relay.PID, relay.NUMBER.pack(42))]


# -- the wrapper's side --------------------------------------------------------------------------


class Lines:
    """Records what capture hands on (the recorder's two calls)."""

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def feed(self, line: bytes) -> None:
        self.lines.append(line)

    def wait_for_room(self, timeout_s: float) -> None:
        pass


def captured(*sent: bytes, terminal: bool = False) -> tuple[Lines, OutputCapture]:
    read_end, write_end = os.pipe()
    lines = Lines()
    reader = OutputCapture(read_end, lines, terminal=terminal)  # type: ignore[arg-type]
    for one in sent:
        os.write(write_end, one)
    os.close(write_end)
    assert reader.wait(30)
    return lines, reader


def data(payload: bytes) -> bytes:
    return frame(relay.DATA, payload)


def gap(size: int, lines: int, ends_line: bool) -> bytes:
    return frame(relay.GAP, relay.COUNTS.pack(size, lines, ends_line))


def test_lines_split_across_frames_and_the_reports_are_read() -> None:
    lines, reader = captured(
        frame(relay.PID, relay.NUMBER.pack(1234)),
        data(b"first\nsec"),
        data(b"ond\nthird"),
        frame(relay.EXITED, relay.STATUS.pack(-15)),
        data(b" and last"),  # no newline at the end: still a line
    )
    assert lines.lines == [b"first\n", b"second\n", b"third and last"]
    assert (reader.pid, reader.status) == (1234, -15)
    assert reader.counts == LineCounts(lines=3)
    assert reader.counts.summary() is None


def test_on_a_terminal_lines_lose_the_carriage_return() -> None:
    lines, _ = captured(data(b"one\r\ntwo\r\n"), terminal=True)
    assert lines.lines == [b"one\n", b"two\n"]


def test_a_gap_loses_the_lines_it_cut_and_no_other() -> None:
    lines, reader = captured(
        data(b"kept\nbroken sta"),
        gap(30, 2, False),  # "rt\nlost\nhalf of a" was dropped
        data(b" line\nkept again\n"),
        gap(5, 1, True),  # "gone\n": it ended a line
        data(b"kept to the end\n"),
    )
    assert lines.lines == [b"kept\n", b"kept again\n", b"kept to the end\n"]
    # "broken start", "lost", "half of a line", "gone": four lines, and exactly their bytes.
    assert reader.counts == LineCounts(lines=7, not_recorded=4, not_recorded_bytes=10 + 30 + 6 + 5)
    summary = reader.counts.summary()
    assert summary is not None
    assert summary.startswith("4 of 7 output lines (51 bytes) were not recorded in the transcript")


def test_a_line_longer_than_the_limit_is_recorded_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "MAX_LINE_BYTES", 4)
    lines, _ = captured(data(b"abcdefghij\n"))
    assert lines.lines == [b"abcd", b"efgh", b"ij\n"]


def test_what_capture_has_no_time_for_after_the_output_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "CAPTURE_GRACE_S", 0.0)
    lines, reader = captured(
        data(b"recorded\n"),
        frame(relay.OUTPUT_DONE),
        data(b"late one\nlate two\n"),
    )
    assert lines.lines == [b"recorded\n"]
    assert reader.counts == LineCounts(lines=3, not_recorded=2, not_recorded_bytes=18)


def test_a_run_reports_what_it_could_not_record_once_with_the_counts(
    default_pipeline: TranscriptPipeline, otel: Any, runs_dir: Path
) -> None:
    run = AgentRun(
        otel.tracer_provider.get_tracer("test"), prompt_name="loud", adapter="cli", session_id=None
    )
    recorder = LineRecorder(run, PlainAdapter())
    recorder.feed(b"a line\n")
    recorder.end(None, LineCounts(lines=3, not_recorded=2, not_recorded_bytes=40))
    assert run.emitter.flush()
    records = run_records(run.emitter)
    errors = [r["context"] for r in records if r["event"] == "transcript.error"]
    assert len(errors) == 1
    assert errors[0]["error"].startswith("2 of 3 output lines (40 bytes) were not recorded")
    assert (errors[0]["output_lines"], errors[0]["unrecorded_lines"], errors[0]["unrecorded_bytes"]) == (
        3,
        2,
        40,
    )
    entries = [r["context"]["detail"] for r in records if r["event"] == "transcript.entry"]
    assert entries == [{"text": "a line"}]
