"""The tool calls of a Codex rollout, each given one `tool_use` and one `tool_result`.

A call shows up to three times in a rollout: the history's call (`function_call`, ...), its
output (`*_output`), and a typed item (`item_completed` `CommandExecution`, ...) that tells the
call and its outcome at once. Whichever of the output and the typed item comes first gives the
result, the other nothing; a typed item before the history's call (a hosted web search) gives
the call too. `RolloutCalls` keeps, bounded, the calls open (their tool names, to name their
results) and those already answered, and hands on the latest of both (`counted`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.mappings._entry import latest
from transcript_otel.mappings._rollout_payload import (
    COMMAND_TOOL,
    call_input,
    dig,
    ends_aborted,
    exited_badly,
    part_texts,
    payload_call_id,
    rollout_tool_name,
    typed_input,
    typed_output,
)
from transcript_otel.mappings.codex_exec import codex_item_failed
from transcript_otel.model.entries import EntryType

TYPED_TOOLS: Final = {
    "CommandExecution": COMMAND_TOOL,
    "FileChange": "codex:file_change",
    "WebSearch": "codex:web_search",
    "McpToolCall": None,  # named after the MCP tool
    "CollabAgentToolCall": None,  # named after the call it answers (`wait_agent`)
    "DynamicToolCall": None,  # a tool the client offers (weakincentives' bridged tools): its own name
}
_MAX_CALLS: Final = 10_000
# The latest calls `counted()` hands on, open or answered (a turn's calls at once, and more).
_CALLS_HANDED_ON: Final = 64

_Entries = list[tuple[EntryType, dict[str, Any]]]


def _remember(calls: dict[str, Any], call_id: str, value: Any) -> None:
    """Keep `call_id`, dropping the oldest beyond `_MAX_CALLS` (calls that never end cannot grow it)."""
    calls[call_id] = value
    if len(calls) > _MAX_CALLS:
        del calls[next(iter(calls))]


class RolloutCalls:
    """The calls of one rollout file with no result yet, and those a typed item or an output answered."""

    __slots__ = ("_answered", "_calls")

    def __init__(self) -> None:
        self._calls: dict[str, str] = {}  # call id → tool name, for calls with no result yet
        self._answered: dict[str, None] = {}  # calls a typed item answered, until their output or call

    def counted(self) -> dict[str, Any]:
        """The latest calls open and answered (JSON), for a mapper that goes on (`go_on`)."""
        return {
            "calls": [[call_id, self._calls[call_id]] for call_id in latest(self._calls, _CALLS_HANDED_ON)],
            "answered": latest(self._answered, _CALLS_HANDED_ON),
        }

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        """Go on from the calls another mapper of the file `counted()`. False, and nothing
        changed, for what no mapper said."""
        calls, answered = counted.get("calls"), counted.get("answered")
        if not (
            isinstance(calls, list)
            and all(
                isinstance(call, list) and len(call) == 2 and all(map(nonempty_text, call)) for call in calls
            )
            and isinstance(answered, list)
            and all(map(nonempty_text, answered))
        ):
            return False
        self._calls = dict(calls)
        self._answered = dict.fromkeys(answered)
        return True

    def typed(self, item: dict[str, Any], kind: str) -> _Entries:
        """A typed tool item (`kind`, one of `TYPED_TOOLS`): its result, after a `tool_use` when
        the history showed no call; nothing when the call's output gave the result."""
        call_id = nonempty_text(item.get("id"))
        server, tool = nonempty_text(item.get("server")), nonempty_text(item.get("tool"))
        if kind == "CollabAgentToolCall":  # named as the model called it (`wait_agent`), else as exec
            name = self._calls.get(call_id or "") or f"codex:{tool or 'collab'}"
        elif kind == "DynamicToolCall":
            name = self._calls.get(call_id or "") or tool or "codex:dynamic_tool"
        else:
            name = TYPED_TOOLS[kind] or (f"{server}:{tool}" if server and tool else "codex:mcp")
        entries: _Entries = []
        if call_id is None or call_id not in self._calls:
            if call_id is not None and call_id in self._answered:
                del self._answered[call_id]  # its output came first and gave the result
                return []
            entries.append(_tool(EntryType.TOOL_USE, call_id, name, input=typed_input(item)))
        if call_id is not None:
            self._calls.pop(call_id, None)
            _remember(self._answered, call_id, None)
        failed = (
            codex_item_failed(item)
            or bool(item.get("error"))
            or dig(item, "result", "isError") is True
            or item.get("success") is False
        )
        result = _tool(
            EntryType.TOOL_RESULT, call_id, name, is_error=failed, text=typed_output(item), item=item
        )
        return [*entries, result]

    def call(self, payload: dict[str, Any]) -> _Entries:
        """A call of the history (`function_call`, ...): its `tool_use`, unless a typed item gave it."""
        call_id = payload_call_id(payload)
        if call_id is not None and call_id in self._answered:
            # A hosted web search: Codex writes the typed item, which gave the call and its
            # result, before the history's call (and no output follows).
            del self._answered[call_id]
            return []
        name = rollout_tool_name(payload)
        if call_id is not None:
            _remember(self._calls, call_id, name)
        return [_tool(EntryType.TOOL_USE, call_id, name, input=call_input(payload))]

    def output(self, payload: dict[str, Any]) -> _Entries:
        """A call's output (`*_output`): its `tool_result`, unless a typed item gave it."""
        call_id = payload_call_id(payload)
        if call_id is not None and call_id in self._answered:
            del self._answered[call_id]  # a typed item gave the result
            return []
        if call_id is not None:
            _remember(self._answered, call_id, None)  # a typed item after it gives nothing
        called = self._calls.pop(call_id, None) if call_id is not None else None
        output = payload.get("output", payload.get("tools"))
        texts = part_texts(output)
        said = {"text": "\n".join(texts)} if texts or isinstance(output, str) else {"output": output}
        failed = ends_aborted(texts) or (called == COMMAND_TOOL and exited_badly(texts))
        return [_tool(EntryType.TOOL_RESULT, call_id, called, is_error=failed, **said)]


def _tool(
    entry_type: EntryType, call_id: str | None, name: str | None, **said: Any
) -> tuple[EntryType, dict[str, Any]]:
    return entry_type, {"tool_use_id": call_id, "tool_name": name, **said}
