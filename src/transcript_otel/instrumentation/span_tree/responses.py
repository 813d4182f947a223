"""What model responses tell a `chat` span: the model, the response id, why the model stopped.

A turn's entries (or a subagent's) are noted in its `TurnFacts` as the writer places them; the
first model that answers a chat that asked for none names it (`chat {model}`).
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.genai.facts import response_facts
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_ASSISTANT_MESSAGE,
    ENTRY_TOKEN_USAGE,
    ENTRY_TOOL_USE,
)
from transcript_otel.instrumentation.span_tree.slots import AgentSlot, ChatSlot

# Entries that may tell the model that answered, its response id and why it stopped.
_RESPONSE_ENTRIES: Final = frozenset({ENTRY_ASSISTANT_MESSAGE, ENTRY_TOKEN_USAGE})


def note_response(chat: ChatSlot | None, entry_type: Any, detail: Any) -> None:
    """A response's model, id and finish reason, and whether the chat's last output was a tool
    call, in `chat`'s facts."""
    if chat is None:
        return
    facts = chat.facts
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
    if facts.note_response(response, reports_turn=entry_type == ENTRY_TOKEN_USAGE):
        chat.name_model(facts.request_model)


def note_subagent_model(subagent: AgentSlot | None, model: str) -> None:
    """A subagent's model, where its entries name none: its chat span's."""
    chat = subagent.chat if subagent is not None else None
    if chat is not None:
        chat.facts.response_model = chat.facts.response_model or model
        if chat.facts.request_model is None:
            chat.facts.request_model = model
            chat.name_model(model)
