"""`claude_sdk_program.py` with the spans it made printed: run under `opentelemetry-instrument`
beside other claude-agent-sdk instrumentors (docs/coexistence.md).

    coexistence_program.py PROMPT

Adds an in-memory exporter to the tracer provider `opentelemetry-instrument` set up, runs
one `query()` (`claude_sdk_program.main`), and prints one JSON object: the message class
names it received and every span that ended (name, ids, status, attributes, scope).
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any

from claude_sdk_program import main
from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import transcript_otel


def as_json(span: ReadableSpan) -> dict[str, Any]:
    context = span.get_span_context()
    assert context is not None
    return {
        "name": span.name,
        "trace_id": f"{context.trace_id:032x}",
        "span_id": f"{context.span_id:016x}",
        "parent_span_id": f"{span.parent.span_id:016x}" if span.parent is not None else None,
        "status": span.status.status_code.name,
        "scope": span.instrumentation_scope.name if span.instrumentation_scope is not None else None,
        "attributes": dict(span.attributes or {}),
    }


def run(prompt: str) -> dict[str, Any]:
    provider = trace.get_tracer_provider()
    assert isinstance(provider, TracerProvider), f"no SDK tracer provider: {provider!r}"
    exporter = InMemorySpanExporter()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    messages = asyncio.run(main(prompt))
    # Our spans end on the transcript writer: wait for it before reading what was exported.
    assert transcript_otel.flush(10.0)
    spans = [as_json(span) for span in exporter.get_finished_spans()]
    return {"messages": messages, "spans": spans}


if __name__ == "__main__":
    print(json.dumps(run(sys.argv[1]), default=str))
