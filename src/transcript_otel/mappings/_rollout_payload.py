"""What a Codex rollout line's payload says: a call's tool name and input, a typed item's input
and output, the texts of content parts, and whether an output says its call failed.

Pure reading of the payload dicts `codex_rollout.CodexRolloutMapper` maps.
"""

from __future__ import annotations

import re
from typing import Any, Final

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.records.serialize import parse_json

COMMAND_TOOL: Final = "codex:command"
_SHELL_TOOLS: Final = frozenset({"exec_command", "shell", "shell_command", "local_shell", "container.exec"})
# Code mode's one tool (a model such as gpt-6-sol): JavaScript whose nested tools run as items.
CODE_MODE_TOOL: Final = "exec"
_EXIT_LINE: Final = re.compile(r"^Process exited with code (-?\d+)$", re.MULTILINE)
_ABORTED: Final = "aborted by user"  # the last line of a stopped call's output


def part_texts(parts: Any) -> list[str]:
    """A string, or the `text`s of a list of content parts."""
    if isinstance(parts, str):
        return [parts]
    found = [part.get("text") for part in parts if isinstance(part, dict)] if isinstance(parts, list) else []
    return [text for text in found if isinstance(text, str)]


def rollout_tool_name(payload: dict[str, Any]) -> str:
    kind, name = payload.get("type"), nonempty_text(payload.get("name"))
    if kind == "local_shell_call" or name in _SHELL_TOOLS:
        return COMMAND_TOOL
    if kind == "web_search_call":
        return "codex:web_search"
    if kind == "tool_search_call":
        return "tool_search"
    if name == "apply_patch":
        return "codex:file_change"
    if kind == "custom_tool_call" and name == CODE_MODE_TOOL:
        return "codex:code_mode"
    namespace = nonempty_text(payload.get("namespace")) or ""
    if name and namespace.startswith("mcp__"):
        return f"{namespace.removeprefix('mcp__')}:{name}"
    if name and name.startswith("mcp__") and "__" in name[5:]:
        server, _, tool = name[5:].partition("__")  # before 0.171: one `mcp__server__tool` name
        return f"{server}:{tool}"
    return name or "codex:tool"


def call_input(payload: dict[str, Any]) -> Any:
    for key in ("arguments", "input", "action"):
        value = payload.get(key)
        if isinstance(value, str) and key == "arguments":
            try:
                return parse_json(value)
            except (ValueError, RecursionError):
                return value
        if value is not None:
            return value
    return None


def payload_call_id(payload: dict[str, Any]) -> str | None:
    return nonempty_text(payload.get("call_id", payload.get("id")))


def dig(value: Any, *keys: str) -> Any:
    for key in keys:
        value = value.get(key) if isinstance(value, dict) else None
    return value


def typed_input(item: dict[str, Any]) -> Any:
    """What a typed tool item acted on (for a call the history did not show)."""
    for key in ("arguments", "command", "changes", "query", "action"):
        if item.get(key) is not None:
            return {key: item[key]}
    return None


def typed_output(item: dict[str, Any]) -> str:
    """A typed tool item's output: the command's, the MCP result's texts, the patch tool's."""
    output = item.get("aggregated_output")
    if isinstance(output, str):
        return output
    texts = (
        part_texts(dig(item, "result", "content"))
        or part_texts(item.get("content_items"))  # a dynamic tool's answer
        or part_texts(dig(item, "error", "message"))
    )
    if texts:
        return "\n".join(texts)
    return "".join(part for part in (item.get("stdout"), item.get("stderr")) if isinstance(part, str))


def ends_aborted(texts: list[str]) -> bool:
    """The call's output says the person stopped it (Esc in the terminal UI): Codex ends it so."""
    return bool(texts) and texts[-1].rstrip().rpartition("\n")[2] == _ABORTED


def exited_badly(texts: list[str]) -> bool:
    """A command's output says it exited with a code other than 0 (what a failed command's
    output says where no typed item tells its status: Codex 0.140)."""
    found = _EXIT_LINE.search("\n".join(texts))
    return found is not None and found.group(1) != "0"
