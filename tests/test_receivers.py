"""Log records over loopback sockets into real OTLP receivers: oteltap and rotel.

* oteltap: an in-process OTLP/HTTP-protobuf receiver. SDK providers set up the
  way `configure()` does (batch processors, OTLP/HTTP exporters) send to it; the
  envelope read from the received protobuf `LogRecord`s reconstructs exactly and
  each record is correlated with the received span.
* rotel: a real collector (Rust binary from the `rotel` wheel) on free loopback
  ports, receiving over gRPC and over HTTP; its debug output shows every record.
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import BatchLogRecordProcessor
from opentelemetry.sdk.resources import SERVICE_NAME, Resource
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor

from transcript_otel import (
    TranscriptEmitter,
    TranscriptPipeline,
    reconstruct_transcript,
    records_from_otlp,
)
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink

from helpers import run_records, strict
from receivers import TapCollector, require_oteltap
from rotel_collector import Rotel
from rotel_output import RotelLogRecord, latest_points, parse_rotel_metrics, parse_rotel_output

pytestmark = pytest.mark.receiver

FLAT = ("string_value", "int_value", "double_value", "bool_value")

# No raw newlines in string values: rotel's debug output prints strings verbatim.
RUN: list[tuple[str, str, dict[str, Any] | None, str | None]] = [
    ("user_message", "main", {"text": "Review this diff ☃ naïve", "files": ["a.py", "b.py"]}, '{"k": 1}'),
    ("assistant_message", "main", {"text": "line1\nline2", "scores": [0.1, 2.5, -3], "ok": True}, None),
    ("tool_use", "main", {"tool_use_id": "toolu_9", "tool_name": "Read", "input": {"path": "a.py"}}, None),
    ("tool_result", "main", {"tool_use_id": "toolu_9", "content": "", "meta": {}, "n": None}, ""),
    ("thinking", "subagent:helper", {"text": "日本語"}, None),
    ("token_usage", "main", {"usage": {"input_tokens": 12, "output_tokens": 34}}, None),
]


def providers(span_exporter: Any, log_exporter: Any, service: str) -> tuple[TracerProvider, LoggerProvider]:
    """Providers as `configure()` builds them: one resource, batch processors, OTLP exporters."""
    resource = Resource.create({SERVICE_NAME: service})
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(BatchSpanProcessor(span_exporter))
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    logger_provider.add_log_record_processor(BatchLogRecordProcessor(log_exporter))
    return tracer_provider, logger_provider


def emit_run(
    pipeline: TranscriptPipeline, tracer_provider: TracerProvider, prompt: str, span_name: str
) -> tuple[TranscriptEmitter, Any]:
    with (
        tracer_provider.get_tracer("agent").start_as_current_span(span_name) as span,
        TranscriptEmitter(
            prompt_name=prompt, adapter="scripted", session_id=f"{prompt}-session", pipeline=pipeline
        ) as emitter,
    ):
        for entry_type, source, detail, raw in RUN:
            emitter.emit(entry_type, source=source, detail=detail, raw=raw)
    return emitter, span.get_span_context()


def _run_id(log_record: Any) -> str | None:
    for kv in log_record.attributes:
        if kv.key == "transcript.run_id":
            value: str = kv.value.string_value
            return value
    return None


# -- oteltap -------------------------------------------------------------------------------


def test_oteltap_receives_records_that_reconstruct_exactly(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path
) -> None:
    require_oteltap()

    async def scenario() -> None:
        async with TapCollector() as tap:
            tracer_provider, logger_provider = providers(
                OTLPSpanExporter(endpoint=f"{tap.endpoint}/v1/traces", timeout=5),
                OTLPLogExporter(endpoint=f"{tap.endpoint}/v1/logs", timeout=5),
                "oteltap-test",
            )
            try:
                pipeline = make_pipeline(
                    [JsonlMirror(runs_dir), OTelLogSink(logger_provider), SpanEventSink()]
                )
                emitter, span_context = emit_run(pipeline, tracer_provider, "tap", "agent-run")
                assert await asyncio.to_thread(tracer_provider.force_flush, 10_000)
                assert await asyncio.to_thread(logger_provider.force_flush, 10_000)
                expected_logs = len(RUN) + 2

                def mine() -> list[Any]:
                    return [log for log in tap.logs if _run_id(log) == emitter.run_id]

                assert await tap.wait_for(
                    lambda: len(mine()) >= expected_logs and any(s.name == "agent-run" for s in tap.spans)
                ), f"received {len(tap.logs)} log records and {len(tap.spans)} spans"
                received_logs = mine()
                (received_span,) = [s for s in tap.spans if s.name == "agent-run"]
            finally:
                await asyncio.to_thread(tracer_provider.shutdown)
                await asyncio.to_thread(logger_provider.shutdown)

        assert len(received_logs) == expected_logs
        assert [log.event_name for log in received_logs] == (
            ["transcript.start"] + ["transcript.entry"] * len(RUN) + ["transcript.stop"]
        )
        # The envelope read from the received protobuf records reconstructs exactly.
        from_receiver = reconstruct_transcript(records_from_otlp(received_logs))
        from_jsonl = reconstruct_transcript(run_records(emitter))
        assert len(from_receiver) == len(RUN)
        assert from_receiver == from_jsonl
        assert strict(from_receiver) == strict(from_jsonl)
        # Trace correlation with the span the receiver got.
        assert received_span.trace_id == span_context.trace_id.to_bytes(16, "big")
        assert received_span.span_id == span_context.span_id.to_bytes(8, "big")
        for log in received_logs:
            assert log.trace_id == received_span.trace_id
            assert log.span_id == received_span.span_id
            assert log.severity_text == "DEBUG"
            assert log.time_unix_nano > 0
            assert log.observed_time_unix_nano >= log.time_unix_nano
        # The span-event copy arrived on the span, flattened.
        event_names = [event.name for event in received_span.events]
        assert event_names.count("transcript.entry") == len(RUN)
        for event in received_span.events:
            for kv in event.attributes:
                assert kv.value.WhichOneof("value") in FLAT

    asyncio.run(asyncio.wait_for(scenario(), timeout=30))


# -- rotel ---------------------------------------------------------------------------------


def rotel_exporters(rotel: Rotel, protocol: str) -> tuple[Any, Any]:
    if protocol == "grpc":
        pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
        from opentelemetry.exporter.otlp.proto.grpc._log_exporter import OTLPLogExporter as GrpcLogs
        from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import OTLPSpanExporter as GrpcSpans

        return (
            GrpcSpans(endpoint=rotel.grpc_endpoint, insecure=True, timeout=5),
            GrpcLogs(endpoint=rotel.grpc_endpoint, insecure=True, timeout=5),
        )
    return (
        OTLPSpanExporter(endpoint=f"{rotel.http_endpoint}/v1/traces", timeout=5),
        OTLPLogExporter(endpoint=f"{rotel.http_endpoint}/v1/logs", timeout=5),
    )


def as_otlp_json(record: RotelLogRecord) -> dict[str, Any]:
    """A record parsed from rotel's output in the OTLP/JSON shape `records_from_otlp` reads."""

    def any_value(value: Any) -> dict[str, Any]:
        if isinstance(value, bool):
            return {"boolValue": value}
        if isinstance(value, int):
            return {"intValue": str(value)}
        if isinstance(value, float):
            return {"doubleValue": value}
        return {"stringValue": value}

    return {
        "eventName": record.event_name,
        "severityText": record.severity_text,
        "body": {"stringValue": record.body},
        "traceId": record.trace_id,
        "spanId": record.span_id,
        "attributes": [{"key": k, "value": any_value(v)} for k, v in record.attributes.items()],
    }


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_rotel_receives_log_records(
    rotel: Rotel,
    protocol: str,
    make_pipeline: Callable[..., TranscriptPipeline],
    runs_dir: Path,
) -> None:
    prompt = "rotel-" + protocol.replace("/", "-")
    span_exporter, log_exporter = rotel_exporters(rotel, protocol)
    tracer_provider, logger_provider = providers(span_exporter, log_exporter, f"svc-{prompt}")
    try:
        pipeline = make_pipeline([JsonlMirror(runs_dir), OTelLogSink(logger_provider), SpanEventSink()])
        emitter, span_context = emit_run(pipeline, tracer_provider, prompt, f"span-{prompt}")
        assert tracer_provider.force_flush(10_000)
        assert logger_provider.force_flush(10_000)
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()

    def mine(logs: list[RotelLogRecord]) -> list[RotelLogRecord]:
        return [log for log in logs if log.attributes.get("transcript.run_id") == emitter.run_id]

    logs, spans = rotel.wait_for(
        lambda logs, spans: (
            len(mine(logs)) >= len(RUN) + 2 and any(span.name == f"span-{prompt}" for span in spans)
        )
    )
    received = mine(logs)
    assert len(received) == len(RUN) + 2, rotel.output()[-3000:]
    output = rotel.output()
    assert "EventName: transcript.entry" in output
    assert f"transcript.prompt_name: Str({prompt})" in output
    assert f"transcript.run_id: Str({emitter.run_id})" in output
    assert "transcript.sequence_number: Int(1)" in output
    assert "EventName: transcript.start" in output
    assert f"service.name: Str(svc-{prompt})" in output

    trace_hex = f"{span_context.trace_id:032x}"
    span_hex = f"{span_context.span_id:016x}"
    assert re.search(rf"Trace ID\s*: {trace_hex}\n\s*Span ID\s*: {span_hex}", output)
    assert [log.event_name for log in received] == (
        ["transcript.start"] + ["transcript.entry"] * len(RUN) + ["transcript.stop"]
    )
    entries = [log for log in received if log.event_name == "transcript.entry"]
    for log, (entry_type, source, detail, raw) in zip(entries, RUN, strict=True):
        assert log.trace_id == trace_hex
        assert log.span_id == span_hex
        assert log.severity_text == "DEBUG"
        assert log.severity_number == "SEVERITY_NUMBER_DEBUG(5)"
        attributes = log.attributes
        assert attributes["transcript.prompt_name"] == prompt
        assert attributes["transcript.adapter"] == "scripted"
        assert attributes["transcript.entry_type"] == entry_type
        assert attributes["transcript.source"] == source
        assert isinstance(attributes["transcript.sequence_number"], int)
        assert attributes["transcript.session_id"] == f"{prompt}-session"
        assert attributes["gen_ai.conversation.id"] == f"{prompt}-session"
        assert json.loads(attributes["transcript.detail"]) == detail
        assert attributes.get("transcript.raw") == raw
        moment = datetime.fromisoformat(attributes["transcript.timestamp"])
        assert log.timestamp is not None
        assert abs(log.timestamp - round(moment.timestamp() * 1e6) * 1000) <= 1000
        assert log.observed_timestamp is not None
        assert log.observed_timestamp >= log.timestamp
    tool_use = entries[2].attributes
    assert (tool_use["gen_ai.tool.call.id"], tool_use["gen_ai.tool.name"]) == ("toolu_9", "Read")
    assert entries[5].attributes["gen_ai.usage.input_tokens"] == 12

    # The whole envelope survives the collector: rebuild the entries from its output.
    from_rotel = reconstruct_transcript(records_from_otlp([as_otlp_json(log) for log in received]))
    assert strict(from_rotel) == strict(reconstruct_transcript(run_records(emitter)))

    (span,) = [s for s in spans if s.name == f"span-{prompt}"]
    assert (span.trace_id, span.span_id) == (trace_hex, span_hex)
    assert span.event_names.count("transcript.entry") == len(RUN)


