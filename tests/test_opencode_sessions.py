"""`import` and `watch` of OpenCode's database: each recorded session (its rows, put in a WAL
database as the CLI leaves it) becomes one run holding what the rows stored and what the model
served; a database written row by row as the CLI wrote it (its `event` table replayed) is
watched into the same entries, each once; the database is only ever read."""

from __future__ import annotations

import hashlib
import json
import shutil
import sqlite3
import subprocess
import sys
from collections.abc import Callable
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import trace

from opencode_fixtures import SCENARIOS, event_rows, served, tables, upsert, writing
from transcript_otel import TranscriptPipeline, check_invariants, read_records
from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.files import NotASessionError, SessionKind, find_sessions
from transcript_otel.sessions.importer import ImportedRun, import_session
from transcript_otel.sessions.opencode_db import opencode_database
from transcript_otel.sessions.opencode_watch import OpenCodeWatcher
from transcript_otel.sessions.recorder import derived_id_tracer, run_id_of
from transcript_otel.sinks import JsonlMirror

from loopback import subprocess_env

CLI = [sys.executable, "-m", "transcript_otel.cli"]


def _import(database: Path, directory: Path) -> ImportedRun:
    (session,) = find_sessions([database])
    assert session.kind is SessionKind.OPENCODE
    return import_session(session, directory)


def _entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]


def _spans(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == TranscriptEvent.SPAN.value]


def _parts(scenario: str, kind: str) -> list[dict[str, Any]]:
    return [row["data"] for row in tables(scenario)["part"] if row["data"]["type"] == kind]


def _imported(scenario: str, tmp_path: Path) -> list[dict[str, Any]]:
    with writing(tmp_path / "opencode.db", scenario):
        imported = _import(tmp_path / "opencode.db", tmp_path / "runs")
    (session,) = tables(scenario)["session"]
    assert imported.session_id == session["id"]
    assert imported.run_id == run_id_of(SessionKind.OPENCODE, session["id"])
    return list(read_records(imported.path))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_session_is_one_valid_run_of_what_its_rows_stored(scenario: str, tmp_path: Path) -> None:
    records = _imported(scenario, tmp_path)
    assert check_invariants(records) == []
    entries = _entries(records)
    said = {kind: [e["detail"].get("text") for e in entries if e["entry_type"] == kind] for kind in
            ("user_message", "assistant_message", "thinking")}  # fmt: skip
    (prompt,) = said["user_message"]
    # As stored: `opencode run` wrapped the prompt, which has spaces, in double quotes.
    assert prompt == _parts(scenario, "text")[0]["text"]
    assert prompt.startswith('"scripted-')
    assert prompt.endswith('"')
    assert said["assistant_message"] == [part["text"] for part in _parts(scenario, "text")[1:]]
    # The reasoning is in the database even though the run was not asked for it (`--thinking`).
    assert said["thinking"] == [part["text"] for part in _parts(scenario, "reasoning")]
    assert (scenario == "thinking") == bool(said["thinking"])
    start = records[0]
    assert start["event"] == TranscriptEvent.START.value
    (session,) = tables(scenario)["session"]
    assert {e["session_id"] for e in entries} == {session["id"]}


