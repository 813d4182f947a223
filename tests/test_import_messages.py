"""What `transcript-otel import` prints: paths a terminal can show safely, and no empty lists."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "sessions" / "claude_code"


def _import(*args: str, home: Path, jsonl_dir: Path) -> subprocess.CompletedProcess[str]:
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))
    }
    environment.update(
        HOME=str(home), CLAUDE_CONFIG_DIR=str(home / ".claude"), CODEX_HOME=str(home / ".codex")
    )
    return subprocess.run(
        [sys.executable, "-m", "transcript_otel", "import", "--jsonl-dir", str(jsonl_dir), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env=environment,
    )


def test_a_folder_named_with_escape_sequences_reaches_the_terminal_escaped(tmp_path: Path) -> None:
    session = next((FIXTURES / "interactive_two_prompts").rglob("*.jsonl"))
    hostile = tmp_path / "proj\x1b]0;owned\x07\x1b[2J\nfake line"
    hostile.mkdir()
    shutil.copy(session, hostile / session.name)
    (hostile / "notes.jsonl").write_text("plain text, not a session\n")
    completed = _import(str(tmp_path), home=tmp_path / "home", jsonl_dir=tmp_path / "runs")
    assert completed.returncode == 0, completed.stderr
    printed = completed.stdout + completed.stderr
    assert "\x1b" not in printed
    assert "\x07" not in printed
    assert "\nfake line" not in printed  # the newline is shown as \\n
    assert "proj\\x1b]0;owned\\x07\\x1b[2J\\nfake line" in completed.stdout
    assert "notes.jsonl: " in completed.stderr  # the skipped file, escaped the same way


def test_no_empty_list_when_the_cli_folders_do_not_exist(tmp_path: Path) -> None:
    completed = _import("--claude-code", home=tmp_path / "home", jsonl_dir=tmp_path / "runs")
    assert completed.returncode == 1
    lines = completed.stderr.splitlines()
    assert lines == [
        f"transcript-otel import: no Claude Code sessions at {tmp_path / 'home' / '.claude' / 'projects'}"
    ]
