"""The two halves of `transcript-otel run`'s capture, in process: the relay's copy of the
output (`cli.relay.capture_copy.CaptureCopy`) and the wrapper's reading of it (`cli.capture`).

The relay never waits for capture: what capture has not taken is held up to a bound, and
output beyond it is dropped from the copy, with a gap frame where it was. The capture side
records every line it gets, loses the line a gap cut through (and only that one), and
counts every line it could not record, so that a run reports its losses exactly, once.
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.capture import defaults
from transcript_otel.capture.defaults import set_pipeline
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.cli import capture, line_recorder
from transcript_otel.cli.capture import OutputCapture
from transcript_otel.cli.line_recorder import LineCounts, LineRecorder
from transcript_otel.cli.relay import capture_copy, protocol
from transcript_otel.cli.run_command import end_run
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun
from transcript_otel.mappings.lines import PlainAdapter
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.sinks import JsonlMirror, Sink

from helpers import run_records


def frame(kind: bytes, payload: bytes = b"") -> bytes:
    return protocol.HEADER.pack(kind, len(payload)) + payload


def frames(data: bytes) -> list[tuple[bytes, bytes]]:
    found = []
    while data:
        kind, size = protocol.HEADER.unpack_from(data)
        found.append((kind, data[protocol.HEADER.size : protocol.HEADER.size + size]))
        data = data[protocol.HEADER.size + size :]
    return found


def read_all(fd: int) -> bytes:
    chunks = []
    while chunk := os.read(fd, 1 << 20):
        chunks.append(chunk)
    os.close(fd)
    return b"".join(chunks)


# -- the relay's side ----------------------------------------------------------------------------


def read_in_background(fd: int) -> Callable[[], bytes]:
    """Read `fd` to its end on a thread; the function returns what was read."""
    result: list[bytes] = []
    reader = threading.Thread(target=lambda: result.append(read_all(fd)))
    reader.start()

    def received() -> bytes:
        reader.join(30)
        return result[0]

    return received


def test_the_copy_is_held_up_to_its_bound_then_dropped_and_reported_as_a_gap_at_its_offset(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_read, data_write = os.pipe()
    report_read, report_write = os.pipe()
    copy = capture_copy.CaptureCopy(data_write, report_write)
    big = b"line of output\n" * 200_000  # 3 MB: more than the pipe holds, the rest is held
    copy.add(big)
    assert copy.held_bytes > 0
    monkeypatch.setattr(capture_copy, "MAX_HELD_BYTES", copy.held_bytes + 5)
    copy.add(b"dropped\nline ")  # over the bound: dropped from the copy, counted
    copy.add(b"more\nfive\n")  # and this; it ended a line
    copy.add(b"ok\n")  # fits again: the gap is reported first, at its place in the copy
    copy.report(protocol.EXITED, protocol.STATUS.pack(0))
    data, reports = read_in_background(data_read), read_in_background(report_read)
    copy.finish()
    assert data() == big + b"ok\n"
    assert frames(reports()) == [
        (protocol.GAP, protocol.GAP_AT.pack(len(big), 23, 3, True)),
        (protocol.EXITED, protocol.STATUS.pack(0)),
    ]


def test_the_kernel_copies_what_a_pipe_holds_without_taking_it_from_the_command() -> None:
    data_read, data_write = os.pipe()
    report_read, report_write = os.pipe()
    source_read, source_write = os.pipe()
    copy = capture_copy.CaptureCopy(data_write, report_write)
    os.write(source_write, b"hello\n")
    assert copy.tee(source_read) == 6
    assert os.read(source_read, 100) == b"hello\n"  # still there, for our stdout
    copy.finish()
    assert read_all(data_read) == b"hello\n"
    assert read_all(report_read) == b""
    for fd in (source_read, source_write):
        os.close(fd)


# -- the wrapper's side --------------------------------------------------------------------------


class Lines:
    """Records what capture hands on (the recorder's calls): a backlog that always has room."""

    closed = False

    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def feed_lines(self, lines: list[bytes], start: int, stop: int) -> int:
        self.lines += lines[start:stop]
        return stop

    def wait_for_room(self, timeout_s: float) -> bool:
        return True


class Relay:
    """The relay's end of the two pipes, written by hand; capture hands lines to `Lines`, or
    to `recorder`."""

    def __init__(self, *, terminal: bool = False, recorder: LineRecorder | None = None) -> None:
        data_read, self.data = os.pipe()
        report_read, self.reports = os.pipe()
        self.lines = Lines()
        taker: Any = self.lines if recorder is None else recorder
        self.capture = OutputCapture(data_read, report_read, taker, terminal=terminal)

    def output(self, data: bytes) -> None:
        os.write(self.data, data)

    def report(self, kind: bytes, payload: bytes = b"") -> None:
        os.write(self.reports, frame(kind, payload))

    def end(self) -> OutputCapture:
        os.close(self.data)
        os.close(self.reports)
        assert self.capture.wait(30)
        return self.capture


def test_lines_split_across_reads_and_the_reports_are_read() -> None:
    relay_end = Relay()
    relay_end.report(protocol.PID, protocol.NUMBER.pack(1234))
    relay_end.output(b"first\nsec")
    relay_end.output(b"ond\nthird")
    relay_end.report(protocol.EXITED, protocol.STATUS.pack(-15))
    relay_end.output(b" and last")  # no newline at the end: still a line
    capture_end = relay_end.end()
    assert relay_end.lines.lines == [b"first\n", b"second\n", b"third and last"]
    assert (capture_end.pid, capture_end.status) == (1234, -15)
    assert capture_end.counts == LineCounts(lines=3)
    assert capture_end.counts.summary() is None


def test_on_a_terminal_lines_lose_the_carriage_return() -> None:
    relay_end = Relay(terminal=True)
    relay_end.output(b"one\r\ntwo\r\n")
    relay_end.end()
    assert relay_end.lines.lines == [b"one\n", b"two\n"]


def test_a_gap_loses_the_lines_it_cut_and_no_other() -> None:
    relay_end = Relay()
    # As the relay does: each gap is reported before the output that follows it.
    relay_end.report(protocol.GAP, protocol.GAP_AT.pack(15, 30, 2, False))  # "rt\nlost\nhalf of a"
    relay_end.report(protocol.GAP, protocol.GAP_AT.pack(32, 5, 1, True))  # "gone\n": it ended a line
    relay_end.output(b"kept\nbroken sta")  # 15 bytes
    relay_end.output(b" line\nkept again\n")  # 17 bytes
    relay_end.output(b"kept to the end\n")
    capture_end = relay_end.end()
    assert relay_end.lines.lines == [b"kept\n", b"kept again\n", b"kept to the end\n"]
    # "broken start", "lost", "half of a line", "gone": four lines, and exactly their bytes.
    assert capture_end.counts == LineCounts(lines=7, not_recorded=4, not_recorded_bytes=10 + 30 + 6 + 5)
    summary = capture_end.counts.summary()
    assert summary is not None
    assert summary.startswith("4 of 7 output lines (51 bytes) were not recorded in the transcript")


def test_a_gap_at_the_very_end_is_counted() -> None:
    relay_end = Relay()
    relay_end.report(protocol.GAP, protocol.GAP_AT.pack(6, 12, 2, True))
    relay_end.output(b"first\n")
    capture_end = relay_end.end()
    assert relay_end.lines.lines == [b"first\n"]
    assert capture_end.counts == LineCounts(lines=3, not_recorded=2, not_recorded_bytes=12)


def test_a_last_line_a_gap_cut_and_that_never_ends_is_counted_lost() -> None:
    """200 MB printed with no newline at all: the relay dropped its middle from the copy. The
    line is reported lost (it was silent: 0 lines not recorded, so no report at all)."""
    relay_end = Relay()
    relay_end.report(protocol.GAP, protocol.GAP_AT.pack(5, 1000, 0, False))
    relay_end.output(b"start")
    relay_end.output(b"rest of the line, and no newline")
    capture_end = relay_end.end()
    assert relay_end.lines.lines == []
    assert capture_end.counts == LineCounts(lines=1, not_recorded=1, not_recorded_bytes=5 + 1000 + 32)
    summary = capture_end.counts.summary()
    assert summary is not None
    assert summary.startswith("1 of 1 output lines (1037 bytes) were not recorded in the transcript")


def test_a_line_longer_than_the_limit_is_recorded_in_pieces(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "MAX_LINE_BYTES", 4)
    relay_end = Relay()
    relay_end.output(b"abcdefghij\n")
    relay_end.end()
    assert relay_end.lines.lines == [b"abcd", b"efgh", b"ij\n"]


class Priorities(Lines):
    """`Lines`, with the CPU priority (nice) of the thread each line was handed on from."""

    def __init__(self) -> None:
        super().__init__()
        self.niceness: list[int] = []

    def feed_lines(self, lines: list[bytes], start: int, stop: int) -> int:
        self.niceness += [os.getpriority(os.PRIO_PROCESS, threading.get_native_id())] * (stop - start)
        return super().feed_lines(lines, start, stop)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="a thread's own priority is Linux's")
