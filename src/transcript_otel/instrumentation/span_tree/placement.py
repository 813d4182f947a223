"""Where each entry of an `AgentRun` goes: `EntryPlacer`, on the writer, in queue order.

An entry belongs to a span: a tool call's own, a subagent's, else the open turn's, else the
root's. Placing it may open spans (a prompt's turn, a tool call, a subagent's first entry)
or end them (a tool's result, a background task's end, a Codex subagent's completion), and
tells what the spans end with: usage, model facts, errors, content.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from typing import Any, Final

from opentelemetry.context import Context

from transcript_otel.genai.attributes import tool_failed, tool_identity, usage_attributes
from transcript_otel.genai.facts import init_model
from transcript_otel.instrumentation.span_tree.book import SpanBook
from transcript_otel.instrumentation.span_tree.content import ContentKeeper
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_ERROR,
    ENTRY_SYSTEM_EVENT,
    ENTRY_TOKEN_USAGE,
    ENTRY_TOOL_RESULT,
    ENTRY_TOOL_USE,
    ENTRY_USER_MESSAGE,
    error_type,
    says,
)
from transcript_otel.instrumentation.span_tree.policy import TurnPolicy
from transcript_otel.instrumentation.span_tree.responses import note_response, note_subagent_model
from transcript_otel.instrumentation.span_tree.slots import AgentSlot, SpanSlot, ToolSlot
from transcript_otel.instrumentation.span_tree.span_content import add_content
from transcript_otel.instrumentation.span_tree.tools import ToolTracker
from transcript_otel.instrumentation.span_tree.turns import TurnTracker
from transcript_otel.instrumentation.span_tree.usage import UsageLedger
from transcript_otel.model.entries import MAIN_SOURCE, EntryType, subagent_source
from transcript_otel.records.queued import EntryPlacement

# The entries a Claude message's lines become, each carrying the message's id and usage.
_MESSAGE_ENTRIES: Final = frozenset(
    {EntryType.ASSISTANT_MESSAGE.value, EntryType.THINKING.value, EntryType.TOOL_USE.value}
)
# Entries that may end spans: a tool's result, a system event telling that work ended.
_ENDING_ENTRIES: Final = frozenset({ENTRY_TOOL_RESULT, ENTRY_SYSTEM_EVENT})
# What a harness reports as its turn ends: its usage, or why it failed.
TURN_REPORTS: Final = frozenset({EntryType.TOKEN_USAGE.value, EntryType.ERROR.value})


class EntryPlacer(EntryPlacement):
    """Places a run's entries in its spans (the writer calls `place()` for each)."""

    def __init__(
        self,
        policy: TurnPolicy,
        book: SpanBook,
        turns: TurnTracker,
        tools: ToolTracker,
        usage: UsageLedger,
        content: ContentKeeper,
        lock: threading.RLock,
        report: Callable[[str, Exception], None],
    ) -> None:
        self._policy = policy
        self._book = book
        self._turns = turns
        self._tools = tools
        self._usage = usage
        self._content = content
        # The run's: the agent's thread reads what placing changes (`AgentRun.unexported_usage`).
        self._lock = lock
        self._report = report

    def place(self, entry_type: Any, source: Any, detail: Any, timestamp_ns: int) -> Context:
        """The span an entry belongs to, opening or ending spans as it implies (at the entry's
        time). Never raises."""
        with self._lock:
            try:
                slot = self._place(entry_type, source, detail, timestamp_ns)
            except Exception as exc:
                self._report("could not place an entry in its span", exc)
                return self._book.root.context
            if entry_type in _ENDING_ENTRIES:
                try:
                    self._end_what_it_ends(entry_type, detail, slot, timestamp_ns)
                except Exception as exc:
                    self._report("could not end a tool span", exc)
        return slot.context

    def _place(self, entry_type: Any, source: Any, detail: Any, timestamp_ns: int) -> SpanSlot:
        turns = self._turns
        if (
            self._policy.prompt_opens_turn
            and turns.current is None
            and source == MAIN_SOURCE
            and entry_type == ENTRY_USER_MESSAGE
        ):
            turns.open(timestamp_ns)
        subagent = self._tools.subagent(source, entry_type, detail, timestamp_ns, turns.current)
        if subagent is not None and isinstance(detail, Mapping):
            usage = usage_attributes({"usage": detail.get("message_usage")})
            if usage:  # a subagent's model call: its own spans and the run's totals, not the turn's
                self._usage.count(subagent, usage, turn=None)
        if self._tools.named_by_call_id and (
            entry_type == ENTRY_SYSTEM_EVENT or (subagent is not None and not subagent.agent_id_learned)
        ):
            self._tools.learn_agent_id(detail)
        turn = turns.current
        if source == MAIN_SOURCE and entry_type in TURN_REPORTS:
            turn = turns.reported()  # the oldest turn still waits for its result
        if subagent is not None:  # a subagent's model is its own
            if entry_type != ENTRY_SYSTEM_EVENT:
                note_response(subagent.chat, entry_type, detail)
        elif entry_type != ENTRY_SYSTEM_EVENT:
            note_response(turn, entry_type, detail)
        elif self._book.model is None:  # the init message's model: the run's, when it has none
            model = init_model(detail)
            if model is not None:
                turns.set_request_model(model)
        base: SpanSlot = subagent or turn or self._book.root
        if self._policy.counts_message_usage and entry_type in _MESSAGE_ENTRIES:
            # Any line of a message may be its first: one that holds only tool calls too.
            self._usage.count_message(base, detail, turns.current)
        if self._content.rules is not None:
            self._content.keep(
                entry_type,
                detail,
                subagent=subagent,
                turn=turn,
                root=self._book.root,
                awaited=self._tools.awaits,
            )
        if entry_type == ENTRY_TOOL_USE:
            caller = subagent or self._book.root  # the agent that called the tool
            parent = self._tools.script_of(source) or base
            return self._tools.open(source, detail, parent, timestamp_ns, caller.agent_name)
        if entry_type == ENTRY_TOOL_RESULT:
            call_id, _ = tool_identity(detail)
            tool = self._tools.take_result(source, call_id)
            if tool is None or call_id is None:
                return base
            last_call = detail.get("subagent_last_call") if isinstance(detail, Mapping) else None
            if isinstance(last_call, Mapping):
                self._count_subagent_last_call(call_id, last_call)
            add_content(entry_type, detail, tool)
            return tool
        if entry_type == ENTRY_TOKEN_USAGE:
            self._usage.count_report(base, detail, turn)
        elif entry_type == ENTRY_ERROR:
            base.error_type = error_type(detail)
        return base

    def _end_what_it_ends(self, entry_type: Any, detail: Any, slot: SpanSlot, timestamp_ns: int) -> None:
        """A tool's result ends its span (unless the call goes on in the background); a system
        event may end a background call's or a Codex subagent's."""
        if entry_type == ENTRY_TOOL_RESULT and isinstance(slot, ToolSlot):
            if says(detail, "background_launch"):
                self._tools.go_on_in_background(slot)
            else:
                self._tools.end(slot, failed=tool_failed(detail), end_ns=timestamp_ns)
        if entry_type == ENTRY_SYSTEM_EVENT and isinstance(detail, Mapping):
            ended_call = detail.get("background_call_ended")
            if isinstance(ended_call, str):
                self._tools.end_background(ended_call, failed=says(detail, "is_error"), end_ns=timestamp_ns)
            self._tools.end_completed_subagent(detail, timestamp_ns)

    def _count_subagent_last_call(self, call_id: str, last_call: Mapping[str, Any]) -> None:
        """A synchronous Claude subagent's last model call, told only by its launching call's
        result (`detail.subagent_last_call`): counted on its chat span and itself, its model
        noted there. Not where the subagent's last words were printed (an answer, not a tool
        call): that call was counted as they came."""
        subagent: AgentSlot | None = self._tools.subagents.get(subagent_source(call_id))
        chat = subagent.chat if subagent is not None else None
        if subagent is None or (chat is not None and not chat.facts.last_output_was_tool_call):
            return
        usage = usage_attributes({"usage": last_call.get("usage")})
        if usage:
            self._usage.count(subagent, usage, turn=None)
        model = last_call.get("model")
        if isinstance(model, str):
            note_subagent_model(subagent, model)
