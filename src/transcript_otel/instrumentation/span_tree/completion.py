"""How the spans of an `AgentRun` end: on the writer, once what was emitted inside them is written.

What a span ends with (usage, cost, error type, a turn's response facts, content) is read in
queue order as it ends; its last attributes and status, its `transcript.span` record, a chat
span's operation-details event and its metrics follow once its span events are written, then
its end.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.trace import Status, StatusCode

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.genai.attributes import run_totals
from transcript_otel.genai.metrics import record_span_end
from transcript_otel.instrumentation.span_tree.content import ContentKeeper
from transcript_otel.instrumentation.span_tree.slots import (
    AgentSlot,
    ChatSlot,
    FinalState,
    SpanSlot,
    ToolSlot,
)
from transcript_otel.instrumentation.span_tree.span_content import (
    OPERATION_DETAILS_EVENT,
    operation_details,
    span_content,
)
from transcript_otel.model.span_records import span_fields
from transcript_otel.otel.attributes import ERROR_TYPE, GEN_AI_RESPONSE_FINISH_REASONS, TOOL_RESULT_MISSING

# Ours, in US dollars as the harness reports it (kept beside the conventions' newer name).
USAGE_COST_USD: Final = "transcript.usage.cost_usd"
GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"


class SpanEnder:
    """Ends the run's spans: a slot's final state read as it ends, its completion on the writer."""

    def __init__(
        self, emitter: TranscriptEmitter, content: ContentKeeper, report: Callable[[str, Exception], None]
    ) -> None:
        self._emitter = emitter
        self._content = content
        self._report = report
        # The run's end was processed: spans ending later keep no record.
        self.spans_closed = False

    def end_missing(self, tool: ToolSlot, end_ns: int) -> None:
        """End a tool span whose result never came, saying so."""
        if not tool.ended:
            tool.span.set_attribute(TOOL_RESULT_MISSING, True)
        self.end(tool, end_ns)

    def end(self, slot: SpanSlot, end_ns: int) -> None:
        """End the span at `end_ns` (a subagent's chat span first), once what was emitted inside
        it is written. A slot ends once."""
        if slot.ended:
            return
        slot.ended = True
        if isinstance(slot, AgentSlot) and slot.chat is not None:
            self.end(slot.chat, end_ns)
        self.complete_when_written(slot, end_ns, ends=True)

    def complete_when_written(self, slot: SpanSlot, end_time: int, *, ends: bool) -> None:
        """Its last attributes, status and record once its events are written; `ends`: and its end."""
        # Decided and read now, in queue order as the span ends: later entries may still
        # count usage on the root before the span's events are written.
        keeps_record = not self.spans_closed and self._emitter.keeps_span_records()
        failed = slot.error_type is not None
        chat = isinstance(slot, ChatSlot)
        attributes = slot.facts.final_attributes(failed) if isinstance(slot, ChatSlot) else {}
        content: dict[str, Any] = {}
        rules = self._content.rules
        if slot.content is not None and rules is not None:
            reasons = attributes.get(GEN_AI_RESPONSE_FINISH_REASONS)
            description = self._content.description if slot.described else None
            content = span_content(slot.content, rules, reasons[0] if reasons else None, description)
        final = FinalState(
            dict(slot.usage), slot.cost_usd, slot.error_type, keeps_record, attributes, content
        )
        self._emitter.after_written(functools.partial(self._complete, slot, end_time, final, ends, chat))

    def _complete(self, slot: SpanSlot, end_time: int, final: FinalState, ends: bool, chat: bool) -> None:
        """On the writer: the span's last attributes and status, its `transcript.span` record
        (queued where the span ended), then its end. Off the agent's thread: it costs far more
        than queueing an entry."""
        span = slot.span
        pipeline = self._emitter.pipeline
        try:
            if final.attributes:
                span.set_attributes(final.attributes)
            settings = pipeline.genai_content
            if final.content and settings.on_spans:
                span.set_attributes(final.content)
            if final.usage:  # tokens are counted once: on chat spans; the others say the totals
                span.set_attributes(final.usage if chat else run_totals(final.usage))
            if final.content and settings.in_events and chat:
                event = operation_details(
                    getattr(span, "attributes", None), {**final.attributes, **final.usage}, final.content
                )
                pipeline.emit_genai_event(OPERATION_DETAILS_EVENT, event, slot.context, end_time)
            if final.cost_usd:
                span.set_attribute(USAGE_COST_USD, final.cost_usd)
                if chat:  # the model calls the cost is for
                    span.set_attribute(GEN_AI_USAGE_COST, final.cost_usd)
            if final.error_type is not None:
                span.set_attribute(ERROR_TYPE, final.error_type)
                span.set_status(Status(StatusCode.ERROR, final.error_type))
            fields = span_fields(span, end_time, final.error_type) if final.keeps_record else None
            if fields is not None:
                self._emitter.span_ended(fields, slot.context, end_time)
            # Last: it reads the attributes set above. Only with a MeterProvider; never raises.
            record_span_end(span, end_time, final.usage, final.error_type)
        except Exception as exc:
            self._report("could not complete a span", exc)
        finally:
            if ends:
                span.end(end_time=end_time)
