"""The process-wide default pipeline, built from the environment on first use."""

from __future__ import annotations

import threading

from transcript_otel import environment_variables as env
from transcript_otel.pipeline import (
    DEFAULT_MAX_BACKLOG_BYTES,
    DEFAULT_SHUTDOWN_TIMEOUT_S,
    TranscriptPipeline,
)
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.jsonl import JsonlMirror
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import DEFAULT_MAX_VALUE_LENGTH, SpanEventSink

_lock = threading.Lock()
_pipeline: TranscriptPipeline | None = None


def pipeline_from_environment() -> TranscriptPipeline:
    """JSONL mirror, OTel log records (global provider) and span events, per env vars."""
    sinks: list[Sink] = []
    if env.env_flag(env.TRANSCRIPT_OTEL_JSONL, True):
        sinks.append(
            JsonlMirror(
                env.env_text(env.TRANSCRIPT_OTEL_JSONL_DIR), path=env.env_text(env.TRANSCRIPT_OTEL_JSONL_PATH)
            )
        )
    if env.env_flag(env.TRANSCRIPT_OTEL_LOG_RECORDS, True):
        sinks.append(OTelLogSink())
    if env.env_flag(env.TRANSCRIPT_OTEL_SPAN_EVENTS, True):
        length = env.env_number(env.TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH, DEFAULT_MAX_VALUE_LENGTH)
        sinks.append(SpanEventSink(max_value_length=int(length)))
    return TranscriptPipeline(
        sinks,
        max_backlog_bytes=int(
            env.env_number(env.TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES, DEFAULT_MAX_BACKLOG_BYTES)
        ),
        shutdown_timeout_s=env.env_number(env.TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_S),
    )


def get_pipeline() -> TranscriptPipeline:
    """The pipeline new emitters use unless given one."""
    global _pipeline
    if _pipeline is None:
        with _lock:
            if _pipeline is None:
                _pipeline = pipeline_from_environment()
    return _pipeline


def set_pipeline(pipeline: TranscriptPipeline) -> TranscriptPipeline | None:
    """Make `pipeline` the default; returns the previous one (not shut down)."""
    global _pipeline
    with _lock:
        previous, _pipeline = _pipeline, pipeline
    return previous
