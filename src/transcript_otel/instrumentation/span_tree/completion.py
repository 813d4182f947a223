"""How the spans of an `AgentRun` end: on the writer, once what was emitted inside them is written.

What a span ends with (usage, cost, error type, a turn's response facts, content) is read in
queue order as it ends; its last attributes and status, its `transcript.span` record, a chat
span's operation-details event and its metrics follow once its span events are written, then
its end.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from opentelemetry.trace import Status, StatusCode

from transcript_otel.genai.attributes import run_totals
from transcript_otel.genai.metrics import record_span_end
from transcript_otel.instrumentation.span_tree.span_content import (
    OPERATION_DETAILS_EVENT,
    operation_details,
    span_content,
)
from transcript_otel.instrumentation.span_tree.span_slot import FinalState, SpanSlot, ToolSlot
from transcript_otel.instrumentation.span_tree.state import RunState
from transcript_otel.model.span_records import span_fields
from transcript_otel.otel.attributes import ERROR_TYPE, GEN_AI_RESPONSE_FINISH_REASONS, TOOL_RESULT_MISSING

# Ours, in US dollars as the harness reports it (kept beside the conventions' newer name).
USAGE_COST_USD: Final = "transcript.usage.cost_usd"
GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"


class SpanCompletion(RunState):
    """Ending spans: a slot's final state, read as it ends, and its completion on the writer."""

    def _end_missing(self, tool: ToolSlot, end_ns: int) -> None:
        tool.span.set_attribute(TOOL_RESULT_MISSING, True)
        self._end(tool, end_ns)

    def _end(self, slot: SpanSlot, end_ns: int) -> None:
        """End the span at `end_ns` (a subagent's chat span first), once what was emitted inside
        it is written."""
        if slot.chat is not None:
            self._complete_when_written(slot.chat, end_ns, ends=True)
        self._complete_when_written(slot, end_ns, ends=True)

    def _complete_when_written(self, slot: SpanSlot, end_time: int, *, ends: bool) -> None:
        # Decided and read now, in queue order as the span ends: later entries may still
        # count usage on the root before the span's events are written.
        keeps_record = not self._spans_closed and self.emitter.keeps_span_records()
        failed = slot.error_type is not None
        attributes = slot.facts.final_attributes(failed) if slot.facts is not None else {}
        content: dict[str, Any] = {}
        if slot.content is not None and self._content_rules is not None:
            reasons = attributes.get(GEN_AI_RESPONSE_FINISH_REASONS)
            description = self._description if slot.described else None
            content = span_content(
                slot.content, self._content_rules, reasons[0] if reasons else None, description
            )
        final = FinalState(
            dict(slot.usage), slot.cost_usd, slot.error_type, keeps_record, attributes, content
        )
        self.emitter.after_written(functools.partial(self._complete, slot, end_time, final, ends))

    def _complete(self, slot: SpanSlot, end_time: int, final: FinalState, ends: bool) -> None:
        """On the writer: the span's last attributes and status, its `transcript.span` record
        (queued where the span ended), then its end. Off the agent's thread: it costs far more
        than queueing an entry."""
        span = slot.span
        try:
            if final.attributes:
                span.set_attributes(final.attributes)
            settings = self.emitter.pipeline.genai_content
            if final.content and settings.on_spans:
                span.set_attributes(final.content)
            if final.usage:  # tokens are counted once: on chat spans; the others say the totals
                span.set_attributes(final.usage if slot.facts is not None else run_totals(final.usage))
            if final.content and settings.in_events and slot.facts is not None:
                event = operation_details(
                    getattr(span, "attributes", None), {**final.attributes, **final.usage}, final.content
                )
                self.emitter.pipeline.emit_genai_event(OPERATION_DETAILS_EVENT, event, slot.context, end_time)
            if final.cost_usd:
                span.set_attribute(USAGE_COST_USD, final.cost_usd)
                if slot.facts is not None:  # a turn: the model calls the cost is for
                    span.set_attribute(GEN_AI_USAGE_COST, final.cost_usd)
            if final.error_type is not None:
                span.set_attribute(ERROR_TYPE, final.error_type)
                span.set_status(Status(StatusCode.ERROR, final.error_type))
            fields = span_fields(span, end_time, final.error_type) if final.keeps_record else None
            if fields is not None:
                self.emitter.span_ended(fields, slot.context, end_time)
            # Last: it reads the attributes set above. Only with a MeterProvider; never raises.
            record_span_end(span, end_time, final.usage, final.error_type)
        except Exception as exc:
            self._report("could not complete a span", exc)
        finally:
            if ends:
                span.end(end_time=end_time)
