"""The OTLP side's backlog (`export_processors.BoundedLogRecordProcessor`): bounded, counted, prompt.

A backend that is down or slow must cost a bounded amount of memory, every record it
could not take must be accounted for in the transcript, and flushing must return
when its time is up.
"""

from __future__ import annotations

import gc
import json
import logging
import os
import re
import sys
import threading
import time
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk._logs")

from opentelemetry._logs import LogRecord
from opentelemetry.sdk._logs import LoggerProvider, LogRecordProcessor
from opentelemetry.sdk._logs.export import LogRecordExportResult

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.capture.agent_activity import ActivityWatch
from transcript_otel.otel import export_drops as _export_drops
from transcript_otel.otel.export_drops import let_this_thread_wait, take_drop
from transcript_otel.otlp import export_queue
from transcript_otel.otlp.export_processors import BoundedLogRecordProcessor, BoundedSpanProcessor
from transcript_otel.otlp.export_queue import BACKPRESSURE_WAIT_S
from transcript_otel.otlp.export_sizes import RECORD_OVERHEAD_BYTES, record_bytes, span_bytes
from transcript_otel.sinks import JsonlMirror, OTelLogSink

from loopback import free_port

pytestmark = pytest.mark.otlp

TEXT = "x" * 10_000  # each entry's detail: about 10 KB of payload


class HeldExporter:
    """Takes batches only once released; keeps every record it took, in order."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.batches: list[list[Any]] = []

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        self.released.wait(30)
        self.batches.append(list(batch))
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        self.released.set()

    def records(self) -> list[Any]:
        return [record for batch in self.batches for record in batch]


@pytest.fixture
def exporter() -> Iterator[HeldExporter]:
    held = HeldExporter()
    yield held
    held.released.set()


def provider_with(processor: BoundedLogRecordProcessor) -> LoggerProvider:
    provider = LoggerProvider(shutdown_on_exit=False)
    provider.add_log_record_processor(processor)
    return provider


def emit_entries(pipeline: TranscriptPipeline, count: int) -> TranscriptEmitter:
    emitter = TranscriptEmitter(prompt_name="outage", adapter="test", session_id="s1", pipeline=pipeline)
    for _ in range(count):
        emitter.emit("tool_result", detail={"output": TEXT})
    assert emitter.flush(10)
    return emitter


def report_from_child(run: Callable[[], dict[str, Any]]) -> dict[str, Any]:
    """`run()` in a forked child; its JSON report, read back in the parent."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child reports, then leaves without the parent's exit handlers
        try:
            os.write(write_end, json.dumps(run()).encode())
        finally:
            os._exit(0)
    os.close(write_end)
    with os.fdopen(read_end) as pipe:
        report: dict[str, Any] = json.loads(pipe.read())
    os.waitpid(pid, 0)
    return report


def test_the_queue_holds_at_most_its_bound_and_counts_what_it_drops(
    exporter: HeldExporter, tmp_path: Path
) -> None:
    bound = 100_000
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=bound, max_export_batch_size=4)
    pipeline = TranscriptPipeline([OTelLogSink(provider_with(processor))], shutdown_timeout_s=2)
    try:
        emit_entries(pipeline, 60)
        # One batch is out with the (held) exporter; the queue behind it stays within the bound.
        assert 0 < processor.queued_bytes <= bound
        assert processor.dropped > 0
        exporter.released.set()
        assert processor.force_flush(10_000)
        exported = exporter.records()
        # Every entry was either exported or counted as dropped (the run is not stopped yet).
        assert len(exported) + processor.dropped == 60
        sequence = [r.log_record.attributes.get("transcript.sequence_number") for r in exported]
        entries = [number for number in sequence if number is not None]
        assert entries == sorted(entries)  # in the order they were emitted
    finally:
        pipeline.shutdown(2)


