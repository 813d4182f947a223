"""The tool calls and subagents of an `AgentRun`: `execute_tool` and subagent `invoke_agent` spans.

A tool span runs from a `tool_use` entry to the `tool_result` with its call id (or, for a
call that goes on in the background, to the harness's word that the work ended). A
`Task`/`Agent` call is a transfer to the subagent it names, whose span (with a `chat` span of
its model calls) is nested under it: found by its call id where the harness names subagents
so (stream-json), else by its prompt or as the oldest waiting.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.attributes import tool_identity
from transcript_otel.genai.chat_content import ChatContent
from transcript_otel.genai.content import AgentContent, ToolContent
from transcript_otel.genai.facts import subagent_agent_id
from transcript_otel.genai.lookup import value_at
from transcript_otel.genai.pieces import texts_of
from transcript_otel.instrumentation.span_tree.book import SpanBook
from transcript_otel.instrumentation.span_tree.completion import SpanEnder
from transcript_otel.instrumentation.span_tree.content import ContentKeeper
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_TOOL_USE,
    is_bridged_tool,
    launcher_arguments,
)
from transcript_otel.instrumentation.span_tree.slots import (
    MAX_KNOWN_LAUNCHERS,
    AgentSlot,
    ChatSlot,
    SpanSlot,
    ToolSlot,
    keep_bounded,
)
from transcript_otel.instrumentation.span_tree.span_content import add_content
from transcript_otel.mappings._entry import SUBAGENT_COMPLETED
from transcript_otel.model.entries import MAIN_SOURCE, SUBAGENT_SOURCE_PREFIX, EntryType, subagent_source
from transcript_otel.otel.attributes import GEN_AI_AGENT_ID

# semantic-conventions-genai's agent-as-a-tool refinement of `execute_tool` (a `Task`/`Agent`
# call names the subagent type it starts, and waits for its answer).
GEN_AI_TRANSFER_MODE: Final = "gen_ai.transfer.mode"
GEN_AI_TRANSFER_TARGET_NAME: Final = "gen_ai.transfer.target.name"
TRANSFER_RETURNS_TO_CALLER: Final = "return_to_caller"

# Tools that start a Claude subagent.
_SUBAGENT_TOOLS: Final = frozenset({"Task", "Agent", "spawn_agent"})  # Claude; Codex (`multi_agent_v2`)
# Launchers that return as the subagent starts: it runs on until its parent is told it completed.
_LAUNCH_AND_RETURN: Final = frozenset({"spawn_agent"})
# Tools that run a script whose own tool calls are made while it runs: those are its children.
_SCRIPT_TOOLS: Final = frozenset({"codex:code_mode"})


# Subagent launchers whose result came before their subagent spoke, kept for it.
_MAX_ENDED_LAUNCHERS: Final = 64


class ToolTracker:
    """The run's open tool calls and subagents, and what tells which call launched which."""

    def __init__(
        self, book: SpanBook, content: ContentKeeper, ender: SpanEnder, *, named_by_call_id: bool
    ) -> None:
        self._book = book
        self._content = content
        self._ender = ender
        # Claude's stream-json names a subagent's messages after the `Task` call that launched
        # it (`subagent:{call id}`): its parent is then known exactly, never guessed.
        self.named_by_call_id = named_by_call_id
        self._open: dict[tuple[str, str], ToolSlot] = {}
        self._launchers: dict[str, ToolSlot] = {}
        # A script still running, by source (Codex code mode): the tools called meanwhile are its own.
        self._running_scripts: dict[str, ToolSlot] = {}
        # Calls whose result said they go on in the background (a background subagent): they
        # end when the harness says the work ended, or with the run.
        self._background: dict[str, ToolSlot] = {}
        self.subagents: dict[str, AgentSlot] = {}
        # Subagent launchers whose result came first: transcript files are read by polling,
        # so a subagent's file may be read after its `Task` call's result.
        self._ended_launchers: deque[ToolSlot] = deque(maxlen=_MAX_ENDED_LAUNCHERS)
        # Real agent ids learned (stream-json's `task_started`) before their subagent spoke.
        self._agent_ids_by_call: dict[str, str] = {}

    def open(
        self, source: str, detail: Any, parent: SpanSlot, start_ns: int, agent_name: str | None
    ) -> SpanSlot:
        """The span of a `tool_use` entry (`parent` where the call has no id: it cannot be
        matched with its result)."""
        call_id, name = tool_identity(detail)
        if call_id is None:
            return parent
        name = name or "tool"
        tool = self._book.open_tool(
            name,
            call_id,
            bridged=is_bridged_tool(detail),
            parent=parent,
            agent_name=agent_name,
            start_ns=start_ns,
        )
        if self._content.rules is not None:
            tool.content = ToolContent()
            add_content(ENTRY_TOOL_USE, detail, tool)
        if name in _SUBAGENT_TOOLS:
            self._note_launcher(tool, launcher_arguments(detail))
        self._open[(source, call_id)] = tool
        if name in _SCRIPT_TOOLS:
            self._running_scripts[source] = tool
        return tool

    def _note_launcher(self, tool: ToolSlot, arguments: Any) -> None:
        if self.named_by_call_id:
            keep_bounded(self._launchers, tool.call_id, tool)
        if not isinstance(arguments, Mapping):
            return
        prompt, subagent_type = arguments.get("prompt"), arguments.get("subagent_type")
        tool.subagent_prompt = prompt if isinstance(prompt, str) else None
        tool.subagent_type = subagent_type if isinstance(subagent_type, str) else None
        if tool.subagent_type:  # the call names the agent it starts, and waits for its answer
            tool.span.set_attributes(
                {
                    GEN_AI_TRANSFER_MODE: TRANSFER_RETURNS_TO_CALLER,
                    GEN_AI_TRANSFER_TARGET_NAME: tool.subagent_type,
                }
            )

    def script_of(self, source: str) -> ToolSlot | None:
        """The script running on `source`, whose tool calls are its children."""
        return self._running_scripts.get(source)

    def take_result(self, source: str, call_id: str | None) -> ToolSlot | None:
        """The open call a `tool_result` answers, no longer open."""
        return self._open.pop((source, call_id), None) if call_id is not None else None

    def awaits(self, call_id: str) -> bool:
        """Whether the main thread's call `call_id` is open or goes on in the background."""
        return call_id in self._background or (MAIN_SOURCE, call_id) in self._open

    def go_on_in_background(self, tool: ToolSlot) -> None:
        keep_bounded(self._background, tool.call_id, tool)

    def end_background(self, call_id: str, *, failed: bool, end_ns: int) -> None:
        """The harness said the work of a call that went on in the background ended."""
        call = self._background.pop(call_id, None)
        if call is not None:
            self.end(call, failed=failed, end_ns=end_ns)

    def end(self, tool: ToolSlot, *, failed: bool, end_ns: int) -> None:
        """A call's result came: its span ends (a subagent it waited for first)."""
        if tool.name in _SCRIPT_TOOLS:
            for source, script in list(self._running_scripts.items()):
                if script is tool:
                    del self._running_scripts[source]
        ends_subagent = tool.subagent_source is not None and tool.name not in _LAUNCH_AND_RETURN
        subagent = self.subagents.pop(str(tool.subagent_source), None) if ends_subagent else None
        if tool.name in _SUBAGENT_TOOLS and tool.subagent_source is None:
            self._ended_launchers.append(tool)
        if subagent is not None:
            self._ender.end(subagent, end_ns)
        if failed:
            tool.error_type = "tool_error"
        self._ender.end(tool, end_ns)

    def subagent(
        self, source: str, entry_type: Any, detail: Any, start_ns: int, turn: ChatSlot | None
    ) -> AgentSlot | None:
        """The subagent a `subagent:` source's entry belongs to, its span opened on its first
        entry: under the call that launched it, else the turn, else the root."""
        if not source.startswith(SUBAGENT_SOURCE_PREFIX):
            return None
        slot = self.subagents.get(source)
        if slot is not None:
            return slot
        agent_id = source[len(SUBAGENT_SOURCE_PREFIX) :]
        launcher = self._launchers.get(agent_id) if self.named_by_call_id else self._launcher_of(detail)
        # Named by its launching call (stream-json): the real agent id, where already told.
        call_id = agent_id if self.named_by_call_id else None
        learned_id = self._agent_ids_by_call.pop(call_id, None) if call_id is not None else None
        slot = self._book.open_subagent(
            launcher or turn or self._book.root,
            subagent_type=launcher.subagent_type if launcher is not None else None,
            agent_id=agent_id,
            learned_id=learned_id,
            launching_call_id=call_id,
            start_ns=start_ns,
        )
        slot.agent_id_learned = learned_id is not None or call_id is None
        if self._content.rules is not None and slot.chat is not None:
            slot.content, slot.chat.content = AgentContent(), ChatContent()
            prompt = launcher.subagent_prompt if launcher is not None else None
            if (
                prompt is not None
                and entry_type != EntryType.USER_MESSAGE.value
                and self._content.keeps(ENTRY_TOOL_USE)
            ):
                # Its stream does not say its prompt (stream-json): the launching call does.
                add_content(EntryType.USER_MESSAGE.value, {"text": prompt}, slot, slot.chat)
        if launcher is not None:
            launcher.subagent_source = source
        self.subagents[source] = slot
        return slot

    def _launcher_of(self, detail: dict[str, Any] | None) -> ToolSlot | None:
        """The `Task`/`Agent` call that started this subagent: same prompt, else the oldest waiting.

        Open calls come first; then calls whose result was read before the subagent's file.
        """
        open_calls = [
            tool
            for (source, _), tool in self._open.items()
            if source == MAIN_SOURCE and tool.name in _SUBAGENT_TOOLS and tool.subagent_source is None
        ]
        ended_calls = [tool for tool in self._ended_launchers if tool.subagent_source is None]
        # A subagent's file begins with its prompt: the first text of its first message.
        texts = texts_of(value_at(detail, "sdk_entry", "message", "content"))
        prompt = texts[0] if texts else None
        for tool in (*open_calls, *ended_calls):
            if prompt is not None and tool.subagent_prompt == prompt:
                return tool
        waiting = open_calls or ended_calls
        return waiting[0] if waiting else None

    def end_completed_subagent(self, detail: Mapping[str, Any], end_ns: int) -> None:
        """Codex tells the parent thread that a subagent's thread completed: its span ends."""
        thread = detail.get("agent_thread_id")
        if detail.get("subtype") != SUBAGENT_COMPLETED or not isinstance(thread, str):
            return
        subagent = self.subagents.pop(subagent_source(thread), None)
        if subagent is not None:
            self._ender.end(subagent, end_ns)

    def learn_agent_id(self, detail: Any) -> None:
        """A stream-json subagent's real agent id (`task_started`, or its messages' `agent_id`):
        its span, named by the launching call id, gets it as `gen_ai.agent.id`."""
        identity = subagent_agent_id(detail)
        if identity is None or identity.call_id is None:
            return
        slot = self.subagents.get(SUBAGENT_SOURCE_PREFIX + identity.call_id)
        if slot is None:  # it has not spoken yet: its span gets the id as it opens
            if len(self._agent_ids_by_call) >= MAX_KNOWN_LAUNCHERS:
                del self._agent_ids_by_call[next(iter(self._agent_ids_by_call))]
            self._agent_ids_by_call[identity.call_id] = identity.agent_id
        elif not slot.agent_id_learned:
            slot.span.set_attribute(GEN_AI_AGENT_ID, identity.agent_id)
            slot.agent_id_learned = True

    def close_main(self, end_ns: int) -> None:
        """At a turn's end: the main thread's calls still open end (their result never came).
        Subagents and calls that go on in the background may outlive the turn."""
        for key in [key for key in self._open if key[0] == MAIN_SOURCE]:
            self._ender.end_missing(self._open.pop(key), end_ns)

    def close_all(self, end_ns: int) -> None:
        """At the run's end: every tool and subagent span still open ends."""
        tools, self._open = list(self._open.values()), {}
        subagents, self.subagents = list(self.subagents.values()), {}
        background, self._background = list(self._background.values()), {}
        for slot in subagents:
            self._ender.end(slot, end_ns)
        for tool in [*tools, *background]:
            self._ender.end_missing(tool, end_ns)

    def open_slots(self) -> list[SpanSlot]:
        """Every open tool and subagent span, a subagent's chat span too."""
        slots: list[SpanSlot] = [*self._open.values(), *self._background.values(), *self.subagents.values()]
        slots += [subagent.chat for subagent in self.subagents.values() if subagent.chat is not None]
        return slots
