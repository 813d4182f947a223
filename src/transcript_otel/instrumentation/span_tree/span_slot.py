"""The spans of an `AgentRun` as the writer keeps them while they are open: their slots.

A `SpanSlot` holds an open span, its context and what its entries came to so far (usage,
cost, error type, a turn's response facts, content); a `ToolSlot` is an `execute_tool` span,
with what its call says of the subagent it may start. `FinalState` is what a span ends with.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Self

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import Span, SpanKind

from transcript_otel.instrumentation.span_tree.span_content import SpanContent
from transcript_otel.instrumentation.span_tree.turn_facts import TurnFacts, chat_span_name
from transcript_otel.otel.attributes import GEN_AI_REQUEST_MODEL

MAX_KNOWN_LAUNCHERS: Final = 1024


@dataclass(slots=True)
class SpanSlot:
    span: Span
    context: Context
    usage: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    error_type: str | None = None
    # A turn: the harness announced it (Claude Code's `init`), so its next announcement is another turn.
    announced: bool = False
    # A turn: what its entries say about its model responses (None for other spans).
    facts: TurnFacts | None = None
    # The root and subagents: the `gen_ai.agent.name` of the tools they call.
    agent_name: str | None = None
    # A subagent named by its launching call id: its real agent id is known (set on the span).
    agent_id_learned: bool = False
    # A subagent: the `chat` span of its model calls (its tokens, model and conversation).
    chat: SpanSlot | None = None
    # What the span's entries said, where content goes onto spans (`span_content`).
    content: SpanContent | None = None
    # The root and the main turns: they carry the system prompt and tool definitions.
    described: bool = False
    # A main turn: the task notifications it began with, and whether the model answered in it.
    notified: dict[str, str] | None = None
    answered: bool = False

    @classmethod
    def open(
        cls,
        tracer: trace.Tracer,
        name: str,
        parent: Context,
        kind: SpanKind,
        attributes: Mapping[str, Any],
        start_ns: int | None = None,
    ) -> Self:
        span = tracer.start_span(
            name,
            context=parent,
            kind=kind,
            attributes={key: value for key, value in attributes.items() if value is not None},
            start_time=start_ns,
        )
        return cls(span, trace.set_span_in_context(span, parent))


class FinalState(NamedTuple):
    """What a span ends with, read in queue order as it ends (later entries may change the slot)."""

    usage: dict[str, int]
    cost_usd: float
    error_type: str | None
    keeps_record: bool
    # A turn's response facts (`TurnFacts.final_attributes`); empty for other spans.
    attributes: dict[str, Any]
    # Its content attributes (`span_content`), for the span and the operation-details event.
    content: dict[str, Any]


@dataclass(slots=True)
class ToolSlot(SpanSlot):
    name: str = ""
    call_id: str = ""
    subagent_prompt: str | None = None
    subagent_type: str | None = None
    subagent_source: str | None = None


def name_chat(turn: SpanSlot, model: str | None) -> None:
    """The turn's model is known: its request model and its span's name `chat {model}`."""
    if model:
        turn.span.set_attribute(GEN_AI_REQUEST_MODEL, model)
        turn.span.update_name(chat_span_name(model))


def keep_bounded(calls: dict[str, ToolSlot], call_id: str, tool: ToolSlot) -> None:
    """`calls[call_id] = tool`, forgetting the oldest call beyond `MAX_KNOWN_LAUNCHERS`."""
    if len(calls) >= MAX_KNOWN_LAUNCHERS:
        del calls[next(iter(calls))]
    calls[call_id] = tool
