"""Claude Code stream-json messages to canonical entries.

These are the messages the `claude` CLI prints with `--output-format stream-json`:
what claude-agent-sdk reads from its CLI process (before turning them into
`AssistantMessage`, `ResultMessage`, ...), and what `claude -p --output-format
stream-json` prints. One message (a JSON object) becomes:

* source `subagent:{parent_tool_use_id}` when the message belongs to a subagent (its
  `parent_tool_use_id` is the id of the `Task`/`Agent` call that launched it), else `main`;
* `assistant` → one `thinking` per thinking block, then one `assistant_message` for
  the other blocks (text, ...) if any, then one `tool_use` per `tool_use` or
  `server_tool_use` block;
* `user` → `user_message` for the content other than tool results (if any), then one
  `tool_result` per `tool_result` block, named after its `tool_use` when that was seen;
* `result` → `token_usage` (its `usage` and `total_cost_usd`) when it reports either,
  then `error` when it reports an error (`is_error`, or an `error_*` subtype);
* `system` → `system_event` with its `subtype` (`compact_boundary` is `compaction`);
  `rate_limit_event` and `conversation_reset` → `system_event` with that subtype;
* `stream_event` (partial-message deltas) → nothing: the complete message follows;
  control frames → nothing: they are the SDK's protocol, not the conversation;
* any other type → `unknown`, kept whole; a message that is not a JSON object (or
  whose type is not a string) → `unknown` with `detail.parse_error`.

`detail.sdk_entry` is the message, or the block split out of it; the first entry
made from a message carries the message as `raw` (encoded by the background writer).
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.mappings._claude_blocks import ToolNames, content_blocks, is_block, with_content
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.model import MAIN_SOURCE, EntryType, RawJson, subagent_source

_THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
_TOOL_USE_BLOCKS: Final = frozenset({"tool_use", "server_tool_use"})
_NOT_CONVERSATION: Final = frozenset(
    {"stream_event", "control_request", "control_response", "control_cancel_request", "transcript_mirror"}
)
_SYSTEM_SUBTYPES: Final = {"compact_boundary": "compaction"}
_EVENT_MESSAGES: Final = frozenset({"rate_limit_event", "conversation_reset"})


def _block_type(block: Any) -> str | None:
    if isinstance(block, dict):
        block_type = block.get("type")
        if isinstance(block_type, str):
            return block_type
    return None


def source_of(message: dict[str, Any]) -> str:
    """`subagent:{parent_tool_use_id}` for a subagent's message, else `main`."""
    parent = message.get("parent_tool_use_id")
    return subagent_source(parent) if isinstance(parent, str) and parent else MAIN_SOURCE


def reports_error(result: dict[str, Any]) -> bool:
    subtype = result.get("subtype")
    return result.get("is_error") is True or (isinstance(subtype, str) and subtype.startswith("error"))


class ClaudeStreamMapper:
    """Maps the messages of one run; remembers the tool names seen, per source."""

    __slots__ = ("_tool_names",)

    def __init__(self) -> None:
        self._tool_names = ToolNames()

    def message(self, message: Any) -> list[MappedEntry]:
        if not isinstance(message, dict):
            reason = f"a stream-json message must be a JSON object, got {type(message).__name__}"
            return [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason}, RawJson(message))]
        raw = RawJson(message)
        message_type = message.get("type")
        if not isinstance(message_type, str):
            reason = "the message has no string 'type'"
            return [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason, "sdk_entry": message}, raw)]
        source = source_of(message)
        if message_type in _NOT_CONVERSATION:
            return []
        if message_type == "assistant":
            entries = self._assistant(message, source)
        elif message_type == "user":
            entries = self._user(message, source)
        elif message_type == "result":
            entries = _result(message)
        elif message_type == "system":
            subtype = message.get("subtype")
            subtype = _SYSTEM_SUBTYPES.get(subtype, subtype) if isinstance(subtype, str) else None
            entries = [(EntryType.SYSTEM_EVENT, _with_subtype({"sdk_entry": message}, subtype))]
        elif message_type in _EVENT_MESSAGES:
            entries = [(EntryType.SYSTEM_EVENT, {"sdk_entry": message, "subtype": message_type})]
        else:
            entries = [(EntryType.UNKNOWN, {"sdk_entry": message})]
        return [
            MappedEntry(entry_type.value, detail, raw if index == 0 else None, source)
            for index, (entry_type, detail) in enumerate(entries)
        ]

    def _assistant(self, message: dict[str, Any], source: str) -> list[tuple[EntryType, dict[str, Any]]]:
        blocks = content_blocks(message)
        if blocks is None:
            return [(EntryType.ASSISTANT_MESSAGE, {"sdk_entry": message})]
        thinking: list[Any] = []
        tool_uses: list[Any] = []
        others: list[Any] = []
        for block in blocks:
            block_type = _block_type(block)
            kind = thinking if block_type in _THINKING_BLOCKS else others
            (tool_uses if block_type in _TOOL_USE_BLOCKS else kind).append(block)
        entries = [(EntryType.THINKING, {"sdk_entry": block}) for block in thinking]
        if others or not blocks:
            entries.append((EntryType.ASSISTANT_MESSAGE, {"sdk_entry": with_content(message, others)}))
        for block in tool_uses:
            self._tool_names.remember(source, block)
            entries.append((EntryType.TOOL_USE, {"sdk_entry": block}))
        return entries

    def _user(self, message: dict[str, Any], source: str) -> list[tuple[EntryType, dict[str, Any]]]:
        blocks = content_blocks(message)
        if blocks is None:
            return [(EntryType.USER_MESSAGE, {"sdk_entry": message})]
        results = [block for block in blocks if is_block(block, "tool_result")]
        others = [block for block in blocks if not is_block(block, "tool_result")]
        entries: list[tuple[EntryType, dict[str, Any]]] = []
        if others or not blocks:
            entries.append((EntryType.USER_MESSAGE, {"sdk_entry": with_content(message, others)}))
        entries.extend((EntryType.TOOL_RESULT, self._tool_names.result_detail(source, b)) for b in results)
        return entries


def _with_subtype(detail: dict[str, Any], subtype: str | None) -> dict[str, Any]:
    if subtype is not None:
        detail["subtype"] = subtype
    return detail


def _result(message: dict[str, Any]) -> list[tuple[EntryType, dict[str, Any]]]:
    entries: list[tuple[EntryType, dict[str, Any]]] = []
    if message.get("usage") is not None or message.get("total_cost_usd") is not None:
        entries.append((EntryType.TOKEN_USAGE, {"sdk_entry": message}))
    if reports_error(message):
        entries.append((EntryType.ERROR, {"sdk_entry": message}))
    if not entries:
        entries.append((EntryType.SYSTEM_EVENT, {"sdk_entry": message, "subtype": "result"}))
    return entries
