"""The tool calls and subagents of an `AgentRun`: `execute_tool` and subagent `invoke_agent` spans.

A tool span runs from a `tool_use` entry to the `tool_result` with its call id (or, for a
call that goes on in the background, to the harness's word that the work ended). A
`Task`/`Agent` call is a transfer to the subagent it names, whose span (with a `chat` span of
its model calls) is nested under it: found by its call id where the harness names subagents
so (stream-json), else by its prompt or as the oldest waiting.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from opentelemetry.trace import SpanKind

from transcript_otel.genai.attributes import tool_identity
from transcript_otel.genai.chat_content import ChatContent
from transcript_otel.genai.content import AgentContent, ToolContent
from transcript_otel.genai.facts import subagent_agent_id
from transcript_otel.genai.lookup import value_at
from transcript_otel.genai.pieces import texts_of
from transcript_otel.instrumentation.span_tree.completion import SpanCompletion
from transcript_otel.instrumentation.span_tree.content import ContentKeeping
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_TOOL_USE,
    is_bridged_tool,
    launcher_arguments,
)
from transcript_otel.instrumentation.span_tree.span_content import add_content
from transcript_otel.instrumentation.span_tree.span_slot import (
    MAX_KNOWN_LAUNCHERS,
    SpanSlot,
    ToolSlot,
    keep_bounded,
)
from transcript_otel.instrumentation.span_tree.turn_facts import CHAT_OPERATION, TurnFacts, chat_span_name
from transcript_otel.mappings._entry import SUBAGENT_COMPLETED
from transcript_otel.model.entries import MAIN_SOURCE, SUBAGENT_SOURCE_PREFIX, EntryType, subagent_source
from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import (
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_TOOL_TYPE,
)

# A stream-json subagent's span is named by the call that launched it: that call's id.
SUBAGENT_CALL_ID: Final = "transcript.subagent.call_id"
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


class ToolSpans(SpanCompletion, ContentKeeping):
    """Opening and ending tool and subagent spans, on the writer, in queue order."""

    def _open_tool(
        self, source: str, detail: Any, parent: SpanSlot, start_ns: int, agent_name: str | None
    ) -> SpanSlot:
        call_id, name = tool_identity(detail)
        if call_id is None:
            return parent  # a call without an id cannot be matched with its result
        name = name or "tool"
        arguments = launcher_arguments(detail)
        tool = ToolSlot.open(
            self._tracer,
            f"execute_tool {name}",
            parent.context,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "execute_tool",
                attr.GEN_AI_TOOL_NAME: name,
                attr.GEN_AI_TOOL_CALL_ID: call_id,
                GEN_AI_TOOL_TYPE: "function" if is_bridged_tool(detail) else "extension",
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                GEN_AI_AGENT_NAME: agent_name,
            },
            start_ns,
        )
        tool.name = name
        tool.call_id = call_id
        if self._content_rules is not None:
            tool.content = ToolContent()
            add_content(ENTRY_TOOL_USE, detail, tool)
        if name in _SUBAGENT_TOOLS and self._subagents_named_by_call_id:
            keep_bounded(self._launchers, call_id, tool)
        if name in _SUBAGENT_TOOLS and isinstance(arguments, Mapping):
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
        self._tools[(source, call_id)] = tool
        if name in _SCRIPT_TOOLS:
            self._running_scripts[source] = tool
        return tool

    def _go_on_in_background(self, tool: ToolSlot) -> None:
        with self._lock:
            keep_bounded(self._background_calls, tool.call_id, tool)

    def _end_tool(self, tool: ToolSlot, *, failed: bool, end_ns: int) -> None:
        with self._lock:
            if tool.name in _SCRIPT_TOOLS:
                for source, script in list(self._running_scripts.items()):
                    if script is tool:
                        del self._running_scripts[source]
            ends_subagent = tool.subagent_source is not None and tool.name not in _LAUNCH_AND_RETURN
            subagent = self._subagents.pop(str(tool.subagent_source), None) if ends_subagent else None
            if tool.name in _SUBAGENT_TOOLS and tool.subagent_source is None:
                self._ended_launchers.append(tool)
        if subagent is not None:
            self._end(subagent, end_ns)
        if failed:
            tool.error_type = "tool_error"
        self._end(tool, end_ns)

    def _subagent_slot(self, source: str, entry_type: Any, detail: Any, start_ns: int) -> SpanSlot | None:
        if not source.startswith(SUBAGENT_SOURCE_PREFIX):
            return None
        slot = self._subagents.get(source)
        if slot is not None:
            return slot
        agent_id = source[len(SUBAGENT_SOURCE_PREFIX) :]
        if self._subagents_named_by_call_id:
            launcher = self._launchers.get(agent_id)
        else:
            launcher = self._launcher_of(detail)
        parent = launcher or self._turn or self._root
        subagent_type = launcher.subagent_type if launcher is not None else None
        # Named by its launching call (stream-json): the real agent id, where already told.
        call_id = agent_id if self._subagents_named_by_call_id else None
        learned_id = self._agent_ids_by_call.pop(call_id, None) if call_id is not None else None
        slot = SpanSlot.open(
            self._tracer,
            f"invoke_agent {subagent_type or 'subagent'}",
            parent.context,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "invoke_agent",
                GEN_AI_AGENT_NAME: subagent_type or agent_id,
                GEN_AI_AGENT_ID: learned_id or agent_id,
                GEN_AI_PROVIDER_NAME: self._provider,
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                SUBAGENT_CALL_ID: call_id,
            },
            start_ns,
        )
        slot.agent_name = subagent_type or agent_id
        slot.agent_id_learned = learned_id is not None or call_id is None
        # Its model calls: a `chat` span of its own, so that its tokens are counted once, on a chat
        # span (never on the main turn), and priced at its own model.
        slot.chat = SpanSlot.open(
            self._tracer,
            chat_span_name(None),
            slot.context,
            SpanKind.CLIENT,
            {
                GEN_AI_OPERATION_NAME: CHAT_OPERATION,
                GEN_AI_PROVIDER_NAME: self._provider,
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                GEN_AI_AGENT_NAME: slot.agent_name,
            },
            start_ns,
        )
        slot.chat.facts = TurnFacts()
        if self._content_rules is not None:
            slot.content, slot.chat.content = AgentContent(), ChatContent()
            prompt = launcher.subagent_prompt if launcher is not None else None
            if (
                prompt is not None
                and entry_type != EntryType.USER_MESSAGE.value
                and self._keeps(ENTRY_TOOL_USE)
            ):
                # Its stream does not say its prompt (stream-json): the launching call does.
                add_content(EntryType.USER_MESSAGE.value, {"text": prompt}, slot, slot.chat)
        if launcher is not None:
            launcher.subagent_source = source
        self._subagents[source] = slot
        return slot

    def _launcher_of(self, detail: dict[str, Any] | None) -> ToolSlot | None:
        """The `Task`/`Agent` call that started this subagent: same prompt, else the oldest waiting.

        Open calls come first; then calls whose result was read before the subagent's file.
        """
        open_calls = [
            tool
            for (source, _), tool in self._tools.items()
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

    def _end_completed_subagent(self, detail: Mapping[str, Any], end_ns: int) -> None:
        """Codex tells the parent thread that a subagent's thread completed: its span ends."""
        thread = detail.get("agent_thread_id")
        if detail.get("subtype") != SUBAGENT_COMPLETED or not isinstance(thread, str):
            return
        with self._lock:
            subagent = self._subagents.pop(subagent_source(thread), None)
        if subagent is not None:
            self._end(subagent, end_ns)

    def _learn_agent_id(self, detail: Any) -> None:
        """A stream-json subagent's real agent id (`task_started`, or its messages' `agent_id`):
        its span, named by the launching call id, gets it as `gen_ai.agent.id`."""
        identity = subagent_agent_id(detail)
        if identity is None or identity.call_id is None:
            return
        slot = self._subagents.get(SUBAGENT_SOURCE_PREFIX + identity.call_id)
        if slot is None:  # it has not spoken yet: its span gets the id as it opens
            if len(self._agent_ids_by_call) >= MAX_KNOWN_LAUNCHERS:
                del self._agent_ids_by_call[next(iter(self._agent_ids_by_call))]
            self._agent_ids_by_call[identity.call_id] = identity.agent_id
        elif not slot.agent_id_learned:
            slot.span.set_attribute(GEN_AI_AGENT_ID, identity.agent_id)
            slot.agent_id_learned = True
