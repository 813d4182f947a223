"""The canonical transcript model: entry types, the envelope, entries and summaries.

This is the contract of the transcript specification: nine entry types, a nine-key
envelope, and the four log events (`transcript.entry/start/stop/error`).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Final


class EntryType(StrEnum):
    """The canonical vocabulary every adapter maps its native events onto."""

    USER_MESSAGE = "user_message"
    ASSISTANT_MESSAGE = "assistant_message"
    TOOL_USE = "tool_use"
    TOOL_RESULT = "tool_result"
    THINKING = "thinking"
    SYSTEM_EVENT = "system_event"
    TOKEN_USAGE = "token_usage"
    ERROR = "error"
    UNKNOWN = "unknown"


CANONICAL_ENTRY_TYPES: Final = frozenset(entry_type.value for entry_type in EntryType)

# Envelope keys, in the order the specification (and `wink`) writes them.
ENVELOPE_KEYS: Final = (
    "prompt_name",
    "adapter",
    "entry_type",
    "sequence_number",
    "source",
    "timestamp",
    "session_id",
    "detail",
    "raw",
)
REQUIRED_ENVELOPE_KEYS: Final = ENVELOPE_KEYS[:6]

MAIN_SOURCE: Final = "main"
SUBAGENT_SOURCE_PREFIX: Final = "subagent:"


class TranscriptEvent(StrEnum):
    """The structured-log event names of the transcript taxonomy."""

    ENTRY = "transcript.entry"
    START = "transcript.start"
    STOP = "transcript.stop"
    ERROR = "transcript.error"
    # A span of the run as it ended (JSONL mirror only): what `replay` rebuilds spans from.
    SPAN = "transcript.span"


@dataclass(frozen=True, slots=True)
class RawJson:
    """A `raw` value to be encoded as JSON by the background writer, not by the agent's thread."""

    value: Any


@dataclass(frozen=True, slots=True)
class DetailInRaw:
    """A `detail` that `raw` (the JSON of an object) holds, taken out of it by the background writer.

    The detail is `{key: raw_object[raw_key] for key, raw_key in fields}`, then `constants`.
    Where a harness's `raw` is the JSON of the very objects its `detail` holds, the agent's
    thread then keeps one string per entry until the writer runs, not a tree of objects:
    a tree takes more memory, fresh pages (page faults) and garbage collections.
    """

    fields: tuple[tuple[str, str], ...]
    constants: tuple[tuple[str, str], ...] = ()


_SOURCE_PATTERN: Final = re.compile(r"main|subagent:.+", re.DOTALL)


def is_valid_source(source: str) -> bool:
    """Whether `source` is `main` or `subagent:<id>` (invariant 6)."""
    # `main` first: nearly every entry's source, checked by the writer for each one.
    return source == MAIN_SOURCE or _SOURCE_PATTERN.fullmatch(source) is not None


def subagent_source(agent_id: str) -> str:
    """The `source` value for entries produced by the subagent `agent_id`."""
    return f"{SUBAGENT_SOURCE_PREFIX}{agent_id}"


@dataclass(slots=True, frozen=True)
class TranscriptEntry:
    """A single entry in a reconstructed transcript."""

    prompt_name: str
    adapter: str
    entry_type: str
    sequence_number: int
    source: str
    timestamp: datetime
    session_id: str | None = None
    detail: dict[str, Any] = field(default_factory=dict)
    raw: str | None = None

    def to_context(self) -> dict[str, Any]:
        """The envelope as a structured-log `context`, in specification key order."""
        context: dict[str, Any] = {
            "prompt_name": self.prompt_name,
            "adapter": self.adapter,
            "entry_type": self.entry_type,
            "sequence_number": self.sequence_number,
            "source": self.source,
            "timestamp": self.timestamp.isoformat(),
        }
        if self.session_id is not None:
            context["session_id"] = self.session_id
        if self.detail:
            context["detail"] = self.detail
        if self.raw is not None:
            context["raw"] = self.raw
        return context


@dataclass(slots=True, frozen=True)
class TranscriptSummary:
    """Summary statistics for a transcript."""

    total_entries: int
    entries_by_type: dict[str, int]
    entries_by_source: dict[str, int]
    sources: tuple[str, ...]
    adapter: str
    prompt_name: str
    first_timestamp: datetime | None
    last_timestamp: datetime | None
