"""The byte bound holds from the very first entry, even when the writer is stuck."""

from __future__ import annotations

import threading
from collections.abc import Callable

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel._records import PreparedRecord
from transcript_otel.sinks import JsonlMirror, Sink

from helpers import entry_contexts, run_records

ENTRY_JSON_BYTES = 50_000


class StuckSink(Sink):
    """Blocks the writer in its first write until released (a hung disk or backend)."""

    name = "stuck"

    def __init__(self) -> None:
        self.release = threading.Event()

    def write(self, record: PreparedRecord) -> None:
        self.release.wait(30.0)


def test_cold_burst_of_large_entries_stays_within_the_byte_bound(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object
) -> None:
    stuck = StuckSink()
    bound = 64 * 1024 * 1024
    pipeline = make_pipeline([stuck, JsonlMirror(str(runs_dir))], max_backlog_bytes=bound)
    emitter = TranscriptEmitter(prompt_name="burst", adapter="a", pipeline=pipeline)
    output = "x" * ENTRY_JSON_BYTES
    for index in range(3_000):
        emitter.emit("tool_result", detail={"output": output, "index": index})
    accepted = 3_000 - emitter.dropped_entries

    # Each entry is ~50 KB of JSON, ~2.5x that as Python objects: the bound admits
    # about 500 of them. Without calibration it would have admitted all 3,000.
    assert emitter.dropped_entries > 0
    assert accepted * ENTRY_JSON_BYTES * 2.5 <= bound * 1.1

    stuck.release.set()
    emitter.stop()
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


def test_the_entry_size_estimate_goes_down_slowly_however_the_entries_are_batched(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: object
) -> None:
    """After large entries, a burst of small ones lowers the estimate a 64th of the way per
    entry: the bound does not suddenly admit 30x as many entries because one batch was small."""

    def limit_after(*bursts: tuple[int, int]) -> int:
        pipeline = make_pipeline([JsonlMirror(str(runs_dir))])
        emitter = TranscriptEmitter(prompt_name="estimate", adapter="a", pipeline=pipeline)
        for count, size in bursts:
            for index in range(count):
                emitter.emit("tool_result", detail={"output": "x" * size, "index": index})
            assert pipeline.flush()
        return pipeline.backlog_limit

    small_only = limit_after((128, 1_000))
    large = limit_after((20, 50_000))
    large_then_small = limit_after((20, 50_000), (128, 1_000))
    assert large < large_then_small < small_only / 2

    # 128 small entries move the estimate 1 - (63/64)**128 = 87% of the way down.
    def estimate(limit: int) -> float:
        return 64 * 1024 * 1024 / limit

    moved = (estimate(large) - estimate(large_then_small)) / (estimate(large) - estimate(small_only))
    assert 0.80 < moved < 0.93
