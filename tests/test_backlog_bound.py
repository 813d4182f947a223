"""The byte bound is on the memory the backlog holds, from the very first entry, even when the
writer is stuck."""

from __future__ import annotations

import asyncio
import gc
import json
import logging
import threading
import time
import tracemalloc
from collections.abc import Callable
from datetime import datetime
from typing import Any

import pytest

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.capture import pipeline as pipeline_module
from transcript_otel.capture.shared import WAKE_THRESHOLD
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.sinks import JsonlMirror, Sink

from conftest import OTelHarness
from helpers import FIXTURES, WRITTEN_WITHIN_S, entry_contexts, run_records

MIB = 1 << 20


class StuckSink(Sink):
    """Blocks the writer in its first write until released (a hung disk or backend)."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()
        self.blocked = threading.Event()

    def write(self, record: PreparedRecord) -> None:
        self.blocked.set()
        self.release.wait(30.0)


class StuckOnEntrySink(StuckSink):
    """Writes the run's start, then blocks on its first entry."""

    def write(self, record: PreparedRecord) -> None:
        if "entry_type" in record.context:
            super().write(record)


def _text(index: int, size: int) -> str:
    """Text of `size` characters of its own (no two entries share it, as in real runs)."""
    return f"{index:08d}" + "x" * (size - 8)


def _big_every_tenth(index: int) -> tuple[dict[str, Any], None]:
    return {"output": _text(index, 50_000 if index % 10 == 0 else 100)}, None


# Entries as (detail, raw) for entry number `index`.
SHAPES: dict[str, Callable[[int], tuple[dict[str, Any], str | None]]] = {
    "60 B of text": lambda index: ({"text": _text(index, 60)}, None),
    "1 KB with raw JSON": lambda index: (
        {"text": _text(index, 1_000), "n": index, "tags": ["a", "b"]},
        json.dumps({"text": _text(index, 1_000)}),
    ),
    "50 KB": lambda index: ({"output": _text(index, 50_000)}, None),
    "1 in 10 of 50 KB": _big_every_tenth,
    "nested": lambda index: ({"items": [{"key": f"{index}-{n}", "value": n} for n in range(20)]}, None),
    "60 B, then 50 KB": lambda index: ({"output": _text(index, 50_000 if index >= 20_000 else 60)}, None),
    "50 KB, then 60 B": lambda index: ({"output": _text(index, 50_000 if index < 200 else 60)}, None),
}


# Where drops may begin, as a share of the bound. Behind a stuck writer, one entry at a time is
# measured: a large one among small ones raises the estimate at once, so with entries of mixed
# sizes the drops begin early (the safe side), never late.
LOWEST_SHARE: dict[str, float] = {"1 in 10 of 50 KB": 0.25}


@pytest.mark.parametrize("shape", SHAPES)
def test_the_bound_is_on_the_memory_the_backlog_holds(
    make_pipeline: Callable[..., TranscriptPipeline], shape: str
) -> None:
    """Behind a stuck sink, entries are accepted until what they hold, measured by the
    interpreter's own allocator, nears the bound: not far below it (a count of entries of
    a guessed size), nor far above (entries that grow get past it by at most 256)."""
    make = SHAPES[shape]
    bound = 16 * MIB
    stuck = StuckSink()
    pipeline = make_pipeline([stuck], max_backlog_bytes=bound, shutdown_timeout_s=0.5)
    emitter = TranscriptEmitter(prompt_name="bound", adapter="a", pipeline=pipeline)
    emitter.emit("user_message", detail={"text": "the sink takes this one and blocks"})
    assert stuck.blocked.wait(10.0)
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        emitted = 0
        while emitter.dropped_entries < 1_000:
            detail, raw = make(emitted)
            emitter.emit("tool_result", detail=detail, raw=raw)
            emitted += 1
        held = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
        stuck.release.set()
    lowest = LOWEST_SHARE.get(shape, 0.5)
    assert lowest * bound < held < 1.3 * bound, f"{held / MIB:.1f} MiB held for a bound of 16 MiB"


def _emit_many(emitter: TranscriptEmitter, count: int) -> None:
    for index in range(count):
        emitter.emit("assistant_message", detail={"text": _text(index, 60)})


async def _emit_in_tasks(emitter: TranscriptEmitter, tasks: int, count: int) -> None:
    async def task() -> None:
        for _ in range(0, count, 100):
            _emit_many(emitter, 100)
            await asyncio.sleep(0)

    await asyncio.gather(*(task() for _ in range(tasks)))


