"""The HTML page's data for each record: one compact JSON object per entry or capture notice.

`entry_data` turns a `transcript.entry` context into the object the page's script
renders (short keys, listed there), with the words to show picked per entry type;
a record that cannot be read as an entry becomes a `malformed` object with its reason
and its record, and a `transcript.error` record a notice in the timeline
(`error_notice`). Times are epoch microseconds (`epoch_us`), so the script sorts
entries exactly.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from typing import Any, Final

from transcript_otel.genai.attributes import (
    cost_usd,
    message_usage,
    tool_failed,
    tool_identity,
    usage_attributes,
)
from transcript_otel.model.entries import TranscriptEntry
from transcript_otel.reading.digest import TOKEN_NAMES
from transcript_otel.reading.reconstruct import entry_from_context
from transcript_otel.reading.text import (
    assistant_parts,
    compact_json,
    entry_text,
    shown_tool_input,
    shown_tool_output,
)
from transcript_otel.reading.tool_calls import ToolCalls
from transcript_otel.reading.turn_tokens import TurnTokens
from transcript_otel.reading.turns import EntryTurns

_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
# Entries a Claude message's lines become, any of which may be its first (and carry its usage).
_MESSAGE_ENTRIES: Final = frozenset({"assistant_message", "thinking", "tool_use"})
# Entry kinds the page shows besides the canonical entry types.
MALFORMED: Final = "malformed"
TRANSCRIPT_ERROR: Final = "transcript.error"


def epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (a naive time is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def _words(entry_type: str, detail: Mapping[str, Any]) -> tuple[str | None, str | None, bool]:
    """(thinking, the text to show, whether there are no words but the detail's own JSON).

    A tool result shows its output, a Claude assistant message its text blocks with
    its thinking blocks apart; every other entry its `entry_text`.
    """
    thinking = None
    if entry_type == "tool_result":
        words = shown_tool_output(detail)
    elif entry_type == "assistant_message":
        thinking, words = assistant_parts(detail)
        if not words and thinking is None:
            words = entry_text(entry_type, detail)
    else:
        words = entry_text(entry_type, detail)
    if words.startswith("{") and words == compact_json(detail):
        return thinking, None, True
    return thinking, words, False


def _short_usage(usage: Mapping[str, int]) -> dict[str, int]:
    """`gen_ai.usage.*` counts under the page's short names."""
    return {TOKEN_NAMES[key]: value for key, value in usage.items() if key in TOKEN_NAMES}


class Placement:
    """Where each entry of a run stands, read in order: its turn (`EntryTurns`), the tokens it
    counts there (`TurnTokens`, as devflow's turns count them), the call it answers and how long
    that took (`ToolCalls`, as the header's tools table counts them), and whether its cost is
    its turn's or the run's alone."""

    __slots__ = ("_calls", "_tokens", "_turns")

    def __init__(self, turns: EntryTurns, tokens: TurnTokens) -> None:
        self._turns = turns
        self._tokens = tokens
        self._calls = ToolCalls()

    def place(self, data: dict[str, Any], entry: TranscriptEntry, context: Mapping[str, Any]) -> None:
        data["t"] = turn = self._turns.turn_of(context)
        counted = _short_usage(self._tokens.counted(entry.entry_type, entry.source, entry.detail))
        if counted:
            data["tk"] = counted
        if entry.entry_type == "tool_use":
            self._calls.called(entry.source, entry.detail, entry.timestamp)
        else:
            answer = self._calls.answered(entry.entry_type, entry.source, entry.detail, entry.timestamp)
            if answer is not None and answer.call_id is not None:
                data["ans"] = answer.call_id
            if answer is not None and answer.duration_ms is not None:
                data["ms"] = answer.duration_ms
        if "cost" in data and not self._turns.own_cost(turn, context):
            data["rc"] = data.pop("cost")  # the run's cost, not this turn's: on the header only

    def place_notice(self, data: dict[str, Any]) -> None:
        """A capture notice or an unreadable entry: in the turn of the entry before it."""
        data["t"] = self._turns.last

    def rest(self) -> dict[str, int]:
        """What the run's tokens count beyond every entry placed (short names; see `TurnTokens`)."""
        return _short_usage(self._tokens.rest())


def entry_data(
    index: int, context: Mapping[str, Any], at_us: int, placement: Placement
) -> tuple[dict[str, Any], int]:
    """The page's JSON object for one `transcript.entry` context, and its time (`at_us` if it has none).

    Keys: `i` file order, `k` entry type, `s` source, `n` sequence number, `ts` the
    recorded timestamp, `us` epoch microseconds, `t` its turn, `x` the text (absent when
    the only words are the detail's JSON: `xj`), `th` an assistant message's thinking, `d`
    the detail, `r` raw (unknown and malformed entries), `c`/`nm`/`in` call id, tool name and
    input, `f` failed, `ans` the call an entry answers, `ms` how long that call took, `u`
    token counts, `cost` the turn's cost a report adds (`rc`: the run's, of several turns),
    `mu` a message's usage, `tk` the tokens it counts on its turn (`TurnTokens`).
    """
    try:
        entry = entry_from_context(context)
    except ValueError as exc:
        return malformed(index, context, at_us, str(exc)), at_us
    at_us = epoch_us(entry.timestamp)
    kind, detail = entry.entry_type, entry.detail
    data: dict[str, Any] = {
        "i": index,
        "k": kind,
        "s": entry.source,
        "n": entry.sequence_number,
        "ts": context.get("timestamp"),
        "us": at_us,
    }
    thinking, words, fallback = _words(kind, detail)
    if words is not None:
        data["x"] = words
    if fallback:
        data["xj"] = 1
    if thinking is not None:
        data["th"] = thinking
    data["d"] = detail
    if kind in ("unknown", "error") and entry.raw is not None:
        data["r"] = entry.raw
    if kind in ("tool_use", "tool_result"):
        call_id, name = tool_identity(detail)
        if call_id is not None:
            data["c"] = call_id
        if name is not None:
            data["nm"] = name
        if kind == "tool_use":
            data["in"] = shown_tool_input(detail)
        elif tool_failed(detail):
            data["f"] = 1
    elif kind == "token_usage":
        usage = _short_usage(usage_attributes(detail))
        if usage:
            data["u"] = usage
        cost = cost_usd(detail)
        if cost:
            data["cost"] = cost
    if kind in _MESSAGE_ENTRIES:  # any line of a message may be its first: tool calls only too
        counted = message_usage(detail)
        if counted is not None:
            data["mu"] = [counted[0], _short_usage(counted[1])]
    placement.place(data, entry, context)
    return data, at_us


def _notice(
    index: int, kind: str, context: Mapping[str, Any], timestamp: Any, at_us: int, words: str
) -> dict[str, Any]:
    """The keys of an object that is not a readable entry: what its context says, `main` for
    a source it does not name, and the words that tell what it is."""
    source = context.get("source")
    return {
        "i": index,
        "k": kind,
        "s": source if isinstance(source, str) and source else "main",
        "n": context.get("sequence_number"),
        "ts": timestamp if isinstance(timestamp, str) else None,
        "us": at_us,
        "x": words,
    }


def malformed(index: int, context: Mapping[str, Any], at_us: int, reason: str) -> dict[str, Any]:
    """A `transcript.entry` record that is not an entry, shown with why and with its record."""
    data = _notice(index, MALFORMED, context, context.get("timestamp"), at_us, reason)
    data["r"] = compact_json(dict(context))
    return data


def error_notice(
    index: int, context: Mapping[str, Any], record: Mapping[str, Any], at_us: int
) -> dict[str, Any]:
    """A `transcript.error` record (something went wrong while capturing) as a notice in the timeline."""
    words = context.get("error") or record.get("message") or "transcript error"
    text = words if isinstance(words, str) else compact_json(words)
    data = _notice(index, TRANSCRIPT_ERROR, context, record.get("timestamp"), at_us, text)
    data["d"] = dict(context)
    return data