def test_every_dropped_record_is_a_transcript_error_in_the_mirror(
    exporter: HeldExporter, tmp_path: Path
) -> None:
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=50_000, max_export_batch_size=2)
    runs = tmp_path / "runs"
    pipeline = TranscriptPipeline(
        [JsonlMirror(runs), OTelLogSink(provider_with(processor))], shutdown_timeout_s=2
    )
    try:
        emitter = emit_entries(pipeline, 30)
        emitter.stop()
    finally:
        exporter.released.set()
        pipeline.shutdown(2)
    (mirror,) = runs.glob("*.jsonl")
    records = [json.loads(line) for line in mirror.read_text().splitlines()]
    entries = [r["context"] for r in records if r["event"] == "transcript.entry"]
    assert [e["sequence_number"] for e in entries] == list(range(1, 31))  # the mirror has them all
    reports = [r["context"] for r in records if r["event"] == "transcript.error"]
    dropped = [r for r in reports if r.get("sink") == "otel_logs"]
    assert len(dropped) == processor.dropped > 0
    assert pipeline.sink_failures["otel_logs"] == processor.dropped
    assert all("the OTLP export queue is full" in r["error"] for r in dropped)
    # Each report names the entry that is missing in the backend.
    missing = {r["sequence_number"] for r in dropped if r.get("failed_event") == "transcript.entry"}
    exported = {r.log_record.attributes.get("transcript.sequence_number") for r in exporter.records()} - {
        None
    }
    assert missing.isdisjoint(exported)
    assert missing | exported == set(range(1, 31))


def test_force_flush_and_shutdown_return_in_time_when_the_exporter_hangs(exporter: HeldExporter) -> None:
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=1)
    provider = provider_with(processor)
    provider.get_logger("test").emit(body="waiting")
    started = time.monotonic()
    assert processor.force_flush(200) is False  # the exporter never answered
    processor.shutdown(200)
    assert time.monotonic() - started < 5  # bounded: not the 30 s of the SDK's defaults
    provider.get_logger("test").emit(body="after shutdown")
    assert processor.dropped == 1


def test_batches_leave_in_order_and_at_most_the_batch_size(exporter: HeldExporter) -> None:
    exporter.released.set()
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=8, schedule_delay_s=5)
    logger = provider_with(processor).get_logger("test")
    for index in range(50):
        logger.emit(body=str(index))
    assert processor.force_flush(10_000)  # the last, partial batch goes without waiting 5 s
    assert all(len(batch) <= 8 for batch in exporter.batches)
    assert [record.log_record.body for record in exporter.records()] == [str(i) for i in range(50)]
    processor.shutdown()


def test_batches_are_cut_at_their_byte_bound_and_leave_without_waiting(exporter: HeldExporter) -> None:
    """Large records leave in batches of at most `max_export_batch_bytes` (a single record
    larger than that goes alone), as soon as that much is queued: no schedule delay."""
    exporter.released.set()
    processor = BoundedLogRecordProcessor(
        exporter, max_export_batch_size=64, max_export_batch_bytes=100_000, schedule_delay_s=30
    )
    logger = provider_with(processor).get_logger("test")
    for index in range(20):
        logger.emit(body=f"{index:02d}" + "y" * 30_000)
    logger.emit(body="z" * 250_000)
    deadline = time.monotonic() + 10
    while len(exporter.records()) < 18 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert len(exporter.records()) >= 18  # gone long before the 30 s schedule delay
    assert processor.force_flush(10_000)
    sizes = [[record_bytes(record) for record in batch] for batch in exporter.batches]
    assert all(sum(batch) <= 100_000 or len(batch) == 1 for batch in sizes)
    assert len(exporter.batches[-1]) == 1  # the 250 KB record, alone
    bodies = [str(record.log_record.body)[:2] for record in exporter.records()]
    assert bodies == [f"{index:02d}" for index in range(20)] + ["zz"]
    processor.shutdown()


