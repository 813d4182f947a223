"""The content the spans of an `AgentRun` will carry, kept as the writer places entries.

Each entry's content goes to the spans that will say it: a subagent's and its chat span's,
else the root's and the turn's. Background tasks' notifications are what Claude Code begins
its next turn with: a turn's input, kept until a turn calls the model with them. So are tool
results a turn ended on, unanswered: where each model call is a turn of its own (OpenCode's
steps), the next call reads them. Nothing is kept unless the content rules (`span_content`) let
content go on spans.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from transcript_otel.genai.attributes import tool_identity
from transcript_otel.genai.facts import task_notification
from transcript_otel.genai.rules import ContentRules
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_ASSISTANT_MESSAGE,
    ENTRY_SYSTEM_EVENT,
    ENTRY_TOOL_RESULT,
)
from transcript_otel.instrumentation.span_tree.slots import MAX_KNOWN_LAUNCHERS, AgentSlot, ChatSlot
from transcript_otel.instrumentation.span_tree.span_content import AgentDescription, add_content
from transcript_otel.model.entries import EntryType


class ContentKeeper:
    """What the run's spans will say: the rules, the agent's description, unread notifications."""

    def __init__(self, rules: ContentRules | None) -> None:
        # None: no span carries content, and nothing is kept.
        self.rules = rules
        # What the harness told the model before the conversation (`describe_agent()`).
        self.description = AgentDescription()
        # Background tasks' notifications no model call has read yet.
        self._unread: dict[str, str] = {}
        # The main turn's tool results since its last answer: the next model call's input.
        self._unanswered: list[Any] = []

    def keep(
        self,
        entry_type: Any,
        detail: Any,
        *,
        subagent: AgentSlot | None,
        turn: ChatSlot | None,
        root: AgentSlot,
        awaited: Callable[[str], bool],
    ) -> None:
        """The entry in what its spans will say: a subagent's and its chat's, or the root's and
        the turn's. `awaited(call_id)`: whether that call's result is still to come.

        A background task's notification is what Claude Code starts its next turn with: that
        turn's input. A task whose call's result comes after it ran in the foreground: the
        result tells the model its answer, the notification nothing more."""
        if subagent is not None:
            add_content(entry_type, detail, subagent, subagent.chat)
            return
        if entry_type == ENTRY_SYSTEM_EVENT:
            notification = task_notification(detail)
            # Its summary is the subagent's answer: kept where assistant text may be.
            if (
                notification is not None
                and self.keeps(ENTRY_ASSISTANT_MESSAGE)
                and len(self._unread) < MAX_KNOWN_LAUNCHERS
            ):
                call_id, summary = notification
                if call_id is None:
                    self._unread[str(len(self._unread))] = summary
                elif awaited(call_id):
                    self._unread[call_id] = summary  # else: its result told it already
            return
        if entry_type == ENTRY_TOOL_RESULT:
            if self._unread:
                call_id, _ = tool_identity(detail)
                self._unread.pop(call_id or "", None)
            if turn is not None and len(self._unanswered) < MAX_KNOWN_LAUNCHERS:
                self._unanswered.append(detail)
        if entry_type == ENTRY_ASSISTANT_MESSAGE and turn is not None:
            turn.answered = True
            self._unanswered.clear()
        add_content(entry_type, detail, root, turn)

    def keeps(self, entry_type: str) -> bool:
        """Whether content of `entry_type`'s category may go on spans (a text taken from one entry
        into another's place keeps its own category's rule)."""
        return self.rules is not None and self.rules.keeps(entry_type)

    def deliver_notifications(self, turn: ChatSlot) -> None:
        """A new turn begins with the tool results the last turn ended on unanswered, and the
        notifications no model call has read yet."""
        if self._unanswered:
            for detail in self._unanswered:
                add_content(ENTRY_TOOL_RESULT, detail, turn)
            self._unanswered.clear()
        if self._unread:
            turn.notified, self._unread = self._unread, {}
            for summary in turn.notified.values():
                add_content(EntryType.USER_MESSAGE.value, {"text": summary}, turn)

    def pass_on_notifications(self, turn: ChatSlot) -> None:
        """A turn that ends without the model answering (Claude Code's `num_turns: 0`) leaves its
        notifications to the next turn, which calls the model with them."""
        if turn.notified and not turn.answered:
            self._unread = {**turn.notified, **self._unread}

    def describe(
        self, system_instructions: str | None, tool_definitions: Sequence[Mapping[str, Any]] | None
    ) -> None:
        """What the harness told the model before the conversation (`describe_agent()`)."""
        if system_instructions is not None:
            self.description.system_instructions = system_instructions
        if tool_definitions is not None:
            self.description.tool_definitions = tuple(tool_definitions)