def test_a_backend_that_stops_midrun_stops_after_log_records_whichever_signal_comes_first() -> None:
    """The down-mid-run fault takes the first export of log records and then goes away; spans
    sent before that do not stop it (the exporters' order is not the test's to choose)."""
    import socket
    import time
    import urllib.error
    import urllib.request

    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

    from fault_servers import Fault, HttpFaultServer

    logs = ExportLogsServiceRequest()
    logs.resource_logs.add().scope_logs.add().log_records.add().event_name = "transcript.entry"

    def post(server: HttpFaultServer, path: str, body: bytes) -> None:
        request = urllib.request.Request(
            f"{server.endpoint}{path}", body, {"Content-Type": "application/x-protobuf"}
        )
        with urllib.request.urlopen(request, timeout=10) as answer:
            assert answer.status == 200

    server = HttpFaultServer(Fault.STOPS_MIDRUN)
    with server:
        post(server, "/v1/traces", ExportTraceServiceRequest().SerializeToString())
        post(server, "/v1/logs", logs.SerializeToString())  # still listening after the spans
        assert server.counted.accepted_log_records == 1
        assert server.stopping.wait(10)  # it goes away, from a thread of its own
        for _ in range(1000):
            try:
                socket.create_connection(("127.0.0.1", server.port), timeout=1).close()
            except ConnectionRefusedError:
                break
            except ConnectionResetError:  # closed while this connection waited in its queue
                pass
            time.sleep(0.01)
        with pytest.raises(urllib.error.URLError):
            post(server, "/v1/logs", logs.SerializeToString())


