"""`gemini -p PROMPT --output-format stream-json` lines to canonical entries.

Gemini CLI 0.61.0 prints one JSON event per line (docs/gemini-opencode-notes.md). The adapter maps:

* `init` → `system_event` (`subtype: init`: the turn begins; its `session_id` is the session
  id; its `model` is what was asked for, `auto` unless `--model` named one);
* `message` role `user` → `user_message` (`text`: the prompt);
* `message` role `assistant` with `delta: true`: one line per streamed chunk. Consecutive
  chunks are one `assistant_message` (`text` joined, `deltas` their count, `timestamp` the
  first one's), made when anything else comes (a tool call, the result) or at the end of the
  stream; a message without `delta` is one of its own;
* `tool_use` → `tool_use` (`tool_use_id` = `tool_id`, `tool_name`, `input` = `parameters`);
  `tool_result` → `tool_result` (`content`: its `output`, else its error's message; `is_error`
  when `status` is `error`), named after its `tool_use`. A command that exits non-zero is a
  `success` to the CLI (its exit status is only in the text the model got back): so it is here;
* `error` (the CLI's warnings, a blocked stream) → `system_event`, `subtype` its `severity`
  (`warning` or `error`; a fatal error ends in `result` instead);
* `result` → `token_usage` (the main model, its usage and the session's: `mappings.gemini_usage`)
  closing the turn, then `error` when its `status` is not `success` (`event.error.message`:
  the API's error);
* any other event → `unknown`; a line that is not a JSON object with a string `type` →
  `unknown` with `detail.parse_error`. Blank lines are skipped.

Not in the stream, so not in the transcript: thoughts (the CLI prints no line for them; their
token count is in `reasoning_output_tokens`), per-step usage, the model of each message, cost,
and the requests the CLI retried (a 429 it recovered from leaves no trace on stdout).

`detail.event` is the event as printed and `raw` its line. A joined assistant message has no
`raw`: a secret the model streamed across chunks would be cut across their lines, where
redaction (which reads one entry at a time) cannot see it whole; in `text` it is whole. The
chunks' lines are only that text in JSON framing, with their times.
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry, line_entries, typed_event
from transcript_otel.mappings.gemini_usage import stream_usage_detail
from transcript_otel.model.entries import EntryType

NAME: Final = "gemini-stream-json"
# Tool ids whose name is remembered for their result; beyond this many, the oldest go.
_MAX_TOOLS: Final = 10_000
# Past this many characters, the chunks held are written as one message and the rest follows.
MAX_HELD_CHARS: Final = 1 << 20
_SEVERITIES: Final = frozenset({"warning", "error"})


def starts_stream(kind: str | None, value: dict[str, Any]) -> bool:
    """Whether a stream whose first event is `value` (of type `kind`) is Gemini CLI's: `init`
    with a `session_id`, which no other stream `run` reads opens with."""
    return kind == "init" and "session_id" in value


class GeminiStreamJsonAdapter:
    """Maps the lines of one `gemini --output-format stream-json` run; holds the assistant chunks
    not yet joined and the tool names seen."""

    name: Final = NAME

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._asked_model: str | None = None
        self._chunks: list[str] = []
        self._first_chunk_at: Any = None
        self._held_chars = 0
        self._tool_names: dict[str, str] = {}

    def feed(self, line: str) -> list[MappedEntry]:
        if not line.strip():
            return []
        event = typed_event(line, "a stream-json event")
        if isinstance(event, MappedEntry):
            return [*self.flush(), event]
        if event["type"] == "message" and event.get("role") == "assistant" and event.get("delta") is True:
            return self._hold(event)
        return self.flush() + line_entries(line, self._event(event))

    def flush(self) -> list[MappedEntry]:
        """The assistant chunks held, as one message (none held: nothing)."""
        if not self._chunks:
            return []
        detail = {"text": "".join(self._chunks), "deltas": len(self._chunks)}
        if self._first_chunk_at is not None:
            detail["timestamp"] = self._first_chunk_at
        self._chunks, self._first_chunk_at, self._held_chars = [], None, 0
        return [MappedEntry(EntryType.ASSISTANT_MESSAGE.value, detail)]

    def _hold(self, event: dict[str, Any]) -> list[MappedEntry]:
        content = event.get("content")
        chunk = content if isinstance(content, str) else ""
        written = self.flush() if self._held_chars + len(chunk) > MAX_HELD_CHARS else []
        if not self._chunks:
            self._first_chunk_at = event.get("timestamp")
        self._chunks.append(chunk)
        self._held_chars += len(chunk)
        return written

    def _event(self, event: dict[str, Any]) -> list[tuple[EntryType, dict[str, Any]]]:
        kind = event["type"]
        if kind == "init":
            if isinstance(event.get("session_id"), str) and event["session_id"]:
                self.session_id = event["session_id"]
            model = event.get("model")
            self._asked_model = model if isinstance(model, str) and model != "auto" else None
            return [(EntryType.SYSTEM_EVENT, {"event": event, "subtype": "init"})]
        if kind == "message" and event.get("role") in ("user", "assistant"):
            content = event.get("content")
            entry_type = EntryType.USER_MESSAGE if event["role"] == "user" else EntryType.ASSISTANT_MESSAGE
            return [(entry_type, {"text": content if isinstance(content, str) else "", "event": event})]
        if kind == "tool_use":
            return [(EntryType.TOOL_USE, self._tool_use(event))]
        if kind == "tool_result":
            return [(EntryType.TOOL_RESULT, self._tool_result(event))]
        if kind == "error" and event.get("severity") in _SEVERITIES:
            return [(EntryType.SYSTEM_EVENT, {"event": event, "subtype": event["severity"]})]
        if kind == "result":
            usage = {"event": event, **stream_usage_detail(event.get("stats"), self._asked_model)}
            entries = [(EntryType.TOKEN_USAGE, usage)]
            if event.get("status") != "success":
                entries.append((EntryType.ERROR, {"event": event}))
            return entries
        return [(EntryType.UNKNOWN, {"event": event})]

    def _tool_use(self, event: dict[str, Any]) -> dict[str, Any]:
        detail: dict[str, Any] = {"event": event}
        call_id, name = event.get("tool_id"), event.get("tool_name")
        if isinstance(call_id, str):
            detail["tool_use_id"] = call_id
        if isinstance(name, str):
            detail["tool_name"] = name
            if isinstance(call_id, str):
                if len(self._tool_names) >= _MAX_TOOLS:
                    del self._tool_names[next(iter(self._tool_names))]
                self._tool_names[call_id] = name
        detail["input"] = event.get("parameters")
        return detail

    def _tool_result(self, event: dict[str, Any]) -> dict[str, Any]:
        detail: dict[str, Any] = {"event": event}
        call_id = event.get("tool_id")
        if isinstance(call_id, str):
            detail["tool_use_id"] = call_id
            name = self._tool_names.pop(call_id, None)
            if name is not None:
                detail["tool_name"] = name
        error = event.get("error")
        message = error.get("message") if isinstance(error, dict) else None
        output = event.get("output")
        detail["content"] = output if isinstance(output, str) else message if isinstance(message, str) else ""
        detail["is_error"] = event.get("status") == "error"
        return detail
