"""What one line of a CLI's own session log says, for an import after the fact.

Claude Code (`~/.claude/projects/<project>/<session>.jsonl`) and Codex
(`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`) write every session to disk as it
happens (docs/session-logs.md). A session mapper reads one line into a `SessionLine`:
the canonical entries it holds, when the line says it happened, and what it tells about
the run's shape (a turn begins or ends; the model; the session's id), which the importer
applies to the run's spans in file order.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any, NamedTuple

from transcript_otel.mappings._entry import MappedEntry

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class SessionLine(NamedTuple):
    entries: list[MappedEntry]
    timestamp_ns: int | None = None  # None: the line says no time (the importer keeps the last)
    opens_turn: bool = False  # a prompt: the open turn ends and a new one begins before the entries
    ends_turn: bool = False  # the turn is over after the entries (Codex `task_complete`)
    model: str | None = None  # the model the line names (a response's, a turn's context)
    session_id: str | None = None  # the session's own id, where the line names it
    failure: str | None = None  # our mapping failed on the line (a bug): why, for a `transcript.error`
    # The line held bytes that are not UTF-8, read as U+FFFD (`utf8_text`): what, for a `transcript.error`.
    repaired: str | None = None
    provider: str | None = None  # the model's provider, where the line names it (OpenCode's `providerID`)


def utf8_text(line: bytes) -> tuple[str, str | None]:
    """The line's text, and None; or, where some of its bytes are not UTF-8 (a file cut or
    written wrong), its text with each such byte as U+FFFD and what was replaced: the line is
    still read as what it is, its text kept, not taken whole as an `unknown` entry."""
    try:
        return line.decode("utf-8"), None
    except UnicodeDecodeError:
        text = line.decode("utf-8", "replace")
    replaced = text.count("\ufffd") - line.count("\ufffd".encode())
    return text, f"{replaced} byte sequence{'s' * (replaced != 1)} not UTF-8 read as U+FFFD"


# The last second told in the CLIs' own shape (`2026-11-27T08:01:07.123Z`), and its ns: most
# lines of a session share their second with the line before.
_last_second: tuple[str, int] = ("", 0)


def timestamp_ns(value: Any) -> int | None:
    """An ISO 8601 time as the CLIs write it (`2026-11-27T08:01:07.123Z`) in ns; None if not one."""
    global _last_second
    if not isinstance(value, str):
        return None
    millis = value[20:23]
    shaped = (
        len(value) == 24 and value[19] == "." and value[23] == "Z" and millis.isascii() and millis.isdigit()
    )
    second, second_ns = _last_second
    if shaped and value[:19] == second:
        return second_ns + int(millis) * 1_000_000
    found = _parsed(value)
    if shaped and found is not None:
        _last_second = (value[:19], found - int(millis) * 1_000_000)
    return found


def _parsed(value: str) -> int | None:
    try:
        moment = datetime.fromisoformat(value)
    except ValueError:
        return None
    if moment.tzinfo is None:
        return None  # a time without its zone is no point in time
    since = moment - _EPOCH  # exact, where `timestamp()`'s float would round the microseconds
    return (since.days * 86_400 + since.seconds) * 1_000_000_000 + since.microseconds * 1_000