def test_the_size_estimate_counts_body_and_nested_attributes() -> None:
    class Record:
        def __init__(self) -> None:
            self.body = "b" * 100
            self.attributes = {"transcript.detail": "d" * 1000, "nested": {"list": ["x" * 10, 5]}}

    class Wrapped:
        log_record = Record()

    body, detail, item = "b" * 100, "d" * 1000, "x" * 10
    expected = RECORD_OVERHEAD_BYTES + sys.getsizeof(body) + len("transcript.detail") + sys.getsizeof(detail)
    expected += len("nested") + len("list") + (8 + sys.getsizeof(item)) + (8 + 8)
    assert record_bytes(Wrapped()) == expected


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_forked_child_exports_its_own_records_and_not_the_parents(exporter: HeldExporter) -> None:
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=1)
    logger = provider_with(processor).get_logger("test")
    logger.emit(body="parent, held")  # out with the held exporter when the child is forked
    logger.emit(body="parent, queued")

    def in_child() -> dict[str, Any]:  # what the child exported
        exporter.batches.clear()
        exporter.released.set()
        logger.emit(body="child")
        flushed = processor.force_flush(5_000)
        return {"flushed": flushed, "bodies": [record.log_record.body for record in exporter.records()]}

    assert report_from_child(in_child) == {"flushed": True, "bodies": ["child"]}
    exporter.released.set()
    assert processor.force_flush(5_000)
    assert [record.log_record.body for record in exporter.records()] == ["parent, held", "parent, queued"]
    processor.shutdown()


def test_shutdown_names_what_the_backend_never_took_once(
    exporter: HeldExporter, caplog: pytest.LogCaptureFixture
) -> None:
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=1)
    logger = provider_with(processor).get_logger("test")
    for index in range(3):  # one goes out to the held exporter, two wait behind it
        logger.emit(body=str(index))
    time.sleep(0.1)
    processor.shutdown(200)
    processor.shutdown(200)  # a second shutdown (exit handler after an explicit one) does nothing
    warnings = [r.getMessage() for r in caplog.records if "did not reach the OTLP backend" in r.getMessage()]
    # The one the exporter holds counts too: the backend never answered for it.
    assert len(warnings) == 1
    assert re.fullmatch(
        r"transcript-otel: 3 log records did not reach the OTLP backend \(the backend did not answer an "
        r"export of 1 of them in 0\.\d s\); the JSONL mirror has them: "
        r"`transcript-otel replay RUN` sends them",
        warnings[0],
    ), warnings[0]


