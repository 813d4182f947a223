"""Checking a stream of records against the specification's seven invariants.

Each violation names the record (its position, or the file line when read from
a file), the invariant by number and name, and what exactly is wrong.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from transcript_otel.model.entries import (
    CANONICAL_ENTRY_TYPES,
    MAIN_SOURCE,
    REQUIRED_ENVELOPE_KEYS,
    TranscriptEvent,
    is_valid_source,
)

INVARIANTS: Final = {
    1: "envelope completeness",
    2: "sequence monotonicity",
    3: "type vocabulary",
    4: "non-blocking emission",
    5: "adapter labeling",
    6: "source consistency",
    7: "timestamp ordering",
}

# Adapters whose protocol has no subagent boundaries: only `main` is valid.
SINGLE_SOURCE_ADAPTERS: Final = frozenset({"codex_app_server"})

_FIELD_TYPES: Final[dict[str, tuple[type, ...]]] = {
    "prompt_name": (str,),
    "adapter": (str,),
    "entry_type": (str,),
    "sequence_number": (int,),
    "source": (str,),
    "timestamp": (str,),
    "session_id": (str, type(None)),
    "detail": (dict,),
    "raw": (str, type(None)),
}


@dataclass(frozen=True, slots=True)
class Violation:
    """One record breaking one invariant."""

    location: str
    invariant: int
    message: str

    @property
    def invariant_name(self) -> str:
        return INVARIANTS[self.invariant]

    def __str__(self) -> str:
        return f"{self.location}: invariant {self.invariant} ({self.invariant_name}): {self.message}"


@dataclass(slots=True)
class _SourceState:
    last_sequence: int
    last_timestamp: datetime | None
    location: str


class _Checker:
    def __init__(self, expected_adapter: str | None) -> None:
        self.expected_adapter = expected_adapter
        self.violations: list[Violation] = []
        self.sources: dict[tuple[str, str], _SourceState] = {}
        self.adapter_of_prompt: dict[str, str] = {}
        # Sequence numbers a `transcript.error` said are missing from this file, per (prompt,
        # source): the JSONL mirror's record of entries a full disk kept out
        # (`sinks/jsonl_write_failures.py`).
        self.declared_gaps: dict[tuple[str, str], list[tuple[int, int]]] = {}

    def fail(self, location: str, invariant: int, message: str) -> None:
        self.violations.append(Violation(location, invariant, message))

    def check(self, location: str, record: Mapping[str, Any]) -> None:
        event = record.get("event")
        context = record.get("context")
        if event == TranscriptEvent.START.value and isinstance(context, Mapping):
            # A new run of the same prompt restarts its sequence numbers.
            prompt = context.get("prompt_name")
            for key in [key for key in self.sources if key[0] == prompt]:
                del self.sources[key]
            for key in [key for key in self.declared_gaps if key[0] == prompt]:
                del self.declared_gaps[key]
            self.adapter_of_prompt.pop(str(prompt), None)
        if event == TranscriptEvent.ERROR.value and record.get("level") not in (None, "WARNING"):
            self.fail(location, 4, f"transcript.error logged at {record.get('level')!r}, not WARNING")
        if event == TranscriptEvent.ERROR.value and isinstance(context, Mapping):
            self.note_declared_gaps(context)
        if event != TranscriptEvent.ENTRY.value:
            return
        if not isinstance(context, Mapping):
            self.fail(location, 1, "transcript.entry record has no context object")
            return
        if not self.envelope_complete(location, context):
            return
        self.check_entry(location, context)

    def note_declared_gaps(self, context: Mapping[str, Any]) -> None:
        missing = context.get("missing_sequence_numbers")
        if not isinstance(missing, Mapping):
            return
        for source, span in missing.items():
            if (
                isinstance(span, list | tuple)
                and len(span) == 2
                and all(type(bound) is int for bound in span)
                and 1 <= span[0] <= span[1]
            ):
                key = (str(context.get("prompt_name")), str(source))
                self.declared_gaps.setdefault(key, []).append((span[0], span[1]))

    def declared(self, key: tuple[str, str], first: int, last: int) -> bool:
        """Whether sequence numbers `first`..`last` are all declared missing (see `declared_gaps`)."""
        for low, high in sorted(self.declared_gaps.get(key, ())):
            if low <= first <= high + 1:
                first = high + 1
        return first > last

    def envelope_complete(self, location: str, context: Mapping[str, Any]) -> bool:
        missing = [key for key in REQUIRED_ENVELOPE_KEYS if key not in context]
        if missing:
            self.fail(location, 1, f"missing required key(s) {', '.join(missing)}")
        complete = not missing
        for key, types in _FIELD_TYPES.items():
            if key not in context:
                continue
            value = context[key]
            if not isinstance(value, types) or (key == "sequence_number" and isinstance(value, bool)):
                expected = " or ".join("null" if t is type(None) else t.__name__ for t in types)
                self.fail(location, 1, f"{key} is {type(value).__name__}, expected {expected}")
                complete = False
        return complete

    def check_entry(self, location: str, context: Mapping[str, Any]) -> None:
        prompt, adapter, source = context["prompt_name"], context["adapter"], context["source"]
        entry_type, sequence = context["entry_type"], context["sequence_number"]
        if entry_type not in CANONICAL_ENTRY_TYPES:
            self.fail(location, 3, f"entry_type {entry_type!r} is not canonical")
        self.check_adapter(location, prompt, adapter)
        if not is_valid_source(source):
            self.fail(location, 6, f"source {source!r} is neither 'main' nor 'subagent:<id>'")
        elif adapter in SINGLE_SOURCE_ADAPTERS and source != MAIN_SOURCE:
            self.fail(location, 6, f"adapter {adapter!r} produces 'main' only, got {source!r}")
        try:
            timestamp: datetime | None = datetime.fromisoformat(context["timestamp"])
        except ValueError:
            self.fail(location, 1, f"timestamp {context['timestamp']!r} is not ISO-8601")
            timestamp = None
        if timestamp is not None and timestamp.utcoffset() is None:
            self.fail(location, 7, f"timestamp {context['timestamp']!r} has no UTC offset")
            timestamp = None
        elif timestamp is not None and timestamp.utcoffset().total_seconds() != 0:  # type: ignore[union-attr]
            self.fail(location, 7, f"timestamp {context['timestamp']!r} is not UTC")
        self.check_order(location, (prompt, source), sequence, timestamp)

    def check_adapter(self, location: str, prompt: str, adapter: str) -> None:
        if not adapter:
            self.fail(location, 5, "adapter is empty")
            return
        if self.expected_adapter is not None and adapter != self.expected_adapter:
            self.fail(location, 5, f"adapter {adapter!r}, expected {self.expected_adapter!r}")
        first = self.adapter_of_prompt.setdefault(prompt, adapter)
        if first != adapter:
            self.fail(
                location,
                5,
                f"adapter {adapter!r} differs from {first!r} earlier in the run of prompt {prompt!r}",
            )

    def check_order(
        self, location: str, key: tuple[str, str], sequence: int, timestamp: datetime | None
    ) -> None:
        state = self.sources.get(key)
        label = f"source {key[1]!r} of prompt {key[0]!r}"
        if state is None:
            if sequence != 1 and not self.declared(key, 1, sequence - 1):
                self.fail(location, 2, f"{label} starts at {sequence}, expected 1")
            self.sources[key] = _SourceState(sequence, timestamp, location)
            return
        if sequence <= state.last_sequence:
            self.fail(
                location,
                2,
                f"{label}: sequence_number {sequence} does not increase "
                f"(previous {state.last_sequence} at {state.location})",
            )
        elif sequence != state.last_sequence + 1 and not self.declared(
            key, state.last_sequence + 1, sequence - 1
        ):
            missing = sequence - state.last_sequence - 1
            self.fail(
                location, 2, f"{label} jumps from {state.last_sequence} to {sequence} ({missing} missing)"
            )
        if timestamp is not None and state.last_timestamp is not None and timestamp < state.last_timestamp:
            self.fail(
                location,
                7,
                f"{label}: timestamp {timestamp.isoformat()} is earlier than "
                f"{state.last_timestamp.isoformat()} at {state.location}",
            )
        self.sources[key] = _SourceState(
            max(sequence, state.last_sequence), timestamp or state.last_timestamp, location
        )


def check_invariants(
    records: Iterable[Mapping[str, Any] | tuple[str, Mapping[str, Any]]],
    *,
    expected_adapter: str | None = None,
) -> list[Violation]:
    """Check structured-log records, in file order, against the seven invariants.

    `records` holds record dicts (located as `record N`) or `(location, record)`
    pairs such as `("run.jsonl:12", record)`. Invariant 4 (non-blocking emission)
    is a runtime property; what a log shows of it is checked: every
    `transcript.error` must be a WARNING.
    """
    checker = _Checker(expected_adapter)
    for index, item in enumerate(records, start=1):
        if isinstance(item, tuple):
            location, record = item
        else:
            location, record = f"record {index}", item
        checker.check(location, record)
    return checker.violations
