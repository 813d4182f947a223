"""`transcript-otel watch` over a mirror on a disk that fills up, then gets room again (issue 51,
item 6): the lines the mirror could not write are read again and exported once there is room,
each line of the session in the mirror exactly once, whether the room comes back while the
watch runs or while it is stopped. A real file system (a small tmpfs, mounted for the test: root
only) and the real `watch` process.
"""

from __future__ import annotations

import contextlib
import errno
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from transcript_otel import read_records
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.text import entry_text
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session

from loopback import subprocess_env
from session_fixtures import codex_day

SOURCE = codex_day("resumed")
CLI = [sys.executable, "-m", "transcript_otel.cli"]


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs at `tmp_path/runs` (skipped where it cannot be mounted: not root)."""
    runs = tmp_path / "runs"
    runs.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(runs)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs: {mounted.stderr.decode(errors='replace').strip()}")
    try:
        yield runs
    finally:
        subprocess.run(["umount", "-l", str(runs)], check=False)


def _fill(disk: Path) -> Path:
    """`disk` made full: a file written to until there is no room."""
    filler = disk / "filler.bin"
    with filler.open("wb", buffering=0) as out:
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0" * 65536)
        with contextlib.suppress(OSError):
            while True:
                out.write(b"\0")
    with pytest.raises(OSError, match="No space left") as full:
        (disk / "probe").write_bytes(b"x" * 4096)
    assert full.value.errno == errno.ENOSPC
    return filler


def _entries(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (r["context"]["entry_type"], entry_text(r["context"]["entry_type"], r["context"]["detail"]))
        for r in records
        if r["event"] == TranscriptEvent.ENTRY.value
    ]


def _mirror(runs: Path) -> list[tuple[str, str]]:
    """The entries of every run in the mirror, runs in the order they began (a run file the
    full disk left empty holds none)."""
    found = [list(read_records(path)) for path in runs.glob("*.jsonl")]
    ordered = sorted((run for run in found if run), key=lambda run: run[0]["timestamp"])
    return [entry for run in ordered for entry in _entries(run)]


def _stopped(runs: Path) -> bool:
    return any(
        r["event"] == TranscriptEvent.STOP.value for p in runs.glob("*.jsonl") for r in read_records(p)
    )


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 90.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.1)


class _Watch:
    """The `watch` command, its stderr in a file."""

    def __init__(self, home: Path, runs: Path, tmp_path: Path) -> None:
        self.log = tmp_path / "watch.stderr"
        self._stderr: IO[str] = self.log.open("a")
        command = [*CLI, "watch", str(home), "--state", str(tmp_path / "watch.json"), "--idle", "1"]
        env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(runs))
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        assert self.process.stdout is not None
        assert "following" in self.process.stdout.readline()

    def said(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            assert self.process.wait(timeout=60) == 0, self.said()
        finally:
            self._stderr.close()


@pytest.mark.parametrize("room_back", ["while it runs", "while it is stopped"])
def test_lines_the_full_disk_kept_from_the_mirror_are_exported_once_there_is_room(
    room_back: str, small_disk: Path, tmp_path: Path
) -> None:
    runs = small_disk
    (session,) = find_sessions([SOURCE])
    imported = _entries(list(read_records(import_session(session, tmp_path / "imported").path)))
    lines = session.path.read_bytes().splitlines(keepends=True)
    # The disk fills between the session's two turns (`codex exec` and its `resume`).
    half = max(i for i, line in enumerate(lines) if b'"task_started"' in line)
    home = tmp_path / "home"
    target = home / "project" / session.path.name
    target.parent.mkdir(parents=True)

    watch = _Watch(home, runs, tmp_path)
    target.write_bytes(b"".join(lines[:half]))
    # Its run ended (idle 1 s): what comes after the disk filled is a run of its own.
    _wait_for(lambda: _stopped(runs), "the first turn's run ended")
    first = _mirror(runs)
    assert first
    assert first == imported[: len(first)]

    filler = _fill(runs)
    with target.open("ab") as out:
        out.write(b"".join(lines[half:]))
    _wait_for(lambda: "No space left on device" in watch.said(), "the failure said")
    time.sleep(6)  # a try again, in vain, at least (every 5 s)
    assert _mirror(runs) == first, "nothing of the second turn fits"

    if room_back == "while it is stopped":
        watch.stop()
        filler.unlink()
        watch = _Watch(home, runs, tmp_path)
    else:
        filler.unlink()
    try:
        _wait_for(lambda: len(_mirror(runs)) >= len(imported), "the second turn exported")
        time.sleep(1.5)  # anything more it would write (twice)
    finally:
        watch.stop()
    assert _mirror(runs) == imported
    assert "could not write the lines of 1 session(s)" in watch.said()
    if room_back == "while it runs":
        assert "the mirror writes again" in watch.said()
