"""The content the spans of an `AgentRun` will carry, kept as the writer places entries.

Each entry's content goes to the spans that will say it (`add_content`): a subagent's and its
chat span's, else the root's and the turn's. Background tasks' notifications are what Claude
Code begins its next turn with: a turn's input, kept until a turn calls the model with them.
Nothing is kept unless the content rules (`span_content`) let content go on spans.
"""

from __future__ import annotations

from typing import Any

from transcript_otel.genai.attributes import tool_identity
from transcript_otel.genai.facts import task_notification
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_ASSISTANT_MESSAGE,
    ENTRY_SYSTEM_EVENT,
    ENTRY_TOOL_RESULT,
)
from transcript_otel.instrumentation.span_tree.span_content import add_content
from transcript_otel.instrumentation.span_tree.span_slot import MAX_KNOWN_LAUNCHERS, SpanSlot
from transcript_otel.instrumentation.span_tree.state import RunState
from transcript_otel.model.entries import MAIN_SOURCE, EntryType


class ContentKeeping(RunState):
    """Keeping entries' content for the spans that will carry it."""

    def _keep_content(
        self, entry_type: Any, detail: Any, subagent: SpanSlot | None, turn: SpanSlot | None
    ) -> None:
        """The entry in what its spans will say: a subagent's or the root's, and its chat's.

        A background task's notification is what Claude Code starts its next turn with: that
        turn's input. A task whose call's result comes after it ran in the foreground: the
        result tells the model its answer, the notification nothing more."""
        if subagent is not None:
            add_content(entry_type, detail, subagent, subagent.chat)
            return
        if entry_type == ENTRY_SYSTEM_EVENT:
            notification = task_notification(detail)
            # Its summary is the subagent's answer: kept where assistant text may be.
            keeps = self._keeps(ENTRY_ASSISTANT_MESSAGE)
            if notification is not None and keeps and len(self._unread_notifications) < MAX_KNOWN_LAUNCHERS:
                call_id, summary = notification
                if call_id is None:
                    self._unread_notifications[str(len(self._unread_notifications))] = summary
                elif call_id in self._background_calls or (MAIN_SOURCE, call_id) in self._tools:
                    self._unread_notifications[call_id] = summary  # else: its result told it already
            return
        if entry_type == ENTRY_TOOL_RESULT and self._unread_notifications:
            call_id, _ = tool_identity(detail)
            self._unread_notifications.pop(call_id or "", None)
        if entry_type == ENTRY_ASSISTANT_MESSAGE and turn is not None:
            turn.answered = True
        add_content(entry_type, detail, self._root, turn)

    def _keeps(self, entry_type: str) -> bool:
        """Whether content of `entry_type`'s category may go on spans (a text taken from one entry
        into another's place keeps its own category's rule)."""
        return self._content_rules is not None and self._content_rules.keeps(entry_type)

    def _deliver_notifications(self, turn: SpanSlot) -> None:
        if self._unread_notifications:
            turn.notified, self._unread_notifications = self._unread_notifications, {}
            for summary in turn.notified.values():
                add_content(EntryType.USER_MESSAGE.value, {"text": summary}, turn)

    def _pass_on_notifications(self, turn: SpanSlot) -> None:
        """A turn that ends without the model answering (Claude Code's `num_turns: 0`) leaves its
        notifications to the next turn, which calls the model with them."""
        if turn.notified and not turn.answered:
            self._unread_notifications = {**turn.notified, **self._unread_notifications}
