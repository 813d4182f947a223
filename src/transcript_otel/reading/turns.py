"""A run's turns as `run`, `import` and `watch` counted them, and which turn each entry is in.

Those commands record each turn as a `chat` span (`transcript.turn`, a child of the run's
root span) in the mirror, and each entry names the span it happened in (`span_id`): an entry
is in the turn whose span is it or holds it (a subagent's spans, a tool's). That is the
count a backend shows, also for the turns a harness starts itself (Claude Code's after a
background subagent ends) and for a `/compact`. A run without such spans (recorded before
they were, or by an instrumentor) is cut where its prompts are: a main `user_message` opens
a turn, as does a Codex `turn_started` unless it follows the user message that opened it.

A usage report's cost is its turn's own, except where a report covers all the turns since
the last one (Claude Code's session log writes one per process): then it is the run's
alone, unless that was a single turn.

`RunTurns` reads the run's records once (`add`) to count its turns; `assign()` then gives an
`EntryTurns` that places the entries, read again in order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.model.entries import MAIN_SOURCE, TranscriptEvent
from transcript_otel.otel.attributes import TURN_NUMBER

_MAX_HOPS: Final = 64  # a span's ancestry is short; a cycle in a damaged file ends here


class _PromptTurns:
    """Turns cut where the prompts are, for a run without turn spans."""

    __slots__ = ("_quiet", "_turn", "count")

    def __init__(self) -> None:
        self.count = 0
        self._turn = 0
        # The main thread said nothing since the open turn's opener but user messages and
        # system events: a prompt or a turn start then joins that turn.
        self._quiet = False

    def add(self, entry_type: str, source: str, detail: Mapping[str, Any]) -> int:
        if source == MAIN_SOURCE:
            joins = self._turn > 0 and self._quiet
            if entry_type == "user_message":
                self._open(joins)
                self._quiet = True
            elif entry_type == "system_event" and detail.get("subtype") == "turn_started":
                self._open(joins)
                self._quiet = not joins  # the user message of a turn Codex started joins it
            elif entry_type != "system_event":
                self._quiet = False
        return self._turn

    def _open(self, joins: bool) -> None:
        if not joins:
            self.count += 1
            self._turn = self.count


def _entry_parts(context: Mapping[str, Any]) -> tuple[str, str, Mapping[str, Any]]:
    detail = context.get("detail")
    source = context.get("source")
    return (
        str(context.get("entry_type")),
        source if isinstance(source, str) else MAIN_SOURCE,
        detail if isinstance(detail, Mapping) else {},
    )


class RunTurns:
    """The turns of one run, from its records read once in order."""

    __slots__ = ("_chat_turns", "_parents", "_prompts")

    def __init__(self) -> None:
        self._parents: dict[str, str | None] = {}
        self._chat_turns: dict[str, int] = {}
        self._prompts = _PromptTurns()

    def add(self, record: Mapping[str, Any]) -> None:
        context = record.get("context")
        if not isinstance(context, Mapping):
            return
        event = record.get("event")
        if event == TranscriptEvent.ENTRY.value:
            self._prompts.add(*_entry_parts(context))
        elif event == "transcript.span" and isinstance(context.get("span_id"), str):
            parent = context.get("parent_span_id")
            self._parents[context["span_id"]] = parent if isinstance(parent, str) else None
            attributes = context.get("attributes")
            number = attributes.get(TURN_NUMBER) if isinstance(attributes, Mapping) else None
            if isinstance(number, int) and not isinstance(number, bool):
                self._chat_turns[context["span_id"]] = number

    def _main_turns(self) -> dict[str, int]:
        """The turn spans that are children of a root span (a subagent's own are not the run's)."""
        return {
            span: number
            for span, number in self._chat_turns.items()
            if (parent := self._parents.get(span)) is not None
            and parent in self._parents
            and self._parents[parent] is None
        }

    @property
    def count(self) -> int:
        main = self._main_turns()
        return len(set(main.values())) if main else self._prompts.count

    def assign(self) -> EntryTurns:
        """What places the run's entries, read again from the start."""
        return EntryTurns(self._parents, self._main_turns())


class EntryTurns:
    """The turn of each entry of a run (`turn_of`, in file order), and whose a cost is (`own_cost`)."""

    __slots__ = ("_current", "_last", "_parents", "_prompts", "_since_report", "_turns")

    def __init__(self, parents: Mapping[str, str | None], turns: Mapping[str, int]) -> None:
        self._parents, self._turns = parents, turns
        self._prompts = _PromptTurns() if not turns else None
        self._current = 0  # the turn of the last entry placed by its span
        self._last = 0
        self._since_report: set[int] = set()  # the turns the main thread was in since the last cost

    def turn_of(self, context: Mapping[str, Any]) -> int:
        """The entry's turn: 0 before the first; an entry outside every turn (a report after
        the last one ended) joins the turn it follows."""
        entry_type, source, detail = _entry_parts(context)
        if self._prompts is not None:
            turn = self._prompts.add(entry_type, source, detail)
        else:
            found = self._span_turn(context.get("span_id"))
            if found is not None:
                self._current = found
            turn = self._current if found is None else found
        if source == MAIN_SOURCE and turn:
            self._since_report.add(turn)
        self._last = turn
        return turn

    @property
    def last(self) -> int:
        """The turn of the last entry placed (where a notice between entries belongs)."""
        return self._last

    def _span_turn(self, span: Any) -> int | None:
        for _ in range(_MAX_HOPS):
            if not isinstance(span, str):
                return None
            if span in self._turns:
                return self._turns[span]
            span = self._parents.get(span)
        return None

    def own_cost(self, turn: int, context: Mapping[str, Any]) -> bool:
        """Whether the cost a usage report (just placed in `turn`) adds is that turn's alone."""
        found = self._span_turn(context.get("span_id")) if self._prompts is None else turn
        since, self._since_report = self._since_report, set()
        _, _, detail = _entry_parts(context)
        if not _since_last_report(detail):
            return bool(found)
        return bool(found) and since <= {found}


def _since_last_report(detail: Mapping[str, Any]) -> bool:
    """Whether a report's cost is all since the last one, whatever turns that held: Claude Code's
    session log writes its `cost-state` once per process (a `-p` run, a terminal session),
    where stdout's `result` reports each turn's (its span's, even when it comes late)."""
    entry = detail.get("sdk_entry")
    return isinstance(entry, Mapping) and entry.get("type") == "cost-state"
