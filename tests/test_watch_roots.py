"""`transcript-otel watch --claude-code --codex` on a machine where a CLI has not run yet: the
folder it will log to is not there when the watch starts. The watch says it waits for it, and
follows it once it appears, its sessions read from their start (issue 47, item 3). Before, it
said "following" for folders that did not exist, and never looked at them again.
"""

from __future__ import annotations

import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

import pytest
from opentelemetry import trace

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState, saved_state
from transcript_otel.sinks import JsonlMirror

from inotify_watches import assert_told_by_the_kernel, inotify_watches, require_inotify
from loopback import subprocess_env
from session_fixtures import CLAUDE, codex_day

CLI = [sys.executable, "-m", "transcript_otel.cli"]
CLAUDE_SESSION = next((CLAUDE / "tools/home/.claude/projects/-scratch-work").glob("*.jsonl"))
CODEX_SESSION = next(codex_day("shell").glob("*.jsonl"))


def _write_in_steps(source: Path, target: Path, steps: int, between: Callable[[], object]) -> None:
    """`source` appended to `target` (its folders made first) in `steps` parts, `between` after each."""
    target.parent.mkdir(parents=True, exist_ok=True)
    lines = source.read_bytes().splitlines(keepends=True)
    for step in range(steps):
        with target.open("ab") as out:
            out.write(b"".join(lines[len(lines) * step // steps : len(lines) * (step + 1) // steps]))
        between()


def _entries(runs: Path) -> int:
    return sum(
        1
        for path in runs.glob("*.jsonl")
        for record in read_records(path)
        if record["event"] == TranscriptEvent.ENTRY.value
    )


def _exported_to(state: Path, path: Path) -> int | None:
    try:
        position = saved_state(state)["files"].get(str(path))
    except (OSError, ValueError):
        return None
    return position["offset"] if position else None


def _lines(stream: IO[str]) -> queue.Queue[str]:
    """The lines the watch prints, as it prints them (read on a thread of their own)."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in stream:
            lines.put(line.strip())

    threading.Thread(target=read, daemon=True).start()
    return lines


def _line(lines: queue.Queue[str]) -> str:
    """The next line the watch prints, within a minute (never waiting for ever on one it does
    not print)."""
    try:
        return lines.get(timeout=60)
    except queue.Empty:
        raise AssertionError("the watch printed nothing more within a minute") from None


def _wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + 60  # a minute at most: a busy machine only waits longer
    while not condition():
        assert time.monotonic() < deadline, f"not within a minute: {what}"
        time.sleep(0.05)


def test_the_watch_says_which_folders_are_missing_and_follows_them_once_they_appear(tmp_path: Path) -> None:
    claude_home, codex_home, runs, state = (
        tmp_path / name for name in ("claude", "codex", "runs", "watch.json")
    )
    env = subprocess_env(
        CLAUDE_CONFIG_DIR=str(claude_home), CODEX_HOME=str(codex_home), TRANSCRIPT_OTEL_JSONL_DIR=str(runs)
    )
    command = [*CLI, "watch", "--claude-code", "--codex", "--state", str(state)]
    watch = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        printed = _lines(watch.stdout)
        for missing in (claude_home / "projects", codex_home / "sessions"):
            assert _line(printed) == f"transcript-otel watch: waiting for {missing} (not there yet)"
        targets = (
            (CLAUDE_SESSION, claude_home / "projects/-work" / CLAUDE_SESSION.name),
            (CODEX_SESSION, codex_home / "sessions/2026/12/06" / CODEX_SESSION.name),
        )
        for source, target in targets:
            _write_in_steps(source, target, 3, lambda: time.sleep(0.3))
            _wait_for(
                lambda target=target: _exported_to(state, target) == target.stat().st_size,  # type: ignore[misc]
                f"{target} exported",
            )
        appeared = {_line(printed) for _ in range(2)}
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(60) == 0
    assert appeared == {
        f"transcript-otel watch: following {claude_home / 'projects'} (it appeared)",
        f"transcript-otel watch: following {codex_home / 'sessions'} (it appeared)",
    }
    assert len(list(runs.glob("*.jsonl"))) == 2  # each session, from its start


@pytest.mark.parametrize("kernel_changes", [True, False], ids=["kernel-changes", "polling"])
def test_a_root_made_after_the_watch_started_is_followed_from_its_start(
    kernel_changes: bool, tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """The folder and the session's own folders made at once (as `mkdir -p` and the CLIs do),
    the session written in steps: every line exported, once."""
    root = tmp_path / "home" / ".codex" / "sessions"
    if kernel_changes:
        require_inotify()
    before = set(inotify_watches()) if kernel_changes else set()
    watcher = Watcher(
        [root],
        WatchState(tmp_path / "watch.json"),
        pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
        tracer=trace.get_tracer(__name__),
        kernel_changes=kernel_changes,
    )
    try:
        assert watcher.poll_once() == 0
        recorded: list[int] = []
        _write_in_steps(
            CODEX_SESSION,
            root / "2026/12/06" / CODEX_SESSION.name,
            3,
            lambda: recorded.append(watcher.poll_once()),
        )
        if kernel_changes:  # the folder that appeared, and the session's own, as the kernel tells
            assert_told_by_the_kernel(before, root)
            assert_told_by_the_kernel(before, root / "2026/12/06")
    finally:
        watcher.close()
    lines = len(CODEX_SESSION.read_bytes().splitlines())
    assert sum(recorded) == lines
    assert recorded[0] > 0  # as it appeared, not at a restart
