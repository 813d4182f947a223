"""Canonical entries as devflow turns, written in order as soon as nothing more can change them.

Mapping of the canonical entries (in file order, which is capture order):

* `user_message` → a `user` turn; a `system` turn when the chat message's role is
  `system` or `developer` (the prompt the weakincentives OpenAI/LiteLLM adapters send).
* `assistant_message` → an `assistant` turn with its text; a Claude message's thinking
  blocks become a `[thinking]` turn just before it.
* `thinking` → an `assistant` turn whose content starts with `[thinking] `: devflow
  has no role for it, so it is kept, marked, in its place.
* `tool_use` → a tool call (`id`, `name`, `input`: an object, anything else wrapped as
  `{"value": …}`) on the source's open assistant turn (its latest turn, when that is
  an assistant turn), else on a new empty assistant turn: parallel calls share the
  turn of the message that made them; a call after a result opens a new turn.
* `tool_result` → fills the call of the same id and source (`output` = the result's
  text, or `error` when the result says the call failed), and is a `tool_result` turn
  with that text (`durationMs`: reported, else from the call to the result): the
  transcript keeps the order in which results came (between them, events and
  subagent turns), and a result of an unknown call is kept too.
* `token_usage` → `tokensIn`/`tokensOut` (input and output tokens) added to the
  source's open assistant turn (the response it counts); with none open, a `system`
  turn `[usage] tokens: …` carrying them. What each entry counts is `reading.turn_tokens`'
  rule (the HTML page's too): runs whose reports count no tokens (Claude session logs)
  count each assistant message's own usage once, on its turn; where the totals are a
  Claude session's own and the reports count the main agent's turns (the SDK's stream),
  a subagent's model call counts on the turn of its first line. The turns' tokens add up
  to the metadata totals: what the session counts beyond all the turns is a last `system`
  turn `[usage] in the session's total, in no line's usage: …`.
* `system_event` → a `system` turn `[event] <text>` (the subtype and its words).
* `error` → a `system` turn `[error] <text>`; the first error's text is `metadata.error`.
* `unknown` → a `system` turn `[unknown] <text>` (an unreadable line's reason, and the line).
* `subagent:<id>` sources → their turns in place, in capture order, content prefixed
  `[subagent:<id>] `; tool calls pair within their own source.

Any turn but a plain user, system-prompt or assistant message or tool result is
marked in its content, so a reader never mistakes an event for something said.

Only the turns that cannot be written yet are held: an assistant turn while it may
still get tool calls or token usage, one with tool calls waiting for their results,
and the turns after it (written in order). A source's turn stops waiting at that
source's last entry (counted by the first pass over the run), so a finished subagent
holds nothing back. At most `_MAX_HELD_TURNS` turns or `_MAX_HELD_CHARS` characters
are held: beyond, the oldest is written as it is (a call whose result comes later
keeps no `output`; its `tool_result` turn still follows).
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from transcript_otel.exports.devflow.file import DevflowFile
from transcript_otel.exports.devflow.format import go_json, go_time
from transcript_otel.genai.attributes import tool_failed, tool_identity
from transcript_otel.model.entries import MAIN_SOURCE, TranscriptEntry
from transcript_otel.otel.attributes import GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_OUTPUT_TOKENS
from transcript_otel.reading.text import assistant_parts, entry_text, shown_tool_input, shown_tool_output
from transcript_otel.reading.tool_calls import reported_ms
from transcript_otel.reading.turn_tokens import TurnTokens

__all__ = ["TurnWriter"]

_MAX_HELD_TURNS: Final = 10_000
_MAX_HELD_CHARS: Final = 16 * 1024 * 1024
_SYSTEM_ROLES: Final = ("system", "developer")


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _call_input(detail: Mapping[str, Any]) -> dict[str, Any]:
    arguments = shown_tool_input(detail)
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return {str(key): value for key, value in arguments.items()}
    return {"value": arguments}


@dataclass(slots=True, eq=False)
class _Call:
    turn: _Turn
    key: tuple[str, str] | None
    name: str
    input: dict[str, Any]
    started: datetime
    output: str = ""
    error: str = ""


@dataclass(slots=True, eq=False)
class _Turn:
    id: int
    role: str
    source: str
    content: str
    timestamp: datetime
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[_Call] = field(default_factory=list)
    duration_ms: int = 0
    open: bool = False  # an assistant turn that may still get tool calls and token usage
    waiting: int = 0  # its calls still waiting for their result
    size: int = 0  # characters held for it

    def as_json(self) -> dict[str, Any]:
        content = self.content
        if self.source != MAIN_SOURCE:
            content = f"[{self.source}] {content}" if content else f"[{self.source}]"
        turn: dict[str, Any] = {"id": self.id, "role": self.role, "content": content}
        if self.tokens_in:
            turn["tokensIn"] = self.tokens_in
        if self.tokens_out:
            turn["tokensOut"] = self.tokens_out
        turn["timestamp"] = go_time(self.timestamp)
        if self.calls:
            turn["toolCalls"] = [_call_json(call) for call in self.calls]
        if self.duration_ms:
            turn["durationMs"] = self.duration_ms
        return turn


def _call_json(call: _Call) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    if call.key is not None:
        encoded["id"] = call.key[1]
    encoded["name"] = call.name
    encoded["input"] = call.input
    if call.output:
        encoded["output"] = call.output
    if call.error:
        encoded["error"] = call.error
    return encoded


class TurnWriter:
    """Canonical entries in, devflow turns out in order, holding only what must wait."""

    def __init__(self, out: DevflowFile, entries_by_source: Mapping[str, int], tokens: TurnTokens) -> None:
        """`tokens`: what each entry counts on its turn (`RunDigest.turn_tokens`)."""
        self._out = out
        self._remaining = Counter(entries_by_source)
        self._tokens = tokens
        self._last_at: datetime | None = None
        self._held: deque[_Turn] = deque()
        self._held_chars = 0
        self._open: dict[str, _Turn] = {}
        self._calls: dict[tuple[str, str], _Call] = {}
        self._next_id = 1
        self.written = 0

    # -- entries --------------------------------------------------------------------------

    def add(self, entry: TranscriptEntry) -> None:
        kind, source, detail, at = entry.entry_type, entry.source, entry.detail, entry.timestamp
        self._last_at = at
        if kind == "user_message":
            role = _mapping(detail, "message").get("role")
            self._turn(source, "system" if role in _SYSTEM_ROLES else "user", entry_text(kind, detail), at)
        elif kind == "assistant_message":
            self._assistant(source, detail, at)
        elif kind == "thinking":
            turn = self._turn(source, "assistant", f"[thinking] {entry_text(kind, detail)}", at, open_=True)
            self._count(turn, self._tokens.counted(kind, source, detail))
        elif kind == "tool_use":
            self._tool_use(source, detail, at)
        elif kind == "tool_result":
            self._tool_result(source, detail, at)
        elif kind == "token_usage":
            self._token_usage(source, detail, at)
        elif kind == "system_event":
            self._turn(source, "system", f"[event] {entry_text(kind, detail)}", at)
        elif kind == "error":
            self._turn(source, "system", f"[error] {entry_text(kind, detail)}", at)
        else:
            text = entry_text(kind, detail)
            line = detail.get("line")
            if isinstance(line, str) and line:
                text = f"{text}\n{line}"
            self._turn(source, "system", f"[{kind}] {text}", at)
        self._remaining[source] -= 1
        if self._remaining[source] == 0:
            self._end_source(source)
        self._flush()

    def _turn(self, source: str, role: str, content: str, at: datetime, *, open_: bool = False) -> _Turn:
        self._close(source)
        turn = _Turn(self._next_id, role, source, content, at, open=open_, size=len(content))
        self._next_id += 1
        self._held.append(turn)
        self._held_chars += turn.size
        if open_:
            self._open[source] = turn
        return turn

    def _grow(self, turn: _Turn, chars: int) -> None:
        turn.size += chars
        self._held_chars += chars

    def _assistant(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        thinking, text = assistant_parts(detail)
        if thinking is not None:
            self._turn(source, "assistant", f"[thinking] {thinking}", at)
        turn = self._turn(source, "assistant", text, at, open_=True)
        self._count(turn, self._tokens.counted("assistant_message", source, detail))

    @staticmethod
    def _count(turn: _Turn, usage: Mapping[str, int]) -> None:
        turn.tokens_in += usage.get(GEN_AI_USAGE_INPUT_TOKENS, 0)
        turn.tokens_out += usage.get(GEN_AI_USAGE_OUTPUT_TOKENS, 0)

    def _tool_use(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        turn = self._open.get(source) or self._turn(source, "assistant", "", at, open_=True)
        self._count(turn, self._tokens.counted("tool_use", source, detail))
        call_id, name = tool_identity(detail)
        key = (source, call_id) if call_id is not None else None
        call = _Call(turn, key, name or "tool", _call_input(detail), at)
        turn.calls.append(call)
        self._grow(turn, len(call.name) + len(go_json(call.input, 0)))
        if key is not None:
            replaced = self._calls.pop(key, None)
            if replaced is not None:  # the same id again: the first call gets no result
                replaced.turn.waiting -= 1
            self._calls[key] = call
            turn.waiting += 1

    def _tool_result(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        text = shown_tool_output(detail)
        call_id, _ = tool_identity(detail)
        call = self._calls.pop((source, call_id), None) if call_id is not None else None
        duration = reported_ms(detail)
        if call is not None:
            if tool_failed(detail):
                call.error = text
            else:
                call.output = text
            call.turn.waiting -= 1
            self._grow(call.turn, len(text))
            if duration is None:
                duration = max((at - call.started).total_seconds() * 1000, 0.0)
        turn = self._turn(source, "tool_result", text, at)
        turn.duration_ms = round(duration) if duration is not None else 0

    def _token_usage(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        usage = self._tokens.counted("token_usage", source, detail)
        tokens_in = usage.get(GEN_AI_USAGE_INPUT_TOKENS, 0)
        tokens_out = usage.get(GEN_AI_USAGE_OUTPUT_TOKENS, 0)
        if not (tokens_in or tokens_out):
            return  # nothing devflow can hold (cost is in the metadata)
        turn = self._open.get(source)
        if turn is None:
            turn = self._turn(source, "system", f"[usage] {entry_text('token_usage', detail)}", at)
        self._count(turn, usage)

    # -- holding and writing --------------------------------------------------------------

    def _close(self, source: str) -> None:
        turn = self._open.pop(source, None)
        if turn is not None:
            turn.open = False

    def _end_source(self, source: str) -> None:
        """The source's last entry was read: its open turn and waiting calls wait no more."""
        self._close(source)
        for key in [key for key in self._calls if key[0] == source]:
            self._calls.pop(key).turn.waiting -= 1

    def _let_go(self, turn: _Turn) -> None:
        """Write `turn` as it is, whatever it waits for."""
        if self._open.get(turn.source) is turn:
            self._close(turn.source)
        for call in turn.calls:
            if call.key is not None and self._calls.get(call.key) is call:
                del self._calls[call.key]
        turn.waiting = 0

    def _flush(self) -> None:
        held = self._held
        while held:
            head = held[0]
            if head.open or head.waiting:
                if len(held) <= _MAX_HELD_TURNS and self._held_chars <= _MAX_HELD_CHARS:
                    return
                self._let_go(head)
            held.popleft()
            self._held_chars -= head.size
            self._write(head)

    def _write(self, turn: _Turn) -> None:
        self._out.write((b",\n    " if self.written else b"\n    ") + go_json(turn.as_json(), 2))
        self.written += 1

    def finish(self) -> None:
        for source in list(self._open):
            self._close(source)
        for call in self._calls.values():
            call.turn.waiting -= 1
        self._calls.clear()
        self._session_rest()
        self._flush()

    def _session_rest(self) -> None:
        """What the session's totals count beyond the turns, on a turn of its own, so the turns
        add up to the metadata."""
        if self._last_at is None:
            return
        rest = self._tokens.rest()
        rest_in = rest.get(GEN_AI_USAGE_INPUT_TOKENS, 0)
        rest_out = rest.get(GEN_AI_USAGE_OUTPUT_TOKENS, 0)
        if not (rest_in or rest_out):
            return
        words = ", ".join(f"{count} {word}" for count, word in ((rest_in, "in"), (rest_out, "out")) if count)
        turn = self._turn(
            MAIN_SOURCE,
            "system",
            f"[usage] in the session's total, in no line's usage: {words}",
            self._last_at,
        )
        turn.tokens_in, turn.tokens_out = rest_in, rest_out
