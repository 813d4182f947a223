"""The `transcript/` section of a debug bundle: one JSONL file per source, and what its index says of each.

Each source (`main`, `subagent:<id>`, any other string) gets a file whose name is a
sanitized stem (`[A-Za-z0-9_-]`, unique even on case-insensitive file systems), so no
source string can reach outside `debug_bundle/`. Past `MAX_SOURCE_FILES` sources the
rest share `transcript/other-sources.jsonl`. While the entries pass, each file keeps
the counts, sequence numbers and times `transcript/index.json` reports for it; the
entry lines themselves wait in a spool file until the zip takes them.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

TRANSCRIPT_DIR: Final = "transcript"
# Bounds that keep a hostile run from growing memory without limit.
MAX_SOURCE_FILES: Final = 1000  # sources beyond: `transcript/other-sources.jsonl`
_MAX_TYPES_PER_SOURCE: Final = 100  # more distinct entry types are counted as "(other)"
_UNSAFE_NAME: Final = re.compile(r"[^A-Za-z0-9_-]+")
_STEM_LIMIT: Final = 80


def _safe_stem(source: str | None) -> str:
    """A file-name stem for a source: `main`, `subagent-<id>`, `source-<name>`, `no-source`."""
    if source is None:
        return "no-source"
    if source == "main":
        return "main"
    prefix, rest = "source", source
    if source.startswith("subagent:"):
        prefix, rest = "subagent", source[len("subagent:") :]
    slug = _UNSAFE_NAME.sub("-", rest).strip("-")[:_STEM_LIMIT].strip("-")
    return f"{prefix}-{slug}" if slug else prefix


@dataclass(slots=True)
class SourceFile:
    """One source's entries: their spool file and what the index says about them."""

    source: str | None  # None: entries without a source string (or `several`)
    member: str
    spool: Path
    several: bool = False  # the entries of every source beyond MAX_SOURCE_FILES
    entries: int = 0
    first_sequence: int | None = None
    last_sequence: int | None = None
    contiguous: bool = True
    first_timestamp: str | None = None
    last_timestamp: str | None = None
    by_type: Counter[str] = field(default_factory=Counter)

    def add(self, context: Mapping[str, Any]) -> None:
        self.entries += 1
        sequence = context.get("sequence_number")
        if not isinstance(sequence, int) or isinstance(sequence, bool):
            self.contiguous = False
        else:
            self.contiguous = self.contiguous and sequence == self.entries  # 1, 2, 3… in file order
            if self.first_sequence is None:
                self.first_sequence = sequence
            self.last_sequence = sequence
        stamp = context.get("timestamp")
        if isinstance(stamp, str):
            if self.first_timestamp is None:
                self.first_timestamp = stamp
            self.last_timestamp = stamp
        entry_type = context.get("entry_type")
        key = entry_type if isinstance(entry_type, str) else "(none)"
        if key not in self.by_type and len(self.by_type) >= _MAX_TYPES_PER_SOURCE:
            key = "(other)"
        self.by_type[key] += 1

    def index_item(self, stop_entries: Any) -> dict[str, Any]:
        """This file in `transcript/index.json`; `stop_entries` is the stop record's `entries_by_source`."""
        item: dict[str, Any] = {
            "source": self.source,
            "file": self.member,
            "entries": self.entries,
            "first_sequence": self.first_sequence,
            "last_sequence": self.last_sequence,
            "contiguous": self.contiguous,
            "first_timestamp": self.first_timestamp,
            "last_timestamp": self.last_timestamp,
            "entries_by_type": dict(self.by_type),
        }
        if self.several:
            item["several_sources"] = True  # every source after the first MAX_SOURCE_FILES
        elif isinstance(stop_entries, Mapping) and self.source is not None:
            item["stop_entries"] = stop_entries.get(self.source)
        return item


class SourceFiles:
    """The files of the `transcript/` section, one per source, spooled in `workdir`."""

    def __init__(self, workdir: Path) -> None:
        self._workdir = workdir
        self._by_source: dict[str | None, SourceFile] = {}
        self._overflow: SourceFile | None = None  # the sources beyond MAX_SOURCE_FILES, together
        self._stems: set[str] = set()

    def of(self, value: Any) -> SourceFile:
        """The file of the source an entry's `source` names (None for a missing or empty one)."""
        key: str | None = value if isinstance(value, str) and value else None
        found = self._by_source.get(key)
        if found is not None:
            return found
        if len(self._by_source) < MAX_SOURCE_FILES:
            found = self._by_source[key] = self._new(key, _safe_stem(key))
        elif self._overflow is None:
            found = self._overflow = self._new(None, "other-sources", several=True)
        else:
            found = self._overflow
        return found

    def all(self) -> list[SourceFile]:
        return [*self._by_source.values(), *([self._overflow] if self._overflow else [])]

    def _new(self, source: str | None, stem: str, *, several: bool = False) -> SourceFile:
        stem = self._unique_stem(stem)
        spool = self._workdir / f"source-{len(self._stems)}.spool"
        return SourceFile(
            source=source, member=f"{TRANSCRIPT_DIR}/{stem}.jsonl", spool=spool, several=several
        )

    def _unique_stem(self, stem: str) -> str:
        candidate, number = stem, 1
        while candidate.lower() in self._stems:  # unique on case-insensitive file systems too
            number += 1
            candidate = f"{stem}-{number}"
        self._stems.add(candidate.lower())
        return candidate
