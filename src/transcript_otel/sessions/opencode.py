"""OpenCode's sessions as `import` finds and reads them: one database, a run per session row.

Where Claude Code and Codex write a file per session, OpenCode writes every session into one
SQLite database (`opencode_db`). A path to it is told by its content (an SQLite file with
OpenCode's tables) and gives one `SessionFiles` per `session` row (`session_id`); the session's
lines are its rows (`opencode_db.session_lines`), mapped by `mappings.opencode_rows`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from transcript_otel.mappings.opencode_rows import OpenCodeRowMapper
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.sessions.opencode_db import (
    OpenCodeDatabaseError,
    read_only,
    rows_timeline,
    session_lines,
)
from transcript_otel.sessions.timeline import MapLine, TimedLine

if TYPE_CHECKING:
    from transcript_otel.sessions.files import SessionFiles


class OpenCodeLines:
    """A session's row mapper as the recorder asks for one (`recorder.SessionMapping`)."""

    def __init__(self, _last_report: bytes | None, _main_file: Path) -> None:
        self.mapper = OpenCodeRowMapper()

    def __call__(self, line: bytes, source: str) -> SessionLine:
        return self.mapper.line(line)

    def counted(self) -> dict[str, Any]:
        return {"given": self.mapper.counted()}

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        given = counted.get("given")
        if not isinstance(given, list) or not all(isinstance(key, str) for key in given):
            return False
        self.mapper.go_on(given)
        return True

    def counted_messages(self) -> list[str]:
        return []  # each step's usage is given once, by its message row


def database_timeline(session: SessionFiles, map_line: MapLine) -> Iterator[TimedLine]:
    """The session's rows, read in one snapshot, mapped in order. Raises `OpenCodeDatabaseError`."""
    if session.session_id is None:
        raise OpenCodeDatabaseError(f"{session.path}: which OpenCode session is not said")
    with read_only(session.path) as connection:
        lines = session_lines(connection, session.session_id)
    return rows_timeline(lines, map_line)