@pytest.mark.parametrize("scenario", ["shell", "failing_shell"])
def test_a_tool_call_and_its_result_are_paired_and_a_failed_command_fails(
    scenario: str, tmp_path: Path
) -> None:
    records = _imported(scenario, tmp_path)
    entries = _entries(records)
    (tool,) = _parts(scenario, "tool")
    (use,) = [e["detail"] for e in entries if e["entry_type"] == "tool_use"]
    (result,) = [e["detail"] for e in entries if e["entry_type"] == "tool_result"]
    assert (use["tool_use_id"], use["tool_name"], use["input"]) == (
        tool["callID"],
        "bash",
        tool["state"]["input"],
    )
    assert (result["tool_use_id"], result["output"]) == (tool["callID"], tool["state"]["output"])
    failed = tool["state"]["metadata"]["exit"] != 0
    assert result["is_error"] is failed
    assert failed is (scenario == "failing_shell")
    (span,) = [s for s in _spans(records) if s[fields.NAME] == "execute_tool bash"]
    assert span["status"] == ("ERROR" if failed else "UNSET")
    assert span[fields.ATTRIBUTES]["gen_ai.tool.call.id"] == tool["callID"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_tokens_are_what_the_model_served_and_the_cost_what_opencode_stored(
    scenario: str, tmp_path: Path
) -> None:
    """OpenCode's `input` leaves out the cache, its `output` the reasoning: the chat spans count
    the prompt the model got and all it wrote, as served; the cost is the one OpenCode stored,
    per step (each assistant message) and for the session (its row)."""
    records = _imported(scenario, tmp_path)
    spans = _spans(records)
    chats = [s for s in spans if s[fields.NAME] == "chat scripted-chat"]
    assert chats

    def counted(key: str) -> int:
        return sum(span[fields.ATTRIBUTES].get(f"gen_ai.usage.{key}", 0) for span in chats)

    calls = served(scenario)
    usage = [call["usage"] for call in calls]
    assert counted("input_tokens") == sum(u["prompt_tokens"] for u in usage)
    assert counted("output_tokens") == sum(u["completion_tokens"] for u in usage)
    assert counted("cache_read.input_tokens") == sum(
        u["prompt_tokens_details"]["cached_tokens"] for u in usage
    )
    reasoning = sum(u["completion_tokens_details"]["reasoning_tokens"] for u in usage)
    assert counted("reasoning.output_tokens") == reasoning
    (session,) = tables(scenario)["session"]
    (root,) = [s for s in spans if s[fields.NAME] == "invoke_agent opencode"]
    totals = root[fields.ATTRIBUTES]
    stored_prompt = session["tokens_input"] + session["tokens_cache_read"] + session["tokens_cache_write"]
    assert totals.get("transcript.usage.input_tokens", 0) == stored_prompt == counted("input_tokens")
    assert (
        totals.get("transcript.usage.output_tokens", 0)
        == session["tokens_output"] + session["tokens_reasoning"]
    )
    assert totals.get("transcript.usage.cost_usd", 0.0) == pytest.approx(session["cost"], abs=1e-12)
    assert sum(s[fields.ATTRIBUTES].get("gen_ai.usage.cost", 0.0) for s in chats) == pytest.approx(
        session["cost"]
    )
    steps = [row for row in tables(scenario)["message"] if row["data"]["role"] == "assistant"]
    reports = [e["detail"] for e in _entries(records) if e["entry_type"] == "token_usage"]
    paid = [(row["id"], row["data"]["cost"]) for row in steps if row["data"]["cost"]]
    assert [(report["message_id"], report["turn_cost_usd"]) for report in reports] == paid
    assert len(reports) == len(calls)  # one model step, one call served
    # Each step a turn of its own, its `chat` span the call's usage and the step's stored cost.
    counted_steps = [
        (chat[fields.ATTRIBUTES]["gen_ai.usage.input_tokens"], chat[fields.ATTRIBUTES]["gen_ai.usage.cost"])
        for chat in chats
        if "gen_ai.usage.input_tokens" in chat[fields.ATTRIBUTES]
    ]
    assert counted_steps == [(u["prompt_tokens"], cost) for u, (_, cost) in zip(usage, paid, strict=True)]


def test_a_failed_step_is_an_error_and_fails_its_turn(tmp_path: Path) -> None:
    records = _imported("error_500", tmp_path)
    (error,) = [e["detail"] for e in _entries(records) if e["entry_type"] == "error"]
    assert (error["status_code"], error["exception"]["type"]) == (500, "APIError")
    assert "scripted 500" in error["exception"]["message"]
    (chat,) = [s for s in _spans(records) if s[fields.NAME] == "chat scripted-chat"]
    assert chat["status"] == "ERROR"
    assert not any(key.startswith("gen_ai.usage.") for key in chat[fields.ATTRIBUTES])


def _digest(path: Path) -> dict[str, str]:
    return {
        file.name: hashlib.sha256(file.read_bytes()).hexdigest()
        for file in path.parent.glob(path.name + "*")
        if not file.name.endswith("-shm")  # (the readers' shared index)
    }


def test_the_rows_are_read_from_the_wal_and_nothing_is_written(tmp_path: Path) -> None:
    """While the writer holds the database (no checkpoint), its rows are only in the `-wal`:
    read through SQLite, never written; the `.db` file copied alone holds no session."""
    database = tmp_path / "opencode.db"
    with writing(database, "shell"):
        before = _digest(database)
        assert (tmp_path / "opencode.db-wal").stat().st_size > database.stat().st_size
        _import(database, tmp_path / "runs")
        assert _digest(database) == before
        alone = tmp_path / "copy" / "opencode.db"
        alone.parent.mkdir()
        shutil.copyfile(database, alone)
        with pytest.raises(NotASessionError, match="an SQLite database"):
            list(find_sessions([alone]))


def test_an_sqlite_file_that_is_not_opencodes_is_no_session(tmp_path: Path) -> None:
    other = tmp_path / "other.db"
    with closing(sqlite3.connect(other)) as connection:
        connection.execute("CREATE TABLE session (id TEXT)")
        connection.commit()
    with pytest.raises(NotASessionError, match="an SQLite database, not a session "):
        list(find_sessions([other]))


def _cli(*arguments: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *arguments],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=120,
        check=False,
    )


