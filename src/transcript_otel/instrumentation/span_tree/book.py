"""Where an `AgentRun`'s spans are opened: `SpanBook`, with the run's facts as they stand.

The facts every span opens with (provider, the model asked for, the session id) change as the
harness tells them; the book keeps them and the root span, and opens the turns' `chat`
spans, the `execute_tool` spans and the subagents' `invoke_agent` spans with them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Final

from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from transcript_otel.instrumentation.span_tree.slots import AgentSlot, ChatSlot, SpanSlot, ToolSlot
from transcript_otel.instrumentation.span_tree.turn_facts import CHAT_OPERATION, TurnFacts, chat_span_name
from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import (
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_TOOL_TYPE,
    TURN_NUMBER,
)

TRANSCRIPT_ADAPTER: Final = "transcript.adapter"
# A stream-json subagent's span is named by the call that launched it: that call's id.
SUBAGENT_CALL_ID: Final = "transcript.subagent.call_id"


class SpanBook:
    """The run's root span and the facts its other spans open with."""

    def __init__(
        self,
        tracer: trace.Tracer,
        parent: Context,
        *,
        prompt_name: str,
        adapter: str,
        run_id: str,
        session_id: str | None,
        provider: str | None,
        model: str | None,
        started_ns: int | None,
    ) -> None:
        self._tracer = tracer
        self.provider = provider
        # The model the run asked for, where known (the harness's, else its entries').
        self.model = model
        # The model the harness resolved (`note_model()`): a turn's response model until one answers.
        self.harness_model: str | None = None
        self.session_id = session_id
        self.root = AgentSlot.open(
            tracer,
            f"invoke_agent {prompt_name}",
            parent,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "invoke_agent",
                GEN_AI_AGENT_NAME: prompt_name,
                attr.GEN_AI_CONVERSATION_ID: session_id,
                GEN_AI_PROVIDER_NAME: provider,
                GEN_AI_REQUEST_MODEL: model,
                TRANSCRIPT_ADAPTER: adapter,
                attr.RUN_ID: run_id,
            },
            started_ns,
        )
        self.root.agent_name = prompt_name
        self.root.described = True

    def open_turn(self, number: int, start_ns: int) -> ChatSlot:
        """A main turn's `chat` span, under the root."""
        turn = ChatSlot.open(
            self._tracer,
            chat_span_name(self.model),
            self.root.context,
            SpanKind.CLIENT,
            {
                GEN_AI_OPERATION_NAME: CHAT_OPERATION,
                GEN_AI_PROVIDER_NAME: self.provider,
                GEN_AI_REQUEST_MODEL: self.model,
                attr.GEN_AI_CONVERSATION_ID: self.session_id,
                TURN_NUMBER: number,
            },
            start_ns,
        )
        turn.facts = TurnFacts(request_model=self.model, response_model=self.harness_model)
        turn.described = True
        return turn

    def open_tool(
        self,
        name: str,
        call_id: str,
        *,
        bridged: bool,
        parent: SpanSlot,
        agent_name: str | None,
        start_ns: int,
    ) -> ToolSlot:
        """An `execute_tool` span under `parent`; `bridged`: a tool the harness serves the agent."""
        tool = ToolSlot.open(
            self._tracer,
            f"execute_tool {name}",
            parent.context,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "execute_tool",
                attr.GEN_AI_TOOL_NAME: name,
                attr.GEN_AI_TOOL_CALL_ID: call_id,
                GEN_AI_TOOL_TYPE: "function" if bridged else "extension",
                attr.GEN_AI_CONVERSATION_ID: self.session_id,
                GEN_AI_AGENT_NAME: agent_name,
            },
            start_ns,
        )
        tool.name = name
        tool.call_id = call_id
        return tool

    def open_subagent(
        self,
        parent: SpanSlot,
        *,
        subagent_type: str | None,
        agent_id: str,
        learned_id: str | None,
        launching_call_id: str | None,
        start_ns: int,
    ) -> AgentSlot:
        """A subagent's `invoke_agent` span under `parent`, with the `chat` span of its model
        calls: its tokens are counted once, on a chat span (never on the main turn), and
        priced at its own model. `agent_id`: the id its source names; `learned_id`: its real one,
        where already told."""
        agent_name = subagent_type or agent_id
        slot = AgentSlot.open(
            self._tracer,
            f"invoke_agent {subagent_type or 'subagent'}",
            parent.context,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "invoke_agent",
                GEN_AI_AGENT_NAME: agent_name,
                GEN_AI_AGENT_ID: learned_id or agent_id,
                GEN_AI_PROVIDER_NAME: self.provider,
                attr.GEN_AI_CONVERSATION_ID: self.session_id,
                SUBAGENT_CALL_ID: launching_call_id,
            },
            start_ns,
        )
        slot.agent_name = agent_name
        slot.chat = ChatSlot.open(
            self._tracer,
            chat_span_name(None),
            slot.context,
            SpanKind.CLIENT,
            {
                GEN_AI_OPERATION_NAME: CHAT_OPERATION,
                GEN_AI_PROVIDER_NAME: self.provider,
                attr.GEN_AI_CONVERSATION_ID: self.session_id,
                GEN_AI_AGENT_NAME: agent_name,
            },
            start_ns,
        )
        return slot

    def set_model(self, model: str) -> None:
        """The run's model, learned after it began: the root's request model, and every turn's
        opened from now on."""
        self.model = model
        self.root.span.set_attribute(GEN_AI_REQUEST_MODEL, model)

    def set_provider(self, provider: str, open_turns: Iterable[ChatSlot]) -> None:
        """The provider, learned after the run began: the root's, the open turns', and every
        span's opened from now on."""
        self.provider = provider
        for slot in (self.root, *open_turns):
            slot.span.set_attribute(GEN_AI_PROVIDER_NAME, provider)
