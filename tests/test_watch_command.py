"""What `transcript-otel watch` and `import` tell a person (issue 47 point 12): where the runs go,
in their help, and, while a watch runs, one line on stderr for each session it takes up."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from transcript_otel import read_records

from inotify_watches import inotify_here, inotify_watches
from loopback import subprocess_env
from session_fixtures import SESSIONS, codex_day

CLI = [sys.executable, "-m", "transcript_otel.cli"]
CODEX_DAY = codex_day("shell")
CLAUDE_PROJECT = SESSIONS / "claude_code/background_subagent/home/.claude/projects/-scratch-work"


def _help(command: str, tmp_path: Path) -> str:
    done = subprocess.run(
        [*CLI, command, "--help"],
        capture_output=True,
        text=True,
        env=subprocess_env(XDG_STATE_HOME=str(tmp_path / "state"), COLUMNS="200"),
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return " ".join(done.stdout.split())  # argparse wraps lines


def test_watch_help_says_where_its_output_goes(tmp_path: Path) -> None:
    text = _help("watch", tmp_path)
    mirror = tmp_path / "state" / "transcript-otel" / "runs"
    assert f"to the local JSONL mirror (--jsonl-dir, else $TRANSCRIPT_OTEL_JSONL_DIR, else {mirror})" in text
    assert "when an OTLP endpoint is set (--endpoint or OTEL_EXPORTER_OTLP_ENDPOINT)" in text
    assert "Each session it starts following is said on stderr" in text
    assert "--jsonl-dir JSONL_DIR" in text
    assert "--endpoint ENDPOINT" in text


def test_import_help_names_the_fallback_mirror_folder(tmp_path: Path) -> None:
    mirror = tmp_path / "state" / "transcript-otel" / "runs"
    assert f"(default: $TRANSCRIPT_OTEL_JSONL_DIR, else {mirror})" in _help("import", tmp_path)


def _wait_for_lines(stream: list[str], process: subprocess.Popen[str], count: int) -> None:
    assert process.stderr is not None
    deadline = time.monotonic() + 60
    while sum("following" in line for line in stream) < count:
        assert time.monotonic() < deadline, f"said so far: {stream}"
        stream.append(process.stderr.readline())


def test_watch_says_each_session_it_takes_up_and_writes_to_its_jsonl_dir(tmp_path: Path) -> None:
    home, runs = tmp_path / "home", tmp_path / "mirror"
    shutil.copytree(CLAUDE_PROJECT, home / "claude")  # there at the first start: taken up at its end
    (claude,) = (home / "claude").glob("*.jsonl")
    command = [*CLI, "watch", str(home), "--state", str(tmp_path / "w.json"), "--jsonl-dir", str(runs)]
    watch = subprocess.Popen(
        command, env=subprocess_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    said: list[str] = []
    try:
        assert watch.stdout is not None
        assert "following" in watch.stdout.readline()
        _wait_for_lines(said, watch, 1)
        (codex,) = CODEX_DAY.glob("rollout-*.jsonl")
        (home / "codex").mkdir()
        shutil.copy(codex, home / "codex" / codex.name)  # made while it runs: read from its start
        _wait_for_lines(said, watch, 2)
        if inotify_here():  # told by the kernel, not polling: it watches each folder it looked in
            watched = set().union(*inotify_watches(watch.pid).values())
            assert {(home / name).stat().st_ino for name in ("", "claude", "codex")} <= watched
        deadline = time.monotonic() + 60
        while not list(runs.glob("*.jsonl")):
            assert time.monotonic() < deadline, "nothing written to --jsonl-dir"
            time.sleep(0.1)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, rest = watch.communicate(timeout=60)
    assert watch.returncode == 0, rest
    following = [line.rstrip("\n") for line in said if "following" in line]
    assert following == [
        f"transcript-otel watch: following claude_code session {claude} "
        f"(from byte {claude.stat().st_size}, 1 subagent file)",
        f"transcript-otel watch: following codex session {home / 'codex' / codex.name} (from its start)",
    ]
    (run,) = runs.glob("*.jsonl")  # the Codex session's lines, in the mirror --jsonl-dir named
    assert any(record["event"] == "transcript.entry" for record in read_records(run))


def test_an_idle_time_that_is_no_time_is_refused_with_the_reason(tmp_path: Path) -> None:
    """`--idle nan` ended no run, `--idle 0` and `--idle -5` every run at once: argparse refuses
    them, naming the option, before the watch starts (exit 2, nothing written)."""
    for given in ("nan", "-5", "0", "soon"):
        done = subprocess.run(
            [
                *CLI,
                "watch",
                str(tmp_path / "home"),
                f"--idle={given}",
                "--state",
                str(tmp_path / "state.json"),
            ],
            env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs")),
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert done.returncode == 2, given
        (last,) = done.stderr.splitlines()[-1:]
        assert last.startswith("transcript-otel watch: error: argument --idle: "), last
        assert repr(given) in last
        assert not (tmp_path / "state.json").exists()
