"""Section 3: end-to-end throughput, entries/s = N / (first emit() .. flush() returned).

The producer emits N entries back to back, except that it sleeps 0.2 ms while the
backlog holds more than half of its bound (the bound is 64 MiB: ~340 entries of
50 KB), so the figures measure the writer, not the drop path. The waits and any
pipeline drops are reported.

* `main_jsonl`: the JSONL mirror alone (`pipeline.flush()`), and all three sinks
  with OTel logs into a discarding exporter (writer cost of the full setup); then the
  baseline of the latter: the OTel SDK's own calls for the same records (`logger.emit()`
  of the log record our OTel log sink emits, `span.add_event()` of the event our span
  event sink adds, each with those attributes, on one thread, then the providers'
  flush), and our all-sinks time over it.
* `main_otlp`: JSONL + OTel logs + span events, exported with the real
  OTLP/HTTP exporters to a live `rotel` on loopback (blackhole exporter);
  `pipeline.flush(deep=True)` also force-flushes the SDK, so every record has
  been answered by the receiver when the clock stops. Two rows: the SDK's
  `BatchLogRecordProcessor` with its defaults (the baseline), and exactly the
  providers `configure()` builds (`BoundedLogRecordProcessor`). Drops: the
  pipeline's counter; for the SDK, records emitted into it that never reached
  the exporter (its queue was full); for configure()'s queue, its own `dropped`
  counter; and export failures (records the receiver refused).
"""

from __future__ import annotations

import itertools
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from opentelemetry import trace
from opentelemetry._logs import LogRecord, SeverityNumber, get_logger
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import Tracer, use_span

from entries import SIZES, Entry, make_entry
from harness import THREADED_RUNS, RunPercentiles, Stat, perf_ns, repeat, sleep_overshoots
from otel_setup import CountingLogExporter, ExporterMessages, SdkLogs, export_queue_of, sdk_logs, sdk_tracer
from results import Row
from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.otlp import exporters
from transcript_otel.otlp.export_sizes import DEFAULT_BATCH_SIZE, DEFAULT_MAX_QUEUE_BYTES
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.otel_logs import SCOPE_NAME

SECTION_JSONL = "3a. throughput, writer side (N entries, then flush)"
SECTION_OTLP = "3b. throughput into a live OTLP/HTTP receiver (rotel, loopback)"
FLUSH_TIMEOUT_S = 300.0
EXPORT_TIMEOUT_S = 5.0  # what configure() gives the OTLP exporters

JSONL_N = {"1kb": 20_000, "50kb": 2_000, "50kb_nested": 1_000}
ALL_SINKS_N = {"1kb": 4_000, "50kb": 400, "50kb_nested": 150}
OTLP_N = {"1kb": 4_000, "50kb": 400, "50kb_nested": 150}
SESSION_ID = "11111111-2222-3333-4444-555555555555"
# Entries of the burst whose writing and export the wake-up rows sleep through.
WAKE_BURST = {"1kb": 2_000, "50kb": 200, "50kb_nested": 100}


def produce(pipeline: TranscriptPipeline, emitter: TranscriptEmitter, entries: Iterable[Entry]) -> int:
    """Emit `entries`, waiting while the backlog is over half its bound; the waits.

    So the pipeline itself drops nothing: the figures measure the writer and its
    sinks, not the drop path.
    """
    emit = emitter.emit
    backlog = pipeline.backlog
    waits = 0
    for entry in entries:
        while len(backlog) > pipeline.backlog_limit // 2:
            waits += 1
            time.sleep(0.0002)
        emit(entry.entry_type, detail=entry.detail, raw=entry.raw)
    return waits


