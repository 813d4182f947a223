"""What a turn's entries say about its model responses, for its `chat` span.

A turn is one `chat` span but may cover several model calls. `TurnFacts` keeps, as
the writer places the turn's entries, the few facts its span ends with: the model
requested (the run's, else the first model that answered: what the harness asked
for), the last response's model and id, and the turn's finish reason. The finish
reason is the harness's report of the turn (Claude's `result`) where there is one,
else the last assistant message's, else derived from how the turn went (`error`,
`tool_call` when its last output was a tool call, else `stop`).

Noting an entry costs a few attribute lookups on the writer; nothing walks content.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from transcript_otel.genai.facts import ResponseFacts
from transcript_otel.otel.attributes import (
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_RESPONSE_ID,
    GEN_AI_RESPONSE_MODEL,
)

CHAT_OPERATION: Final = "chat"


def chat_span_name(model: str | None) -> str:
    """`chat {model}`, or `chat` while the model is unknown."""
    return f"{CHAT_OPERATION} {model}" if model else CHAT_OPERATION


@dataclass(slots=True)
class TurnFacts:
    """The response facts of one turn, as its entries tell them (None where none said)."""

    request_model: str | None = None
    response_model: str | None = None
    response_id: str | None = None
    # The harness's report of the whole turn (Claude's `result`): it wins over the messages'.
    reported_finish_reason: str | None = None
    message_finish_reason: str | None = None
    last_output_was_tool_call: bool = False
    # A response (not the turn's report, not the harness) named `response_model`.
    model_from_response: bool = False

    def note_response(self, facts: ResponseFacts, *, reports_turn: bool) -> bool:
        """Keep what a model response (or the turn's report) says; True when this made the
        request model known (the first model that answered a turn that had none)."""
        learned_request_model = False
        # A turn's report names the model only where no response of the turn did (a session's
        # model named by its usage, where the messages were never read).
        if facts.model is not None and not (reports_turn and self.model_from_response):
            self.response_model = facts.model
            self.model_from_response = not reports_turn
            if self.request_model is None:
                self.request_model = facts.model
                learned_request_model = True
        if facts.response_id is not None:
            self.response_id = facts.response_id
        if facts.finish_reason is not None:
            if reports_turn:
                self.reported_finish_reason = facts.finish_reason
            else:
                self.message_finish_reason = facts.finish_reason
        return learned_request_model

    def final_attributes(self, failed: bool) -> dict[str, Any]:
        """The response attributes the turn's span ends with (only those known)."""
        finish_reason = self.reported_finish_reason or self.message_finish_reason
        if finish_reason is None:
            finish_reason = "error" if failed else "tool_call" if self.last_output_was_tool_call else "stop"
        attributes: dict[str, Any] = {GEN_AI_RESPONSE_FINISH_REASONS: [finish_reason]}
        if self.response_model is not None:
            attributes[GEN_AI_RESPONSE_MODEL] = self.response_model
        if self.response_id is not None:
            attributes[GEN_AI_RESPONSE_ID] = self.response_id
        return attributes
