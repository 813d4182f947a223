"""What `transcript-otel import` tells besides its runs (issue 48, item 6): a progress line on a
terminal only (sessions, MB, MB/s, time left, rewritten with `\\r`) and a summary line at its end,
and with `--json` one JSON object on stdout instead of a line per session."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from transcript_otel.sessions.files import find_sessions

from loopback import subprocess_env
from session_fixtures import CLAUDE, CODEX
from terminal_session import TerminalSession

CLI = [sys.executable, "-m", "transcript_otel"]
SUMMARY = re.compile(
    r"transcript-otel import: (\d+) of (\d+) sessions imported(?: \((\d+) not\))?, (\d+) entries, "
    r"\d+\.\d MB in \d+\.\d s, (\d+) warnings?"
)


def _import(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "import", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
        check=False,
    )


def _session_count(*paths: Path) -> int:
    return len(list(find_sessions(paths)))


def test_on_a_terminal_a_progress_line_is_rewritten_in_place_then_the_summary(tmp_path: Path) -> None:
    total = _session_count(CLAUDE)
    command = [*CLI, "import", str(CLAUDE), "--jsonl-dir", str(tmp_path / "runs"), "-j", "2"]
    # stdout to a file: the terminal shows what stderr says.
    shell_line = f"{shlex.join(command)} > {shlex.quote(str(tmp_path / 'stdout'))}"
    with TerminalSession(shell_line, subprocess_env()) as terminal:
        shown = terminal.expect(SUMMARY.pattern)
        assert terminal.close() == 0
    assert f"\rimporting: 0/{total} sessions, 0.0/" in shown  # before the first session is done
    last = re.search(
        rf"\rimporting: {total}/{total} sessions, (\d+\.\d)/(\d+\.\d) MB, \d+\.\d MB/s, ETA 0s", shown
    )
    assert last is not None, shown
    assert last.group(1) == last.group(2)
    # Wiped before the summary, which has a line of its own.
    summary = SUMMARY.search(shown)
    assert summary is not None
    assert re.search(r"\r +\r" + re.escape(summary.group(0)), shown)
    said = (tmp_path / "stdout").read_text().splitlines()  # a line per session, with its entries
    entries = sum(int(found) for found in re.findall(r"\((\d+) entries", "\n".join(said)))
    assert summary.groups() == (str(total), str(total), None, str(entries), "0")


def test_piped_stderr_says_only_what_went_wrong(tmp_path: Path) -> None:
    """No progress line, no `\\r`, no summary: the files below the folder that are no session."""
    done = _import(str(CODEX), "--jsonl-dir", str(tmp_path / "runs"))
    assert done.returncode == 0, done.stderr
    assert "\r" not in done.stderr
    said = done.stderr.splitlines()
    assert said
    assert all(line.startswith("transcript-otel import: skipped ") for line in said), said
    assert len(done.stdout.splitlines()) == _session_count(CODEX)


def test_json_gives_each_session_its_run_and_status_and_the_totals(tmp_path: Path) -> None:
    sessions = [session.path for session in find_sessions([CODEX / "subagent", CODEX / "shell"])]
    runs = tmp_path / "runs"
    probe = _import(str(sessions[-1]), "--jsonl-dir", str(tmp_path / "probe"))
    (probed,) = (tmp_path / "probe").iterdir()
    (runs / probed.name / "in the way").mkdir(parents=True)  # the last session's run cannot be written
    done = _import(str(CODEX / "subagent"), str(CODEX / "shell"), "--jsonl-dir", str(runs), "--json")
    assert (probe.returncode, done.returncode) == (0, 1)
    result = json.loads(done.stdout)  # all of stdout: no line per session
    *imported, failed = result["sessions"]
    assert [session["path"] for session in result["sessions"]] == [str(path) for path in sessions]
    for session in imported:
        assert (session["status"], session["adapter"]) == ("imported", "codex_session")
        run = Path(session["run"])
        assert run.parent == runs
        assert sum(1 for line in run.read_text().splitlines() if '"event":"transcript.entry"' in line) > 0
        assert session["entries"] > 0
    assert any(session["subagents"] > 0 for session in imported)
    assert (failed["status"], failed["run"]) == ("failed", None)
    assert failed["error"].startswith("[Errno 21] Is a directory")
    assert [skip["reason"] for skip in result["skipped"]] == ["Codex's stdout (`codex exec --json`)"] * 2
    totals = result["totals"]
    assert {key: totals[key] for key in ("sessions", "imported", "failed", "skipped", "warnings")} == {
        "sessions": len(sessions),
        "imported": len(sessions) - 1,
        "failed": 1,
        "skipped": 2,
        "warnings": 0,
    }
    assert totals["entries"] == sum(session["entries"] for session in imported)
    assert totals["bytes"] == sum(
        path.stat().st_size for path in _files_of(CODEX / "subagent", CODEX / "shell")
    )
    assert not SUMMARY.search(done.stderr)  # the totals are in the JSON


def _files_of(*paths: Path) -> list[Path]:
    return [file for session in find_sessions(paths) for file, _ in session.sources()]
