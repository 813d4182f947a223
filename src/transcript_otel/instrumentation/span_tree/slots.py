"""The spans of an `AgentRun` while they are open: one small type per kind of span.

Every slot holds an open span, its context and what its entries came to so far (usage, cost,
error type, content). `AgentSlot` is the root's or a subagent's `invoke_agent` span (a
subagent's with the `chat` span of its model calls), `ChatSlot` a turn's or a subagent's
`chat` span with its response facts, `ToolSlot` an `execute_tool` span with what its call
says of the subagent it may start. A slot is ended once (`SpanEnder`); `FinalState` is what
it ends with.
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
    # What the span's entries said, where content goes onto spans (`span_content`).
    content: SpanContent | None = None
    # It carries the system prompt and tool definitions (the root and the main turns).
    described: bool = False
    # Its end was queued: a slot ends once.
    ended: bool = False

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


@dataclass(slots=True)
class ChatSlot(SpanSlot):
    """A `chat` span: a main turn, or a subagent's model calls."""

    # What its entries say about its model responses.
    facts: TurnFacts = field(default_factory=TurnFacts)
    # The harness announced it (Claude Code's `init`): its next announcement is another turn.
    announced: bool = False
    # The task notifications it began with, and whether the model answered in it.
    notified: dict[str, str] | None = None
    answered: bool = False

    def name_model(self, model: str | None) -> None:
        """Its model is known: its request model and its span's name `chat {model}`."""
        if model:
            self.span.set_attribute(GEN_AI_REQUEST_MODEL, model)
            self.span.update_name(chat_span_name(model))


@dataclass(slots=True)
class AgentSlot(SpanSlot):
    """An `invoke_agent` span: the run's root, or a subagent."""

    # The `gen_ai.agent.name` of the tools it calls.
    agent_name: str | None = None
    # A subagent named by its launching call id: its real agent id is known (set on the span).
    agent_id_learned: bool = False
    # A subagent: the `chat` span of its model calls (its tokens, model and conversation).
    chat: ChatSlot | None = None


@dataclass(slots=True)
class ToolSlot(SpanSlot):
    """An `execute_tool` span; a subagent launcher's prompt, type and subagent once it spoke."""

    name: str = ""
    call_id: str = ""
    subagent_prompt: str | None = None
    subagent_type: str | None = None
    subagent_source: str | None = None


class FinalState(NamedTuple):
    """What a span ends with, read in queue order as it ends (later entries may change the slot)."""

    usage: dict[str, int]
    cost_usd: float
    error_type: str | None
    keeps_record: bool
    # A chat span's response facts (`TurnFacts.final_attributes`); empty for other spans.
    attributes: dict[str, Any]
    # Its content attributes (`span_content`), for the span and the operation-details event.
    content: dict[str, Any]


def keep_bounded(calls: dict[str, ToolSlot], call_id: str, tool: ToolSlot) -> None:
    """`calls[call_id] = tool`, forgetting the oldest call beyond `MAX_KNOWN_LAUNCHERS`."""
    if len(calls) >= MAX_KNOWN_LAUNCHERS:
        del calls[next(iter(calls))]
    calls[call_id] = tool
