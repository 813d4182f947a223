"""The result of a mapping: one canonical entry, before it gets its number and time."""

from __future__ import annotations

import itertools
from typing import Any, Final, NamedTuple

from transcript_otel.model.entries import MAIN_SOURCE, EntryType, RawJson
from transcript_otel.records.serialize import parse_json

# The `system_event` subtype of a Codex subagent's end (rollouts and the app-server alike), on
# which its span ends.
SUBAGENT_COMPLETED: Final = "subagent_completed"
# The `system_event` subtype of a compaction (the model's summary of the conversation so far),
# which the session recorder takes for the answer to its turn's request.
COMPACTION: Final = "compaction"


class MappedEntry(NamedTuple):
    entry_type: str
    detail: dict[str, Any]
    raw: str | RawJson | None = None
    source: str = MAIN_SOURCE


_ASSISTANT_MESSAGE: Final = EntryType.ASSISTANT_MESSAGE.value
_UNKNOWN: Final = EntryType.UNKNOWN.value


def assistant_line(line: str) -> list[MappedEntry]:
    """A line of plain output: assistant text (`raw` is the line); nothing for a blank line."""
    text = line.rstrip("\r\n")
    return [MappedEntry(_ASSISTANT_MESSAGE, {"text": text}, line)] if text.strip() else []


def latest(remembered: dict[str, Any], most: int) -> list[str]:
    """The keys of `remembered` added last (`most` at most), oldest first: what a mapping hands
    on to the one that goes on after it, without copying all it remembers."""
    newest = list(itertools.islice(reversed(remembered), most))
    return newest[::-1]


def typed_event(line: str, an_event: str) -> dict[str, Any] | MappedEntry:
    """A JSON line's object with a string `type`, else the `unknown` entry that says why it is
    not one (`an_event`: what it should have been, "a codex exec event")."""
    try:
        event = parse_json(line)
    except (ValueError, RecursionError) as exc:
        return MappedEntry(_UNKNOWN, {"parse_error": f"invalid JSON: {exc}"}, line)
    if not isinstance(event, dict) or not isinstance(event.get("type"), str):
        reason = f"{an_event} must be a JSON object with a string 'type'"
        return MappedEntry(_UNKNOWN, {"parse_error": reason, "event": event}, line)
    return event


def line_entries(line: str, mapped: list[tuple[EntryType, dict[str, Any]]]) -> list[MappedEntry]:
    """What one line maps to, the line as the raw of the first entry."""
    return [
        MappedEntry(entry_type.value, detail, line if index == 0 else None)
        for index, (entry_type, detail) in enumerate(mapped)
    ]
