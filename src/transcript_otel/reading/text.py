"""What an entry says, in words: the text people read in `show`, Markdown, HTML and devflow.

Each harness shapes `detail` its own way (Codex notifications, Claude transcript
lines and SDK messages, OpenAI-format chat messages, line adapters' `text`); these
functions look where each of them puts the words and fall back to compact JSON, so
no entry is ever shown empty. Pure and tolerant of any input.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.attributes import cost_usd, session_usage, tool_identity, usage_attributes
from transcript_otel.genai.lookup import mapping_or_empty
from transcript_otel.mappings.claude_stream import result_error_type
from transcript_otel.otel.attributes import (
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
)
from transcript_otel.reading.claude_system import system_words
from transcript_otel.reading.event_words import event_words
from transcript_otel.reading.tool_words import NO_OUTPUT, result_words

# The role each entry type plays, as the role-based transcript seed names them.
ROLES: Final = {
    "user_message": "user",
    "assistant_message": "assistant",
    "thinking": "assistant",
    "tool_use": "assistant",
    "tool_result": "tool",
    "system_event": "system",
    "token_usage": "system",
    "error": "system",
    "unknown": "system",
}

_MAX_EVENT_JSON: Final = 500
_TEXT_KEYS: Final = (
    "text",
    "thinking",
    "summary",
    "content",
    "contentItems",  # Codex bridged tool results
    "result",
    "output",
    "message",
    "error",
)


def compact_json(value: Any) -> str:
    """One line of JSON (`repr` for what JSON cannot hold)."""
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"), default=repr)
    except (TypeError, ValueError, RecursionError):
        return repr(value)


def usd_text(cost: float) -> str:
    """`$0.01566`: a cost in dollars, to the millionth, without trailing zeros."""
    return f"${cost:.6f}".rstrip("0").rstrip(".")


def text_of(value: Any) -> str | None:
    """The words in a value: a string, the texts of a list of parts or blocks, else None."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        parts = [part for part in (_block_text(item) for item in value) if part]
        return "\n".join(parts) if parts else None
    if isinstance(value, Mapping):
        return _block_text(value)
    return None


def _block_text(block: Any) -> str | None:
    if isinstance(block, str):
        return block
    if not isinstance(block, Mapping):
        return None
    kind = block.get("type")
    if kind == "tool_use":
        return f"{block.get('name', 'tool')}({compact_json(block.get('input'))})"
    for key in _TEXT_KEYS:
        if key in block and block[key] is not None:
            found = text_of(block[key])
            if found:
                return found
    return None


def _codex_item(detail: Mapping[str, Any]) -> Mapping[str, Any]:
    """Codex's item: an app-server notification's, or a `codex exec --json` event's."""
    return mapping_or_empty(mapping_or_empty(detail, "notification"), "item") or mapping_or_empty(
        mapping_or_empty(detail, "event"), "item"
    )


def _codex_item_text(item: Mapping[str, Any]) -> str | None:
    """A Codex item's words: app-server items (camelCase) and `codex exec --json` ones (snake_case)."""
    kind = item.get("type")
    if kind in ("commandExecution", "command_execution"):
        output = item.get("aggregatedOutput", item.get("aggregated_output"))
        return f"$ {item.get('command', '')}" + (f"\n{output.rstrip()}" if isinstance(output, str) else "")
    if kind in ("fileChange", "file_change"):
        changes = item.get("changes")
        if isinstance(changes, list):
            return "\n".join(
                f"{_change_kind(change.get('kind'))} {change.get('path', '?')}"
                for change in changes
                if isinstance(change, Mapping)
            )
    if kind in ("mcpToolCall", "mcp_tool_call"):
        call = f"{item.get('server', '')}.{item.get('tool', '')}({compact_json(item.get('arguments'))})"
        result = text_of(item.get("result"))
        return call + (f"\n{result}" if result else "")
    if kind in ("webSearch", "web_search"):
        return f"search: {item.get('query', '')}"
    if kind == "reasoning" and "text" not in item:  # app-server: summary parts (and content, if sent)
        parts = [text_of(part) for part in (*_list(item.get("summary")), *_list(item.get("content")))]
        return "\n".join(part for part in parts if part) or None
    return text_of(item)


