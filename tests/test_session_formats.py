"""What a file holds, told from its content (`sessions.formats`), and `import` acting on it: the
real CLIs' session logs under any name are imported as what they are; their stdout captures, an
SQLite database, an empty file are refused (a file named on its own: one line, exit 2; below a
folder: skipped, said in one line)."""

from __future__ import annotations

import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import read_records
from transcript_otel.cli import main
from transcript_otel.sessions import files as files_module
from transcript_otel.sessions.files import SessionKind, find_sessions
from transcript_otel.sessions.formats import Format, format_of, read_head

from loopback import subprocess_env
from session_fixtures import SESSIONS

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLI = [sys.executable, "-m", "transcript_otel.cli"]
NOT_A_SESSION = "not a session Claude Code, Codex, Gemini CLI or OpenCode wrote"

ROLLOUTS = sorted((SESSIONS / "codex").rglob("rollout-*.jsonl"))
CLAUDE_LOGS = sorted(path for path in (SESSIONS / "claude_code").rglob("*.jsonl") if ".claude" in path.parts)
CLAUDE_STDOUTS = sorted((SESSIONS / "claude_code").glob("*/stdout-*.jsonl"))
CODEX_STDOUTS = sorted((SESSIONS / "codex").glob("*/stdout-*.jsonl"))
CODEX_ROLLOUT = SESSIONS / "codex/shell/codex-home"  # one root thread, no subagent
CLAUDE_TOOLS = SESSIONS / "claude_code/tools/home/.claude/projects/-scratch-work"


def _format(path: Path) -> Format:
    return format_of(*read_head(path))


def _sqlite(path: Path) -> Path:
    with sqlite3.connect(path) as database:  # a real SQLite file, as a CLI's state database is
        database.execute("create table logs (id integer primary key, message text)")
        database.executemany("insert into logs (message) values (?)", [(f"line {n}",) for n in range(300)])
    return path


def _cli(*arguments: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *arguments], capture_output=True, text=True, env=subprocess_env(), timeout=120, check=False
    )


def _records(runs: Path) -> list[dict[str, Any]]:
    (run,) = runs.glob("*.jsonl")
    return list(read_records(run))


def _entry_types(records: list[dict[str, Any]]) -> Counter[str]:
    return Counter(r["context"]["entry_type"] for r in records if r["event"] == "transcript.entry")


# -- the sniffer, on what the real programs wrote -------------------------------------------------


def test_the_fixtures_are_what_they_are() -> None:
    assert len(ROLLOUTS) >= 20
    assert len(CLAUDE_LOGS) >= 25
    assert {_format(path) for path in ROLLOUTS} == {Format.CODEX}  # 0.140's older format too
    assert {_format(path) for path in CLAUDE_LOGS} == {Format.CLAUDE_CODE}  # 2.0.32's too
    assert {_format(path) for path in CLAUDE_STDOUTS} == {Format.CLAUDE_STREAM_JSON}
    assert {_format(path) for path in CODEX_STDOUTS} == {Format.CODEX_EXEC_JSON}
    assert _format(FIXTURES / "line_streams/claude-sdk-stdout.jsonl") is Format.CLAUDE_STREAM_JSON
    assert _format(FIXTURES / "runs/run-rtf1.jsonl") is Format.TRANSCRIPT_RUN
    assert _format(FIXTURES / "codex/app-server/shell.jsonl") is Format.OTHER_JSON  # JSON-RPC


def test_only_the_lines_up_to_the_deciding_one_are_read(tmp_path: Path) -> None:
    rollout = max(ROLLOUTS, key=lambda path: path.stat().st_size)
    head, whole = read_head(rollout)
    assert head == rollout.read_bytes().split(b"\n")[0] + b"\n"  # its session_meta line alone
    assert not whole
    damaged = tmp_path / "damaged.jsonl"
    damaged.write_bytes(b"not json\n" + rollout.read_bytes())
    assert read_head(damaged)[0].count(b"\n") == 2


def test_a_renamed_copy_is_what_it_was(tmp_path: Path) -> None:
    for number, original in enumerate([ROLLOUTS[0], CLAUDE_LOGS[0], CLAUDE_STDOUTS[0]]):
        copy = tmp_path / f"attached-{number}.txt"
        shutil.copy(original, copy)
        assert _format(copy) is _format(original)


