"""Claude Code transcript JSONL lines to canonical entries (the specification's Claude table).

One line of `<session>.jsonl` (source `main`) or `<session>/subagents/agent-<id>.jsonl`
(source `subagent:<id>`) becomes:

* `user` → `user_message`, `assistant` → `assistant_message`, `tool_result` →
  `tool_result`, `thinking` → `thinking`, `summary` → `system_event` with
  `detail.subtype = "compaction"`, `system` → `system_event` (its `subtype` copied),
  any other type → `unknown`;
* an assistant line whose content holds `tool_use` blocks is split, as
  weakincentives 0.26+ does: one `assistant_message` for the other blocks (text and
  thinking, if any) then one `tool_use` per block; a user line holding
  `tool_result` blocks likewise gives a `user_message` for the rest (if any) and one
  `tool_result` per block, named after its `tool_use` when that was seen; the first
  `tool_use` of a message that holds nothing else keeps the message's id and usage in
  `detail.claude_message` (its model call's tokens have no other entry to go with);
* a line that is not JSON, or not an object, → `unknown` with `detail.parse_error`
  and the line as `raw`.

`detail.sdk_entry` is the parsed line (or block); `raw` is the line itself.
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.mappings._claude_blocks import ToolNames, content_blocks, is_block, with_content
from transcript_otel.mappings._entry import COMPACTION, MappedEntry
from transcript_otel.model.entries import EntryType
from transcript_otel.records.serialize import parse_json, safe_text

_TYPE_MAP: Final = {
    "user": EntryType.USER_MESSAGE,
    "assistant": EntryType.ASSISTANT_MESSAGE,
    "tool_result": EntryType.TOOL_RESULT,
    "thinking": EntryType.THINKING,
    "summary": EntryType.SYSTEM_EVENT,
    "system": EntryType.SYSTEM_EVENT,
}


# The key of a split-off `tool_use` detail that keeps its message's `{id, usage}`.
MESSAGE_OF_BLOCKS: Final = "claude_message"


def _unparsed(reason: str, raw: str, source: str) -> list[MappedEntry]:
    return [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason}, raw, source)]


class ClaudeTranscriptMapper:
    """Maps the lines of one run's transcript files; remembers tool names per source."""

    __slots__ = ("_tool_names",)

    def __init__(self) -> None:
        self._tool_names = ToolNames()

    def line(self, line: Any, source: str) -> list[MappedEntry]:
        if isinstance(line, bytes):
            line = line.decode("utf-8", "backslashreplace")
        if not isinstance(line, str):
            text = safe_text(line)[0]  # a repr that cannot raise
            return [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": "line is not text"}, text, source)]
        try:
            entry = parse_json(line)
        except (ValueError, RecursionError) as exc:
            return [
                MappedEntry(EntryType.UNKNOWN.value, {"parse_error": f"Invalid JSON: {exc}"}, line, source)
            ]
        if not isinstance(entry, dict):
            reason = f"a transcript line must be a JSON object, got {type(entry).__name__}"
            return _unparsed(reason, line, source)
        return self.parsed(entry, line, source)

    @property
    def tool_names(self) -> ToolNames:
        """The names of the calls with no result yet, by source."""
        return self._tool_names

    def parsed(self, entry: dict[str, Any], line: str, source: str) -> list[MappedEntry]:
        """`line(line, source)` for a line already parsed to `entry` (the session mapper's)."""
        native_type = entry.get("type")
        entry_type = (
            _TYPE_MAP.get(native_type, EntryType.UNKNOWN)
            if isinstance(native_type, str)
            else EntryType.UNKNOWN
        )
        blocks = content_blocks(entry) or []
        if entry_type is EntryType.ASSISTANT_MESSAGE and any(is_block(b, "tool_use") for b in blocks):
            return self._split_assistant(entry, blocks, line, source)
        if entry_type is EntryType.USER_MESSAGE and any(is_block(b, "tool_result") for b in blocks):
            return self._split_user(entry, blocks, line, source)
        detail: dict[str, Any] = {"sdk_entry": entry}
        if entry.get("type") == "summary":
            detail["subtype"] = COMPACTION
        elif entry.get("type") == "system" and isinstance(entry.get("subtype"), str):
            detail["subtype"] = entry["subtype"]
        return [MappedEntry(entry_type.value, detail, line, source)]

    def _split_assistant(
        self, entry: dict[str, Any], blocks: list[Any], line: str, source: str
    ) -> list[MappedEntry]:
        entries: list[MappedEntry] = []
        others = [block for block in blocks if not is_block(block, "tool_use")]
        if others:
            sdk_entry = with_content(entry, others)
            entries.append(
                MappedEntry(EntryType.ASSISTANT_MESSAGE.value, {"sdk_entry": sdk_entry}, line, source)
            )
        message = entry.get("message")
        for block in blocks:
            if is_block(block, "tool_use"):
                self._tool_names.remember(source, block)
                detail: dict[str, Any] = {"sdk_entry": block}
                if not entries and isinstance(message, dict):
                    # A message of tool calls only: its first call carries the message's id and
                    # usage, which no other entry does (the model call's tokens).
                    detail[MESSAGE_OF_BLOCKS] = {"id": message.get("id"), "usage": message.get("usage")}
                entries.append(MappedEntry(EntryType.TOOL_USE.value, detail, None, source))
        return entries

    def _split_user(
        self, entry: dict[str, Any], blocks: list[Any], line: str, source: str
    ) -> list[MappedEntry]:
        entries: list[MappedEntry] = []
        others = [block for block in blocks if not is_block(block, "tool_result")]
        if others:
            user_detail = {"sdk_entry": with_content(entry, others)}
            entries.append(MappedEntry(EntryType.USER_MESSAGE.value, user_detail, line, source))
        for block in blocks:
            if is_block(block, "tool_result"):
                detail = self._tool_names.result_detail(source, block)
                entries.append(
                    MappedEntry(EntryType.TOOL_RESULT.value, detail, None if others else line, source)
                )
        return entries