def test_import_opencode_reads_the_database_where_opencode_keeps_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    assert opencode_database({"XDG_DATA_HOME": str(data)}) == data / "opencode" / "opencode.db"
    assert opencode_database({"HOME": "/h"}) == Path("/h/.local/share/opencode/opencode.db")
    assert opencode_database({"HOME": "/h", "OPENCODE_DB": "other.db"}) == Path(
        "/h/.local/share/opencode/other.db"
    )
    missing = _cli("import", "--opencode", "--jsonl-dir", str(tmp_path / "runs"), XDG_DATA_HOME=str(data))
    assert missing.returncode == 1
    assert f"no OpenCode sessions at {data / 'opencode' / 'opencode.db'}" in missing.stderr
    (data / "opencode").mkdir(parents=True)
    with writing(data / "opencode" / "opencode.db", "thinking"):
        done = _cli("import", "--opencode", "--jsonl-dir", str(tmp_path / "runs"), XDG_DATA_HOME=str(data))
        # A folder holding it: its `opencode.db` is looked at, as `*.jsonl` files are.
        below = _cli("import", str(data), "--json", "--jsonl-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    (line,) = done.stdout.splitlines()
    assert line.startswith(f"{data / 'opencode' / 'opencode.db'} -> ")
    assert "(7 entries)" in line
    assert below.returncode == 0, below.stderr
    (session,) = json.loads(below.stdout)["sessions"]
    assert (session["adapter"], session["entries"]) == ("opencode_session", 7)


def test_a_database_locked_by_its_writer_is_a_clear_error(tmp_path: Path) -> None:
    database = tmp_path / "opencode.db"
    with writing(database, "plain") as connection:
        connection.execute("PRAGMA locking_mode = EXCLUSIVE")
        connection.execute("UPDATE session SET title = title")  # (the lock is taken at a write)
        failed = _cli("import", str(database), "--jsonl-dir", str(tmp_path / "runs"))
    assert failed.returncode == 2
    assert f"{database}: cannot read the database now: database is locked" in failed.stderr


def _watched(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline], scenarios: list[str], before: str | None
) -> list[dict[str, Any]]:
    """The scenarios' rows written as OpenCode wrote them, the watch polling after each; `before`:
    a session there before the watch started."""
    database = tmp_path / "home" / "opencode.db"
    with writing(database, before) as connection:
        watcher = OpenCodeWatcher(
            database,
            pipeline=make_pipeline([JsonlMirror(tmp_path / "watched")]),
            tracer=derived_id_tracer("watched", "opencode"),  # (spans recorded for the mirror)
            idle_s=3600.0,
        )
        watcher.poll_once()
        for scenario in scenarios:
            for table, row in event_rows(scenario):
                upsert(connection, table, row)
                watcher.poll_once()
        watcher.close()
    runs = [list(read_records(path)) for path in (tmp_path / "watched").glob("*.jsonl")]
    return [record for run in sorted(runs, key=lambda run: run[0]["timestamp"]) for record in run]


def _said(records: list[dict[str, Any]]) -> list[tuple[str, dict[str, Any]]]:
    return [(e["entry_type"], e["detail"]) for e in _entries(records)]


