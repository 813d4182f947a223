"""What the two Claude formats share: messages with `content` blocks, tool names per source.

A Claude Code transcript line and a stream-json message (what the CLI prints to the
Agent SDK) both carry `message.content`, a list of typed blocks; a `tool_result`
block names its call only by id, so the tool's name is remembered from its
`tool_use` block, per source, bounded.
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.mappings._entry import latest

# Tool names remembered per source for naming results; bounded like a transcript's tools.
_MAX_REMEMBERED_TOOLS: Final = 10_000


def content_blocks(entry: dict[str, Any]) -> list[Any] | None:
    """`entry["message"]["content"]` when it is a list of blocks."""
    message = entry.get("message")
    if isinstance(message, dict):
        content = message.get("content")
        if isinstance(content, list):
            return content
    return None


def type_of(value: Any) -> str | None:
    """A line's or block's `type` when it is a string: any other value names no type we know."""
    kind = value.get("type") if isinstance(value, dict) else None
    return kind if isinstance(kind, str) else None


def is_block(block: Any, block_type: str) -> bool:
    return isinstance(block, dict) and block.get("type") == block_type


def with_content(entry: dict[str, Any], blocks: list[Any]) -> dict[str, Any]:
    """A copy of `entry` whose message holds only `blocks` (the input is left untouched)."""
    message = entry["message"]
    return {**entry, "message": {**message, "content": blocks}}


class ToolNames:
    """The name of each tool call seen, per source, until its result names it."""

    __slots__ = ("_names",)

    def __init__(self) -> None:
        self._names: dict[str, dict[str, str]] = {}

    def remember(self, source: str, block: dict[str, Any]) -> None:
        call_id, name = block.get("id"), block.get("name")
        names = self._names.setdefault(source, {})
        if isinstance(call_id, str) and isinstance(name, str) and len(names) < _MAX_REMEMBERED_TOOLS:
            names[call_id] = name

    def open_calls(self, most: int) -> dict[str, list[list[str]]]:
        """The latest calls (`most`) of each source with no result yet: `[[call id, name], ...]`."""
        return {
            source: [[call_id, names[call_id]] for call_id in latest(names, most)]
            for source, names in self._names.items()
        }

    def go_on(self, calls: Any) -> bool:
        """Name the results of calls `open_calls` gave (made in a run before); False, and nothing
        changed, for what it did not give."""
        if not isinstance(calls, dict) or not all(
            isinstance(source, str)
            and isinstance(named, list)
            and all(
                isinstance(call, list) and len(call) == 2 and all(isinstance(part, str) for part in call)
                for call in named
            )
            for source, named in calls.items()
        ):
            return False
        self._names = {source: dict(named) for source, named in calls.items()}
        return True

    def result_detail(self, source: str, block: dict[str, Any]) -> dict[str, Any]:
        """`{"sdk_entry": block}`, with `tool_name` when its call was seen (then forgotten)."""
        detail: dict[str, Any] = {"sdk_entry": block}
        call_id = block.get("tool_use_id")
        names = self._names.get(source)
        name = names.pop(call_id, None) if names is not None and isinstance(call_id, str) else None
        if name is not None:
            detail["tool_name"] = name
        return detail
