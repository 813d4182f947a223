"""The tokens each entry of a run counts on its turn, so that a run's turns add up to its totals.

One rule for every export that shows tokens per turn (devflow's turns, the HTML page's turn
lines), read in file order (`counted`):

* a usage report counts what it adds to the run's totals (`RunningUsage`);
* where no report counts tokens (a Claude session log: its `cost-state` tells only the
  session's totals), a Claude message's own usage counts once, on its first line;
* where the totals are the Claude session's own (`modelUsage`, subagents included) and the
  reports count the main agent's turns (the SDK's stream), a subagent's model call counts its
  usage on its first line (`message_usage`, as the span tree counts it).

What the session's totals count beyond all that (a subagent's output, which the stream's lines
tell only in part; a compaction's call) is `rest()`, for one last line that says so.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.attributes import RunningUsage, message_usage, usage_attributes
from transcript_otel.model.entries import MAIN_SOURCE

__all__ = ["TurnTokens"]

# Entries a Claude message's lines become, any of which may be its first (and carry its usage).
_MESSAGE_ENTRIES: Final = frozenset({"assistant_message", "thinking", "tool_use"})


class TurnTokens:
    """What each entry of one run, read in order, counts on its turn (`gen_ai.usage.*` counts)."""

    __slots__ = ("_counted", "_last_message", "_message_usage", "_session_totals", "_usage")

    def __init__(self, *, reports_usage: bool, session_totals: Mapping[str, int] | None) -> None:
        """`reports_usage`: whether a usage report of the run counts tokens; `session_totals`: the
        run's totals where they are the Claude session's own."""
        self._message_usage = not reports_usage
        self._session_totals = dict(session_totals) if session_totals is not None else None
        self._counted: Counter[str] = Counter()
        self._last_message: dict[str, str] = {}  # by source: a message's lines come together
        # Codex repeats its running total: each report counts what the total grew by.
        self._usage = RunningUsage()

    def counted(self, entry_type: str, source: str, detail: Mapping[str, Any]) -> dict[str, int]:
        """The tokens this entry counts on its turn (empty: none)."""
        usage: dict[str, int] = {}
        if entry_type == "token_usage":
            usage = self._usage.added(detail)
        elif entry_type in _MESSAGE_ENTRIES:
            found = message_usage(detail) if self._message_usage else None
            if found is not None and self._last_message.get(source) != found[0]:
                self._last_message[source] = found[0]
                usage = found[1]
            if not self._message_usage and self._session_totals is not None and source != MAIN_SOURCE:
                # The session's totals count a subagent's calls, the reports only the main agent's;
                # the mapping puts each call's usage on its first line.
                usage = usage_attributes({"usage": detail.get("message_usage")})
        usage = {key: count for key, count in usage.items() if count}
        self._counted.update(usage)
        return usage

    def rest(self) -> dict[str, int]:
        """What the session's totals count beyond all the entries read (empty: nothing, or the
        totals are not the session's)."""
        if self._session_totals is None:
            return {}
        return {
            key: total - self._counted[key]
            for key, total in self._session_totals.items()
            if total > self._counted[key]
        }
