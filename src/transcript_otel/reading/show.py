"""The human-readable transcript (`transcript-otel show`), in the role-based seed's format.

    [09:15:32] ⚙️ SYSTEM
    You are a helpful coding assistant...

    [09:15:35] 🤖 ASSISTANT
    I'll review the code in src/main.py. Let me read the file first.

    [09:15:36] 🔧 Read
    {"path": "src/main.py"}

    [subagent:abc123] [09:15:38] 🤖 ASSISTANT
    Looking at the implementation...

A symbol per role (⚙️ system, 👤 user, 🤖 assistant, 🔧 tool), the time in UTC, a
`[source]` prefix for subagents. Headers are coloured on a terminal, plain when piped.
Records stream through `ShowWriter.write()` one at a time, so a run of any length, or
one still being written (`follow()`), is shown as it is read.
"""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, BinaryIO, Final, TextIO

from transcript_otel.genai.attributes import tool_failed, tool_identity
from transcript_otel.model.entries import MAIN_SOURCE, TranscriptEntry, TranscriptEvent
from transcript_otel.reading.escapes import visible
from transcript_otel.reading.lines import LineReader
from transcript_otel.reading.reconstruct import entry_from_context
from transcript_otel.reading.text import ROLES, entry_text, input_words, shown_tool_input, shown_tool_output
from transcript_otel.reading.turn_end import TurnEnd
from transcript_otel.records.serialize import loads

SYMBOLS: Final = {"system": "⚙️", "user": "👤", "assistant": "🤖", "tool": "🔧"}
_LABELS: Final = {
    "thinking": "THINKING",
    "token_usage": "USAGE",
    "error": "ERROR",
    "unknown": "UNKNOWN",
    "system_event": "SYSTEM",
}
# ANSI SGR colours of a header by role; errors and failed tools in red.
_COLOURS: Final = {"system": "2", "user": "32", "assistant": "36", "tool": "33", "failed": "31;1"}
_FOLLOW_POLL_S: Final = 0.25
# Entries whose words are prose in Markdown; the others (tool traffic, events) go in code blocks.
_PROSE: Final = frozenset({"user_message", "assistant_message", "thinking"})


@dataclass(frozen=True, slots=True)
class ShowFilter:
    """Which entries to show: by source (`main`, `subagent:<id>`, or `subagent` for all of
    them), by entry type, and by time (inclusive, UTC)."""

    sources: frozenset[str] = frozenset()
    entry_types: frozenset[str] = frozenset()
    since: datetime | None = None
    until: datetime | None = None

    def accepts(self, entry: TranscriptEntry) -> bool:
        if self.entry_types and entry.entry_type not in self.entry_types:
            return False
        if self.sources and not (
            entry.source in self.sources or ("subagent" in self.sources and entry.source != MAIN_SOURCE)
        ):
            return False
        moment = entry.timestamp if entry.timestamp.tzinfo else entry.timestamp.replace(tzinfo=UTC)
        if self.since is not None and moment < self.since:
            return False
        return self.until is None or moment <= self.until


def wants_colour(stream: TextIO, choice: str = "auto") -> bool:
    """`always`, `never`, or (`auto`) a terminal without `NO_COLOR` set."""
    if choice != "auto":
        return choice == "always"
    if os.environ.get("NO_COLOR"):
        return False
    isatty: Callable[[], bool] | None = getattr(stream, "isatty", None)
    return bool(isatty and isatty())