class SlowExporter:
    """Takes each batch after `seconds`; notes exports that arrive after its shutdown."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.is_shut_down = False
        self.exports_after_shutdown = 0

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        if self.is_shut_down:
            self.exports_after_shutdown += 1
        time.sleep(self.seconds)
        return LogRecordExportResult.SUCCESS

    def shutdown(self) -> None:
        self.is_shut_down = True


def test_shutdown_keeps_one_deadline_and_exports_nothing_after_the_exporters_shutdown(
    caplog: pytest.LogCaptureFixture,
) -> None:
    exporter = SlowExporter(0.3)
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=2)
    logger = provider_with(processor).get_logger("test")
    for index in range(40):  # 20 batches of 0.3 s: 6 s of exports behind a 1 s deadline
        logger.emit(body=str(index))
    started = time.monotonic()
    processor.shutdown(1_000)
    assert time.monotonic() - started < 2.5  # one deadline for flush and stop, not two
    time.sleep(0.5)  # an export still in flight finishes; no new one starts
    assert exporter.exports_after_shutdown == 0
    (warning,) = [
        r.getMessage() for r in caplog.records if "did not reach the OTLP backend" in r.getMessage()
    ]
    assert warning.startswith("transcript-otel: ")
    lost = int(warning.split()[1])
    assert 20 < lost < 40  # most of them, and counted once


def test_text_is_counted_by_the_memory_it_holds() -> None:
    # One emoji makes Python keep every character of a string in 4 bytes.
    class Record:
        def __init__(self, body: str) -> None:
            self.body = body
            self.attributes: dict[str, Any] = {}

    class Wrapped:
        def __init__(self, body: str) -> None:
            self.log_record = Record(body)

    ascii_only = record_bytes(Wrapped("a" * 10_000)) - RECORD_OVERHEAD_BYTES
    with_an_emoji = record_bytes(Wrapped("a" * 9_999 + "🚀")) - RECORD_OVERHEAD_BYTES
    assert 10_000 <= ascii_only < 10_100
    assert 40_000 <= with_an_emoji < 40_100


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork()")
@pytest.mark.filterwarnings("ignore:This process .* is multi-threaded:DeprecationWarning")
def test_a_child_forked_after_shutdown_stays_shut_down(exporter: HeldExporter) -> None:
    exporter.released.set()
    processor = BoundedLogRecordProcessor(exporter)
    provider = provider_with(processor)
    processor.shutdown(1_000)

    def in_child() -> dict[str, Any]:
        provider.get_logger("test").emit(body="child")
        return {
            "worker_alive": processor._worker.is_alive(),
            "dropped": processor.dropped,
            "reason": take_drop(),
        }

    assert report_from_child(in_child) == {
        "worker_alive": False,
        "dropped": 1,
        "reason": "the OTLP export queue is shut down",
    }


class KeepsWeakReferences(LogRecordProcessor):
    """A second processor: a weak reference to every record the provider emits."""

    def __init__(self) -> None:
        super().__init__()
        self.references: list[weakref.ref[Any]] = []

    def on_emit(self, log_record: Any) -> None:
        self.references.append(weakref.ref(log_record))

    def emit(self, log_record: Any) -> None:  # the SDK's name before 1.39
        self.on_emit(log_record)

    def force_flush(self, timeout_millis: int = 30_000) -> bool:
        return True

    def shutdown(self) -> None:
        pass


def test_records_of_failed_exports_are_freed_though_the_exporter_keeps_them_in_a_cycle(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The real OTLP/HTTP exporter against a port nobody listens on: each batch fails, and
    # the exporter keeps the error, whose traceback holds the batch (a reference cycle).
    import requests
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter

    monkeypatch.setattr(export_queue, "_COLLECT_AFTER_FAILED_BYTES", 1)
    monkeypatch.setattr(export_queue, "_MIN_COLLECT_INTERVAL_S", 0.0)
    monkeypatch.setattr(export_queue, "_COLLECT_TIME_SHARE", 1e9)  # no spacing either
    exporter = OTLPLogExporter(endpoint=f"http://127.0.0.1:{free_port()}/v1/logs", timeout=0.2)
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=4)
    provider = provider_with(processor)
    kept = KeepsWeakReferences()
    provider.add_log_record_processor(kept)
    logger = provider.get_logger("test")
    thresholds = gc.get_threshold()
    gc.set_threshold(10**9)  # no automatic collection: only the export queue's own may free them
    try:
        for number in range(8):
            logger.emit(LogRecord(body=f"entry {number}: {TEXT}", attributes={"n": number}))
        processor.force_flush(10_000)
        deadline = time.monotonic() + 10
        while processor.failed < 8 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert processor.failed == 8
        assert processor.force_flush(5_000)  # the export thread is done with the last batch
        assert len(kept.references) == 8
        assert [reference() for reference in kept.references] == [None] * 8
        # Nor the errors, whose tracebacks hold each batch's encoded request.
        errors = [o for o in gc.get_objects() if isinstance(o, requests.exceptions.ConnectionError)]
        assert errors == []
    finally:
        gc.set_threshold(*thresholds)
        processor.shutdown(1_000)


class PacedExporter:
    """A live backend slower than the records come: takes every batch, after `delay_s`."""

    def __init__(self, delay_s: float, result: LogRecordExportResult = LogRecordExportResult.SUCCESS) -> None:
        self.delay_s = delay_s
        self.result = result
        self.bodies: list[Any] = []

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        time.sleep(self.delay_s)
        if self.result is LogRecordExportResult.SUCCESS:
            self.bodies += [record.log_record.body for record in batch]
        return self.result

    def shutdown(self) -> None:
        pass


def on_a_writer_thread(action: Callable[[], Any]) -> Any:
    """`action()` on a thread that may wait for room, like the pipeline's writer; its result."""
    results: list[Any] = []

    def writer() -> None:
        let_this_thread_wait(time.monotonic() + 60)
        results.append(action())

    thread = threading.Thread(target=writer)
    thread.start()
    thread.join(30)
    return results[0]


