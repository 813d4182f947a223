"""Facts about model responses and agents, read from an entry's `detail` for the spans.

A run's arguments rarely say which model answered; the entries often do. These
readers find, where an adapter writes them, what the GenAI span attributes need:
the response's model, id and finish reason (`response_facts`, `finish_reason`), the
model a Claude session starts with (`init_model`), a Claude subagent's real agent id
(`subagent_agent_id`) and the final answer of a Claude turn (`final_answer`). Like
`genai.attributes`, they are pure and tolerant of any input: where `detail` does not say, they
return None (or `ResponseFacts()`), never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from transcript_otel.genai.lookup import is_mapping, mapping_at
from transcript_otel.records.serialize import safe_text

# Claude Code's own messages (an API error's text, ...) name this model: no model answered.
_SYNTHETIC_MODEL: Final = "<synthetic>"

# Anthropic's `stop_reason` and OpenAI's `finish_reason` as the conventions' finish reasons
# (`stop`, `length`, `content_filter`, `tool_call`, `error`); any other value is kept as it is.
_FINISH_REASONS: Final = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_use": "tool_call",
    "tool_calls": "tool_call",
    "function_call": "tool_call",
    "max_tokens": "length",
    "refusal": "content_filter",
}
_ERROR_FINISH_REASON: Final = "error"

# stream-json `system` subtype of a subagent's start: its task id is the agent id.
_TASK_STARTED: Final = "task_started"
_TASK_NOTIFICATION: Final = "task_notification"


class ResponseFacts(NamedTuple):
    """What an entry says about the model response it comes from; None where it does not say."""

    model: str | None = None
    response_id: str | None = None
    finish_reason: str | None = None  # the conventions' value (see `finish_reason`)


class SubagentIdentity(NamedTuple):
    """A subagent's real agent id, and the id of the `Task`/`Agent` call that launched it
    (where the entry tells it: stream-json sources name subagents by that call id)."""

    call_id: str | None
    agent_id: str


def _text(container: Any, key: str) -> str | None:
    """The non-empty string under `key`, made encodable (OTLP cannot carry lone surrogates)."""
    value = container.get(key) if is_mapping(container) else None
    return safe_text(value)[0] if isinstance(value, str) and value else None


def _claude_result(detail: Any) -> Mapping[str, Any] | None:
    """A Claude `result` message (a `token_usage` entry's, or a `system_event`'s without usage)."""
    entry = mapping_at(detail, "sdk_entry")
    return entry if entry is not None and entry.get("type") == "result" else None


def finish_reason(stop_reason: Any) -> str | None:
    """The conventions' finish reason for a harness's stop reason: `end_turn`/`stop_sequence` →
    `stop`, `tool_use` → `tool_call`, `max_tokens` → `length`, `refusal` → `content_filter`
    (OpenAI's `tool_calls`/`function_call` → `tool_call`); any other string as it is."""
    if not isinstance(stop_reason, str) or not stop_reason:
        return None
    return _FINISH_REASONS.get(stop_reason) or safe_text(stop_reason)[0]


def _assistant_facts(detail: Any) -> ResponseFacts:
    """Claude (SDK, stream-json, transcript files): `sdk_entry.message.{model, id, stop_reason}`."""
    message = mapping_at(mapping_at(detail, "sdk_entry"), "message")
    if message is None or message.get("model") == _SYNTHETIC_MODEL:
        return ResponseFacts()  # Claude Code's own words (an API error's text): no model answered
    return ResponseFacts(
        _text(message, "model"), _text(message, "id"), finish_reason(message.get("stop_reason"))
    )


def _usage_facts(detail: Any) -> ResponseFacts:
    """Claude's `result`: the turn's stop reason (`error` when the result reports a failure: its
    `stop_reason` is then the CLI's own message's or the last call's) and the model its
    `modelUsage` names, where it names one; WINK 0.24 chat adapters:
    `detail.model`; RTF1: `detail.usage.model`. Codex reports no model in its entries."""
    result = _claude_result(detail)
    if result is not None:
        failed = result.get("is_error") is True
        reason = _ERROR_FINISH_REASON if failed else finish_reason(result.get("stop_reason"))
        return ResponseFacts(model=_only_model(result.get("modelUsage")), finish_reason=reason)
    return ResponseFacts(model=_text(detail, "model") or _text(mapping_at(detail, "usage"), "model"))


def _only_model(model_usage: Any) -> str | None:
    """The one model a Claude `result`'s `modelUsage` names (the session's usage by model); None
    where it names several (a subagent on another model: which one answered is not said)."""
    if isinstance(model_usage, Mapping) and len(model_usage) == 1:
        (model,) = model_usage
        if isinstance(model, str) and model and model != _SYNTHETIC_MODEL:
            return model
    return None


def response_facts(entry_type: Any, detail: Any) -> ResponseFacts:
    """The model, response id and finish reason an `assistant_message` or `token_usage` entry
    tells (see `_assistant_facts`, `_usage_facts`); `ResponseFacts()` for any other entry."""
    if entry_type == "assistant_message":
        return _assistant_facts(detail)
    if entry_type == "token_usage":
        return _usage_facts(detail)
    return ResponseFacts()


def init_model(detail: Any) -> str | None:
    """The model a Claude session starts with: a `system_event`'s `init` message's `sdk_entry.model`."""
    entry = mapping_at(detail, "sdk_entry")
    if entry is None or entry.get("type") != "system" or entry.get("subtype") != "init":
        return None
    model = _text(entry, "model")
    return model if model != _SYNTHETIC_MODEL else None


def subagent_agent_id(detail: Any) -> SubagentIdentity | None:
    """A Claude subagent's real agent id: from stream-json's `system` `task_started`
    (`sdk_entry.{tool_use_id, task_id}`, an agent task), from a subagent message's
    `sdk_entry.{parent_tool_use_id, agent_id}`, or a transcript file's `sdk_entry.agentId`."""
    entry = mapping_at(detail, "sdk_entry")
    if entry is None:
        return None
    if entry.get("type") == "system" and entry.get("subtype") == _TASK_STARTED:
        task_type = entry.get("task_type")
        agent_task = task_type is None or (isinstance(task_type, str) and "agent" in task_type)
        call_id, task_id = _text(entry, "tool_use_id"), _text(entry, "task_id")
        return SubagentIdentity(call_id, task_id) if agent_task and call_id and task_id else None
    agent_id = _text(entry, "agent_id")
    if agent_id is not None:
        return SubagentIdentity(_text(entry, "parent_tool_use_id"), agent_id)
    agent_id = _text(entry, "agentId")
    return SubagentIdentity(None, agent_id) if agent_id is not None else None


def final_answer(detail: Any) -> str | None:
    """A Claude turn's final answer: its `result` message's `result` text (not when the result
    reports a failure: the text is then the error's)."""
    result = _claude_result(detail)
    if result is None or result.get("is_error") is True:
        return None
    return _text(result, "result")


def task_notification(detail: Any) -> tuple[str | None, str] | None:
    """What Claude Code tells the model as a background task ends (stream-json's `system`
    `task_notification`): the call that launched the task, and the task's summary."""
    entry = mapping_at(detail, "sdk_entry")
    if entry is None or entry.get("type") != "system" or entry.get("subtype") != _TASK_NOTIFICATION:
        return None
    summary = _text(entry, "summary")
    return (_text(entry, "tool_use_id"), summary) if summary is not None else None
