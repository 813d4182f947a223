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


def assistant_line(line: str) -> list[MappedEntry]:
    """A line of plain output: assistant text (`raw` is the line); nothing for a blank line."""
    text = line.rstrip("\r\n")
    return [MappedEntry(_ASSISTANT_MESSAGE, {"text": text}, line)] if text.strip() else []


def parsed_line(line: str) -> tuple[Any, MappedEntry | None]:
    """A line's JSON value, or `(None, an unknown entry)` saying why it is not JSON (the line as
    its `raw`)."""
    try:
        return parse_json(line), None
    except (ValueError, RecursionError) as exc:
        return None, MappedEntry(EntryType.UNKNOWN.value, {"parse_error": f"invalid JSON: {exc}"}, line)


def latest(remembered: dict[str, Any], most: int) -> list[str]:
    """The keys of `remembered` added last (`most` at most), oldest first: what a mapping hands
    on to the one that goes on after it, without copying all it remembers."""
    newest = list(itertools.islice(reversed(remembered), most))
    return newest[::-1]
