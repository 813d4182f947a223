"""What a tool's result says in words, where the harness gave no output text to show.

A result without output text says what it did: the tools a tool search found, the query a
web search ran, what a wait for subagents heard, or that the call printed nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.lookup import mapping_or_empty

NO_OUTPUT: Final = "(no output)"


def _found_tools(output: list[Any]) -> str:
    """Codex `tool_search` output: namespaces (an MCP server) of tools, or tools."""
    named: list[str] = []
    for found in output:
        if not isinstance(found, Mapping):
            continue
        name = str(found.get("name", "?"))
        tools = found.get("tools")
        if isinstance(tools, list):
            inner = ", ".join(str(tool.get("name", "?")) for tool in tools if isinstance(tool, Mapping))
            named.append(f"{name} ({inner})" if inner else name)
        else:
            named.append(name)
    return f"found: {'; '.join(named)}" if named else "found no tools"


def _web_search(item: Mapping[str, Any]) -> str | None:
    action = mapping_or_empty(item, "action")
    kind = action.get("type")
    if kind == "open_page" and isinstance(action.get("url"), str):
        return f"opened {action['url']}"
    if kind == "find_in_page" and isinstance(action.get("pattern"), str):
        return f"looked for {action['pattern']!r} in {action.get('url', 'the page')}"
    query = action.get("query", item.get("query"))
    return f"searched: {query}" if isinstance(query, str) and query else None


def _waited(item: Mapping[str, Any]) -> str:
    states = mapping_or_empty(item, "agents_states")
    heard = [
        f"{agent}: {state.get('status', '?') if isinstance(state, Mapping) else state}"
        for agent, state in states.items()
    ]
    status = item.get("status")
    return f"{item.get('tool', 'wait')} {status}" + (f" ({'; '.join(heard)})" if heard else "")


def _empty(detail: Mapping[str, Any]) -> bool:
    """Whether the places a harness puts output hold nothing (an empty string or list)."""
    claude = mapping_or_empty(detail, "sdk_entry").get("content", detail.get("content"))
    told = [detail.get("text"), detail.get("output"), claude]
    present = [value for value in told if value is not None]
    return bool(present) and all(value in ("", []) for value in present)


def result_words(detail: Mapping[str, Any]) -> str | None:
    """The words of a result that has no output text of its own, else None."""
    output = detail.get("output")
    if detail.get("tool_name") == "tool_search" and isinstance(output, list):
        return _found_tools(output)
    item = mapping_or_empty(detail, "item")
    kind = item.get("type")
    if kind in ("WebSearch", "web_search", "webSearch"):
        searched = _web_search(item)
        if searched:
            return searched
    if kind == "CollabAgentToolCall":
        return _waited(item)
    return NO_OUTPUT if _empty(detail) else None