class Runner:
    """Runs one throughput measurement per entry size on one pipeline."""

    def __init__(
        self,
        pipeline: TranscriptPipeline,
        tracer: Tracer | None = None,
        *,
        deep: bool = False,
        after_run: Callable[[], object] | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.tracer = tracer
        self.deep = deep
        self.after_run = after_run

    def measure(self, entry: Entry, count: int, counters: Callable[[], dict[str, int]] | None = None) -> Stat:
        """entries/s per run; notes are totals over the timed runs (warm-up excluded)."""
        per_run: list[dict[str, int]] = []

        def run() -> float:
            before = counters() if counters is not None else {}
            emitter = TranscriptEmitter(
                prompt_name=f"bench:throughput:{entry.key}",
                adapter="codex_app_server",
                session_id=SESSION_ID,
                pipeline=self.pipeline,
            )
            span = self.tracer.start_span(f"throughput {entry.key}") if self.tracer else None
            notes: dict[str, int] = {}
            try:
                with use_span(span, end_on_exit=False) if span is not None else nullcontext():
                    return self._timed(emitter, entry, count, notes)
            finally:
                notes["pipeline_dropped"] = emitter.dropped_entries
                emitter.stop(FLUSH_TIMEOUT_S)
                if span is not None:
                    span.end()
                _remove_mirror_file(emitter)
                if self.after_run is not None:
                    self.after_run()
                if counters is not None:
                    after = counters()
                    notes.update({key: after[key] - before.get(key, 0) for key in after})
                per_run.append(notes)

        rates = repeat(run, THREADED_RUNS)
        totals: dict[str, Any] = {"N": count}
        for notes in per_run[-len(rates) :]:
            for key, value in notes.items():
                totals[key] = totals.get(key, 0) + value
        return Stat(rates, totals)

    def _timed(self, emitter: TranscriptEmitter, entry: Entry, count: int, notes: dict[str, int]) -> float:
        start = perf_ns()
        notes["producer_waits"] = produce(self.pipeline, emitter, itertools.repeat(entry, count))
        if not self.pipeline.flush(FLUSH_TIMEOUT_S, deep=self.deep):
            raise RuntimeError("pipeline flush timed out")
        return count / ((perf_ns() - start) / 1e9)


def _entries() -> list[Entry]:
    return [make_entry(key) for key, _ in SIZES]


def _sdk_counters(logs: SdkLogs) -> Callable[[], dict[str, int]]:
    def counters() -> dict[str, int]:
        logs.provider.force_flush()
        emitted, exported, failed = logs.snapshot()
        return {"sdk_emitted": emitted, "sdk_dropped": emitted - exported - failed, "export_failed": failed}

    return counters


@dataclass(frozen=True)
class SdkCalls:
    """What our OTel log sink and span event sink hand the SDK for one entry."""

    severity_text: str | None
    severity_number: SeverityNumber | None
    body: Any
    log_attributes: dict[str, Any]
    event_name: str
    event_attributes: dict[str, Any]


def sdk_calls_of(entry: Entry) -> SdkCalls:
    """The log record and the span event our sinks make of `entry`, caught by in-memory exporters."""
    from opentelemetry.sdk._logs import LoggerProvider

    log_exporter = InMemoryLogRecordExporter()  # type: ignore[no-untyped-call]  # the SDK leaves it unannotated
    logger_provider = LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(SimpleLogRecordProcessor(log_exporter))
    span_exporter = InMemorySpanExporter()
    tracer_provider = TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(span_exporter))
    pipeline = TranscriptPipeline([OTelLogSink(logger_provider), SpanEventSink()])
    try:
        with tracer_provider.get_tracer("benchmarks").start_as_current_span("catch"):
            emitter = TranscriptEmitter(
                prompt_name=f"bench:throughput:{entry.key}",
                adapter="codex_app_server",
                session_id=SESSION_ID,
                pipeline=pipeline,
            )
            emitter.emit(entry.entry_type, detail=entry.detail, raw=entry.raw)
            emitter.stop(FLUSH_TIMEOUT_S)
    finally:
        pipeline.shutdown(30.0)
    (log,) = [
        data.log_record
        for data in log_exporter.get_finished_logs()
        if data.log_record.event_name == "transcript.entry"
    ]
    (span,) = span_exporter.get_finished_spans()
    (event,) = [event for event in span.events if event.name == "transcript.entry"]
    logger_provider.shutdown()
    tracer_provider.shutdown()
    return SdkCalls(
        log.severity_text,
        log.severity_number,
        log.body,
        dict(log.attributes or {}),
        event.name,
        dict(event.attributes or {}),
    )


