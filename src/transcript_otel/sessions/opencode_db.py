"""OpenCode's database read as it is written: its sessions' rows, in order, as lines to map.

OpenCode (1.18) keeps every session in one SQLite database in WAL mode,
`$XDG_DATA_HOME/opencode/opencode.db` (default `~/.local/share/opencode/`; `$OPENCODE_DB`
names another, relative to that folder unless absolute), its rows in the `-wal` file until a
checkpoint (docs/session-logs.md). It is only ever read here, and never in a way that could
keep the CLI from writing:

- opened through SQLite (a copy of the `.db` file alone may hold no table at all) with a
  `file:…?mode=ro` URI and `query_only`: nothing is written, no checkpoint run;
- each read is one short transaction (a consistent snapshot of the session), then closed: a
  WAL reader never blocks the writer, and a snapshot held long would only keep the WAL growing;
- a database that is locked (`SQLITE_BUSY`), being made, or whose `-shm` cannot be opened
  raises `OpenCodeDatabaseError` (an `OSError`): `import` says it, `watch` reads again later.

A session's rows become the lines its mapper reads (`mappings.opencode_rows`), one JSON object
each, `{"table", "row"}` with the row's JSON columns parsed: the `session` row, then each
message in the order it was made, a user message before its parts, an assistant message (a
model step, which OpenCode completes after its parts) after them.
"""

from __future__ import annotations

import json
import os
import sqlite3
import urllib.parse
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final, NamedTuple

from transcript_otel.model.entries import MAIN_SOURCE
from transcript_otel.sessions.timeline import MapLine, TimedLine

DATABASE_NAME: Final = "opencode.db"
# The tables a database must have to be OpenCode's (the others are not read).
TABLES: Final = frozenset({"session", "message", "part"})
# How long a read waits for a lock (a WAL reader waits only while the WAL is recovered).
_BUSY_S: Final = 1.0
# Columns of `session` that hold JSON text.
_JSON_COLUMNS: Final = frozenset({"data", "model", "permission", "summary_diffs", "metadata", "revert"})


class OpenCodeDatabaseError(OSError):
    """The database cannot be read now (locked, being made, not a database): why."""


class SessionRow(NamedTuple):
    id: str
    parent_id: str | None
    time_updated: int  # epoch ms


def opencode_database(environ: Mapping[str, str] | None = None) -> Path:
    """Where OpenCode keeps its database, by the rule its binary (1.18.33) follows:
    `$OPENCODE_DB` (absolute, else in the data folder), else `opencode.db` in its data folder,
    `$XDG_DATA_HOME/opencode`, by default `~/.local/share/opencode`."""
    env = os.environ if environ is None else environ
    data = Path(env.get("XDG_DATA_HOME") or Path(env.get("HOME") or Path.home()) / ".local" / "share")
    folder = data / "opencode"
    named = env.get("OPENCODE_DB")
    if named and named != ":memory:":
        return Path(named) if Path(named).is_absolute() else folder / named
    return folder / DATABASE_NAME


@contextmanager
def read_only(path: Path) -> Iterator[sqlite3.Connection]:
    """A connection that can only read `path`, closed after; raises `OpenCodeDatabaseError`."""
    uri = f"file:{urllib.parse.quote(str(path.absolute()))}?mode=ro"
    try:
        connection = sqlite3.connect(uri, uri=True, timeout=_BUSY_S, isolation_level=None)
    except sqlite3.Error as exc:
        raise OpenCodeDatabaseError(f"{path}: cannot open the database read-only: {exc}") from exc
    with closing(connection):
        try:
            connection.execute("PRAGMA query_only = ON")
            yield connection
        except sqlite3.Error as exc:
            raise OpenCodeDatabaseError(f"{path}: cannot read the database now: {exc}") from exc


