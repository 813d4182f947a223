"""What people ask of a run first, gathered in one pass over its records.

`RunDigest.add(record)` takes the structured-log records of one run in file order
and keeps only aggregates: counts by entry type and source, tokens in and out,
cost, turns, tool calls per tool with failures and durations, errors, the time span
and whether the run ended. Memory is bounded by the number of distinct tools and of
calls waiting for their result (plus one duration per tool call and one parent id per
span, for the turns), so a 100,000-entry run streams through. `summary()` gives the
library's `TranscriptSummary`, `as_dict()` the JSON of `transcript-otel summary --json`.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

from transcript_otel.genai.attributes import (
    RunningUsage,
    SessionTotals,
    cost_usd,
    message_usage,
)
from transcript_otel.model.entries import TranscriptEvent, TranscriptSummary
from transcript_otel.otel.attributes import (
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
    GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
    GEN_AI_USAGE_INPUT_TOKENS,
    GEN_AI_USAGE_OUTPUT_TOKENS,
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
)
from transcript_otel.reading.reconstruct import entry_from_context
from transcript_otel.reading.text import entry_text
from transcript_otel.reading.tool_calls import Answer, ToolCalls
from transcript_otel.reading.turn_end import TurnEnd
from transcript_otel.reading.turn_tokens import TurnTokens
from transcript_otel.reading.turns import EntryTurns, RunTurns

# Each usage attribute's short name, in the order reports show them.
TOKEN_NAMES: Final = {
    GEN_AI_USAGE_INPUT_TOKENS: "input",
    GEN_AI_USAGE_OUTPUT_TOKENS: "output",
    GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: "cached_input",
    GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: "cache_write_input",
    GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: "reasoning_output",
}
_MAX_ERRORS: Final = 100
# Entries a Claude message's lines become, any of which may be its first (and carry its usage).
_MESSAGE_ENTRIES: Final = frozenset({"assistant_message", "thinking", "tool_use"})


@dataclass(slots=True)
class ToolStats:
    """The calls of one tool: how many, how many failed or got no result, how long they took."""

    name: str
    calls: int = 0
    failures: int = 0
    unanswered: int = 0
    durations_ms: list[float] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        durations = sorted(self.durations_ms)
        return {
            "calls": self.calls,
            "failures": self.failures,
            "unanswered": self.unanswered,
            "total_ms": round(sum(durations), 3),
            "max_ms": round(durations[-1], 3) if durations else None,
            "median_ms": round(durations[len(durations) // 2], 3) if durations else None,
        }


class RunDigest:
    """Aggregates of one run, fed record by record (`add`)."""

    def __init__(self) -> None:
        self.records = 0  # records read, whatever they were
        self.prompt_name = ""
        self.adapter = ""
        self.run_id: str | None = None
        self.session_id: str | None = None
        self.trace_id: str | None = None
        self.started: datetime | None = None
        self.ended: datetime | None = None
        self.stopped = False
        self.by_type: Counter[str] = Counter()
        self.by_source: Counter[str] = Counter()
        self.cost_usd = 0.0
        self.tools: dict[str, ToolStats] = {}
        self.errors: list[str] = []
        self.error_count = 0
        self.transcript_errors = 0
        self.malformed = 0
        self.dropped = 0
        self._usage: Counter[str] = Counter()
        self._running_usage = RunningUsage()
        self._message_usage: Counter[str] = Counter()
        # The session's own totals (Claude Code's `modelUsage`), where it reports them.
        self._session_totals = SessionTotals()
        self._messages_counted: set[str] = set()
        self._calls = ToolCalls()
        self._turn_end = TurnEnd()
        self._turns = RunTurns()

    # -- feeding ------------------------------------------------------------------------

    @classmethod
    def of(cls, records: Iterable[Mapping[str, Any]]) -> RunDigest:
        """The digest of a whole run: every record added, then `finish()`."""
        digest = cls()
        for record in records:
            digest.add(record)
        digest.finish()
        return digest

    def add(self, record: Mapping[str, Any]) -> None:
        self.records += 1
        self._turns.add(record)
        event = record.get("event")
        context = record.get("context")
        if not isinstance(context, Mapping):
            context = {}
        self._identify(context)
        if event == TranscriptEvent.ENTRY.value:
            self._entry(context)
        elif event == TranscriptEvent.STOP.value:
            self.stopped = True
            dropped = context.get("dropped_entries")
            self.dropped += dropped if isinstance(dropped, int) else 0
            self._seen_at(record.get("timestamp"))
        elif event == TranscriptEvent.START.value:
            self._seen_at(record.get("timestamp"))
        elif event == TranscriptEvent.ERROR.value:
            self.transcript_errors += 1

    def _identify(self, context: Mapping[str, Any]) -> None:
        for key in ("prompt_name", "adapter", "run_id", "session_id", "trace_id"):
            value = context.get(key)
            if isinstance(value, str) and value and not getattr(self, key):
                setattr(self, key, value)

    def _seen_at(self, timestamp: Any) -> None:
        if not isinstance(timestamp, str):
            return
        try:
            moment = datetime.fromisoformat(timestamp)
        except ValueError:
            return
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=UTC)
        if self.started is None or moment < self.started:
            self.started = moment
        if self.ended is None or moment > self.ended:
            self.ended = moment

    def _entry(self, context: Mapping[str, Any]) -> None:
        try:
            entry = entry_from_context(context)
        except ValueError:
            self.malformed += 1
            return
        self.by_type[entry.entry_type] += 1
        self.by_source[entry.source] += 1
        self._seen_at(context.get("timestamp"))
        detail = entry.detail
        self._turn_end.add(entry.entry_type, entry.source, detail)
        if entry.entry_type in _MESSAGE_ENTRIES:
            self._count_message(detail)
        if entry.entry_type == "token_usage":
            self._usage.update(self._running_usage.added(detail))
            self.cost_usd += cost_usd(detail)
            self._session_totals.report(detail)
        elif entry.entry_type == "error":
            self.error_count += 1
            if len(self.errors) < _MAX_ERRORS:
                self.errors.append(entry_text(entry.entry_type, detail))
        elif entry.entry_type == "tool_use":
            name = self._calls.called(entry.source, detail, entry.timestamp)
            self.tools.setdefault(name, ToolStats(name)).calls += 1
        else:
            answer = self._calls.answered(entry.entry_type, entry.source, detail, entry.timestamp)
            if answer is not None:
                self._answer(answer)

    def _count_message(self, detail: Mapping[str, Any]) -> None:
        """A Claude message's usage, once per message id, from whichever of its lines comes
        first: one of text, of thinking or of tool calls only (the model call all the same)."""
        counted = message_usage(detail)
        if counted is not None and counted[0] not in self._messages_counted:
            self._messages_counted.add(counted[0])
            self._message_usage.update(counted[1])
            self._session_totals.add_message(counted[1])

    def _answer(self, answer: Answer) -> None:
        stats = self.tools.setdefault(answer.name, ToolStats(answer.name))
        if not answer.call_seen:
            stats.calls += 1
        if answer.failed:
            stats.failures += 1
        if answer.duration_ms is not None:
            stats.durations_ms.append(answer.duration_ms)

    # -- reading ------------------------------------------------------------------------

    @property
    def tokens(self) -> dict[str, int]:
        """Token totals: the session's own totals where it reports them (subagents included) and
        its messages' usage since, else the sum of the run's usage reports, else (Claude
        transcripts) its messages' usage."""
        usage: Mapping[str, int] | None = self._session_totals.totals()
        if usage is None:
            usage = self._usage or self._message_usage
        return {name: usage[key] for key, name in TOKEN_NAMES.items() if key in usage}

    @property
    def reports_usage(self) -> bool:
        """Whether a usage report of the run counts tokens (a Claude session log's counts only
        the session's totals: its messages' own usage is what its turns used)."""
        return bool(self._usage)

    def turn_tokens(self) -> TurnTokens:
        """What each entry, read again from the start, counts on its turn, so the turns add up
        to `tokens`."""
        totals = self._session_totals.totals()
        return TurnTokens(
            reports_usage=self.reports_usage,
            session_totals=None if totals is None else {k: v for k, v in totals.items() if k in TOKEN_NAMES},
        )

    @property
    def turns(self) -> int:
        """The turns the run ran, as its spans count them (`RunTurns`)."""
        return self._turns.count

    def entry_turns(self) -> EntryTurns:
        """What places the run's entries in those turns, read again from the start."""
        return self._turns.assign()

    @property
    def status(self) -> str:
        """`failed` (an error entry), `incomplete` (no `transcript.stop` yet), `interrupted`
        (stopped mid-turn: see `TurnEnd`), else `completed`."""
        if self.error_count:
            return "failed"
        if not self.stopped:
            return "incomplete"
        return "interrupted" if self._turn_end.mid_turn else "completed"

    @property
    def duration_s(self) -> float | None:
        if self.started is None or self.ended is None:
            return None
        return (self.ended - self.started).total_seconds()

    def finish(self) -> None:
        """Count the calls still waiting for a result as unanswered."""
        for name in self._calls.unanswered():
            self.tools[name].unanswered += 1

    def summary(self) -> TranscriptSummary:
        return TranscriptSummary(
            total_entries=sum(self.by_type.values()),
            entries_by_type=dict(self.by_type),
            entries_by_source=dict(self.by_source),
            sources=tuple(sorted(self.by_source)),
            adapter=self.adapter,
            prompt_name=self.prompt_name,
            first_timestamp=self.started,
            last_timestamp=self.ended,
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "prompt_name": self.prompt_name,
            "adapter": self.adapter,
            "run_id": self.run_id,
            "session_id": self.session_id,
            "trace_id": self.trace_id,
            "status": self.status,
            "started": self.started.isoformat() if self.started else None,
            "ended": self.ended.isoformat() if self.ended else None,
            "duration_s": self.duration_s,
            "turns": self.turns,
            "total_entries": sum(self.by_type.values()),
            "entries_by_type": dict(self.by_type),
            "entries_by_source": dict(self.by_source),
            "tokens": self.tokens,
            "cost_usd": round(self.cost_usd, 6),
            "tools": {name: stats.as_dict() for name, stats in sorted(self.tools.items())},
            "errors": list(self.errors),
            "error_count": self.error_count,
            "transcript_errors": self.transcript_errors,
            "malformed_entries": self.malformed,
            "dropped_entries": self.dropped,
        }