def test_a_backend_that_keeps_up_slowly_sets_the_pace_and_nothing_is_dropped() -> None:
    exporter = PacedExporter(0.02)
    # Room for about three records: the writer must wait for each batch to leave.
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=3 * 11_000, max_export_batch_size=2)
    logger = provider_with(processor).get_logger("test")
    bodies = [f"{number}: {TEXT}" for number in range(30)]

    def emit_all() -> list[str | None]:
        reasons = []
        for body in bodies:
            logger.emit(LogRecord(body=body))
            reasons.append(take_drop())
        return reasons

    assert on_a_writer_thread(emit_all) == [None] * 30
    assert processor.force_flush(10_000)
    assert processor.dropped == 0
    assert exporter.bodies == bodies
    processor.shutdown(1_000)


def test_an_agents_thread_never_waits_for_room_what_does_not_fit_is_dropped() -> None:
    # The application's own logs through the same provider, on its own thread.
    exporter = PacedExporter(0.5)
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=3 * 11_000, max_export_batch_size=2)
    logger = provider_with(processor).get_logger("test")
    take_drop()  # a mark an earlier test left on this thread
    started = time.monotonic()
    for number in range(10):
        logger.emit(LogRecord(body=f"{number}: {TEXT}"))
    took = time.monotonic() - started
    assert processor.dropped > 0
    assert took < BACKPRESSURE_WAIT_S, f"the agent's thread waited {took:.2f} s"
    processor.shutdown(2_000)


def test_a_failing_backend_gets_no_backpressure_its_records_are_dropped_and_counted() -> None:
    exporter = PacedExporter(0.01, LogRecordExportResult.FAILURE)
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=3 * 11_000, max_export_batch_size=2)
    logger = provider_with(processor).get_logger("test")
    logger.emit(LogRecord(body=f"first: {TEXT}"))
    assert processor.force_flush(10_000)  # the export failed: no more waiting for room
    assert processor.failed == 1
    started = time.monotonic()
    take_drop()  # a mark an earlier test left on this thread
    reasons = []
    for number in range(20):
        logger.emit(LogRecord(body=f"{number}: {TEXT}"))
        reasons.append(take_drop())
    assert time.monotonic() - started < BACKPRESSURE_WAIT_S
    assert processor.dropped == reasons.count("the OTLP export queue is full (backend slow or down)") > 0
    processor.shutdown(1_000)


def test_spans_are_bounded_in_bytes_and_their_drops_are_counted_and_announced_once(
    exporter: HeldExporter, caplog: pytest.LogCaptureFixture
) -> None:
    from opentelemetry.sdk.trace import TracerProvider

    # Each span holds a 10 KB event: the bound keeps about four, with one batch held by the exporter.
    processor = BoundedSpanProcessor(exporter, max_queue_bytes=4 * 11_000, max_export_batch_size=2)
    provider = TracerProvider(shutdown_on_exit=False)
    provider.add_span_processor(processor)
    tracer = provider.get_tracer("test")
    with caplog.at_level(logging.WARNING, logger="transcript_otel.otlp.export_processors"):
        for number in range(40):
            span = tracer.start_span(f"execute_tool {number}")
            span.add_event("transcript.entry", {"transcript.detail": TEXT})
            span.end()  # on this (an agent's) thread: never waits, drops what does not fit
        assert 0 < processor.queued_bytes <= 4 * 11_000
        assert processor.dropped > 0
        exporter.released.set()
        assert processor.force_flush(10_000)
    names = [span.name for span in exporter.records()]
    assert len(names) + processor.dropped == 40
    assert names == sorted(names, key=lambda name: int(name.split()[1]))  # in the order they ended
    announced = [r.getMessage() for r in caplog.records if "spans are being dropped" in r.getMessage()]
    assert len(announced) == 1
    assert "the OTLP export queue is full" in announced[0]
    processor.shutdown(1_000)


def test_a_span_is_sized_by_its_name_attributes_and_events() -> None:
    from opentelemetry.sdk.trace import TracerProvider

    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("test")
    bare = tracer.start_span("s")
    bare.end()
    with_events = tracer.start_span("s", attributes={"gen_ai.tool.name": "codex:command"})
    for _ in range(3):
        with_events.add_event("transcript.entry", {"transcript.detail": TEXT})
    with_events.end()
    assert span_bytes(with_events) - span_bytes(bare) >= 3 * len(TEXT)


