"""The sinks a prepared transcript record is written to.

Every sink runs on the pipeline's background writer thread, never on the agent's.
"""

from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.jsonl import JsonlMirror
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import SpanEventSink

__all__ = ["JsonlMirror", "OTelLogSink", "Sink", "SpanEventSink"]
