"""Role-based chat messages (the OpenAI chat format) to canonical entries.

Request/response adapters keep the conversation as a list of messages they send
again with every request (seed 001's role-based capture). One message becomes:

* `system` and `user` (and `developer`) → `user_message` (the specification's
  `user_message` is what is delivered to the model, system prompts included);
* `assistant` → `assistant_message` when it has content (or neither content nor
  calls), then one `tool_use` per entry of `tool_calls`
  (`{tool_use_id, tool_name, input}`; `input` is the parsed `arguments`, or the text
  with `input_parse_error` when they are not JSON); a legacy `function_call` likewise;
* `tool` (and the legacy `function`) → `tool_result` `{tool_use_id, tool_name,
  content}`, named after its call when that was seen;
* any other role → `unknown`; a message that is not an object → `unknown` with
  `detail.parse_error`.

`detail` keeps the message (`message`) and, for readability, its text (`text`) when
the content is a string or a list of text parts; `raw` is the message as JSON.
`ChatMapper.new_messages(messages)` maps only the messages it has not seen yet, for
a list that grows with every round.

A response's `usage` (Chat Completions `prompt_tokens`/`completion_tokens`, or the
Responses API's `input_tokens`/`output_tokens`, with their `*_details`) becomes a
`token_usage` entry (`usage_entry`): `detail.usage` holds the counts under the
canonical names, `detail.provider_usage` the object as the provider sent it.
"""

from __future__ import annotations

import json
from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.model.entries import EntryType, RawJson

_PROMPT_ROLES: Final = frozenset({"system", "user", "developer"})
_RESULT_ROLES: Final = frozenset({"tool", "function"})
_MAX_REMEMBERED_CALLS: Final = 10_000


def content_text(content: Any) -> str | None:
    """The text of a message's content: a string, or the text parts of a list joined."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [part.get("text") for part in content if isinstance(part, dict)]
        texts = [part for part in parts if isinstance(part, str)]
        return "\n".join(texts) if texts else None
    return None


def _arguments(arguments: Any) -> dict[str, Any]:
    if not isinstance(arguments, str):
        return {"input": arguments}
    try:
        return {"input": json.loads(arguments)}
    except (ValueError, RecursionError) as exc:
        return {"input": arguments, "input_parse_error": f"arguments are not JSON: {exc}"}


class ChatMapper:
    """Maps the messages of one conversation; remembers tool names by call id, bounded."""

    __slots__ = ("_seen", "_tool_names")

    def __init__(self) -> None:
        self._seen = 0
        self._tool_names: dict[str, str] = {}

    def new_messages(self, messages: Any) -> list[MappedEntry]:
        """The entries of the messages after those seen by earlier calls (a list that grows)."""
        return [entry for message in self.unseen(messages) for entry in self.message(message)]

    def unseen(self, messages: Any) -> list[Any]:
        """The messages after those seen by earlier calls, which are now seen."""
        if not isinstance(messages, list):
            return []
        if len(messages) < self._seen:  # a new conversation in the same list object
            self._seen = 0
        fresh, self._seen = messages[self._seen :], len(messages)
        return fresh

    def message(self, message: Any) -> list[MappedEntry]:
        if not isinstance(message, dict):
            reason = f"a chat message must be an object, got {type(message).__name__}"
            return [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason}, RawJson(message))]
        raw = RawJson(message)
        role = message.get("role") if isinstance(message.get("role"), str) else None
        detail: dict[str, Any] = {"message": message}
        text = content_text(message.get("content"))
        if text is not None:
            detail["text"] = text
        if role in _PROMPT_ROLES:
            return [MappedEntry(EntryType.USER_MESSAGE.value, detail, raw)]
        if role == "assistant":
            return self._assistant(message, detail, text, raw)
        if role in _RESULT_ROLES:
            return [MappedEntry(EntryType.TOOL_RESULT.value, self._result_detail(message, detail), raw)]
        return [MappedEntry(EntryType.UNKNOWN.value, detail, raw)]

    def _assistant(
        self, message: dict[str, Any], detail: dict[str, Any], text: str | None, raw: RawJson
    ) -> list[MappedEntry]:
        calls = message.get("tool_calls")
        calls = [call for call in calls if isinstance(call, dict)] if isinstance(calls, list) else []
        function_call = message.get("function_call")
        if isinstance(function_call, dict):
            calls.append({"id": None, "function": function_call})
        entries: list[MappedEntry] = []
        if text or not calls:
            entries.append(MappedEntry(EntryType.ASSISTANT_MESSAGE.value, detail, raw))
        for call in calls:
            function = call.get("function")
            function = function if isinstance(function, dict) else {}
            call_id, name = call.get("id"), function.get("name")
            use: dict[str, Any] = {"tool_call": call}
            if isinstance(call_id, str):
                use["tool_use_id"] = call_id
                if isinstance(name, str) and len(self._tool_names) < _MAX_REMEMBERED_CALLS:
                    self._tool_names[call_id] = name
            if isinstance(name, str):
                use["tool_name"] = name
            use.update(_arguments(function.get("arguments")))
            entries.append(MappedEntry(EntryType.TOOL_USE.value, use, None if entries else raw))
        return entries

    def _result_detail(self, message: dict[str, Any], detail: dict[str, Any]) -> dict[str, Any]:
        call_id = message.get("tool_call_id")
        result = {**detail, "content": message.get("content")}
        if isinstance(call_id, str):
            result["tool_use_id"] = call_id
            name = self._tool_names.pop(call_id, None)
            if name is not None:
                result["tool_name"] = name
        elif isinstance(message.get("name"), str):  # the legacy `function` role names its function
            result["tool_name"] = message["name"]
        return result


# Canonical count name → where each API puts it (Chat Completions, then the Responses API).
_USAGE_FIELDS: Final = {
    "input_tokens": (("prompt_tokens",), ("input_tokens",)),
    "output_tokens": (("completion_tokens",), ("output_tokens",)),
    "total_tokens": (("total_tokens",),),
    "cached_input_tokens": (
        ("prompt_tokens_details", "cached_tokens"),
        ("input_tokens_details", "cached_tokens"),
    ),
    "reasoning_output_tokens": (
        ("completion_tokens_details", "reasoning_tokens"),
        ("output_tokens_details", "reasoning_tokens"),
    ),
}


def _count(usage: dict[str, Any], path: tuple[str, ...]) -> int | None:
    value: Any = usage
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def usage_entry(usage: Any, *, model: str | None = None) -> MappedEntry:
    """A response's `usage` object as a `token_usage` entry (an `unknown` one if it is not an object)."""
    if not isinstance(usage, dict):
        reason = f"usage must be an object, got {type(usage).__name__}"
        return MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason}, RawJson(usage))
    counts: dict[str, int] = {}
    for name, paths in _USAGE_FIELDS.items():
        found = (_count(usage, path) for path in paths)
        value = next((count for count in found if count is not None), None)
        if value is not None:
            counts[name] = value
    detail: dict[str, Any] = {"usage": counts, "provider_usage": usage}
    if model is not None:
        detail["model"] = model
    return MappedEntry(EntryType.TOKEN_USAGE.value, detail, RawJson(usage))
