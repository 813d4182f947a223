"""`opencode run --format json [--thinking]` lines to canonical entries.

OpenCode (1.18.33) prints one JSON object per line, `{type, timestamp (epoch ms), sessionID,
part}` (an `error` has `error` instead of `part`), only for its own session's parts (a `task`
subagent's are not printed). The adapter maps:

* `step_start` (a model step begins) → `system_event` `subtype: turn_started`: each step is one
  model call, one `chat` span;
* `text` (the whole part, once it ended) → `assistant_message` `{text}`; `reasoning` (printed
  with `--thinking` only) → `thinking` `{text}`;
* `tool_use` (a call already over: `state.status` `completed` or `error`) → `tool_use`
  `{tool_use_id, tool_name, input}` and `tool_result` `{tool_use_id, tool_name, status, output,
  exit_code, is_error}`, paired by the model's `callID`. `is_error` when the status is not
  `completed` or the command's `state.metadata.exit` is not 0: OpenCode says `completed` for
  a command that failed;
* `step_finish` → `token_usage` `{usage, turn_cost_usd, finish_reason}` (`step_usage`: the
  counts as the GenAI conventions count them, OpenCode's `cost` as it is);
* `error` → `error` `{exception: {type: error.name, message: error.data.message},
  status_code}`;
* any other type → `unknown`; a line that is not a JSON object with a string `type` →
  `unknown` with `detail.parse_error`. Blank lines are skipped.

Every detail keeps the event under `event` (a tool result: only what is its own); `raw` is the
line, on the first entry of it. The prompt and the model are not printed: `transcript-otel run`
reads them from the command line (`cli.opencode_command`). `timestamp_ns` is when the last line
that says it was printed (a line that says no time was printed after it).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.lookup import mapping_or_empty
from transcript_otel.mappings._entry import MappedEntry, line_entries, typed_event
from transcript_otel.mappings._split_usage import conventions_usage
from transcript_otel.model.entries import EntryType

NAME: Final = "opencode-json"
EVENT_TYPES: Final = frozenset({"step_start", "text", "reasoning", "tool_use", "step_finish", "error"})
_TEXT_PARTS: Final = {"text": EntryType.ASSISTANT_MESSAGE, "reasoning": EntryType.THINKING}
_NS_PER_MS: Final = 1_000_000
_MAX_EPOCH_MS: Final = 2**53  # past this a number is not a time JavaScript printed


def is_opencode_event(value: Any) -> bool:
    """Whether a parsed line is one of `opencode run --format json`'s: a known `type`, a
    `sessionID`, and its `part` (or, for `error`, its `error`)."""
    return (
        isinstance(value, dict)
        and value.get("type") in EVENT_TYPES
        and isinstance(value.get("sessionID"), str)
        and ("part" in value or "error" in value)
    )


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def step_usage(tokens: Any) -> dict[str, int]:
    """A `step_finish`'s `tokens` counted as the GenAI conventions count them. OpenCode's
    `input` leaves out what the cache gave and took (`cache.read`, `cache.write`) and its
    `output` the reasoning: the prompt the model got is their sum, its output with reasoning."""
    counts = tokens if isinstance(tokens, dict) else {}
    cache = mapping_or_empty(counts, "cache")
    return conventions_usage(
        _int(counts.get("input")),
        _int(counts.get("output")),
        _int(cache.get("read")),
        _int(cache.get("write")),
        _int(counts.get("reasoning")),
    )


def _state_failed(state: Mapping[str, Any]) -> bool:
    """Whether a tool part's `state` says its call failed: not `completed`, or a command that
    exited with another status than 0."""
    exit_code = _int(mapping_or_empty(state, "metadata").get("exit"))
    return state.get("status") != "completed" or (exit_code is not None and exit_code != 0)


class OpenCodeJsonAdapter:
    """Maps the lines of one `opencode run --format json` run; keeps its session id and the
    time its last line was printed."""

    name: Final = NAME

    def __init__(self) -> None:
        self.session_id: str | None = None
        self.timestamp_ns: int | None = None

    def feed(self, line: str) -> list[MappedEntry]:
        if not line.strip():
            return []
        event = typed_event(line, "an opencode event")
        if isinstance(event, MappedEntry):
            return [event]
        session_id = event.get("sessionID")
        if isinstance(session_id, str) and session_id:
            self.session_id = session_id
        self.timestamp_ns = _time_ns(event.get("timestamp")) or self.timestamp_ns
        return line_entries(line, _entries(event))

    def flush(self) -> list[MappedEntry]:
        return []


def _time_ns(timestamp: Any) -> int | None:
    if isinstance(timestamp, bool) or not isinstance(timestamp, int | float):
        return None
    if not math.isfinite(timestamp) or not 0 < timestamp < _MAX_EPOCH_MS:
        return None
    return int(timestamp) * _NS_PER_MS


def _entries(event: dict[str, Any]) -> list[tuple[EntryType, dict[str, Any]]]:
    kind = event["type"]
    part = mapping_or_empty(event, "part")
    if kind == "step_start" and part:
        return [(EntryType.SYSTEM_EVENT, {"event": event, "subtype": "turn_started"})]
    if kind in _TEXT_PARTS and isinstance(part.get("text"), str):
        return [(_TEXT_PARTS[kind], {"event": event, "text": part["text"]})]
    if kind == "tool_use" and isinstance(part.get("callID"), str) and mapping_or_empty(part, "state"):
        return _tool(event, part)
    if kind == "step_finish" and part:
        detail: dict[str, Any] = {"event": event, "usage": step_usage(part.get("tokens"))}
        cost = part.get("cost")
        if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost):
            detail["turn_cost_usd"] = cost
        if isinstance(part.get("reason"), str):
            detail["finish_reason"] = part["reason"]
        return [(EntryType.TOKEN_USAGE, detail)]
    if kind == "error" and isinstance(event.get("error"), dict):
        return [(EntryType.ERROR, _error(event))]
    return [(EntryType.UNKNOWN, {"event": event})]


def _tool(event: dict[str, Any], part: Mapping[str, Any]) -> list[tuple[EntryType, dict[str, Any]]]:
    state = mapping_or_empty(part, "state")
    call: dict[str, Any] = {"event": event, "tool_use_id": part["callID"]}
    if isinstance(part.get("tool"), str):
        call["tool_name"] = part["tool"]
    result = {key: value for key, value in call.items() if key != "event"}
    call["input"] = state.get("input")
    output = state.get("output")
    result["status"] = state.get("status")
    result["output"] = output if isinstance(output, str) else state.get("error")
    exit_code = _int(mapping_or_empty(state, "metadata").get("exit"))
    if exit_code is not None:
        result["exit_code"] = exit_code
    result["is_error"] = _state_failed(state)
    return [(EntryType.TOOL_USE, call), (EntryType.TOOL_RESULT, result)]


def _error(event: dict[str, Any]) -> dict[str, Any]:
    """OpenCode's error (`{name, data: {message, statusCode, ...}}`) as an exception: its name
    is the error's class (`APIError`), the message the API's."""
    error = mapping_or_empty(event, "error")
    data = mapping_or_empty(error, "data")
    name = error.get("name")
    message = data.get("message")
    detail: dict[str, Any] = {
        "event": event,
        "exception": {
            "type": name if isinstance(name, str) and name else "Error",
            "message": message if isinstance(message, str) else "",
        },
    }
    status = _int(data.get("statusCode"))
    if status is not None:
        detail["status_code"] = status
    return detail