def test_a_span_recorded_but_not_sampled_is_not_exported(exporter: HeldExporter) -> None:
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.sampling import Decision, Sampler, SamplingResult

    class RecordOnly(Sampler):
        def should_sample(self, *args: Any, **kwargs: Any) -> SamplingResult:
            return SamplingResult(Decision.RECORD_ONLY)

        def get_description(self) -> str:
            return "RecordOnly"

    exporter.released.set()
    processor = BoundedSpanProcessor(exporter)
    provider = TracerProvider(sampler=RecordOnly(), shutdown_on_exit=False)
    provider.add_span_processor(processor)
    span = provider.get_tracer("test").start_span("recorded only")
    assert span.is_recording()
    span.end()
    assert processor.force_flush(5_000)
    assert exporter.records() == []
    processor.shutdown(1_000)


def test_a_slow_backend_holds_up_neither_a_flush_nor_the_mirror(tmp_path: Path) -> None:
    # Every batch of two takes 0.5 s: waiting for room for all 40 entries would take 10 s.
    exporter = PacedExporter(0.5)
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=2 * 11_000, max_export_batch_size=2)
    pipeline = TranscriptPipeline(
        [JsonlMirror(tmp_path), OTelLogSink(provider_with(processor))], shutdown_timeout_s=10
    )
    try:
        emitter = TranscriptEmitter(prompt_name="slow", adapter="test", pipeline=pipeline)
        for _ in range(40):
            emitter.emit("tool_result", detail={"output": TEXT})
        started = time.monotonic()
        assert pipeline.flush(8.0)  # the writer waits for room at most once, then drops and reports
        assert time.monotonic() - started < 5.0
        assert emitter.jsonl_path is not None
        lines = Path(emitter.jsonl_path).read_text().splitlines()
        events = Counter(json.loads(line)["event"] for line in lines)
        assert events["transcript.entry"] == 40
        assert processor.dropped > 0
        assert events["transcript.error"] == processor.dropped  # each drop reported
    finally:
        pipeline.shutdown(2)


def test_a_stalled_backend_costs_the_writer_one_wait_then_records_are_dropped(exporter: HeldExporter) -> None:
    # The exporter never returns (held): no batch leaves, so waiting for room is pointless.
    processor = BoundedLogRecordProcessor(exporter, max_queue_bytes=3 * 11_000, max_export_batch_size=2)
    logger = provider_with(processor).get_logger("test")

    def emit_all() -> tuple[float, list[str | None]]:
        started = time.monotonic()
        reasons = []
        for number in range(20):
            # As the pipeline's writer does before each of its batches.
            let_this_thread_wait(time.monotonic() + BACKPRESSURE_WAIT_S)
            logger.emit(LogRecord(body=f"{number}: {TEXT}"))
            reasons.append(take_drop())
        return time.monotonic() - started, reasons

    took, reasons = on_a_writer_thread(emit_all)
    assert took < 3 * BACKPRESSURE_WAIT_S, f"the writer waited {took:.1f} s"
    assert reasons.count("the OTLP export queue is full (backend slow or down)") == processor.dropped > 10
    exporter.released.set()
    processor.shutdown(2_000)


class FailingUntilReleasedExporter:
    """A backend that refuses every batch until released; remembers what it refused."""

    def __init__(self) -> None:
        self.released = threading.Event()
        self.refused: list[dict[str, Any]] = []  # the attributes of each refused record

    def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
        if self.released.is_set():
            return LogRecordExportResult.SUCCESS
        self.refused += [dict(record.log_record.attributes or {}) for record in batch]
        return LogRecordExportResult.FAILURE

    def shutdown(self) -> None:
        pass


