"""The result of a mapping: one canonical entry, before it gets its number and time."""

from __future__ import annotations

from typing import Any, NamedTuple

from transcript_otel.model import MAIN_SOURCE, RawJson


class MappedEntry(NamedTuple):
    entry_type: str
    detail: dict[str, Any]
    raw: str | RawJson | None = None
    source: str = MAIN_SOURCE