def is_opencode_database(path: Path) -> bool:
    """Whether the SQLite file `path` has OpenCode's tables. Raises `OpenCodeDatabaseError` where
    it cannot be read now (locked): not known to be anyone's."""
    with read_only(path) as connection:
        names = {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    return names >= TABLES


def sessions(connection: sqlite3.Connection) -> list[SessionRow]:
    """Every session, oldest first."""
    query = "SELECT id, parent_id, time_updated FROM session ORDER BY time_created, id"
    return [SessionRow(*row) for row in connection.execute(query)]


def session_ids(path: Path) -> list[str]:
    """The sessions in OpenCode's database `path`, oldest first. Raises `OpenCodeDatabaseError`."""
    with read_only(path) as connection:
        return [row.id for row in sessions(connection)]


def changed_sessions(connection: sqlite3.Connection, since_ms: int) -> dict[str, int]:
    """The sessions whose rows (the session's, its messages', its parts') were updated at
    `since_ms` or later, oldest session first, each with the latest such update (epoch ms)."""
    query = """
        SELECT session.id, max(changed.updated) FROM (
            SELECT id AS session_id, time_updated AS updated FROM session WHERE time_updated >= :since
            UNION ALL SELECT session_id, time_updated FROM message WHERE time_updated >= :since
            UNION ALL SELECT session_id, time_updated FROM part WHERE time_updated >= :since
        ) AS changed JOIN session ON session.id = changed.session_id
        GROUP BY session.id ORDER BY session.time_created, session.id
    """
    return dict(connection.execute(query, {"since": since_ms}).fetchall())


def session_lines(connection: sqlite3.Connection, session_id: str, since_ms: int = 0) -> list[bytes]:
    """The session's rows as lines, in one snapshot: its `session` row, and its messages and parts
    updated at `since_ms` or later (all of them by default); none if there is no such session."""
    connection.execute("BEGIN")
    try:
        connection.row_factory = sqlite3.Row
        session = connection.execute("SELECT * FROM session WHERE id = ?", (session_id,)).fetchone()
        if session is None:
            return []
        messages = connection.execute(
            "SELECT * FROM message WHERE session_id = ? ORDER BY time_created, id", (session_id,)
        ).fetchall()
        parts = connection.execute(
            "SELECT * FROM part WHERE session_id = ? AND time_updated >= ? ORDER BY id",
            (session_id, since_ms),
        ).fetchall()
    finally:
        connection.row_factory = None
        connection.execute("COMMIT")
    by_message: dict[str, list[tuple[int, str, bytes]]] = {}
    for part in parts:
        by_message.setdefault(part["message_id"], []).extend(_part_lines(_values(part)))
    lines = [_line("session", _values(session))]
    for message in messages:
        own = [line for _, _, line in sorted(by_message.get(message["id"], []))]
        values = _values(message)
        said = [_line("message", values)] if message["time_updated"] >= since_ms else []
        user = isinstance(values["data"], dict) and values["data"].get("role") == "user"
        lines += [*said, *own] if user else [*own, *said]
    return lines


def _part_lines(part: dict[str, Any]) -> list[tuple[int, str, bytes]]:
    """A part's lines, each at the time it tells of: a text or reasoning when it ended; a tool
    that ended twice, as it started (`"until": "start"`: what a watch reading it then saw) and as
    it ended, so that an import gives its entries in the order a watch does."""
    data = part["data"] if isinstance(part["data"], dict) else {}
    kind, created = data.get("type"), part["time_created"]
    ends = data.get("time") if kind in ("text", "reasoning") else None
    if kind != "tool":
        return [(_time(ends, "end") or created, part["id"], _line("part", part))]
    state = data.get("state")
    times = state.get("time") if isinstance(state, dict) else None
    started, ended = _time(times, "start"), _time(times, "end")
    if started is None or ended is None:
        return [(started or created, part["id"], _line("part", part))]
    return [
        (started, part["id"], _line("part", part, until="start")),
        (ended, part["id"], _line("part", part)),
    ]


def _time(times: Any, key: str) -> int | None:
    value = times.get(key) if isinstance(times, dict) else None
    return value if isinstance(value, int) else None


def rows_timeline(lines: list[bytes], map_line: MapLine, number_from: int = 0) -> Iterator[TimedLine]:
    """`lines` mapped, each at its time (never earlier than the line before)."""
    latest = 0
    for number, line in enumerate(lines, number_from):
        said = map_line(line, MAIN_SOURCE)
        latest = max(latest, said.timestamp_ns or 0)
        yield TimedLine(latest, 0, number, MAIN_SOURCE, said, len(line))


def _values(row: sqlite3.Row) -> dict[str, Any]:
    return {key: _parsed(key, row[key]) for key in row.keys()}  # noqa: SIM118 (a Row iterates its values)


def _line(table: str, values: dict[str, Any], until: str | None = None) -> bytes:
    line = {"table": table, "row": values, **({"until": until} if until else {})}
    return json.dumps(line, ensure_ascii=False, separators=(",", ":")).encode()


def _parsed(column: str, value: Any) -> Any:
    """A JSON column's value parsed; as stored where it is not JSON."""
    if column not in _JSON_COLUMNS or not isinstance(value, str):
        return value
    try:
        return json.loads(value)
    except ValueError:
        return value
