"""The token usage and cost of an `AgentRun`: `UsageLedger`, counting each once where it belongs.

A subagent's usage goes on its chat span and itself (never on the main turn); anything else on
the span of its entry, its turn and the root, each once. Claude writes a message's usage on
each of its lines: counted once per message id. Where the harness tells the session's own
totals, the root reports them rather than the sum of what the run recorded.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from typing import Any, Final

from transcript_otel.genai.attributes import RunningUsage, SessionTotals, cost_usd, message_usage
from transcript_otel.instrumentation.span_tree.slots import AgentSlot, SpanSlot

# Message ids remembered to count each message once; the oldest go (a long session's memory).
MAX_COUNTED_MESSAGES: Final = 10_000


class UsageLedger:
    """Counts usage on the run's spans, and the session's totals for its root."""

    def __init__(self, root: AgentSlot) -> None:
        self._root = root
        self._running = RunningUsage()
        self._session_totals = SessionTotals()
        self._by_message: dict[str, dict[str, int]] = {}
        # What the root of a run this one took a session over from had counted (its process was
        # killed: that root was never exported); this root reports it too.
        self._carried: dict[str, int] = {}

    def count(
        self, base: SpanSlot, usage: Mapping[str, int], turn: SpanSlot | None, cost: float = 0.0
    ) -> None:
        """Count usage where `base` holds it: a subagent on its chat span and itself, never on the
        main turn; anything else on `base`, on `turn` and on the root (each once)."""
        chat = base.chat if isinstance(base, AgentSlot) else None
        slots = (chat, base) if chat is not None else (base, turn)
        for target in {id(s): s for s in (*slots, self._root) if s is not None}.values():
            counts = target.usage
            for key, count in usage.items():  # `Counter.update`, without its ABC check each time
                counts[key] = counts.get(key, 0) + count
            target.cost_usd += cost

    def count_report(self, base: SpanSlot, detail: Any, turn: SpanSlot | None) -> None:
        """A `token_usage` entry: what it adds to the run so far, its cost, the session's totals."""
        self.count(base, self._running.added(detail), turn, cost_usd(detail))
        self._session_totals.report(detail)

    def count_message(self, slot: SpanSlot, detail: dict[str, Any] | None, turn: SpanSlot | None) -> None:
        """A line of a message that says its usage: counted once per message."""
        counted = message_usage(detail)
        if counted is None or counted[0] in self._by_message:
            return
        message_id, usage = counted
        self._by_message[message_id] = usage
        if len(self._by_message) > MAX_COUNTED_MESSAGES:  # a message's lines come together
            del self._by_message[next(iter(self._by_message))]
        self.count(slot, usage, turn)
        self._session_totals.add_message(usage)

    def count_no_more(self, message_ids: Iterable[str]) -> None:
        """Messages another run counted: their lines add nothing here."""
        for message_id in message_ids:
            self._by_message[message_id] = {}

    def carry(self, root: dict[str, int]) -> None:
        """What the root of the run this one took over from had counted."""
        self._carried = root

    def root_totals(self) -> Counter[str]:
        """What the root reports: the session's totals where told, else what the run counted,
        with what a run taken over had counted."""
        totals = self._session_totals.totals()
        if totals is None:
            totals = Counter(self._root.usage)
        totals.update(self._carried)
        return totals
