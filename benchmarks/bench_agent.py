"""Section 1: what `TranscriptEmitter.emit()` costs the agent's thread, all three sinks on.

Sinks: the JSONL mirror (temp dir), OTel log records (SDK `LoggerProvider`,
`BatchLogRecordProcessor`, a discarding exporter) and span events (an SDK span
is current during every `emit()`). The pipeline has its default byte bound.

* hot loop: `emit()` back to back, `HOT_BATCH` entries per batch (below the
  writer's wake threshold, so it mostly stays parked, as in perf.md's "floor"),
  the pipeline flushed (untimed) between batches; ns per entry.
* sustained: entries back to back for longer than the writer needs to drain
  them, so the writer is busy all along and the agent thread shares the GIL with
  it. Chunks of 16 `emit()` calls are timed; whenever the backlog holds more than
  half its bound the producer sleeps 0.2 ms (untimed), so nothing is dropped.
* paced: a sleep between entries (0.5 ms, and 2 ms), each `emit()` timed alone
  with `perf_counter_ns` (the timer pair, ~0.1 µs, is included); p50 and p99. Two
  calibrations after the same sleep: the timer pair alone, and `emit()` of an emitter
  with capture off (a call that returns at once): what a thread just woken pays on
  this VM for any call.
* wake-up delay: how much later than asked the agent's thread returns from 1 ms of
  (simulated) I/O, `time.sleep(0.001)`, while the writer drains a burst of entries, and
  with the writer idle (calibration). Another thread holding the GIL delays that return
  until it lets go, or for up to the interpreter's switch interval (5 ms).
* capture off: `TranscriptEmitter(emission=False)`.
"""

from __future__ import annotations

import tempfile
import time
from typing import Any

from opentelemetry.sdk.trace import TracerProvider

from entries import Entry, all_entries
from harness import (
    THREADED_RUNS,
    TIMED_RUNS,
    RunPercentiles,
    Stat,
    loop_ns_per_call,
    perf_ns,
    repeat,
    sleep_overshoots,
)
from otel_setup import SdkLogs, sdk_logs, sdk_tracer
from results import Row
from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink

SECTION = "1. agent thread: our emit(), JSONL + OTel logs + span events"

HOT_BATCH = 200
SUSTAINED = {"1kb": 4_000, "50kb": 400, "50kb_nested": 400}  # entries per run
SUSTAINED_CHUNK = 16
PACED = {0.5: 300, 2.0: 120}  # gap in ms -> entries per run
WAKE_BURST = {"1kb": 3_000, "50kb": 300, "50kb_nested": 200}  # entries the writer drains per run
WAKE_IDLE_SLEEPS = 200
FLUSH_TIMEOUT_S = 120.0


class Setup:
    def __init__(self, directory: str) -> None:
        self.logs: SdkLogs = sdk_logs()
        self.tracer_provider: TracerProvider
        self.tracer_provider, _ = sdk_tracer()
        self.tracer = self.tracer_provider.get_tracer("benchmarks")
        self.pipeline = TranscriptPipeline(
            [JsonlMirror(directory), OTelLogSink(self.logs.provider), SpanEventSink()]
        )

    def emitter(self, *, emission: bool = True) -> TranscriptEmitter:
        return TranscriptEmitter(
            prompt_name="bench:agent",
            adapter="codex_app_server",
            session_id="11111111-2222-3333-4444-555555555555",
            emission=emission,
            pipeline=self.pipeline,
        )

    def flush(self) -> None:
        if not self.pipeline.flush(FLUSH_TIMEOUT_S):
            raise RuntimeError("pipeline flush timed out")

    def close(self) -> None:
        self.pipeline.shutdown(30.0)
        self.logs.shutdown()
        self.tracer_provider.shutdown()


def _timed_batch(emitter: TranscriptEmitter, entry: Entry, count: int) -> int:
    emit = emitter.emit
    entry_type, detail, raw = entry.entry_type, entry.detail, entry.raw
    start = perf_ns()
    for _ in range(count):
        emit(entry_type, detail=detail, raw=raw)
    return perf_ns() - start