def _list(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def _change_kind(kind: Any) -> str:
    """A file change's kind: `add` in `codex exec`, `{"type": "add"}` on the app-server."""
    if isinstance(kind, Mapping):
        kind = kind.get("type")
    return kind if isinstance(kind, str) and kind else "change"


def _codex_words(detail: Mapping[str, Any]) -> str | None:
    """What Codex said in a warning, an error or a diff: app-server notifications
    (`message`, `error.message` + `additionalDetails`, `diff`) and `codex exec` events
    (`message`, `error.message`, an `error` item's `message`)."""
    for said in (mapping_or_empty(detail, "notification"), mapping_or_empty(detail, "event")):
        error = mapping_or_empty(said, "error")
        words = [text_of(error.get("message")), text_of(error.get("additionalDetails"))]
        words += [text_of(said.get("message")), text_of(mapping_or_empty(said, "item").get("message"))]
        words += [text_of(said.get("thread_id"))]  # `codex exec`'s `thread.started`
        said_words = [word for word in words if word]
        if said_words:  # the message, with what Codex added to it in parentheses
            head, *more = said_words
            return f"{head} ({'; '.join(more)})" if more else head
        diff = said.get("diff")
        if isinstance(diff, str) and diff:
            return diff
    return None


def _usage_text(detail: Mapping[str, Any]) -> str | None:
    """`tokens: 2000 in, 10 out, 0 cached` (what one report adds), the session's totals where
    that is all it tells (a Claude session log's `cost-state`), and the cost it adds."""
    usage, session = usage_attributes(detail), session_usage(detail)
    cost = cost_usd(detail)
    words = [_tokens_text("tokens", usage), _tokens_text("session total", session) if not usage else None]
    words.append(usd_text(cost) if cost else None)
    said = [word for word in words if word]
    if not said and mapping_or_empty(detail, "sdk_entry").get("type") == "cost-state":
        return "session total: no tokens, no cost"  # the session's model calls all failed
    return " · ".join(said) if said else None


def _tokens_text(label: str, usage: Mapping[str, int]) -> str | None:
    if not usage:
        return None
    words = [
        f"{usage[GEN_AI_USAGE_INPUT_TOKENS]} in" if GEN_AI_USAGE_INPUT_TOKENS in usage else "",
        f"{usage[GEN_AI_USAGE_OUTPUT_TOKENS]} out" if GEN_AI_USAGE_OUTPUT_TOKENS in usage else "",
        f"{usage[GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS]} cached"
        if GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS in usage
        else "",
        f"{usage[GEN_AI_USAGE_REASONING_OUTPUT_TOKENS]} reasoning"
        if GEN_AI_USAGE_REASONING_OUTPUT_TOKENS in usage
        else "",
    ]
    return f"{label}: " + ", ".join(word for word in words if word)


def _error_text(detail: Mapping[str, Any]) -> str | None:
    exception = mapping_or_empty(detail, "exception")
    if exception:
        causes = exception.get("causes")
        chain = [f"{exception.get('type', 'Exception')}: {exception.get('message', '')}"]
        if isinstance(causes, list):
            chain += [
                f"caused by {c.get('type', '?')}: {c.get('message', '')}"
                for c in causes
                if isinstance(c, Mapping)
            ]
        return "\n".join(chain)
    turn_error = mapping_or_empty(mapping_or_empty(mapping_or_empty(detail, "notification"), "turn"), "error")
    if turn_error:
        return text_of(turn_error.get("message")) or compact_json(turn_error)
    codex_said = _codex_words(detail)
    if codex_said:
        return codex_said
    entry = mapping_or_empty(detail, "sdk_entry")
    if entry.get("type") == "result":
        return _result_error_text(entry)
    return None


def _result_error_text(result: Mapping[str, Any]) -> str:
    """A Claude `result` that reports an error: `error_max_turns: Reached maximum number of
    turns (1)`, `api_error 500: API Error: 500 ...` (API errors come as subtype `success`)."""
    label = result_error_type(result)
    status = result.get("api_error_status")
    if label == "api_error" and status is not None:
        label += f" {status}"
    errors = result.get("errors")
    words = text_of(result.get("result")) or (text_of(errors) if isinstance(errors, list) else None)
    words = words or text_of(result.get("terminal_reason"))
    return f"{label}: {words}" if words else label


def entry_text(entry_type: str, detail: Any) -> str:
    """The words of one entry; compact JSON of `detail` when it has none we know."""
    if not isinstance(detail, Mapping):
        return "" if detail is None else compact_json(detail)
    if entry_type == "token_usage":
        found = _usage_text(detail)
        if found:
            return found
    if entry_type == "error":
        found = _error_text(detail)
        if found:
            return found
    if entry_type == "unknown" and isinstance(detail.get("parse_error"), str):
        return f"(unreadable: {detail['parse_error']})"
    if entry_type == "system_event" and isinstance(detail.get("subtype"), str):
        words = _system_words(detail)
        subtype = detail["subtype"].replace("_", " ")
        return f"{subtype}: {words}" if words else subtype
    notification = mapping_or_empty(detail, "notification")
    item = _codex_item(detail)
    candidates: list[Any] = [detail.get("text")]
    if entry_type == "tool_use":
        candidates += [_tool_call_text(detail, notification)]
    if entry_type == "tool_result":
        candidates += [text_of(detail.get("content")), text_of(mapping_or_empty(detail, "result"))]
    if item:
        candidates.append(_codex_item_text(item))
    entry = mapping_or_empty(detail, "sdk_entry")
    if entry:
        message = mapping_or_empty(entry, "message")
        candidates += [text_of(message.get("content")), _block_text(entry)]
    chat = mapping_or_empty(detail, "message")
    if chat:
        candidates.append(text_of(chat.get("content")))
    for candidate in candidates:
        if isinstance(candidate, str) and candidate:
            return candidate
    return compact_json(detail)


def _system_words(detail: Mapping[str, Any]) -> str | None:
    """The words of a system event, else its fields in short JSON (a session's model and
    tools, a run's metadata); None where only the raw notification would be left."""
    ours = event_words(detail)
    if ours is not None:
        return ours
    entry = mapping_or_empty(detail, "sdk_entry")
    if entry.get("type") == "system":
        claude_said = system_words(entry)
        if claude_said:
            return claude_said
    item = mapping_or_empty(mapping_or_empty(detail, "notification"), "item")
    said = mapping_or_empty(entry, "message").get("content")  # the CLI's own words (an API error's text)
    for value in (detail.get("text"), entry.get("summary"), entry.get("content"), item.get("text"), said):
        found = text_of(value)
        if found:
            return found
    codex_said = _codex_words(detail)
    if codex_said:
        return codex_said
    fields = entry or {
        key: value for key, value in detail.items() if key not in ("subtype", "notification", "event")
    }
    shown = {
        key: value for key, value in fields.items() if key not in ("type", "subtype", "uuid", "session_id")
    }
    return compact_json(shown)[:_MAX_EVENT_JSON] if shown else None


def _tool_call_text(detail: Mapping[str, Any], notification: Mapping[str, Any]) -> str | None:
    """`name(arguments)` of a tool call, where the detail names both."""
    _, name = tool_identity(detail)
    if "input" in detail:
        arguments = detail["input"]
    elif "arguments" in notification:
        arguments = notification["arguments"]
    else:
        return None
    return f"{name or 'tool'}({compact_json(arguments)})"


def shown_tool_input(detail: Any) -> Any:
    """The arguments of a `tool_use` entry as people are shown them, wherever its harness puts
    them (None if unknown): a Codex item's one field that says what it does (`command`, not
    its `cwd`). Span content reads its own (`genai.pieces.call_arguments`)."""
    if not isinstance(detail, Mapping):
        return None
    if "input" in detail:
        return detail["input"]
    notification = mapping_or_empty(detail, "notification")
    if "arguments" in notification:
        return notification["arguments"]
    item = _codex_item(detail)
    for key in ("arguments", "command", "changes", "query"):
        if key in item:
            return {key: item[key]}
    entry = mapping_or_empty(detail, "sdk_entry")
    return entry.get("input")


def input_words(arguments: Any) -> str:
    """A call's input for people: one string (a Codex patch, a code-mode script) as it is, not
    as a JSON string literal; anything else as one line of JSON."""
    return arguments if isinstance(arguments, str) else compact_json(arguments)


def shown_tool_output(detail: Mapping[str, Any]) -> str:
    """A tool result's output as people read it, where each harness puts it (`entry_text` for
    the rest): always words. Span content keeps a structure as it is
    (`genai.pieces.call_response`)."""
    text = detail.get("text")
    if isinstance(text, str) and text:
        return text
    output = detail.get("output")  # line adapters
    if isinstance(output, str):
        return output
    item = _codex_item(detail)
    output = item.get("aggregatedOutput", item.get("aggregated_output"))
    if item.get("type") in ("commandExecution", "command_execution") and isinstance(output, str):
        return output or NO_OUTPUT  # the command itself is the call's input
    if item.get("type") in ("mcpToolCall", "mcp_tool_call"):
        found = text_of(item.get("result")) or text_of(item.get("error"))
        if found:
            return found
    items = mapping_or_empty(detail, "result").get("contentItems")  # Codex bridged tools
    found = text_of(items) or result_words(detail)
    if found:
        return found
    return entry_text("tool_result", detail)


def assistant_parts(detail: Mapping[str, Any]) -> tuple[str | None, str]:
    """(thinking, text) of an assistant message: a Claude message's blocks apart, else its words."""
    content = mapping_or_empty(mapping_or_empty(detail, "sdk_entry"), "message").get("content")
    if not isinstance(content, list):
        return None, entry_text("assistant_message", detail)
    thoughts: list[str] = []
    texts: list[str] = []
    for block in content:
        if isinstance(block, str):
            texts.append(block)
        elif isinstance(block, Mapping):
            kind = block.get("type")
            if kind == "thinking":
                thoughts.append(text_of(block.get("thinking")) or "")
            elif kind == "redacted_thinking":
                thoughts.append("(redacted)")
            elif kind == "text":
                texts.append(text_of(block.get("text")) or "")
    return ("\n".join(thoughts) if thoughts else None), "\n".join(texts)
