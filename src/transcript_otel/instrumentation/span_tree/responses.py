"""What the model responses of an `AgentRun` tell: token usage and cost, and a turn's model facts.

Usage is counted once on each span it belongs to (a subagent's chat span and itself, else the
span of the entry, its turn and the root); the model the run asked for and the model, id and
finish reason of each response go to the turn's `TurnFacts` (or a subagent's chat span's).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

from transcript_otel.genai.attributes import message_usage, usage_attributes
from transcript_otel.genai.facts import init_model, response_facts
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_ASSISTANT_MESSAGE,
    ENTRY_SYSTEM_EVENT,
    ENTRY_TOKEN_USAGE,
    ENTRY_TOOL_USE,
)
from transcript_otel.instrumentation.span_tree.span_slot import SpanSlot, name_chat
from transcript_otel.instrumentation.span_tree.state import RunState
from transcript_otel.model.entries import MAIN_SOURCE, subagent_source
from transcript_otel.otel.attributes import GEN_AI_REQUEST_MODEL

# Entries that may tell the model that answered, its response id and why it stopped.
_RESPONSE_ENTRIES: Final = frozenset({ENTRY_ASSISTANT_MESSAGE, ENTRY_TOKEN_USAGE})
# Message ids remembered to count each message once; the oldest go (a long session's memory).
MAX_COUNTED_MESSAGES: Final = 10_000


class ResponseNoting(RunState):
    """Counting usage and noting response facts, on the writer as entries are placed."""

    def _count_usage(
        self, base: SpanSlot, usage: Mapping[str, int], turn: SpanSlot | None, cost_usd: float = 0.0
    ) -> None:
        """Count usage where `base` holds it: a subagent on its chat span and itself, never on the
        main turn; anything else on `base`, on `turn` and on the root (each once)."""
        if base.chat is not None:
            self._add_usage((base.chat, base), usage, cost_usd)
        else:
            self._add_usage((base, turn), usage, cost_usd)

    def _add_usage(self, slots: Iterable[SpanSlot | None], usage: Mapping[str, int], cost_usd: float) -> None:
        for target in {id(s): s for s in (*slots, self._root) if s is not None}.values():
            counts = target.usage
            for key, count in usage.items():  # `Counter.update`, without its ABC check each time
                counts[key] = counts.get(key, 0) + count
            target.cost_usd += cost_usd

    def count_no_more(self, message_ids: Iterable[str]) -> None:
        """Messages another run counted (a session's run before this one): their lines that come
        here add nothing to this run's usage."""
        for message_id in message_ids:
            self._usage_by_message[message_id] = {}

    def _add_message_usage(self, slot: SpanSlot, detail: dict[str, Any] | None) -> None:
        """Claude writes a message's usage on each of its lines: count each message once."""
        counted = message_usage(detail)
        if counted is None or counted[0] in self._usage_by_message:
            return
        message_id, usage = counted
        self._usage_by_message[message_id] = usage
        if len(self._usage_by_message) > MAX_COUNTED_MESSAGES:  # a message's lines come together
            del self._usage_by_message[next(iter(self._usage_by_message))]
        self._count_usage(slot, usage, self._turn)
        self._session_totals.add_message(usage)

    def _note_turn_facts(self, entry_type: Any, detail: Any, turn: SpanSlot | None) -> None:
        """An entry's facts about the model: the init message's model (the run's request model when
        it has none), a response's model, id and finish reason (the turn's, or a subagent's chat)."""
        if entry_type == ENTRY_SYSTEM_EVENT:
            model = init_model(detail) if self._model is None else None
            if model is not None:
                self._set_request_model(model)
            return
        facts = turn.facts if turn is not None else None
        if facts is None:
            return
        if entry_type == ENTRY_TOOL_USE:
            facts.last_output_was_tool_call = True
            return
        if entry_type not in _RESPONSE_ENTRIES:
            return
        if entry_type == ENTRY_ASSISTANT_MESSAGE:
            facts.last_output_was_tool_call = False
        response = response_facts(entry_type, detail)
        if response.model is None and response.response_id is None and response.finish_reason is None:
            return
        reports_turn = entry_type == ENTRY_TOKEN_USAGE
        if facts.note_response(response, reports_turn=reports_turn) and turn is not None:
            name_chat(turn, facts.request_model)

    def _set_request_model(self, model: str) -> None:
        """The run's model, learned from its entries: the root's and every open turn's request model."""
        self._model = model
        self._root.span.set_attribute(GEN_AI_REQUEST_MODEL, model)
        for turn in (self._turn, *self._turns_awaiting_result):
            if turn is not None and turn.facts is not None and turn.facts.request_model is None:
                turn.facts.request_model = model
                name_chat(turn, model)

    def note_model(self, model: str, source: str = MAIN_SOURCE) -> None:
        """The model the harness resolved for the session (Codex's `thread/start` answer): the
        request model where the run has none, and the response model of turns whose entries
        name none. For a subagent's `source`: its chat span's, where its entries name none (a
        Codex subagent's thread says its model in its own `turn_context`)."""
        self._on_writer("could not note the model", self._note_model, model, source)

    def _note_model(self, model: str, source: str) -> None:
        with self._lock:
            if source != MAIN_SOURCE:
                self._note_subagent_model(self._subagents.get(source), model)
                return
            self._harness_model = model
            if self._model is None:
                self._set_request_model(model)
            for turn in (self._turn, *self._turns_awaiting_result):
                if turn is not None and turn.facts is not None and turn.facts.response_model is None:
                    turn.facts.response_model = model

    def _note_subagent_model(self, subagent: SpanSlot | None, model: str) -> None:
        """A subagent's model, where its entries name none: its chat span's."""
        chat = subagent.chat if subagent is not None else None
        if chat is not None and chat.facts is not None:
            chat.facts.response_model = chat.facts.response_model or model
            if chat.facts.request_model is None:
                chat.facts.request_model = model
                name_chat(chat, model)

    def _count_subagent_last_call(self, call_id: str, last_call: Mapping[str, Any]) -> None:
        """A synchronous Claude subagent's last model call, told only by its launching call's
        result (`detail.subagent_last_call`): counted on its chat span and itself, its model
        noted there. Not where the subagent's last words were printed (an answer, not a tool
        call): that call was counted as they came."""
        subagent = self._subagents.get(subagent_source(call_id))
        facts = subagent.chat.facts if subagent is not None and subagent.chat is not None else None
        if subagent is None or (facts is not None and not facts.last_output_was_tool_call):
            return
        usage = usage_attributes({"usage": last_call.get("usage")})
        if usage:
            self._count_usage(subagent, usage, turn=None)
        model = last_call.get("model")
        if isinstance(model, str):
            self._note_subagent_model(subagent, model)