def hot_loop(setup: Setup, emitter: TranscriptEmitter, entry: Entry, batches: int) -> Stat:
    dropped_before = emitter.dropped_entries

    def run() -> float:
        total = 0
        for _ in range(batches):
            setup.flush()
            total += _timed_batch(emitter, entry, HOT_BATCH)
        return total / (HOT_BATCH * batches)

    values = repeat(run, TIMED_RUNS)
    setup.flush()
    return Stat(
        values,
        {"per_run": HOT_BATCH * batches, "dropped": emitter.dropped_entries - dropped_before},
    )


def sustained(setup: Setup, emitter: TranscriptEmitter, entry: Entry) -> Stat:
    """emit() while the writer is busy draining: chunks of 16 timed, waits untimed."""
    count = SUSTAINED[entry.key]
    emit = emitter.emit
    backlog = setup.pipeline.backlog
    entry_type, detail, raw = entry.entry_type, entry.detail, entry.raw
    dropped_before = emitter.dropped_entries
    waits: list[int] = []

    def run() -> float:
        setup.flush()
        total = 0
        waited = 0
        for _ in range(count // SUSTAINED_CHUNK):
            while len(backlog) > setup.pipeline.backlog_limit // 2:
                waited += 1
                time.sleep(0.0002)
            start = perf_ns()
            for _ in range(SUSTAINED_CHUNK):
                emit(entry_type, detail=detail, raw=raw)
            total += perf_ns() - start
        waits.append(waited)
        return total / (count // SUSTAINED_CHUNK * SUSTAINED_CHUNK)

    values = repeat(run, THREADED_RUNS)
    setup.flush()
    return Stat(
        values,
        {
            "per_run": count,
            "producer_waits": sum(waits[1:]),
            "dropped": emitter.dropped_entries - dropped_before,
        },
    )


def paced(setup: Setup, emitter: TranscriptEmitter, entry: Entry, gap_ms: float) -> tuple[Stat, Stat]:
    count = PACED[gap_ms]
    gap_s = gap_ms / 1000
    emit = emitter.emit
    entry_type, detail, raw = entry.entry_type, entry.detail, entry.raw
    runs = RunPercentiles()
    dropped_before = emitter.dropped_entries

    def run() -> float:
        setup.flush()
        samples: list[int] = []
        sleep = time.sleep
        for _ in range(count):
            sleep(gap_s)
            start = perf_ns()
            emit(entry_type, detail=detail, raw=raw)
            samples.append(perf_ns() - start)
        return runs.add(samples)

    repeat(run, THREADED_RUNS)
    setup.flush()
    timed = runs.timed()
    dropped = emitter.dropped_entries - dropped_before
    notes: dict[str, Any] = {"per_run": count, "dropped": dropped}
    return Stat(timed.p50, dict(notes)), Stat(
        timed.p99, {**notes, "max_of_runs_us": max(timed.maximum) / 1000}
    )


def paced_timer_only(gap_ms: float) -> tuple[Stat, Stat]:
    """The same paced loop timing nothing: what this VM adds after a sleep."""
    count = PACED[gap_ms]
    gap_s = gap_ms / 1000
    runs = RunPercentiles()

    def run() -> float:
        samples: list[int] = []
        sleep = time.sleep
        for _ in range(count):
            sleep(gap_s)
            start = perf_ns()
            samples.append(perf_ns() - start)
        return runs.add(samples)

    repeat(run, THREADED_RUNS)
    timed = runs.timed()
    return Stat(timed.p50), Stat(timed.p99)


def wake_delays(setup: Setup, emitter: TranscriptEmitter, entry: Entry) -> tuple[Stat, Stat, Stat]:
    """p50, p99 and max of the delay past 1 ms of I/O while the writer drains a burst."""
    burst = min(WAKE_BURST[entry.key], setup.pipeline.backlog_limit // 2)
    backlog = setup.pipeline.backlog
    runs = RunPercentiles()

    def run() -> float:
        setup.flush()
        for _ in range(burst):
            emitter.emit(entry.entry_type, detail=entry.detail, raw=entry.raw)
        samples = sleep_overshoots(lambda: bool(backlog))
        setup.flush()
        return runs.add(samples)

    repeat(run, THREADED_RUNS)
    timed = runs.timed()
    notes = {"burst": burst}
    return Stat(timed.p50, notes), Stat(timed.p99, notes), Stat(timed.maximum, notes)


def wake_delays_idle() -> tuple[Stat, Stat]:
    """The same sleeps with nothing else running: what the VM's timers add."""
    runs = RunPercentiles()

    def run() -> float:
        sleeps = iter(range(WAKE_IDLE_SLEEPS))
        return runs.add(sleep_overshoots(lambda: next(sleeps, None) is not None))

    repeat(run, THREADED_RUNS)
    timed = runs.timed()
    return Stat(timed.p50), Stat(timed.p99)


def capture_off(setup: Setup, entry: Entry) -> Stat:
    emitter = setup.emitter(emission=False)
    emit = emitter.emit
    entry_type, detail, raw = entry.entry_type, entry.detail, entry.raw
    count = loop_ns_per_call(lambda: emit(entry_type, detail=detail, raw=raw), 0.05)

    def run() -> float:
        return _timed_batch(emitter, entry, count) / count

    return Stat(repeat(run, TIMED_RUNS), {"per_run": count})


def main() -> list[Row]:
    entries = all_entries()
    hot = Row(SECTION, f"hot loop: ns/entry ({HOT_BATCH} per batch, writer parked)", "ns")
    busy = Row(SECTION, "sustained, writer busy: ns/entry (GIL shared with the writer)", "ns")
    paced_rows = {
        gap: (
            Row(SECTION, f"paced {gap} ms: p50", "ns"),
            Row(SECTION, f"paced {gap} ms: p99", "ns"),
            Row(SECTION, f"  calibration: paced {gap} ms, timer only: p50", "ns"),
            Row(SECTION, f"  calibration: paced {gap} ms, timer only: p99", "ns"),
            Row(SECTION, f"  calibration: paced {gap} ms, capture off (emission=False): p50", "ns"),
            Row(SECTION, f"  calibration: paced {gap} ms, capture off (emission=False): p99", "ns"),
        )
        for gap in PACED
    }
    wake = (
        Row(SECTION, "wake-up delay after 1 ms of I/O, writer draining a burst: p50", "ns"),
        Row(SECTION, "wake-up delay after 1 ms of I/O, writer draining a burst: p99", "ns"),
        Row(SECTION, "wake-up delay after 1 ms of I/O, writer draining a burst: max", "ns"),
        Row(SECTION, "  calibration: wake-up delay, writer idle: p50", "ns"),
        Row(SECTION, "  calibration: wake-up delay, writer idle: p99", "ns"),
    )
    off = Row(SECTION, "capture off (emission=False): ns/entry", "ns")
    with tempfile.TemporaryDirectory(prefix="bench-agent-") as directory:
        setup = Setup(directory)
        try:
            for entry in entries:
                emitter = setup.emitter()
                emitter.start()
                with setup.tracer.start_as_current_span(f"bench {entry.key}"):
                    batches = 5 if entry.key == "1kb" else 1
                    hot.cells[entry.key] = hot_loop(setup, emitter, entry, batches)
                    busy.cells[entry.key] = sustained(setup, emitter, entry)
                    for gap, (p50_row, p99_row, timer_p50, timer_p99, off_p50, off_p99) in paced_rows.items():
                        if gap < 2.0 and entry.key != "1kb":
                            continue  # 50 KB entries every 0.5 ms outrun the writer (see README)
                        p50_row.cells[entry.key], p99_row.cells[entry.key] = paced(setup, emitter, entry, gap)
                        timer_p50.cells[entry.key], timer_p99.cells[entry.key] = paced_timer_only(gap)
                        # A call that does nothing, after the same sleep: what the VM's wake-up adds.
                        quiet = setup.emitter(emission=False)
                        off_p50.cells[entry.key], off_p99.cells[entry.key] = paced(setup, quiet, entry, gap)
                    delays = wake_delays(setup, emitter, entry)
                    for row, stat in zip(wake[:3], delays, strict=True):
                        row.cells[entry.key] = stat
                    wake[3].cells[entry.key], wake[4].cells[entry.key] = wake_delays_idle()
                emitter.stop(FLUSH_TIMEOUT_S)
                off.cells[entry.key] = capture_off(setup, entry)
        finally:
            setup.close()
    rows = [hot, busy]
    for paced_group in paced_rows.values():
        rows += list(paced_group)
    rows += [*wake, off]
    return rows