def test_capture_yields_the_cpu_while_the_output_goes_on_and_takes_the_callers_priority_after() -> None:
    ours = os.getpriority(os.PRIO_PROCESS, threading.get_native_id())
    lower = min(ours + 5, 19)
    data_read, data = os.pipe()
    report_read, reports = os.pipe()
    recorder = Priorities()
    capture_end = OutputCapture(data_read, report_read, recorder, terminal=False, niceness=lower)  # type: ignore[arg-type]
    os.write(data, b"during\n")
    wait_until(lambda: recorder.lines == [b"during\n"])
    os.write(reports, frame(protocol.OUTPUT_DONE))
    wait_until(capture_end.handing_over.is_set)  # a lowered priority cannot be raised again
    os.write(data, b"after\n")
    capture_end.go_on()  # on this thread: a new one at its priority
    os.close(data)
    os.close(reports)
    assert capture_end.wait(30)
    assert recorder.lines == [b"during\n", b"after\n"]
    assert recorder.niceness == [lower, ours]


def wait_until(condition: Callable[[], bool]) -> None:
    for _ in range(3000):
        if condition():
            return
        time.sleep(0.01)
    raise AssertionError("never happened")


def test_what_capture_has_no_time_for_after_the_output_is_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capture, "CAPTURE_GRACE_S", 0.0)
    relay_end = Relay()
    relay_end.output(b"recorded\n")
    wait_until(lambda: relay_end.lines.lines == [b"recorded\n"])
    relay_end.report(protocol.OUTPUT_DONE)
    wait_until(lambda: not relay_end.capture.recording)
    relay_end.output(b"late one\nlate two\n")
    capture_end = relay_end.end()
    assert relay_end.lines.lines == [b"recorded\n"]
    assert capture_end.counts == LineCounts(lines=3, not_recorded=2, not_recorded_bytes=18)


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


