"""Reading the entries an `AgentRun` places, tolerant of any shape of their details.

A harness's entries carry what it printed (`sdk_entry`, a Codex `notification` or `event`):
these readers take the few things the span tree needs from them (a tool's arguments, an
error's type) and answer None or a stand-in for anything else, never raising.
`starts_new_turn()` tells the entries that begin a turn, `message_of()` an error's text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_stream import result_error_type
from transcript_otel.model.entries import MAIN_SOURCE, EntryType

ENTRY_TOOL_USE: Final = EntryType.TOOL_USE.value
ENTRY_TOOL_RESULT: Final = EntryType.TOOL_RESULT.value
ENTRY_SYSTEM_EVENT: Final = EntryType.SYSTEM_EVENT.value
ENTRY_ASSISTANT_MESSAGE: Final = EntryType.ASSISTANT_MESSAGE.value
ENTRY_TOKEN_USAGE: Final = EntryType.TOKEN_USAGE.value
ENTRY_USER_MESSAGE: Final = EntryType.USER_MESSAGE.value
ENTRY_ERROR: Final = EntryType.ERROR.value


# -- reading details (tolerant of any shape) ---------------------------------------------


def launcher_arguments(detail: Any) -> Any:
    """The arguments a subagent launcher's prompt and type are read from: a Claude `tool_use`
    block's `input` (`sdk_entry`), else a WINK-bridged call's `arguments`; None elsewhere.
    Narrower than `genai.pieces.call_arguments`, which reads every harness's for span content."""
    if isinstance(detail, Mapping):
        entry = detail.get("sdk_entry")
        if isinstance(entry, Mapping):
            return entry.get("input")
        notification = detail.get("notification")
        if isinstance(notification, Mapping):
            return notification.get("arguments")
    return None


def says(detail: Any, flag: str) -> bool:
    """Whether a mapping set `flag` in an entry's detail."""
    return isinstance(detail, Mapping) and detail.get(flag) is True


# System events a harness prints as each of its turns begins: Claude Code's `system/init`,
# `codex exec`'s `turn.started`.
_TURN_STARTS: Final = frozenset({"init", "turn_started"})


def starts_new_turn(entry: MappedEntry) -> bool:
    """A main system event that begins a turn (`_TURN_STARTS`): a `turn_boundary()`."""
    detail = entry.detail
    return (
        entry.source == MAIN_SOURCE
        and entry.entry_type == ENTRY_SYSTEM_EVENT
        and isinstance(detail, Mapping)
        and detail.get("subtype") in _TURN_STARTS
    )


def is_bridged_tool(detail: Any) -> bool:
    """A WINK tool served to the agent (Codex `item/tool/call`), rather than the agent's own."""
    if isinstance(detail, Mapping):
        notification = detail.get("notification")
        return isinstance(notification, Mapping) and "callId" in notification and "item" not in notification
    return False


def error_type(detail: Any) -> str:
    """`error.type` of an `error` entry: the exception's type, Claude's result subtype, Codex's
    `codexErrorInfo`."""
    if isinstance(detail, Mapping):
        exception = detail.get("exception")
        if isinstance(exception, Mapping) and isinstance(exception.get("type"), str):
            return str(exception["type"])
        entry = detail.get("sdk_entry")
        if isinstance(entry, Mapping) and entry.get("type") == "result":
            return result_error_type(entry)
        event = detail.get("event")
        if isinstance(event, Mapping) and event.get("type") == "turn.failed":
            return "turn_failed"  # `codex exec --json` says no more of why
        notification = detail.get("notification")
        turn = notification.get("turn") if isinstance(notification, Mapping) else None
        error = turn.get("error") if isinstance(turn, Mapping) else None
        if isinstance(error, Mapping):
            info = error.get("codexErrorInfo")
            if isinstance(info, str) and info:
                return info
            if isinstance(info, Mapping) and info:
                return str(next(iter(info)))
    return "_OTHER"


_MAX_CAUSES: Final = 8


def failure_detail(error: BaseException) -> dict[str, Any]:
    """An `error` entry's detail for an exception the harness raised: its type and message, and
    those of what caused it (harnesses wrap the provider's error in their own)."""
    exception: dict[str, Any] = {"type": type(error).__name__, "message": message_of(error)}
    causes: list[dict[str, str]] = []
    cause = error.__cause__ or error.__context__
    while cause is not None and len(causes) < _MAX_CAUSES:
        causes.append({"type": type(cause).__name__, "message": message_of(cause)})
        cause = cause.__cause__ or cause.__context__
    if causes:
        exception["causes"] = causes
    return {"exception": exception}


def message_of(error: BaseException) -> str:
    """`str(error)`, or a stand-in where that raises."""
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} whose str() raised>"


def exception_type(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