def sdk_calls_rate(calls: SdkCalls, count: int, logs: SdkLogs, tracer: Tracer) -> Stat:
    """entries/s of the SDK's own calls for `count` entries: for each, `logger.emit()` of the
    log record and `span.add_event()` of the event our sinks make (their attributes copied into
    a new dict, as a sink builds one), on a span of its own per run, then the logs' flush."""
    logger = get_logger(SCOPE_NAME, logger_provider=logs.provider)
    emit, now = logger.emit, time.time_ns

    def run() -> float:
        span = tracer.start_span("sdk calls")
        context = trace.set_span_in_context(span)
        add_event = span.add_event
        start = perf_ns()
        for _ in range(count):
            emit(
                LogRecord(
                    timestamp=now(),
                    observed_timestamp=now(),
                    context=context,
                    severity_text=calls.severity_text,
                    severity_number=calls.severity_number,
                    body=calls.body,
                    attributes=dict(calls.log_attributes),
                    event_name=calls.event_name,
                )
            )
            add_event(calls.event_name, attributes=dict(calls.event_attributes), timestamp=now())
        logs.provider.force_flush()
        rate = count / ((perf_ns() - start) / 1e9)
        span.end()
        return rate

    return Stat(repeat(run, THREADED_RUNS), {"N": count})


def main_jsonl() -> list[Row]:
    entries = _entries()
    jsonl_row = Row(SECTION_JSONL, "JSONL mirror only: entries/s", "rate")
    all_row = Row(SECTION_JSONL, "JSONL + OTel logs (discarding exporter) + span events: entries/s", "rate")
    sdk_row = Row(
        SECTION_JSONL,
        "baseline: the SDK's logger.emit() + span.add_event() of the same records: entries/s",
        "rate",
    )
    ratio_row = Row(SECTION_JSONL, "all three sinks / SDK calls (time per entry, medians)", "ratio")
    with tempfile.TemporaryDirectory(prefix="bench-throughput-") as directory:
        pipeline = TranscriptPipeline([JsonlMirror(Path(directory) / "jsonl")])
        try:
            runner = Runner(pipeline)
            for entry in entries:
                jsonl_row.cells[entry.key] = runner.measure(entry, JSONL_N[entry.key])
        finally:
            pipeline.shutdown(30.0)

        logs = sdk_logs()
        tracer_provider, _ = sdk_tracer()
        sinks: list[Sink] = [
            JsonlMirror(Path(directory) / "all"),
            OTelLogSink(logs.provider),
            SpanEventSink(),
        ]
        pipeline = TranscriptPipeline(sinks)
        try:
            runner = Runner(pipeline, tracer_provider.get_tracer("benchmarks"), deep=True)
            for entry in entries:
                all_row.cells[entry.key] = runner.measure(entry, ALL_SINKS_N[entry.key], _sdk_counters(logs))
        finally:
            pipeline.shutdown(30.0)
            logs.shutdown()
            tracer_provider.shutdown()

    logs = sdk_logs()
    tracer_provider, _ = sdk_tracer()
    try:
        tracer = tracer_provider.get_tracer("benchmarks")
        for entry in entries:
            stat = sdk_calls_rate(sdk_calls_of(entry), ALL_SINKS_N[entry.key], logs, tracer)
            sdk_row.cells[entry.key] = stat
            ratio_row.cells[entry.key] = Stat([stat.median / all_row.cells[entry.key].median])
    finally:
        logs.shutdown()
        tracer_provider.shutdown()
    return [jsonl_row, all_row, sdk_row, ratio_row]


@dataclass
class OtlpProviders:
    """The SDK providers of one 3b row, exporting to the receiver, and how to read their counters."""

    logger_provider: Any
    tracer_provider: Any
    counters: Callable[[], dict[str, int]]

    def shutdown(self) -> None:
        self.logger_provider.shutdown()
        self.tracer_provider.shutdown()


def sdk_default_providers(endpoint: str) -> OtlpProviders:
    """The SDK's `BatchLogRecordProcessor` with its defaults (batch 512, queue 2048)."""
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    logs = sdk_logs(OTLPLogExporter(endpoint=endpoint + "/v1/logs", timeout=EXPORT_TIMEOUT_S))
    tracer_provider, _ = sdk_tracer(
        OTLPSpanExporter(endpoint=endpoint + "/v1/traces", timeout=EXPORT_TIMEOUT_S)
    )
    return OtlpProviders(logs.provider, tracer_provider, _sdk_counters(logs))


