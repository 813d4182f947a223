"""The exception that ended an `AgentRun`, on its root span: redacted like every entry.

Messages and stack traces carry what the agent saw (keys in a failing request's headers, a
prompt): the message is kept only where the content policy keeps error text, else its digest.
"""

from __future__ import annotations

import traceback

from opentelemetry.semconv.attributes.exception_attributes import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
)
from opentelemetry.trace import Span

from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.instrumentation.span_tree.details import exception_type, message_of
from transcript_otel.model.entries import EntryType
from transcript_otel.records.content import text_digest


def record_exception(pipeline: TranscriptPipeline, span: Span, error: BaseException, at_ns: int) -> None:
    """The span's `exception` event at `at_ns` (the run's end: an import's is the session's,
    the same at every import), redacted like every entry: messages and stack traces
    carry what the agent saw (keys in a failing request's headers, a prompt). The message
    is kept only where the content policy keeps error text."""
    message = message_of(error)
    if pipeline.content_policy.mode_for(EntryType.ERROR.value) == "full":
        stack_trace = "".join(traceback.format_exception(error))
    else:  # the frames only: the messages of the error and its causes are content
        message = text_digest(message)
        frames = traceback.TracebackException.from_exception(error).stack.format()
        stack_trace = "".join(["Traceback (most recent call last):\n", *frames])
        stack_trace += f"{exception_type(error)}: {message}\n"
    span.add_event(
        "exception",
        {
            EXCEPTION_TYPE: exception_type(error),
            EXCEPTION_MESSAGE: pipeline.redactor.text(message),
            EXCEPTION_STACKTRACE: pipeline.redactor.text(stack_trace),
        },
        timestamp=at_ns,
    )
