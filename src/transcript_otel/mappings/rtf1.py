"""RTF1 (`@@RALPH@@ {json}` lines) to canonical entries.

RTF1 is the line protocol of seed 002 (Ralph): an agent prints normal text, and any
line starting with `@@RALPH@@ ` carries one JSON event. The adapter maps:

* `text` by tag: `AI` → `assistant_message`, `THINK` → `thinking`, `USER`/`PROMPT` →
  `user_message`, `SYS` → `system_event`, `TOOL` → `tool_result` (tool text without a
  call), each with `detail = {"text", "tag"}`;
* `tool_start` → `tool_use` `{tool_use_id, tool_name, input}`;
* `tool_output` chunks are joined and kept until the call's `tool_end`, which gives
  one `tool_result` `{tool_use_id, tool_name, status, duration_ms, output, is_error}`
  (`is_error` when the status is `fail`);
* `usage` → `token_usage` `{usage}`; `meta` → `system_event` `{subtype: "meta", meta}`;
* a line that is not RTF1 → `assistant_message` `{text}` (blank lines are skipped);
* an `@@RALPH@@` line with invalid JSON or that breaks the schema → `unknown`
  `{parse_error, line}`: visible, never lost, never an exception.

`flush()` turns calls that never ended into `tool_result`s with status `unknown`.
`raw` is always the line.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry, assistant_line
from transcript_otel.model.entries import EntryType
from transcript_otel.records.serialize import parse_json

PREFIX: Final = "@@RALPH@@ "
TEXT_TAGS: Final = {
    "AI": EntryType.ASSISTANT_MESSAGE,
    "THINK": EntryType.THINKING,
    "USER": EntryType.USER_MESSAGE,
    "PROMPT": EntryType.USER_MESSAGE,
    "SYS": EntryType.SYSTEM_EVENT,
    "TOOL": EntryType.TOOL_RESULT,
}
TOOL_STATUSES: Final = frozenset({"ok", "fail", "unknown"})
# Output kept for the unfinished calls, all together; beyond it the rest is dropped and each
# result concerned says so.
_MAX_OUTPUT_CHARS: Final = 16 << 20
# Calls kept open at once; an agent that never ends its calls cannot grow this further.
_MAX_OPEN_CALLS: Final = 10_000


class SchemaError(ValueError):
    """An RTF1 event that breaks the schema; the message says which rule."""


@dataclass(slots=True)
class _OpenCall:
    name: str | None
    chunks: list[str] = field(default_factory=list)
    size: int = 0
    truncated: bool = False

    def add(self, text: str, budget: int) -> int:
        """Keep `text` if `budget` (characters left for all open calls) allows; what it used."""
        if len(text) > budget:
            self.truncated = True
            return 0
        self.chunks.append(text)
        self.size += len(text)
        return len(text)


def _text(value: Any, rule: str) -> str:
    if not isinstance(value, str):
        raise SchemaError(rule)
    return value


def _tool(event: dict[str, Any]) -> dict[str, Any]:
    tool = event.get("tool")
    if not isinstance(tool, dict):
        raise SchemaError(f"'{event['type']}' needs a 'tool' object")
    _text(tool.get("id"), f"'{event['type']}' needs a string 'tool.id'")
    return tool


class Rtf1Adapter:
    """Maps the lines of one run; holds only the output of calls still running."""

    name: Final = "rtf1"

    def __init__(self) -> None:
        self._calls: dict[str, _OpenCall] = {}
        self._held_chars = 0

    def feed(self, line: str) -> list[MappedEntry]:
        if not line.startswith(PREFIX):
            return assistant_line(line)
        try:
            event = parse_json(line[len(PREFIX) :])
        except (ValueError, RecursionError) as exc:
            return [_unknown(line, f"invalid JSON: {exc}")]
        try:
            return self._event(event, line)
        except SchemaError as exc:
            return [_unknown(line, f"invalid RTF1 event: {exc}")]

    def flush(self) -> list[MappedEntry]:
        """The calls that never ended, as results with status `unknown`."""
        calls, self._calls = self._calls, {}
        self._held_chars = 0
        return [self._result(call_id, call, {"status": "unknown"}, None) for call_id, call in calls.items()]

    def _event(self, event: Any, line: str) -> list[MappedEntry]:
        if not isinstance(event, dict):
            raise SchemaError(f"an event must be a JSON object, got {type(event).__name__}")
        kind = event.get("type")
        if kind == "text":
            tag = event.get("tag", "AI")
            entry_type = TEXT_TAGS.get(tag) if isinstance(tag, str) else None
            if entry_type is None:
                raise SchemaError(f"'text' needs a tag among {', '.join(TEXT_TAGS)}, got {tag!r}")
            text = _text(event.get("text"), "'text' needs a string 'text'")
            return [MappedEntry(entry_type.value, {"text": text, "tag": tag}, line)]
        if kind == "tool_start":
            tool = _tool(event)
            name = tool.get("name")
            _text(name, "'tool_start' needs a string 'tool.name'")
            tool_input = tool.get("input", {})
            if not isinstance(tool_input, dict):
                raise SchemaError("'tool.input' must be an object")
            if len(self._calls) < _MAX_OPEN_CALLS:
                self._calls.setdefault(tool["id"], _OpenCall(name))
            detail = {"tool_use_id": tool["id"], "tool_name": name, "input": tool_input}
            return [MappedEntry(EntryType.TOOL_USE.value, detail, line)]
        if kind == "tool_output":
            tool = _tool(event)
            text = _text(event.get("text"), "'tool_output' needs a string 'text'")
            call = self._calls.get(tool["id"])
            if call is None and len(self._calls) < _MAX_OPEN_CALLS:
                call = self._calls[tool["id"]] = _OpenCall(None)
            if call is not None:
                self._held_chars += call.add(text, _MAX_OUTPUT_CHARS - self._held_chars)
            return []
        if kind == "tool_end":
            tool = _tool(event)
            status = tool.get("status", "unknown")
            if not isinstance(status, str) or status not in TOOL_STATUSES:
                raise SchemaError(f"'tool.status' must be one of ok, fail, unknown, got {status!r}")
            duration = tool.get("duration_ms")
            if duration is not None and (not isinstance(duration, int) or isinstance(duration, bool)):
                raise SchemaError("'tool.duration_ms' must be an integer")
            call = self._calls.pop(tool["id"], None) or _OpenCall(None)
            self._held_chars -= call.size
            ended = {"status": status, **({"duration_ms": duration} if duration is not None else {})}
            return [self._result(tool["id"], call, ended, line)]
        if kind == "usage":
            usage = event.get("usage")
            if not isinstance(usage, dict):
                raise SchemaError("'usage' needs a 'usage' object")
            return [MappedEntry(EntryType.TOKEN_USAGE.value, {"usage": usage}, line)]
        if kind == "meta":
            meta = event.get("meta")
            if not isinstance(meta, dict):
                raise SchemaError("'meta' needs a 'meta' object")
            return [MappedEntry(EntryType.SYSTEM_EVENT.value, {"subtype": "meta", "meta": meta}, line)]
        raise SchemaError(f"unknown event type {kind!r}")

    @staticmethod
    def _result(call_id: str, call: _OpenCall, ended: dict[str, Any], line: str | None) -> MappedEntry:
        detail: dict[str, Any] = {"tool_use_id": call_id}
        if call.name is not None:
            detail["tool_name"] = call.name
        detail.update(ended)
        detail["output"] = "".join(call.chunks)
        if call.truncated:
            detail["output_truncated"] = True
        detail["is_error"] = ended["status"] == "fail"
        return MappedEntry(EntryType.TOOL_RESULT.value, detail, line)


def _unknown(line: str, reason: str) -> MappedEntry:
    return MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason, "line": line.rstrip("\r\n")}, line)
