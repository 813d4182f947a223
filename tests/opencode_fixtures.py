"""OpenCode's recorded sessions (tests/fixtures/sessions/opencode/<scenario>/: the rows of its
database, `tables.json`, and their schema, `schema.sql`) made into databases like the one the
CLI writes: SQLite in WAL mode, its rows left in the `-wal` file while a writer holds it open."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import closing, contextmanager
from pathlib import Path
from typing import Any, Final

from session_fixtures import SESSIONS

OPENCODE: Final = SESSIONS / "opencode"
SCENARIOS: Final = ("plain", "shell", "failing_shell", "thinking", "error_500", "rate_limit_429")
LINE_STREAMS: Final = Path(__file__).resolve().parent / "fixtures" / "line_streams" / "opencode"


def tables(scenario: str) -> dict[str, list[dict[str, Any]]]:
    loaded: dict[str, list[dict[str, Any]]] = json.loads((OPENCODE / scenario / "tables.json").read_text())
    return loaded


def served(scenario: str) -> list[dict[str, Any]]:
    """The model calls the scripted server answered for the recorded session (the `json` run's),
    but the title request, whose tokens OpenCode counts nowhere."""
    meta = json.loads((LINE_STREAMS / f"{scenario}.json.meta.json").read_text())
    return [call for call in meta["served"] if call.get("status") == 200 and call.get("kind") != "title"]


@contextmanager
def writing(path: Path, scenario: str | None = None) -> Iterator[sqlite3.Connection]:
    """A database at `path` with OpenCode's schema (the scenario's rows, if one is named), its
    writer open (no checkpoint: the rows stay in the `-wal`, as the CLI leaves them)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with closing(sqlite3.connect(path, isolation_level=None)) as connection:
        connection.execute("PRAGMA journal_mode = WAL")
        connection.execute("PRAGMA wal_autocheckpoint = 0")
        connection.executescript((OPENCODE / (scenario or "shell") / "schema.sql").read_text())
        for table, rows in tables(scenario).items() if scenario else ():
            for row in rows:
                upsert(connection, table, row)
        yield connection


def upsert(connection: sqlite3.Connection, table: str, row: Mapping[str, Any]) -> None:
    """The row written as OpenCode writes it (JSON columns as text), replacing one of its id."""
    values = [json.dumps(value) if isinstance(value, dict | list) else value for value in row.values()]
    columns = ", ".join(row)
    marks = ", ".join("?" * len(row))
    connection.execute(f"INSERT OR REPLACE INTO {table} ({columns}) VALUES ({marks})", values)


def event_rows(scenario: str) -> Iterator[tuple[str, dict[str, Any]]]:
    """The rows in the order and states OpenCode wrote them: from its `event` table (each
    `session.*`, `message.updated`, `message.part.updated` the state a row took)."""
    final = tables(scenario)
    sessions = {row["id"]: row for row in final["session"]}
    for event in sorted(final["event"], key=lambda event: event["seq"]):
        data, kind = event["data"], event["type"]
        if kind.startswith("session."):
            info = data["info"]
            row = dict(sessions[info["id"]])
            row["time_updated"] = info["time"]["updated"]
            yield "session", row
        elif kind.startswith("message.updated"):
            info = dict(data["info"])
            message_id, session_id = info.pop("id"), info.pop("sessionID")
            times = info["time"]
            updated = times.get("completed", times["created"])
            row = {"id": message_id, "session_id": session_id, "time_created": times["created"]}
            yield "message", {**row, "time_updated": updated, "data": info}
        elif kind.startswith("message.part.updated"):
            part = dict(data["part"])
            part_id, session_id, message_id = part.pop("id"), part.pop("sessionID"), part.pop("messageID")
            created = next(row["time_created"] for row in final["part"] if row["id"] == part_id)
            row = {"id": part_id, "message_id": message_id, "session_id": session_id}
            yield "part", {**row, "time_created": created, "time_updated": data["time"], "data": part}
