"""The process-wide default pipeline, built from the environment on first use."""

from __future__ import annotations

import logging
import os
import threading
from dataclasses import dataclass, replace
from typing import Any, Final, TypeVar

from transcript_otel import environment_variables as env
from transcript_otel.capture.backlog import DEFAULT_MAX_BACKLOG_BYTES
from transcript_otel.capture.pipeline import DEFAULT_SHUTDOWN_TIMEOUT_S, TranscriptPipeline
from transcript_otel.records.content import (
    DEFAULT_GENAI_CONTENT_MAX_LENGTH,
    ContentPolicy,
    GenAiContent,
    genai_content_from,
    policy_from,
)
from transcript_otel.records.redaction import Redactor
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.jsonl import JsonlMirror
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import DEFAULT_MAX_SPAN_BYTES, DEFAULT_MAX_VALUE_LENGTH, SpanEventSink

_T = TypeVar("_T")
_logger = logging.getLogger(__name__)
_lock = threading.Lock()
_pipeline: TranscriptPipeline | None = None


def _choose(argument: _T | None, from_environment: _T) -> _T:
    return from_environment if argument is None else argument


def pipeline_from_environment(
    *,
    logger_provider: Any = None,
    jsonl: bool | None = None,
    jsonl_dir: str | os.PathLike[str] | None = None,
    jsonl_path: str | os.PathLike[str] | None = None,
    log_records: bool | None = None,
    span_events: bool | None = None,
    span_event_max_length: int | None = None,
    span_event_max_bytes: int | None = None,
    max_backlog_bytes: int | None = None,
    shutdown_timeout_s: float | None = None,
    redactor: Redactor | None = None,
    content_policy: ContentPolicy | None = None,
    backend_profile: str | None = None,
    openinference: bool | None = None,
    genai_content: GenAiContent | None = None,
    drained_by_caller: bool = False,
) -> TranscriptPipeline:
    """The JSONL mirror, OTel log records and span events, as a pipeline.

    Each setting is the argument when given, else its `TRANSCRIPT_OTEL_*`
    variable, else the default (the backend profile's for lengths and OpenInference).
    `logger_provider=None` means the global one. `genai_content` replaces what
    `genai_content_from()` would read (an `openinference` given too still applies).
    `drained_by_caller`: no writer thread (`TranscriptPipeline`).
    """
    sinks: list[Sink] = []
    if _choose(jsonl, env.env_flag(env.TRANSCRIPT_OTEL_JSONL, True)):
        sinks.append(
            JsonlMirror(
                _choose(jsonl_dir, env.env_text(env.TRANSCRIPT_OTEL_JSONL_DIR)),
                path=_choose(jsonl_path, env.env_text(env.TRANSCRIPT_OTEL_JSONL_PATH)),
            )
        )
    profile = backend_limits(backend_profile)
    if _choose(log_records, env.env_flag(env.TRANSCRIPT_OTEL_LOG_RECORDS, True)):
        sinks.append(OTelLogSink(logger_provider, max_value_length=profile.log_value_length))
    if _choose(span_events, env.env_flag(env.TRANSCRIPT_OTEL_SPAN_EVENTS, True)):
        length = env.env_number(env.TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH, profile.span_event_value_length)
        span_bytes = env.env_number(env.TRANSCRIPT_OTEL_SPAN_EVENT_MAX_BYTES, DEFAULT_MAX_SPAN_BYTES)
        sinks.append(
            SpanEventSink(
                max_value_length=int(_choose(span_event_max_length, length)),
                max_span_bytes=int(_choose(span_event_max_bytes, span_bytes)),
            )
        )
    backlog = env.env_number(env.TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES, DEFAULT_MAX_BACKLOG_BYTES)
    timeout = env.env_number(env.TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT, DEFAULT_SHUTDOWN_TIMEOUT_S)
    if genai_content is None:
        genai_content = genai_content_from(
            openinference=openinference,
            profile_openinference=profile.openinference,
            profile_max_length=profile.span_content_length,
        )
    elif openinference is not None:
        genai_content = replace(genai_content, openinference=openinference)
    return TranscriptPipeline(
        sinks,
        max_backlog_bytes=int(_choose(max_backlog_bytes, backlog)),
        shutdown_timeout_s=_choose(shutdown_timeout_s, timeout),
        redactor=redactor,
        content_policy=content_policy or policy_from(),
        genai_content=genai_content,
        drained_by_caller=drained_by_caller,
    )


@dataclass(frozen=True, slots=True)
class BackendLimits:
    """How long attribute values may be where a backend keeps them (the mirror keeps all)."""

    span_event_value_length: int
    log_value_length: int | None
    # Characters per GenAI content attribute on spans (`gen_ai.input.messages`, ...).
    span_content_length: int
    # Whether spans also get OpenInference's `input.value`/`output.value` by default.
    openinference: bool = False


# `generic`: any OTLP backend; log records whole, so the transcript reads back from it.
# `jaeger`: stores no logs; span tags to 4 KB. `grafana`: Tempo drops attributes over
# 2 KB; Loki keeps OTLP attributes as structured metadata, 64 KB per line by default,
# so the detail is cut at 16 KB. `phoenix`: Arize Phoenix keeps long attributes and shows
# the messages of LLM spans, and fills its Input/Output columns (session first input, last
# output) only from OpenInference's `input.value`/`output.value`; its events and logs as generic.
BACKEND_PROFILES: Final = {
    "generic": BackendLimits(DEFAULT_MAX_VALUE_LENGTH, None, DEFAULT_GENAI_CONTENT_MAX_LENGTH),
    "jaeger": BackendLimits(DEFAULT_MAX_VALUE_LENGTH, None, 4096),
    "grafana": BackendLimits(2048, 16 * 1024, 2048),
    "phoenix": BackendLimits(DEFAULT_MAX_VALUE_LENGTH, None, 64 * 1024, openinference=True),
}


def backend_limits(profile: str | None = None) -> BackendLimits:
    """The limits of `profile`, else `TRANSCRIPT_OTEL_BACKEND_PROFILE`, else `generic`; an unknown
    name is a ValueError when given, `generic` with a warning when read from the environment."""
    chosen = profile or env.env_text(env.TRANSCRIPT_OTEL_BACKEND_PROFILE) or "generic"
    limits = BACKEND_PROFILES.get(chosen.strip().lower())
    if limits is not None:
        return limits
    message = f"backend profile must be one of {', '.join(BACKEND_PROFILES)}, not {chosen!r}"
    if profile is not None:
        raise ValueError(message)
    _logger.warning("transcript-otel: %s; using generic", message)
    return BACKEND_PROFILES["generic"]


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