# -- rotel's metrics output (`Rotel(debug_log=(*RECORDS, "metrics"))`) ------------------------

# Captured from rotel 0.x's `--debug-log metrics --debug-log-verbosity detailed` output: a
# counter and a histogram exported twice (cumulative: the second export repeats both), a log
# block printed between the exports, and the start of a `transcript-otel run`'s GenAI metrics
# (its bucket lines left out). Trailing spaces are taken off the lines.
ROTEL_METRICS_OUTPUT = """\
ResourceMetrics #0
Resource SchemaURL:
Resource attributes:
     -> telemetry.sdk.language: Str(python)
     -> telemetry.sdk.name: Str(opentelemetry)
     -> telemetry.sdk.version: Str(1.45.2)
     -> service.instance.id: Str(b7db6f0c-6147-44e6-99bf-1df886b8a892)
     -> service.name: Str(unknown_service:python)
ScopeMetrics #0
ScopeMetrics SchemaURL:
InstrumentationScope transcript_otel 0.1.0
Metric #0
Descriptor:
     -> Name: transcript_otel.records.dropped
     -> Description: Transcript records dropped
     -> Unit: {record}
     -> DataType: Sum
     -> IsMonotonic: true
     -> AggregationTemporality: AGGREGATION_TEMPORALITY_CUMULATIVE
NumberDataPoints #0
Data point attributes:
     -> transcript_otel.dropped.where: Str(backlog)
StartTimestamp: 1795747659062849079
Timestamp: 1795747659063072682
Value: 3
Metric #1
Descriptor:
     -> Name: gen_ai.client.token.usage
     -> Description:
     -> Unit: {token}
     -> DataType: Histogram
     -> AggregationTemporality: AGGREGATION_TEMPORALITY_CUMULATIVE
HistogramDataPoints #0
Data point attributes:
     -> gen_ai.token.type: Str(input)
     -> gen_ai.operation.name: Str(chat)
StartTimestamp: 1795747659063012783
Timestamp: 1795747659063072682
Count: 1
Sum: 5
Min: 5
Max: 5
ExplicitBounds #0: 1
ExplicitBounds #1: 4
ExplicitBounds #2: 16
Buckets #0, Count: 0
Buckets #1, Count: 0
Buckets #2, Count: 1
Buckets #3, Count: 0
ResourceLog #0
Resource SchemaURL:
Resource attributes:
     -> telemetry.sdk.language: Str(python)
     -> telemetry.sdk.name: Str(opentelemetry)
     -> telemetry.sdk.version: Str(1.45.2)
     -> service.instance.id: Str(903cf1a7-23a4-49c7-9671-4c2e33c004fe)
     -> service.name: Str(cli-claude)
ScopeLogs #0
ScopeLogs SchemaURL:
InstrumentationScope transcript_otel 0.1.0
LogRecord #0
ObservedTimestamp: 1795747646629967592
Timestamp: 1795747646573305053
SeverityText: DEBUG
SeverityNumber: SEVERITY_NUMBER_DEBUG(5)
EventName: transcript.start
Body: Str(transcript.start)
Attributes:
     -> transcript.run_id: Str(40b062a3020c485c84c2403a8b4c3fc9)
     -> transcript.prompt_name: Str(cli-claude)
     -> transcript.adapter: Str(cli)
    Trace ID       : 0c9f8079965c33798bf219d6085cf5f6
    Span ID        : 1d588a0d69c462fb
Flags: 3
ResourceMetrics #0
Resource SchemaURL:
Resource attributes:
     -> telemetry.sdk.language: Str(python)
     -> telemetry.sdk.name: Str(opentelemetry)
     -> telemetry.sdk.version: Str(1.45.2)
     -> service.instance.id: Str(b7db6f0c-6147-44e6-99bf-1df886b8a892)
     -> service.name: Str(unknown_service:python)
ScopeMetrics #0
ScopeMetrics SchemaURL:
InstrumentationScope transcript_otel 0.1.0
Metric #0
Descriptor:
     -> Name: transcript_otel.records.dropped
     -> Description: Transcript records dropped
     -> Unit: {record}
     -> DataType: Sum
     -> IsMonotonic: true
     -> AggregationTemporality: AGGREGATION_TEMPORALITY_CUMULATIVE
NumberDataPoints #0
Data point attributes:
     -> transcript_otel.dropped.where: Str(backlog)
StartTimestamp: 1795747659062849079
Timestamp: 1795747659067473966
Value: 5
Metric #1
Descriptor:
     -> Name: gen_ai.client.token.usage
     -> Description:
     -> Unit: {token}
     -> DataType: Histogram
     -> AggregationTemporality: AGGREGATION_TEMPORALITY_CUMULATIVE
HistogramDataPoints #0
Data point attributes:
     -> gen_ai.token.type: Str(input)
     -> gen_ai.operation.name: Str(chat)
StartTimestamp: 1795747659063012783
Timestamp: 1795747659067473966
Count: 2
Sum: 12.5
Min: 5
Max: 7.5
ExplicitBounds #0: 1
ExplicitBounds #1: 4
ExplicitBounds #2: 16
Buckets #0, Count: 0
Buckets #1, Count: 0
Buckets #2, Count: 2
Buckets #3, Count: 0
ResourceMetrics #0
Resource SchemaURL:
Resource attributes:
     -> telemetry.sdk.language: Str(python)
     -> telemetry.sdk.name: Str(opentelemetry)
     -> telemetry.sdk.version: Str(1.45.2)
     -> service.instance.id: Str(903cf1a7-23a4-49c7-9671-4c2e33c004fe)
     -> service.name: Str(cli-claude)
ScopeMetrics #0
ScopeMetrics SchemaURL: https://opentelemetry.io/schemas/1.41.0
InstrumentationScope transcript_otel 0.1.0
Metric #0
Descriptor:
     -> Name: gen_ai.client.token.usage
     -> Description: Number of input and output tokens used.
     -> Unit: {token}
     -> DataType: Histogram
     -> AggregationTemporality: AGGREGATION_TEMPORALITY_CUMULATIVE
HistogramDataPoints #0
Data point attributes:
     -> gen_ai.operation.name: Str(chat)
     -> gen_ai.token.type: Str(input)
StartTimestamp: 1795747646691687901
Timestamp: 1795747646704887587
Count: 2
Sum: 3300
Min: 1200
Max: 2100
2026-11-27T02:47:40.570889Z  INFO Shutdown signal received.
"""