@pytest.mark.parametrize("threads", ["one thread", "16 threads and 16 tasks", "3 emitters on 3 threads"])
def test_a_burst_well_within_the_bound_loses_nothing(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object, threads: str
) -> None:
    """About 100,000 entries of 60 bytes of text, emitted as fast as they can be, hold ~45 MB:
    the default bound (64 MiB) keeps every one (the review lost half of them to a count of
    entries derived from a guessed size)."""
    pipeline = make_pipeline([JsonlMirror(str(runs_dir))])
    emitters: list[TranscriptEmitter] = []

    def new_emitter() -> TranscriptEmitter:
        emitter = TranscriptEmitter(prompt_name="burst", adapter="a", pipeline=pipeline)
        emitters.append(emitter)
        return emitter

    if threads == "one thread":
        _emit_many(new_emitter(), 100_000)
    elif threads == "16 threads and 16 tasks":
        shared = new_emitter()
        workers = [threading.Thread(target=_emit_many, args=(shared, 3_200)) for _ in range(16)]
        for worker in workers:
            worker.start()
        asyncio.run(_emit_in_tasks(shared, 16, 3_200))
        for worker in workers:
            worker.join()
    else:
        own = [new_emitter() for _ in range(3)]
        workers = [threading.Thread(target=_emit_many, args=(emitter, 33_400)) for emitter in own]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
    assert [emitter.dropped_entries for emitter in emitters] == [0] * len(emitters)
    written = 0
    for emitter in emitters:
        summary = emitter.stop(WRITTEN_WITHIN_S)
        entries = len(entry_contexts(run_records(emitter)))
        assert entries == summary.total_entries
        written += entries
    assert written >= 100_000


def test_dropped_entries_are_reported_and_the_rest_numbered_without_gaps(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object
) -> None:
    stuck = StuckSink()
    bound = 64 * MIB
    pipeline = make_pipeline([stuck, JsonlMirror(str(runs_dir))], max_backlog_bytes=bound)
    emitter = TranscriptEmitter(prompt_name="burst", adapter="a", pipeline=pipeline)
    emitter.emit("user_message", detail={"text": "the stuck sink takes this one and blocks"})
    assert stuck.blocked.wait(10.0)
    for index in range(3_000):
        emitter.emit("tool_result", detail={"output": _text(index, 50_000), "index": index})
    accepted = 1 + 3_000 - emitter.dropped_entries
    # Each entry holds ~50 KB: the bound admits about 1,300 of them, not all 3,000.
    assert 1 < accepted * 50_000 < bound * 1.3

    stuck.release.set()
    emitter.stop(WRITTEN_WITHIN_S)
    records = run_records(emitter)
    contexts = entry_contexts(records)
    assert [c["sequence_number"] for c in contexts] == list(range(1, accepted + 1))
    (error,) = [r for r in records if r["event"] == "transcript.error"]
    assert error["level"] == "WARNING"
    assert error["context"]["dropped_entries"] == emitter.dropped_entries
    assert "backlog exceeded its bound" in error["context"]["error"]


def test_failures_are_counted_per_sink(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object
) -> None:
    class Broken(Sink):
        name = "broken"

        def write(self, record: PreparedRecord) -> None:
            raise OSError("backend unreachable")

    pipeline = make_pipeline([Broken(), JsonlMirror(str(runs_dir))])
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
        for _ in range(3):
            emitter.emit("user_message", detail={"text": "hi"})
    # start, three entries and stop each failed once in the broken sink.
    assert pipeline.sink_failures["broken"] == 5
    errors = [r for r in run_records(emitter) if r["event"] == "transcript.error"]
    assert len(errors) == 5
    assert all("sink 'broken' failed: OSError: backend unreachable" in e["context"]["error"] for e in errors)


def test_records_left_at_the_shutdown_deadline_are_said_and_counted(
    make_pipeline: Callable[..., TranscriptPipeline], caplog: pytest.LogCaptureFixture
) -> None:
    """Exit never waits past the deadline for a writer that cannot keep up: what it did not
    write is said, with how many (`transcript-otel run` under a loaded machine meets this)."""
    stuck = StuckOnEntrySink()
    pipeline = make_pipeline([stuck], shutdown_timeout_s=0.5)
    emitter = TranscriptEmitter(prompt_name="deadline", adapter="a", pipeline=pipeline)
    emitter.emit("user_message", detail={"text": "the sink takes this one and blocks"})
    assert stuck.blocked.wait(10.0)
    for index in range(100):
        emitter.emit("assistant_message", detail={"text": _text(index, 60)})
    emitter.stop(wait=False)
    with caplog.at_level(logging.WARNING, logger="transcript_otel.capture.pipeline"):
        pipeline.shutdown()
    stuck.release.set()
    said = [r.getMessage() for r in caplog.records if "before the shutdown deadline" in r.getMessage()]
    # The 100 entries queued behind the one being written are given up; the stop, which the
    # stuck writer could not write even then, is said too (the flush requests are not records).
    assert said == [
        "transcript-otel: 100 transcript entries were not written before the shutdown deadline; "
        "each run's transcript.stop counts its own (dropped_entries)",
        "transcript-otel: 1 queued records were not written before the shutdown deadline",
    ]


