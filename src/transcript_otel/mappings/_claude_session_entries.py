"""The entries of a Claude Code session line that no state of the session's mapper decides:
a message's thinking blocks split out as stdout's mapping splits them, an attachment, a
background task's notification, and an error as stdout's `result` tells it.

Pure reading of the line dicts `claude_session.ClaudeSessionMapper` maps.
"""

from __future__ import annotations

import re
from typing import Any, Final

from transcript_otel.mappings._claude_blocks import content_blocks, is_block, type_of, with_content
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_transcript import MESSAGE_OF_BLOCKS
from transcript_otel.model.entries import EntryType

# Attachments that are context the CLI injects before a request (the model's view, not a turn):
# they map to nothing.
_CONTEXT_ATTACHMENTS: Final = frozenset(
    {
        "environment",
        "model",
        "deferred_tools_delta",
        "agent_listing_delta",
        "skill_listing",
        "auto_mode",
        "session_context",
        "date",
        "remote_session_change",
        "prompt_snapshot",
    }
)
_THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})


def _tag(text: str, name: str) -> str | None:
    found = re.search(f"<{name}>(.*?)</{name}>", text, re.DOTALL)
    return found.group(1).strip() if found else None


def error_entry(entry: dict[str, Any], error_type: str, words: str, line: str, source: str) -> MappedEntry:
    """An `error` as the run's failure is told (`error.type` = `error_type`, as stdout's `result`
    says it), the line kept as `sdk_entry`."""
    detail = {"sdk_entry": entry, "exception": {"type": error_type, "message": words}}
    return MappedEntry(EntryType.ERROR.value, detail, line, source)


def manual_compaction(entry: dict[str, Any]) -> bool:
    """Whether `entry` is a `compact_boundary` the person asked for (`/compact`)."""
    metadata = entry.get("compactMetadata")
    return (
        entry.get("subtype") == "compact_boundary"
        and isinstance(metadata, dict)
        and metadata.get("trigger") == "manual"
    )


def is_text(block: Any) -> bool:
    """Whether `block` is a text block that holds its text."""
    return is_block(block, "text") and isinstance(block.get("text"), str)


def _is_thinking(block: Any) -> bool:
    return type_of(block) in _THINKING_BLOCKS


def thinking_first(mapped: MappedEntry) -> list[MappedEntry]:
    """An `assistant_message` as stdout's mapping splits it: a `thinking` per thinking block,
    then the message with the other blocks (if any); the first entry keeps `raw`."""
    entry = mapped.detail["sdk_entry"]
    blocks = content_blocks(entry) or []
    if not any(map(_is_thinking, blocks)):
        return [mapped]
    entries = [
        MappedEntry(EntryType.THINKING.value, {"sdk_entry": block}, None, mapped.source)
        for block in blocks
        if _is_thinking(block)
    ]
    others = [block for block in blocks if not _is_thinking(block)]
    if others:
        entries.append(
            mapped._replace(detail={**mapped.detail, "sdk_entry": with_content(entry, others)}, raw=None)
        )
    else:  # a line of thinking only (a message's first, perhaps): it keeps the message's usage
        _keep_message(entries[0].detail, entry.get("message"))
    entries[0] = entries[0]._replace(raw=mapped.raw)
    return entries


def _keep_message(detail: dict[str, Any], message: Any) -> None:
    """`detail.claude_message`: the id and usage of the message a split-off block is of."""
    if isinstance(message, dict):
        detail[MESSAGE_OF_BLOCKS] = {"id": message.get("id"), "usage": message.get("usage")}


def notification_detail(entry: dict[str, Any], text: str) -> dict[str, Any]:
    """A background task's end, as stdout's `system/task_notification` says it: the call whose
    subagent ended, whether it failed, and its result as the words."""
    detail: dict[str, Any] = {"sdk_entry": entry, "subtype": "task_notification"}
    call_id, status, result = _tag(text, "tool-use-id"), _tag(text, "status"), _tag(text, "result")
    if call_id:
        detail["background_call_ended"] = call_id
        if status not in (None, "completed"):
            detail["is_error"] = True
    if result is not None:
        detail["text"] = result
    return detail


def attachment_entries(entry: dict[str, Any], line: str, source: str) -> list[MappedEntry]:
    attachment = entry.get("attachment")
    kind = type_of(attachment)
    if kind in _CONTEXT_ATTACHMENTS:
        return []
    if kind == "max_turns_reached" and isinstance(attachment, dict):
        words = f"Reached maximum number of turns ({attachment.get('maxTurns')})"
        return [error_entry(entry, "error_max_turns", words, line, source)]
    if kind == "queued_command" and isinstance(attachment, dict) and _typed_prompt(attachment):
        detail = {"sdk_entry": entry, "text": attachment["prompt"]}
        return [MappedEntry(EntryType.USER_MESSAGE.value, detail, line, source)]
    detail = {"sdk_entry": entry, "subtype": "attachment", "attachment_type": kind}
    return [MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)]


def _typed_prompt(attachment: dict[str, Any]) -> bool:
    """A `queued_command` that is a prompt a person typed (`commandMode: "prompt"`, from a human
    where its origin is told), not a command or the CLI's own."""
    origin = attachment.get("origin")
    kind = origin.get("kind") if isinstance(origin, dict) else None
    return (
        attachment.get("commandMode") == "prompt"
        and kind in (None, "human")
        and isinstance(attachment.get("prompt"), str)
    )
