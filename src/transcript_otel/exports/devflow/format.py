"""The devflow transcript format (seed 003, ADR-011): its types, its names, and how Go writes its JSON.

One JSON document `{runId, metadata, turns}`, pretty-printed like Go's
`json.MarshalIndent(t, "", "  ")`, keys in the order and with the `omitempty`
rules of the ADR's Go types (`tokensIn`, `toolCalls`, `output`… are left out when
empty or zero). A document of 100 KiB (102,400 bytes, the ADR's `100*1024`) or more
is stored gzipped: `transcript.json` below, `transcript.json.gz` at or above.
Timestamps are RFC 3339 in UTC (`2025-01-15T10:30:00.123456Z`).

`exports/devflow/writer.py` writes a captured run in this format; `exports/devflow/reader.py`
reads a transcript back into the types below.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import orjson

__all__ = [
    "GZIP_NAME",
    "GZIP_THRESHOLD",
    "PLAIN_NAME",
    "RUN_STATUSES",
    "TURN_ROLES",
    "DevflowMetadata",
    "DevflowToolCall",
    "DevflowTranscript",
    "DevflowTurn",
    "go_json",
    "go_time",
]

GZIP_THRESHOLD: Final = 100 * 1024
TURN_ROLES: Final = ("system", "user", "assistant", "tool_result")
RUN_STATUSES: Final = ("running", "completed", "failed", "canceled")
PLAIN_NAME: Final = "transcript.json"
GZIP_NAME: Final = "transcript.json.gz"


# -- the devflow types (ADR-011's Go types; Go's zero values where a field is left out) ---


@dataclass(frozen=True, slots=True)
class DevflowToolCall:
    """`ToolCall`: one tool call of an assistant turn."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    output: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class DevflowTurn:
    """`Turn`: one message of the conversation (`role` is one of `TURN_ROLES`)."""

    id: int
    role: str
    content: str
    timestamp: datetime
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: tuple[DevflowToolCall, ...] = ()
    duration_ms: int = 0


@dataclass(frozen=True, slots=True)
class DevflowMetadata:
    """`TranscriptMeta` (`status` is one of `RUN_STATUSES`; `ended_at` None when left out)."""

    flow_id: str
    started_at: datetime
    status: str
    total_tokens_in: int = 0
    total_tokens_out: int = 0
    total_cost: float = 0.0
    node_id: str = ""
    input: dict[str, Any] | None = None
    ended_at: datetime | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class DevflowTranscript:
    """`Transcript`: a whole devflow transcript."""

    run_id: str
    metadata: DevflowMetadata
    turns: tuple[DevflowTurn, ...]


# -- as Go writes them ------------------------------------------------------------------


def go_time(moment: datetime) -> str:
    """RFC 3339 in UTC, as Go writes a `time.Time` (`Z`, no trailing zero microseconds)."""
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.isoformat().replace("+00:00", "Z")


def go_json(value: Any, level: int) -> bytes:
    """`value` as MarshalIndent writes it at nesting `level`, UTF-8 (JSON strings hold no newline)."""
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=repr)
    except (orjson.JSONEncodeError, TypeError):  # lone surrogates, integers beyond 64 bits
        text = json.dumps(value, indent=2, ensure_ascii=False, default=repr)
        encoded = text.encode("utf-8", "backslashreplace")  # a lone surrogate as its \\udXXXX escape
    return encoded.replace(b"\n", b"\n" + b"  " * level) if level else encoded