@pytest.mark.parametrize("scenario", ["shell", "failing_shell", "thinking", "error_500"])
def test_a_session_written_row_by_row_is_watched_into_what_an_import_gives(
    scenario: str, tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """Rows are updated in place (text streamed, a tool pending → running → completed): each
    entry is given once, when its row is done, and the run is the import's."""
    watched = _watched(tmp_path, make_pipeline, [scenario], before=None)
    imported = _imported(scenario, tmp_path / "import")
    assert _said(watched) == _said(imported)
    assert [r["event"] for r in watched].count(TranscriptEvent.START.value) == 1
    assert check_invariants(watched) == []
    watched_chat = [s[fields.ATTRIBUTES] for s in _spans(watched) if s[fields.NAME].startswith("chat")]
    imported_chat = [s[fields.ATTRIBUTES] for s in _spans(imported) if s[fields.NAME].startswith("chat")]
    assert watched_chat == imported_chat


def test_at_its_start_the_watch_takes_the_sessions_there_up_from_where_they_are(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    watched = _watched(tmp_path, make_pipeline, ["shell"], before="plain")
    (plain,) = tables("plain")["session"]
    (shell,) = tables("shell")["session"]
    assert {e["session_id"] for e in _entries(watched)} == {shell["id"]} != {plain["id"]}
    assert _said(watched) == _said(_imported("shell", tmp_path / "import"))


def test_a_watch_waits_for_a_database_not_there_yet(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    database = tmp_path / "opencode.db"
    watcher = OpenCodeWatcher(
        database,
        pipeline=make_pipeline([JsonlMirror(tmp_path / "watched")]),
        tracer=trace.get_tracer(__name__),
        idle_s=3600.0,
    )
    assert watcher.poll_once() == 0
    with writing(database, None) as connection:
        for table, row in event_rows("plain"):
            upsert(connection, table, row)
        assert watcher.poll_once() > 0
    watcher.close()
    records = [r for path in (tmp_path / "watched").glob("*.jsonl") for r in read_records(path)]
    assert _said(records) == _said(_imported("plain", tmp_path / "import"))


def test_a_watch_started_again_records_what_was_written_while_it_was_stopped(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """Stopped after the first model step, started again after the session went on: the second
    run holds the rest, nothing twice, nothing left out."""
    database, position = tmp_path / "opencode.db", tmp_path / "watch.opencode.json"
    rows = list(event_rows("shell"))
    first_step = next(
        index
        for index, (table, row) in enumerate(rows)
        if table == "message" and row["data"]["role"] == "assistant" and "completed" in row["data"]["time"]
    )

    def watcher() -> OpenCodeWatcher:
        pipeline = make_pipeline([JsonlMirror(tmp_path / "watched")])
        tracer = derived_id_tracer(str(len(list(tmp_path.glob("watched/*")))), "opencode")
        return OpenCodeWatcher(database, pipeline=pipeline, tracer=tracer, idle_s=3600.0, position=position)

    with writing(database, None) as connection:
        first = watcher()
        first.poll_once()  # (before the session: it records it from its start)
        for table, row in rows[: first_step + 1]:
            upsert(connection, table, row)
            first.poll_once()
        first.close()
        for table, row in rows[first_step + 1 :]:
            upsert(connection, table, row)  # while no watch runs
        second = watcher()
        second.poll_once()
        second.close()
    runs = [list(read_records(path)) for path in (tmp_path / "watched").glob("*.jsonl")]
    assert len(runs) == 2
    watched = [record for run in sorted(runs, key=lambda run: run[0]["timestamp"]) for record in run]
    assert _said(watched) == _said(_imported("shell", tmp_path / "import"))


def test_a_subagents_session_is_a_run_of_its_own_that_names_its_parent(tmp_path: Path) -> None:
    """The `task` tool makes a session with `parent_id` set (a column of `session`): here the
    `plain` session's rows again as such a child of it."""
    database = tmp_path / "opencode.db"
    (parent,) = tables("plain")["session"]
    with writing(database, "plain") as connection:
        child_session = {**parent, "id": "ses_child", "parent_id": parent["id"]}
        upsert(connection, "session", {**child_session, "time_created": parent["time_created"] + 1})
        for table in ("message", "part"):
            for row in tables("plain")[table]:
                child = {**row, "id": f"{row['id']}_child", "session_id": "ses_child"}
                if table == "part":
                    child["message_id"] = f"{row['message_id']}_child"
                upsert(connection, table, child)
        sessions = list(find_sessions([database]))
        assert [session.session_id for session in sessions] == [parent["id"], "ses_child"]
        runs = [import_session(session, tmp_path / "runs" / str(n)) for n, session in enumerate(sessions)]
    started = [
        next(e["detail"] for e in _entries(list(read_records(run.path))) if e["entry_type"] == "system_event")
        for run in runs
    ]
    assert [detail["parent_id"] for detail in started] == [None, parent["id"]]
    assert runs[0].run_id != runs[1].run_id


def test_a_session_idle_past_idle_s_has_its_run_ended_and_goes_on_in_another(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """`idle_s` this short ends the run at the round after each that recorded something: the
    session goes on in other runs, which hold the rest, nothing twice."""
    database = tmp_path / "opencode.db"
    with writing(database, None) as connection:
        watcher = OpenCodeWatcher(
            database,
            pipeline=make_pipeline([JsonlMirror(tmp_path / "watched")]),
            tracer=derived_id_tracer("idle", "opencode"),
            idle_s=1e-9,
        )
        watcher.poll_once()
        for table, row in event_rows("shell"):
            upsert(connection, table, row)
            watcher.poll_once()
            watcher.poll_once()  # (a round with nothing new: the run idle since the last ends)
        watcher.close()
    runs = [list(read_records(path)) for path in (tmp_path / "watched").glob("*.jsonl")]
    assert len(runs) > 2
    watched = [record for run in sorted(runs, key=lambda run: run[0]["timestamp"]) for record in run]
    assert _said(watched) == _said(_imported("shell", tmp_path / "import"))
    assert all(check_invariants(run) == [] for run in runs)
