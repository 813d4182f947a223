"""Each tool call paired with the entry that answers it, and how long it took: one rule for
every report (`summary`'s tools, the HTML page's table and each call's tag).

A call is answered by the `tool_result` of the same call id and source, except a background
call's launch notice (`background_launch`: Claude Code's "Async agent launched"): such a
call ends at the event that says so (`background_call_ended`, its notification). It took
what its result reports (`reported_ms`), else the time from the call to its answer.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from transcript_otel.genai.attributes import tool_failed, tool_identity

_MAX_WAITING_CALLS: Final = 100_000


@dataclass(frozen=True, slots=True)
class Answer:
    """What answering one call tells."""

    call_id: str | None
    name: str
    duration_ms: float | None
    failed: bool
    call_seen: bool  # False: a result of a call never seen (counted as a call of its own)


def reported_ms(detail: Mapping[str, Any]) -> float | None:
    """How long a call took, as its result reports it (`duration_ms`; a Codex app-server item's
    `durationMs`), else None."""
    notification = detail.get("notification")
    item = notification.get("item") if isinstance(notification, Mapping) else None
    told = (detail.get("duration_ms"), item.get("durationMs") if isinstance(item, Mapping) else None)
    for reported in told:
        if isinstance(reported, int | float) and not isinstance(reported, bool) and reported >= 0:
            return float(reported)
    return None


class ToolCalls:
    """The calls waiting for their answer, fed a run's entries in order. Holds at most
    100,000 waiting calls (beyond that a call's answer is taken as one of a call never seen)."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        self._waiting: dict[tuple[str, str], tuple[str, datetime]] = {}

    def called(self, source: str, detail: Mapping[str, Any], at: datetime) -> str:
        """A `tool_use`: its tool's name ("tool" when it names none)."""
        call_id, name = tool_identity(detail)
        name = name or "tool"
        if call_id is not None and len(self._waiting) < _MAX_WAITING_CALLS:
            self._waiting[(source, call_id)] = (name, at)
        return name

    def answered(
        self, entry_type: str, source: str, detail: Mapping[str, Any], at: datetime
    ) -> Answer | None:
        """The answer an entry gives to a call, if it is one."""
        if entry_type == "tool_result" and detail.get("background_launch") is not True:
            call_id, name = tool_identity(detail)
            failed = tool_failed(detail)
        elif isinstance(detail.get("background_call_ended"), str):  # a call that ran in the background
            call_id, name = detail["background_call_ended"], None
            failed = detail.get("is_error") is True
        else:
            return None
        waiting = self._waiting.pop((source, call_id), None) if call_id is not None else None
        if waiting is None and name is None:
            return None  # a result of a call never seen: nothing to count it against
        duration = reported_ms(detail)
        if duration is None and waiting is not None:
            duration = (at - waiting[1]).total_seconds() * 1000
        tool = waiting[0] if waiting is not None else str(name)
        return Answer(call_id, tool, duration, failed, waiting is not None)

    def unanswered(self) -> Iterator[str]:
        """The names of the calls still waiting (each once per call), forgetting them."""
        waiting, self._waiting = self._waiting, {}
        for name, _ in waiting.values():
            yield name
