"""The words of a Claude Code `system` message (stream-json, claude-agent-sdk), for people.

Each subtype the CLI prints says something a reader wants in a few words: the model and tools
an `init` offers, a background task's progress, an API retry (as stdout and as the session
log tell it), how long a turn took. Subtypes not known here are
left to the caller (their fields as short JSON).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from transcript_otel.genai.lookup import nonempty_text


def _plural(count: int, word: str) -> str:
    return f"{count} {word}{'s' * (count != 1)}"


def _number(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _joined(*parts: str | None) -> str | None:
    found = [part for part in parts if part]
    return " · ".join(found) if found else None


def _init(message: Mapping[str, Any]) -> str | None:
    tools, servers = message.get("tools"), message.get("mcp_servers")
    model = nonempty_text(message.get("model"))
    return _joined(
        f"model {model}" if model else None,
        _plural(len(tools), "tool") if isinstance(tools, list) else None,
        _plural(len(servers), "MCP server") if isinstance(servers, list) and servers else None,
        f"cwd {message['cwd']}" if nonempty_text(message.get("cwd")) else None,
        f"permission mode {message['permissionMode']}"
        if nonempty_text(message.get("permissionMode"))
        else None,
    )


def _task(message: Mapping[str, Any]) -> str | None:
    kind = nonempty_text(message.get("subagent_type"))
    where = ", in the background" if message.get("is_backgrounded") is True else ""
    description = nonempty_text(message.get("description"))
    if description is None:
        return None
    return f"{description} ({kind}{where})" if kind else description


def _progress(message: Mapping[str, Any]) -> str | None:
    found = message.get("usage")
    usage: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    tokens, uses = _number(usage.get("total_tokens")), _number(usage.get("tool_uses"))
    last = nonempty_text(message.get("last_tool_name"))
    return _joined(
        nonempty_text(message.get("description")),
        _plural(tokens, "token") if tokens is not None else None,
        _plural(uses, "tool use") if uses is not None else None,
        f"last tool {last}" if last else None,
    )


def _updated(message: Mapping[str, Any]) -> str | None:
    patch = message.get("patch")
    return nonempty_text(patch.get("status")) if isinstance(patch, Mapping) else None


def _background(message: Mapping[str, Any]) -> str | None:
    tasks = message.get("tasks")
    if not isinstance(tasks, list):
        return None
    if not tasks:
        return "none running"
    named = [
        nonempty_text(task.get("description")) or nonempty_text(task.get("task_id")) or "?"
        for task in tasks
        if isinstance(task, Mapping)
    ]
    return f"{len(tasks)} running: {'; '.join(named)}"


def _retry(message: Mapping[str, Any]) -> str | None:
    attempt, most = _number(message.get("attempt")), _number(message.get("max_retries"))
    delay, status = _number(message.get("retry_delay_ms")), message.get("error_status")
    error = nonempty_text(message.get("error"))
    cause = " ".join(str(part) for part in (status, error) if part is not None and part != "")
    return _joined(
        f"attempt {attempt}" + (f" of {most}" if most is not None else "") if attempt is not None else None,
        f"in {delay} ms" if delay is not None else None,
        f"after {cause}" if cause else None,
    )


def _logged_retry(message: Mapping[str, Any]) -> str | None:
    """A session log's `api_error`: a request that failed and is tried again (stdout's `api_retry`)."""
    found = message.get("error")
    error: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
    attempt, most = _number(message.get("retryAttempt")), _number(message.get("maxRetries"))
    delay = _number(message.get("retryInMs"))
    cause = nonempty_text(error.get("formatted")) or nonempty_text(error.get("message"))
    return _joined(
        f"attempt {attempt}" + (f" of {most}" if most is not None else "") if attempt is not None else None,
        f"in {delay} ms" if delay is not None else None,
        f"after {cause}" if cause else None,
    )


def _turn_duration(message: Mapping[str, Any]) -> str | None:
    duration, messages = _number(message.get("durationMs")), _number(message.get("messageCount"))
    return _joined(
        f"{duration} ms" if duration is not None else None,
        _plural(messages, "message") if messages is not None else None,
    )


def _denied(message: Mapping[str, Any]) -> str | None:
    tool, said = nonempty_text(message.get("tool_name")), nonempty_text(message.get("message"))
    return f"{tool}: {said}" if tool and said else tool or said


def _thinking(message: Mapping[str, Any]) -> str | None:
    tokens = _number(message.get("estimated_tokens"))
    return f"about {_plural(tokens, 'thinking token')}" if tokens is not None else None


def _state(message: Mapping[str, Any]) -> str | None:
    return nonempty_text(message.get("state"))


_WORDS: Final[dict[str, Callable[[Mapping[str, Any]], str | None]]] = {
    "init": _init,
    "task_started": _task,
    "task_progress": _progress,
    "task_updated": _updated,
    "background_tasks_changed": _background,
    "api_retry": _retry,
    "api_error": _logged_retry,
    "turn_duration": _turn_duration,
    "permission_denied": _denied,
    "thinking_tokens": _thinking,
    "session_state_changed": _state,
}


def system_words(message: Mapping[str, Any]) -> str | None:
    """The words of a Claude `system` message of a subtype known here, else None."""
    subtype = message.get("subtype")
    words = _WORDS.get(subtype) if isinstance(subtype, str) else None
    return words(message) if words is not None else None