def test_binary_empty_and_unfinished_files(tmp_path: Path) -> None:
    assert _format(_sqlite(tmp_path / "state.sqlite")) is Format.SQLITE
    assert format_of(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR") is Format.BINARY
    assert format_of(b"\xff\xfe not utf-8\n") is Format.BINARY
    assert format_of(b"") is Format.EMPTY
    assert format_of(b"\n\n") is Format.EMPTY
    assert format_of(b"Just text\n") is Format.TEXT
    assert format_of(b"[1, 2]\n") is Format.OTHER_JSON
    first = ROLLOUTS[0].read_bytes().split(b"\n")[0]
    assert format_of(first[:100]) is Format.UNSETTLED  # being written: not known yet
    assert format_of(first[:100], whole_file=True) is Format.TEXT  # a finished file ending so: text
    assert format_of(first) is Format.UNSETTLED
    assert format_of(first, whole_file=True) is Format.CODEX  # its last line without a newline


def test_a_damaged_first_line_is_passed_over() -> None:
    second = ROLLOUTS[0].read_bytes().split(b"\n")[1]
    assert format_of(b'{"timestamp": "2026-11-27T00:00:00Z", "type"\n' + second + b"\n") is Format.CODEX


def test_claude_lines_that_name_no_session_leave_it_to_the_next() -> None:
    summary = b'{"type":"summary","summary":"Fix the tests","leafUuid":"0b6f"}\n'
    named = CLAUDE_LOGS[0].read_bytes().split(b"\n")[0] + b"\n"
    assert format_of(summary + named) is Format.CLAUDE_CODE
    assert format_of(summary) is Format.CLAUDE_CODE


# -- import, through the CLI ----------------------------------------------------------------------


def test_a_rollout_under_another_name_imports_as_codex(tmp_path: Path) -> None:
    (rollout,) = CODEX_ROLLOUT.rglob("rollout-*.jsonl")
    renamed = tmp_path / "bug-report.jsonl"
    shutil.copy(rollout, renamed)
    imported = _cli("import", str(renamed), "--jsonl-dir", str(tmp_path / "runs"))
    assert imported.returncode == 0, imported.stderr
    records = _records(tmp_path / "runs")
    start = next(r["context"] for r in records if r["event"] == "transcript.start")
    assert (start["adapter"], start["prompt_name"]) == ("codex_session", "codex")
    assert _entry_types(records)["unknown"] == 0
    (session,) = find_sessions([renamed])
    assert session.kind is SessionKind.CODEX


def test_a_claude_session_named_like_a_rollout_imports_as_claude_code(tmp_path: Path) -> None:
    (log,) = CLAUDE_TOOLS.glob("*.jsonl")
    renamed = tmp_path / "rollout-2026-11-27T08-43-30-45059e43-ea98-49e6-8e36-16de89cb8703.jsonl"
    shutil.copy(log, renamed)
    imported = _cli("import", str(renamed), "--jsonl-dir", str(tmp_path / "runs"))
    assert imported.returncode == 0, imported.stderr
    records = _records(tmp_path / "runs")
    start = next(r["context"] for r in records if r["event"] == "transcript.start")
    assert start["adapter"] == "claude_code_session"
    assert _entry_types(records)["unknown"] == 0
    assert _entry_types(records)["tool_use"] > 0


@pytest.mark.parametrize(
    ("make", "what"),
    [
        (lambda d: shutil.copy(CLAUDE_STDOUTS[0], d / "s.jsonl"), Format.CLAUDE_STREAM_JSON),
        (lambda d: shutil.copy(CODEX_STDOUTS[0], d / "s.jsonl"), Format.CODEX_EXEC_JSON),
        (lambda d: _sqlite(d / "s.jsonl"), Format.SQLITE),
        (lambda d: (d / "s.jsonl").write_bytes(b""), Format.EMPTY),
        (lambda d: shutil.copy(FIXTURES / "runs/run-rtf1.jsonl", d / "s.jsonl"), Format.TRANSCRIPT_RUN),
    ],
    ids=["claude-stdout", "codex-stdout", "sqlite", "empty", "mirror-run"],
)
def test_a_file_that_is_no_session_log_is_refused_in_one_line(
    make: Any, what: Format, tmp_path: Path
) -> None:
    source = tmp_path / "in"
    source.mkdir()
    make(source)
    path = source / "s.jsonl"
    refused = _cli("import", str(path), "--jsonl-dir", str(tmp_path / "runs"))
    assert refused.returncode == 2
    assert refused.stderr == f"transcript-otel import: {path}: {what.value}, {NOT_A_SESSION}\n"
    assert refused.stdout == ""
    assert not (tmp_path / "runs").exists() or not list((tmp_path / "runs").glob("*.jsonl"))


def test_a_folder_import_takes_the_sessions_by_content_and_says_what_it_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "attachments"
    folder.mkdir()
    (rollout,) = CODEX_ROLLOUT.rglob("rollout-*.jsonl")
    shutil.copy(rollout, folder / "codex-session.jsonl")  # a session, whatever its name
    shutil.copy(CLAUDE_STDOUTS[0], folder / "rollout-2026-11-27T00-00-00-stdout.jsonl")  # named like one
    _sqlite(folder / "state.jsonl")
    imported = _cli("import", str(folder), "--jsonl-dir", str(tmp_path / "runs"))
    assert imported.returncode == 0, imported.stderr
    assert imported.stdout.startswith(f"{folder / 'codex-session.jsonl'} -> ")
    assert imported.stderr.splitlines() == [
        f"transcript-otel import: skipped {folder / 'rollout-2026-11-27T00-00-00-stdout.jsonl'}: "
        f"{Format.CLAUDE_STREAM_JSON.value}, {NOT_A_SESSION}",
        f"transcript-otel import: skipped {folder / 'state.jsonl'}: {Format.SQLITE.value}, {NOT_A_SESSION}",
    ]
    start = next(r["context"] for r in _records(tmp_path / "runs") if r["event"] == "transcript.start")
    assert start["adapter"] == "codex_session"


def test_a_folder_of_no_sessions_says_so(tmp_path: Path) -> None:
    folder = tmp_path / "nothing"
    folder.mkdir()
    _sqlite(folder / "a.jsonl")
    said = _cli("import", str(folder), "--jsonl-dir", str(tmp_path / "runs"))
    assert said.returncode == 1
    assert said.stderr.splitlines() == [
        f"transcript-otel import: skipped {folder / 'a.jsonl'}: {Format.SQLITE.value}, {NOT_A_SESSION}",
        f"transcript-otel import: no sessions in {folder}",
    ]


# -- watch, through the CLI -----------------------------------------------------------------------


def test_watch_follows_a_session_by_content_and_says_once_what_it_skips(tmp_path: Path) -> None:
    """Files appearing below a followed folder: a rollout named otherwise is followed as Codex's,
    a Claude stdout named like a rollout is skipped, said once (not exported as a run of unknowns)."""
    home, runs = tmp_path / "home", tmp_path / "runs"
    (home / "project").mkdir(parents=True)
    command = [*CLI, "watch", str(home), "--state", str(tmp_path / "watch.json")]
    env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(runs))
    watch = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        assert "following" in watch.stdout.readline()
        stdout_copy = home / "project" / "rollout-2026-11-27T00-00-00-stdout.jsonl"
        shutil.copy(CLAUDE_STDOUTS[0], stdout_copy)
        (rollout,) = CODEX_ROLLOUT.rglob("rollout-*.jsonl")
        shutil.copy(rollout, home / "project" / "codex-session.jsonl")
        deadline = time.monotonic() + 60
        while not (runs.exists() and any(runs.glob("*.jsonl")) and _entry_types(_records(runs))["tool_use"]):
            assert time.monotonic() < deadline, "the renamed rollout was not followed"
            time.sleep(0.1)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, stderr = watch.communicate(timeout=60)
    assert watch.returncode == 0, stderr
    records = _records(runs)  # one run: the Codex session's, none of the stdout
    start = next(r["context"] for r in records if r["event"] == "transcript.start")
    assert start["adapter"] == "codex_session"
    assert _entry_types(records)["unknown"] == 0
    skipped = [line for line in stderr.splitlines() if "skipped" in line]
    assert skipped == [
        f"transcript-otel: warning: skipped {stdout_copy}: {Format.CLAUDE_STREAM_JSON.value}, {NOT_A_SESSION}"
    ]


def test_a_file_below_a_folder_that_cannot_be_read_is_said_and_fails_the_import(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """(Run as root, permissions would not stop the read: the read itself is made to fail.)"""
    folder = tmp_path / "in"
    folder.mkdir()
    (rollout,) = CODEX_ROLLOUT.rglob("rollout-*.jsonl")
    shutil.copy(rollout, folder / rollout.name)
    locked = folder / "locked.jsonl"
    locked.write_bytes(rollout.read_bytes())
    real_read_head = read_head  # what `files` calls: the same function

    def read_head_or_fail(path: Path) -> tuple[bytes, bool]:
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return real_read_head(path)

    monkeypatch.setattr(files_module, "read_head", read_head_or_fail)
    status = main(["import", str(folder), "--jsonl-dir", str(tmp_path / "runs"), "--jobs", "1"])
    said = capsys.readouterr()
    assert status == 1
    assert said.err.splitlines() == [
        f"transcript-otel import: skipped {locked}: a file that cannot be read, "
        "so not known to be a session log"
    ]
    assert said.out.startswith(f"{folder / rollout.name} -> ")