def test_records_of_a_failed_export_are_reported_in_each_runs_mirror(tmp_path: Path) -> None:
    exporter = FailingUntilReleasedExporter()
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=4)
    runs = tmp_path / "runs"
    sinks = [JsonlMirror(runs), OTelLogSink(provider_with(processor))]
    pipeline = TranscriptPipeline(sinks, shutdown_timeout_s=5)
    emitters = [
        TranscriptEmitter(prompt_name=name, adapter="test", session_id=name, pipeline=pipeline)
        for name in ("first", "second")
    ]
    try:
        for number in range(6):
            for emitter in emitters:
                emitter.emit("user_message", detail={"n": number})
        assert pipeline.flush(10, deep=True)  # every export fails; the reports are queued
        assert pipeline.flush(10, deep=True)  # the reports are written, and refused in turn
        refused_before_release = list(exporter.refused)
        exporter.released.set()
        for emitter in emitters:
            emitter.stop()
    finally:
        pipeline.shutdown(5)
    lost = Counter(
        attributes["transcript.run_id"]
        for attributes in refused_before_release
        if "transcript.failed_export_records" not in attributes
    )
    assert sum(lost.values()) >= 12  # the entries at least, and the runs' start records
    for emitter in emitters:
        mirror = Path(emitter.jsonl_path or "")
        records = [json.loads(line) for line in mirror.read_text().splitlines()]
        assert sum(r["event"] == "transcript.entry" for r in records) == 6  # the mirror has them all
        reports = [r["context"] for r in records if "failed_export_records" in r["context"]]
        assert reports, "no report of the failed exports"
        assert sum(r["failed_export_records"] for r in reports) == lost[emitter.run_id]
        assert all(r["sink"] == "otel_logs" and "the OTLP export of" in r["error"] for r in reports)
    # The reports themselves were refused too, and not reported in turn.
    assert any("transcript.failed_export_records" in attributes for attributes in refused_before_release)
    assert processor.failed == len(refused_before_release)


def test_a_report_that_fails_does_not_end_the_export_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(lost: Any, reason: str) -> None:
        raise RuntimeError("can't start new thread")  # as at interpreter shutdown

    monkeypatch.setattr(_export_drops, "_failed_export_handler", broken)
    exporter = FailingUntilReleasedExporter()
    processor = BoundedLogRecordProcessor(exporter, max_export_batch_size=1)
    logger = provider_with(processor).get_logger("test")
    logger.emit(LogRecord(body="refused", attributes={"transcript.run_id": "r1"}))
    assert processor.force_flush(5_000)
    assert processor.failed == 1
    exporter.released.set()
    logger.emit(LogRecord(body="taken", attributes={"transcript.run_id": "r1"}))
    assert processor.force_flush(5_000)  # the export thread is still there
    assert processor.failed == 1
    processor.shutdown(1_000)


def test_exports_are_not_traced_by_other_instrumentations() -> None:
    """An HTTP client instrumentation checks `is_instrumentation_enabled()` before it traces a
    request: our OTLP exports must find it off, as in the SDK's own batch processors."""
    from opentelemetry.instrumentation.utils import is_instrumentation_enabled

    seen: list[bool] = []

    class Probe(HeldExporter):
        def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
            seen.append(is_instrumentation_enabled())
            return LogRecordExportResult.SUCCESS

    processor = BoundedLogRecordProcessor(Probe(), max_export_batch_size=1)
    provider_with(processor).get_logger("test").emit(body="one")
    assert processor.force_flush(5_000)
    processor.shutdown(1_000)
    assert seen == [False]


def test_an_export_that_can_wait_waits_for_the_agents_threads_to_pause(
    exporter: HeldExporter, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The schedule's export takes the GIL: while the agent's threads are at work it waits for
    them to pause (or `MAX_DEFER_S`); a flush, a full batch or the end never wait."""
    events: list[str] = []
    busy_looks = iter([True, True, True])

    def others_busy(self: Any) -> bool:
        busy = next(busy_looks, False)
        events.append("agent at work" if busy else "agent waits")
        return busy

    monkeypatch.setattr(ActivityWatch, "others_busy", others_busy)
    exported = threading.Event()

    class Recording(HeldExporter):
        def export(self, batch: Sequence[Any]) -> LogRecordExportResult:
            events.append("export")
            exported.set()
            return super().export(batch)

    recording = Recording()
    recording.released.set()
    processor = BoundedLogRecordProcessor(recording, schedule_delay_s=0.01)
    provider_with(processor).get_logger("test").emit(body="on the schedule")
    assert exported.wait(10)
    assert events == ["agent at work"] * 3 + ["agent waits", "export"]
    events.clear()
    provider_with(processor).get_logger("test").emit(body="flushed")
    assert processor.force_flush(10_000)
    assert "export" in events
    processor.shutdown()
