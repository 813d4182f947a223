"""`transcript-otel list`: the mirror's runs, the one that started last first, as a person reads them."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

RUNS = Path(__file__).resolve().parent / "fixtures" / "runs"
# Started in this order (their first records' times), 14:33:14, 14:33:31, 14:33:41 (the oldest failed).
OLDEST, MIDDLE, NEWEST = (
    "wink-0.24-openai-error.jsonl",
    "wink-0.25-codex-rich.jsonl",
    "wink-0.27-claude-rich.jsonl",
)


def _list(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "transcript_otel", "list", "--jsonl-dir", str(directory), *args],
        capture_output=True,
        text=True,
        timeout=60,
    )


def _mirror(tmp_path: Path) -> Path:
    """The three runs under names that say no start time, written newest-started first: the
    file written last is the run that started first."""
    mirror = tmp_path / "runs"
    mirror.mkdir()
    for age, name in enumerate((NEWEST, MIDDLE, OLDEST)):
        copy = mirror / f"run-{age}.jsonl"
        shutil.copy(RUNS / name, copy)
        os.utime(copy, (1_800_000_000 + age, 1_800_000_000 + age))
    return mirror


def test_runs_are_listed_by_when_they_started_not_when_their_files_were_written(tmp_path: Path) -> None:
    listed = _list(_mirror(tmp_path))
    assert listed.returncode == 0, listed.stderr
    header, *rows = listed.stdout.splitlines()
    assert header.split() == [
        "STARTED",
        "(UTC)",
        "PROMPT",
        "ADAPTER",
        "STATUS",
        "DURATION",
        "TOKENS",
        "IN/OUT",
        "COST",
        "FILE",
    ]
    assert [row.split()[-1] for row in rows] == ["run-0.jsonl", "run-1.jsonl", "run-2.jsonl"]
    newest = rows[0].split()
    assert newest[:6] == ["2026-11-23", "14:33:41", "claude-rich", "claude_agent_sdk", "completed", "0.9"]
    assert "30/15" in newest  # its tokens in and out, as `summary` counts them
    assert listed.stderr == ""


def test_json_lines_and_a_limit_say_what_was_left_out(tmp_path: Path) -> None:
    listed = _list(_mirror(tmp_path), "-n", "2", "--json")
    assert listed.returncode == 0, listed.stderr
    rows = [json.loads(line) for line in listed.stdout.splitlines()]
    assert [Path(row["path"]).name for row in rows] == ["run-0.jsonl", "run-1.jsonl"]
    assert rows[0]["started"].startswith("2026-11-23T14:33:41")
    assert (rows[0]["prompt_name"], rows[0]["status"], rows[0]["input_tokens"], rows[0]["output_tokens"]) == (
        "claude-rich",
        "completed",
        30,
        15,
    )
    assert listed.stderr.splitlines() == ["transcript-otel list: 1 older run not listed (-n)"]


def test_a_file_that_is_not_a_run_and_a_hostile_prompt_name_are_shown_safely(tmp_path: Path) -> None:
    mirror = _mirror(tmp_path)
    (mirror / "zz-garbage.jsonl").write_bytes(b"\x00\x01 not a transcript\n")
    hostile = (RUNS / NEWEST).read_text().replace('"claude-rich"', '"evil\\u001b[2J\\nname"')
    (mirror / "run-hostile.jsonl").write_text(hostile)
    listed = _list(mirror, "-n", "10")
    assert listed.returncode == 0, listed.stderr
    assert "\x1b" not in listed.stdout
    assert "evil\\x1b[2J\\nname" in listed.stdout
    garbage = [row for row in listed.stdout.splitlines() if row.endswith("zz-garbage.jsonl")]
    assert len(garbage) == 1
    assert "unreadable" in garbage[0]


def test_no_runs_is_said_and_fails(tmp_path: Path) -> None:
    listed = _list(tmp_path / "nothing-here")
    assert listed.returncode == 1
    assert listed.stdout == ""
    assert listed.stderr.splitlines() == [f"transcript-otel list: no runs in {tmp_path / 'nothing-here'}"]