def test_parse_rotel_metrics_reads_points_and_keeps_the_latest_of_each_series() -> None:
    points = parse_rotel_metrics(ROTEL_METRICS_OUTPUT)
    assert [(p.name, p.count, p.value) for p in points] == [
        ("transcript_otel.records.dropped", None, 3),
        ("gen_ai.client.token.usage", 1, None),
        ("transcript_otel.records.dropped", None, 5),
        ("gen_ai.client.token.usage", 2, None),
        ("gen_ai.client.token.usage", 2, None),
    ]
    dropped, histogram, genai = latest_points(points)
    assert (dropped.data_type, dropped.unit, dropped.value) == ("Sum", "{record}", 5)
    assert dropped.attributes == {"transcript_otel.dropped.where": "backlog"}
    assert dropped.temporality == "AGGREGATION_TEMPORALITY_CUMULATIVE"
    assert (histogram.data_type, histogram.unit, histogram.description) == ("Histogram", "{token}", "")
    assert histogram.attributes == {"gen_ai.token.type": "input", "gen_ai.operation.name": "chat"}
    assert (histogram.count, histogram.sum, histogram.min, histogram.max) == (2, 12.5, 5, 7.5)
    assert (histogram.explicit_bounds, histogram.bucket_counts) == ([1, 4, 16], [0, 0, 2, 0])
    assert (histogram.start_timestamp, histogram.timestamp) == (1795747659063012783, 1795747659067473966)
    assert (histogram.scope_name, histogram.scope_version, histogram.scope_schema_url) == (
        "transcript_otel",
        "0.1.0",
        None,
    )
    # The second process's point: its own resource and scope, nothing of the log block between.
    assert genai.resource["service.name"] == "cli-claude"
    assert genai.scope_schema_url == "https://opentelemetry.io/schemas/1.41.0"
    assert (genai.description, genai.count, genai.sum, genai.explicit_bounds) == (
        "Number of input and output tokens used.",
        2,
        3300,
        [],
    )
    assert all("transcript.run_id" not in {**p.attributes, **p.resource} for p in points)
    # The log parser, on the same output, sees the one log record and no metric line.
    (record,), spans = parse_rotel_output(ROTEL_METRICS_OUTPUT)
    assert spans == []
    assert record.event_name == "transcript.start"
    assert record.attributes == {
        "transcript.run_id": "40b062a3020c485c84c2403a8b4c3fc9",
        "transcript.prompt_name": "cli-claude",
        "transcript.adapter": "cli",
    }