# -- a writer that cannot keep up ----------------------------------------------------------------


class SlowSink(Sink):
    """Takes its time (2 ms every 64 records): the writer falls behind capture."""

    name = "slow"

    def __init__(self) -> None:
        self.written = 0

    def write(self, record: PreparedRecord) -> None:
        self.written += 1
        if self.written % 64 == 0:
            time.sleep(0.002)


class StuckSink(Sink):
    """Blocks the writer in its first write until released (a hung disk)."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()

    def write(self, record: PreparedRecord) -> None:
        self.release.wait(30.0)


def run_on(
    sinks: list[Sink],
    make_pipeline: Callable[..., TranscriptPipeline],
    otel: Any,
    monkeypatch: pytest.MonkeyPatch,
    **options: Any,
) -> tuple[TranscriptPipeline, LineRecorder]:
    """A run of `transcript-otel run`'s kind recorded through a pipeline of `sinks` (the default
    pipeline, as the CLI's), its lines read as plain text."""
    pipeline = make_pipeline(sinks, **options)
    monkeypatch.setattr(defaults, "_pipeline", defaults._pipeline)  # undone by monkeypatch
    set_pipeline(pipeline)
    run = AgentRun(
        otel.tracer_provider.get_tracer("test"), prompt_name="fast", adapter="cli", session_id=None
    )
    return pipeline, LineRecorder(run, PlainAdapter())


@pytest.mark.parametrize(
    "grace_s", [0.0, capture.CAPTURE_GRACE_S], ids=["no time after the output", "default"]
)
def test_every_line_is_recorded_or_reported_when_the_writer_cannot_keep_up(
    grace_s: float,
    make_pipeline: Callable[..., TranscriptPipeline],
    runs_dir: Path,
    otel: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A slow sink, a backlog of 8 entries at most and a shutdown deadline of 1 ms: capture waits
    for room instead of having entries dropped, what it has no time for once the output is over
    is counted, and what it recorded is written whole however long the writer takes. Each line
    is in the mirror, in order, or counted in the run's one report."""
    monkeypatch.setattr(capture, "CAPTURE_GRACE_S", grace_s)
    pipeline, recorder = run_on(
        [JsonlMirror(runs_dir), SlowSink()],
        make_pipeline,
        otel,
        monkeypatch,
        max_backlog_bytes=1,
        shutdown_timeout_s=0.001,
    )
    assert pipeline.backlog_limit == 8
    printed = 20_000
    relay_end = Relay(recorder=recorder)
    relay_end.output(b"".join(b"line %d\n" % number for number in range(printed)))
    relay_end.report(protocol.OUTPUT_DONE)
    counts = relay_end.end().counts
    end_run(recorder, counts, None)
    pipeline.shutdown()
    records = run_records(recorder.run.emitter)
    texts = [r["context"]["detail"]["text"] for r in records if r["event"] == "transcript.entry"]
    assert texts == [f"line {number}" for number in range(len(texts))]
    errors = [r["context"] for r in records if r["event"] == "transcript.error"]
    assert [error.get("unrecorded_lines") for error in errors] == (
        [counts.not_recorded] if counts.not_recorded else []
    )
    assert len(texts) + counts.not_recorded == counts.lines == printed
    assert records[-1]["event"] == "transcript.stop"
    assert records[-1]["context"]["dropped_entries"] == 0


def test_a_stuck_writer_is_waited_for_only_while_it_writes(
    make_pipeline: Callable[..., TranscriptPipeline],
    runs_dir: Path,
    otel: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Once the output is over the run waits for its transcript to be written, but not for a
    writer that writes nothing (a hung disk), nor once the wrapper is told to stop."""
    monkeypatch.setattr(line_recorder, "WRITER_STALL_S", 0.2)
    stuck = StuckSink()
    _, recorder = run_on([stuck, JsonlMirror(runs_dir)], make_pipeline, otel, monkeypatch)
    recorder.feed(b"a line\n")
    assert not recorder.wait_until_written(lambda: False)  # nothing written for WRITER_STALL_S
    assert not recorder.wait_until_written(lambda: True)  # told to stop
    stuck.release.set()
    assert recorder.wait_until_written(lambda: False)
    entries = [
        r["context"]["detail"] for r in run_records(recorder.run.emitter) if r["event"] == "transcript.entry"
    ]
    assert entries == [{"text": "a line"}]
