"""When the writer starts a drain: after a pause in the records *and* in the agent's work.

The writer needs the GIL, so a drain while the agent's thread is at work costs the agent. A
pause in the records alone does not say the agent waits: between two records it may parse
lines that make none, or end its turn. `_wait_for_pause` also asks how much CPU the process's
other threads used since its last look. Checked here on a clock of the test's own (the
decision, not the machine's timing): the writer's looks, the CPU the agent's threads used
between them, and when it gives up waiting.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import transcript_otel.capture.agent_activity as agent_activity
from transcript_otel import TranscriptPipeline
from transcript_otel.capture.shared import FlushRequest
from transcript_otel.capture.writer import MAX_DEFER_S, PAUSE_S


class ScriptedClock:
    """Wall time moves only when the writer waits; the agent's threads use `busy` of it."""

    def __init__(self, busy: Callable[[float], float]) -> None:
        self.now = 1000.0
        self.others_cpu = 0.0
        self.busy = busy  # share of one core the agent uses at this time
        self.looks: list[float] = []

    def wait(self, timeout: float | None = None) -> bool:
        assert timeout is not None
        self.others_cpu += self.busy(self.now) * timeout
        self.now += timeout
        self.looks.append(self.now)
        return False  # nobody asked for a flush


@pytest.fixture
def pipeline(make_pipeline: Callable[..., TranscriptPipeline]) -> Iterator[TranscriptPipeline]:
    built = make_pipeline([])
    built.backlog.extend(FlushRequest(False, 1.0) for _ in range(10))  # queued, none arriving any more
    yield built
    built.backlog.clear()  # stand-ins: nothing for the writer to do


def _with_clock(monkeypatch: pytest.MonkeyPatch, pipeline: TranscriptPipeline, clock: ScriptedClock) -> None:
    monkeypatch.setattr(time, "monotonic", lambda: clock.now)
    monkeypatch.setattr(agent_activity, "other_threads_cpu", lambda: clock.others_cpu)
    monkeypatch.setattr(pipeline._writer._flush_wanted, "wait", clock.wait)


def test_an_idle_agent_gets_its_records_written_after_one_look(
    monkeypatch: pytest.MonkeyPatch, pipeline: TranscriptPipeline
) -> None:
    clock = ScriptedClock(busy=lambda now: 0.05)
    _with_clock(monkeypatch, pipeline, clock)
    pipeline._writer._wait_for_pause()
    assert len(clock.looks) == 1
    assert clock.looks[0] - 1000.0 == pytest.approx(PAUSE_S)


def test_an_agent_at_work_without_recording_is_left_alone_until_it_waits(
    monkeypatch: pytest.MonkeyPatch, pipeline: TranscriptPipeline
) -> None:
    start = 1000.0
    clock = ScriptedClock(busy=lambda now: 1.0 if now < start + 0.1 else 0.0)  # ends its turn
    _with_clock(monkeypatch, pipeline, clock)
    pipeline._writer._wait_for_pause()
    assert clock.looks[-1] >= start + 0.1  # not before the agent stopped working
    assert clock.looks[-1] < start + MAX_DEFER_S
    assert len(clock.looks) < 10  # it looks less often while the agent works


def test_an_agent_that_never_waits_gets_its_records_written_within_the_deadline(
    monkeypatch: pytest.MonkeyPatch, pipeline: TranscriptPipeline
) -> None:
    clock = ScriptedClock(busy=lambda now: 1.0)
    _with_clock(monkeypatch, pipeline, clock)
    pipeline._writer._wait_for_pause()
    assert clock.looks[-1] == pytest.approx(1000.0 + MAX_DEFER_S)


def test_records_still_coming_keep_the_writer_waiting_whatever_the_cpu(
    monkeypatch: pytest.MonkeyPatch, pipeline: TranscriptPipeline
) -> None:
    clock = ScriptedClock(busy=lambda now: 0.0)
    waited = clock.wait

    def records_keep_coming(timeout: float | None = None) -> Any:
        if len(clock.looks) < 3:
            pipeline.backlog.append(FlushRequest(False, 1.0))
        return waited(timeout)

    _with_clock(monkeypatch, pipeline, clock)
    monkeypatch.setattr(pipeline._writer._flush_wanted, "wait", records_keep_coming)
    pipeline._writer._wait_for_pause()
    assert len(clock.looks) == 4  # three looks found new records, the fourth a pause