@dataclass(slots=True)
class ShowWriter:
    """Writes records as the readable transcript; counts what it showed and skipped."""

    out: TextIO
    colour: bool = False
    only: ShowFilter = field(default_factory=ShowFilter)
    max_chars: int | None = 4000
    # `markdown`: banners as headings, entries as sub-headings, tool traffic in code blocks.
    markdown: bool = False
    shown: int = 0
    malformed: int = 0
    _tool_names: dict[tuple[str, str], str] = field(default_factory=dict)
    _errors: int = 0  # the run's `error` entries so far, shown or not: its end says `failed`
    _turn_end: TurnEnd = field(default_factory=TurnEnd)  # its end says `stopped mid-turn`

    def write(self, record: Mapping[str, Any]) -> None:
        event = record.get("event")
        context = record.get("context")
        context = context if isinstance(context, Mapping) else {}
        if event == TranscriptEvent.START.value:
            self._errors, self._turn_end = 0, TurnEnd()
            self._banner(f"{context.get('prompt_name', '?')} · {context.get('adapter', '?')}", record)
        elif event == TranscriptEvent.STOP.value:
            total = context.get("total_entries")
            ended = "failed" if self._errors else "stopped mid-turn" if self._turn_end.mid_turn else "stopped"
            self._banner(f"{ended} · {total} entries", record)
        elif event == TranscriptEvent.ERROR.value:
            message = visible(str(context.get("message", record.get("message"))))
            self._line(self._paint("failed", f"⚠ transcript.error: {message}"))
        elif event == TranscriptEvent.ENTRY.value:
            try:
                entry = entry_from_context(context)
            except ValueError as exc:
                self.malformed += 1
                self._line(self._paint("failed", f"⚠ {visible(str(exc))}"))
                self._line("")
                return
            self._errors += entry.entry_type == "error"
            self._turn_end.add(entry.entry_type, entry.source, entry.detail)
            if self.only.accepts(entry):
                self.entry(entry)

    def entry(self, entry: TranscriptEntry) -> None:
        role = ROLES.get(entry.entry_type, "system")
        detail = entry.detail
        text = entry_text(entry.entry_type, detail)
        failed = entry.entry_type == "error" or (entry.entry_type == "tool_result" and tool_failed(detail))
        if role == "tool" or entry.entry_type == "tool_use":
            label, text = self._tool(entry)
            symbol = SYMBOLS["tool"]
            role = "tool"
        else:
            label = _LABELS.get(entry.entry_type, role.upper())
            chat = detail.get("message")
            if (
                entry.entry_type == "user_message"
                and isinstance(chat, Mapping)
                and chat.get("role") == "system"
            ):
                role, label = "system", "SYSTEM"
            symbol = SYMBOLS[role]
        prefix = "" if entry.source == MAIN_SOURCE else f"[{visible(entry.source)}] "
        header = f"{prefix}[{entry.timestamp.astimezone(UTC):%H:%M:%S}] {symbol} {visible(label)}"
        body = self._cut(visible(text))
        if self.markdown:
            header = f"### {header}{' (failed)' if failed else ''}"
            if entry.entry_type not in _PROSE:
                fence = "`" * max(3, _longest_backtick_run(body) + 1)
                body = f"{fence}\n{body}\n{fence}"
        self._line(self._paint("failed" if failed else role, header))
        if self.markdown:
            self._line("")
        self._line(body)
        self._line("")
        self.shown += 1

    def _tool(self, entry: TranscriptEntry) -> tuple[str, str]:
        call_id, name = tool_identity(entry.detail)
        key = (entry.source, call_id) if call_id is not None else None
        if entry.entry_type == "tool_use":
            name = name or "tool"
            if key is not None and len(self._tool_names) < 100_000:
                self._tool_names[key] = name
            arguments = shown_tool_input(entry.detail)
            return name, entry_text(entry.entry_type, entry.detail) if arguments is None else input_words(
                arguments
            )
        name = name or (self._tool_names.pop(key, None) if key is not None else None) or "tool"
        outcome = "failed" if tool_failed(entry.detail) else "result"
        return f"{name} → {outcome}", shown_tool_output(entry.detail)

    def _banner(self, what: str, record: Mapping[str, Any]) -> None:
        when = record.get("timestamp")
        stamp = ""
        if isinstance(when, str):
            try:
                stamp = f" · {datetime.fromisoformat(when).astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC"
            except ValueError:
                stamp = ""
        what = visible(what)
        self._line(f"## {what}{stamp}" if self.markdown else self._paint("system", f"── {what}{stamp} ──"))
        self._line("")

    def _cut(self, text: str) -> str:
        if self.max_chars is None or len(text) <= self.max_chars:
            return text
        return f"{text[: self.max_chars]}… ({len(text) - self.max_chars} more characters; --full shows all)"

    def _paint(self, role: str, text: str) -> str:
        if not self.colour:
            return text
        return f"\x1b[{_COLOURS.get(role, '0')}m{text}\x1b[0m"

    def _line(self, text: str) -> None:
        self.out.write(text + "\n")


def follow(
    path: Path, *, poll_s: float = _FOLLOW_POLL_S, stop_when_stopped: bool = True
) -> Iterator[dict[str, Any]]:
    """The records of a JSONL file as it grows (`tail -f`), until its run's `transcript.stop`.

    Only whole lines are read: a line the writer is still writing waits for its end.
    Lines that are not JSON objects are skipped. Stops at Ctrl-C (the caller's
    KeyboardInterrupt) or, with `stop_when_stopped`, after the last run started in the
    file has stopped.
    """
    open_runs = 0
    lines = LineReader(os.fspath(path))  # holds a line the writer is still writing, up to its cap
    handle = open(path, "rb")  # noqa: SIM115 (reopened when the file is replaced)
    try:
        while True:
            chunk = handle.read(1 << 16)
            if not chunk:
                time.sleep(poll_s)
                if _replaced(path, handle):  # truncated, or another file moved over it
                    handle.close()
                    handle = open(path, "rb")  # noqa: SIM115
                    lines, open_runs = LineReader(os.fspath(path)), 0
                    warnings.warn(f"{path} was replaced or truncated: reading it again", stacklevel=2)
                continue
            for _, line in lines.feed(chunk):
                record = _record(line)
                if record is None:
                    continue
                yield record
                event = record.get("event")
                if event == TranscriptEvent.START.value:
                    open_runs += 1
                elif event == TranscriptEvent.STOP.value:
                    open_runs -= 1
                    if stop_when_stopped and open_runs <= 0:
                        return
    finally:
        handle.close()


def _replaced(path: Path, handle: BinaryIO) -> bool:
    try:
        now = os.stat(path)
    except OSError:
        return False  # gone for a moment (a rename in progress): keep the old handle
    opened = os.fstat(handle.fileno())
    return (now.st_ino, now.st_dev) != (opened.st_ino, opened.st_dev) or now.st_size < handle.tell()


def _longest_backtick_run(text: str) -> int:
    longest = run = 0
    for character in text:
        run = run + 1 if character == "`" else 0
        longest = max(longest, run)
    return longest


def _record(line: bytes) -> dict[str, Any] | None:
    try:
        record = loads(line)
    except ValueError:
        return None
    return record if isinstance(record, dict) else None