def configure_providers(endpoint: str) -> OtlpProviders:
    """Exactly the providers `configure()` builds (`transcript_otel.otlp.exporters`).

    The log exporter is wrapped (the `wrap` hook `replay` uses) only to count what it
    exported; the export queue counts what it dropped and what failed.
    """
    counting: list[CountingLogExporter] = []

    def count(exporter: Any) -> CountingLogExporter:
        counting.append(CountingLogExporter(exporter))
        return counting[-1]

    resource = exporters.resource("benchmarks")
    logger_provider = exporters.logger_provider(resource, endpoint + "/v1/logs", "http/protobuf", wrap=count)
    tracer_provider = exporters.tracer_provider(resource, endpoint + "/v1/traces", "http/protobuf")
    export_queue = export_queue_of(logger_provider)

    def counters() -> dict[str, int]:
        export_queue.force_flush(int(FLUSH_TIMEOUT_S * 1000))
        return {
            "exported": counting[0].exported,
            "export_dropped": export_queue.dropped,
            "export_failed": export_queue.failed,
        }

    return OtlpProviders(logger_provider, tracer_provider, counters)


def wake_delays_while_exporting(pipeline: TranscriptPipeline, tracer: Tracer, entry: Entry) -> Stat:
    """p99 of the delay past 1 ms of I/O while a burst is written and exported (a deep
    flush on another thread): the writer and the exporters hold the GIL meanwhile."""
    runs = RunPercentiles()

    def run() -> float:
        emitter = TranscriptEmitter(prompt_name=f"bench:wake:{entry.key}", adapter="a", pipeline=pipeline)
        with use_span(tracer.start_span(f"wake {entry.key}"), end_on_exit=True):
            produce(pipeline, emitter, itertools.repeat(entry, WAKE_BURST[entry.key]))
            flusher = threading.Thread(target=pipeline.flush, args=(FLUSH_TIMEOUT_S,), kwargs={"deep": True})
            flusher.start()
            samples = sleep_overshoots(flusher.is_alive)
            flusher.join()
        emitter.stop(FLUSH_TIMEOUT_S)
        _remove_mirror_file(emitter)
        return runs.add(samples)

    repeat(run, THREADED_RUNS)
    timed = runs.timed()
    notes = {"burst": WAKE_BURST[entry.key], "max_of_runs_ms": round(max(timed.maximum) / 1e6, 2)}
    return Stat(timed.p99, notes)


def _remove_mirror_file(emitter: TranscriptEmitter) -> None:
    """Each run writes a new JSONL file: gone once measured, so runs do not fill the disk."""
    if emitter.jsonl_path is not None and os.path.exists(emitter.jsonl_path):
        os.remove(emitter.jsonl_path)


def _otlp_rows(
    endpoint: str,
    directory: Path,
    entries: list[Entry],
    name: str,
    providers_for: Callable[[str], OtlpProviders],
) -> list[Row]:
    row = Row(SECTION_OTLP, f"{name}: entries/s", "rate")
    wake_name = f"  {name}: wake-up delay after 1 ms of I/O while a burst is exported, p99"
    wake = Row(SECTION_OTLP, wake_name, "ns")
    for entry in entries:
        providers = providers_for(endpoint)
        sinks: list[Sink] = [JsonlMirror(directory), OTelLogSink(providers.logger_provider), SpanEventSink()]
        pipeline = TranscriptPipeline(sinks)
        try:
            runner = Runner(
                pipeline,
                providers.tracer_provider.get_tracer("benchmarks"),
                deep=True,
                after_run=providers.tracer_provider.force_flush,
            )
            row.cells[entry.key] = runner.measure(entry, OTLP_N[entry.key], providers.counters)
            wake.cells[entry.key] = wake_delays_while_exporting(
                pipeline, providers.tracer_provider.get_tracer("benchmarks"), entry
            )
        finally:
            pipeline.shutdown(30.0)
            providers.shutdown()
    return [row, wake]


def main_otlp() -> dict[str, Any]:
    from receiver import blackhole_rotel

    entries = [entry for entry in _entries() if entry.key in OTLP_N]
    rows: list[Row] = []
    with (
        tempfile.TemporaryDirectory(prefix="bench-otlp-") as directory,
        blackhole_rotel() as rotel,
        ExporterMessages() as messages,
    ):
        rows += _otlp_rows(
            rotel.http_endpoint,
            Path(directory),
            entries,
            "SDK defaults (batch 512, queue 2048)",
            sdk_default_providers,
        )
        rows += _otlp_rows(
            rotel.http_endpoint,
            Path(directory),
            entries,
            f"configure()'s export queue ({DEFAULT_MAX_QUEUE_BYTES >> 20} MiB, batch {DEFAULT_BATCH_SIZE})",
            configure_providers,
        )
    info = {"exporter_messages": dict(messages.counts)}
    return {"rows": [row.to_json() for row in rows], "info": info}
