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
from receivers import Rotel, RotelLogRecord, TapCollector

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
    pytest.importorskip("oteltap")

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