def test_at_the_shutdown_deadline_entries_are_given_up_never_the_stop_and_the_count(
    make_pipeline: Callable[..., TranscriptPipeline],
    runs_dir: object,
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A writer behind at exit (`transcript-otel run` on a loaded machine: 46,481 records left
    at the deadline, the mirror with no `transcript.stop` and no word of what it lost): the
    entries it has no time for are given up, and each run's stop is written with their count."""
    monkeypatch.setattr(pipeline_module, "STOP_GRACE_S", 60.0)  # the writer is released meanwhile
    stuck = StuckOnEntrySink()
    pipeline = make_pipeline([stuck, JsonlMirror(str(runs_dir))], shutdown_timeout_s=0.2)
    emitter = TranscriptEmitter(prompt_name="deadline", adapter="a", pipeline=pipeline)
    emitter.emit("user_message", detail={"text": "the sink takes this one and blocks"})
    assert stuck.blocked.wait(10.0)
    for index in range(100):
        emitter.emit("assistant_message", detail={"text": _text(index, 60)})
    emitter.stop(wait=False)
    with caplog.at_level(logging.WARNING, logger="transcript_otel.capture.pipeline"):
        shutting_down = threading.Thread(target=pipeline.shutdown)
        shutting_down.start()
        for _ in range(3000):  # until the deadline passed and the entries were given up
            if emitter.dropped_entries:
                break
            time.sleep(0.01)
        stuck.release.set()
        shutting_down.join(60.0)
    assert emitter.dropped_entries == 100
    records = run_records(emitter)
    assert [c["sequence_number"] for c in entry_contexts(records)] == [1]  # no gap: the rest unnumbered
    (error,) = [r["context"] for r in records if r["event"] == "transcript.error"]
    assert error["dropped_entries"] == 100
    assert records[-1]["event"] == "transcript.stop"
    assert records[-1]["context"]["dropped_entries"] == 100
    said = [r.getMessage() for r in caplog.records if "before the shutdown deadline" in r.getMessage()]
    assert said == [
        "transcript-otel: 100 transcript entries were not written before the shutdown deadline; "
        "each run's transcript.stop counts its own (dropped_entries)"
    ]


def test_claude_sdk_messages_behind_a_stuck_writer_wait_within_the_bound(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object
) -> None:
    """claude-agent-sdk's messages are mapped on the writer: behind a stuck one they wait in the
    backlog within its bound, like entries; those past it are dropped and reported, and what
    waited is written in order once the writer moves again."""
    from opentelemetry import trace

    from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun, user_message
    from transcript_otel.instrumentation.span_tree.agent_run import AgentRun

    messages = _real_cli_messages()
    stuck = StuckSink()
    pipeline = make_pipeline([stuck, JsonlMirror(str(runs_dir))], max_backlog_bytes=MIB)
    run = AgentRun(
        trace.NoOpTracer(), prompt_name="sdk", adapter="claude_agent_sdk", session_id=None, pipeline=pipeline
    )
    sdk_run = SdkRun(run)
    sdk_run.prompt(user_message("Run a command."))
    assert stuck.blocked.wait(10.0)  # the writer holds the run's start
    for _ in range(1_000):
        for message in messages:
            sdk_run.message(message)
    # Measured as they wait: the bound is in bytes (the init message alone holds ~10 KB), not
    # in a count of the prompt's small entry (~7,500 of them); past it by at most one
    # measurement's worth of queued items, as for entries.
    assert run.emitter.dropped_entries > 0
    assert pipeline.backlog_limit < 500
    assert len(pipeline.backlog) <= pipeline.backlog_limit + WAKE_THRESHOLD

    stuck.release.set()
    sdk_run.finish()
    assert pipeline.flush(WRITTEN_WITHIN_S)
    records = run_records(run.emitter)
    contexts = entry_contexts(records)
    assert [c["sequence_number"] for c in contexts] == list(range(1, len(contexts) + 1))
    assert [c["entry_type"] for c in contexts][:2] == ["user_message", "system_event"]
    errors = [r["context"] for r in records if r["event"] == "transcript.error"]
    (dropped,) = [error for error in errors if "dropped_entries" in error]
    assert dropped["dropped_entries"] == run.emitter.dropped_entries
    # Spans that ended while the backlog was past its bound: said too, nothing else went wrong.
    assert all("dropped_entries" in error or "dropped_span_records" in error for error in errors)
    assert records[-1]["event"] == "transcript.stop"


def test_claude_sdk_entries_keep_the_time_their_message_came_whenever_the_writer_maps_them(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object
) -> None:
    """Mapped on the writer, perhaps long after (here: once a stuck sink lets go), each entry
    still says when the SDK got its message."""
    from opentelemetry import trace

    from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun, user_message
    from transcript_otel.instrumentation.span_tree.agent_run import AgentRun

    messages = [
        json.loads(line) for line in (FIXTURES / "claude_code" / "tools.jsonl").read_text().splitlines()
    ]
    stuck = StuckSink()
    pipeline = make_pipeline([stuck, JsonlMirror(str(runs_dir))])
    run = AgentRun(
        trace.NoOpTracer(), prompt_name="sdk", adapter="claude_agent_sdk", session_id=None, pipeline=pipeline
    )
    sdk_run = SdkRun(run)
    assert stuck.blocked.wait(10.0)
    windows: list[tuple[int, int]] = []  # (before, after) each message was handed over
    before = time.time_ns()
    sdk_run.prompt(user_message("Run a command."))
    prompt_window = (before, time.time_ns())
    for message in messages:
        before = time.time_ns()
        sdk_run.message(message)
        windows.append((before, time.time_ns()))
        time.sleep(0.002)
    stuck.release.set()
    sdk_run.finish()
    assert pipeline.flush(WRITTEN_WITHIN_S)

    contexts = entry_contexts(run_records(run.emitter))
    stamps = [datetime.fromisoformat(c["timestamp"]) for c in contexts]
    # The prompt waits for the first message (it tells the session id) and keeps its own time.
    assert contexts[0]["entry_type"] == "user_message"
    assert _within(stamps[0], prompt_window)
    # Every other entry lies within the window of one message, in message order.
    message_of_entry = [next(i for i, w in enumerate(windows) if _within(s, w)) for s in stamps[1:]]
    assert message_of_entry == sorted(message_of_entry)
    assert len(set(message_of_entry)) > 5


def _real_cli_messages() -> list[dict[str, Any]]:
    """The messages the real Claude Code CLI printed for a turn with a Bash call."""
    recorded = FIXTURES / "claude_code" / "tools.jsonl"
    return [json.loads(line) for line in recorded.read_text().splitlines()]


def _within(stamp: datetime, window: tuple[int, int]) -> bool:
    """Whether `stamp` (microseconds) lies within the nanosecond `window`."""
    at_us = int(stamp.timestamp() * 1_000_000)
    return window[0] // 1_000 <= at_us <= window[1] // 1_000 + 1


def test_a_span_that_ends_past_the_bound_is_exported_and_its_missing_record_said(
    make_pipeline: Callable[..., TranscriptPipeline],
    runs_dir: object,
    monkeypatch: pytest.MonkeyPatch,
    otel: OTelHarness,
) -> None:
    """A span ending while the backlog is past its bound gets no `transcript.span` record (a
    stuck sink must not make them pile up), but the transcript says so: a run read back from
    the mirror (tokens per turn, `summary`) would otherwise be short with no word."""
    from transcript_otel.instrumentation.span_tree.agent_run import AgentRun

    pipeline = make_pipeline([JsonlMirror(str(runs_dir))])
    tracer = otel.tracer_provider.get_tracer("test")
    run = AgentRun(tracer, prompt_name="bound", adapter="a", session_id=None, pipeline=pipeline)
    run.begin_turn()
    run.record("user_message", detail={"text": "hi"})
    assert pipeline.flush(WRITTEN_WITHIN_S)
    limit = pipeline.backlog_limit
    monkeypatch.setattr(pipeline._backlog, "_set_entry_bytes", lambda entry_bytes: None)  # no new measure
    pipeline.backlog_limit = 0  # as while the sinks fall behind
    run.end_turn()
    assert pipeline.flush(WRITTEN_WITHIN_S)
    pipeline.backlog_limit = limit
    run.finish()
    assert pipeline.flush(WRITTEN_WITHIN_S)
    records = run_records(run.emitter)
    (error,) = [r["context"] for r in records if r["event"] == "transcript.error"]
    exported = sorted(span.name for span in otel.finished_spans())
    assert len(exported) == 2  # the run's root and its turn, both exported
    assert [r["context"]["name"] for r in records if r["event"] == "transcript.span"] == [
        next(name for name in exported if name.startswith("invoke_agent"))
    ]  # the root's record, not the turn's
    assert error["dropped_span_records"] == 1
    assert error["error"].startswith("1 transcript.span records dropped (the spans were exported)")
    assert [r["event"] for r in records][-1] == "transcript.stop"
