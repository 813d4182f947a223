"""The watch's state (issue 51, item 7): a save writes what changed, not the whole state; a
journal cut short by a crash or left behind by one loses nothing kept before it; one watch at a
time uses a state. Before, every round rewrote the whole state (10,000 sessions: 95 MB written
for 37.7 KB of new lines) and two watches given one state both exported every line."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.sessions.follow import SessionFollower
from transcript_otel.sessions.followed_file import FilePosition
from transcript_otel.sessions.state_lock import StateInUseError
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import MAX_GONE, WatchState, saved_state

from loopback import subprocess_env
from session_fixtures import CLAUDE

CLI = [sys.executable, "-m", "transcript_otel.cli"]


def _journal(state: Path) -> Path:
    return state.with_name(f"{state.name}.journal")


def _state_of(count: int, state_path: Path) -> WatchState:
    state = WatchState(state_path)
    for n in range(count):
        state.positions[Path(f"/sessions/s{n:05d}.jsonl")] = FilePosition(1000 + n, 10 * n, n, tail="x")
    state.save()
    return state


def test_a_save_writes_only_the_positions_that_changed(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    state = _state_of(2_000, path)
    snapshot = path.stat()
    assert not _journal(path).exists()
    moved = Path("/sessions/s00007.jsonl")
    state.positions[moved] = FilePosition(1007, 99_999, 1_000, tail="y")
    state.forget(Path("/sessions/s00008.jsonl"))
    state.save()
    state.save()  # nothing changed since: nothing written
    assert path.stat().st_ino == snapshot.st_ino  # the snapshot is not written again
    assert path.stat().st_mtime_ns == snapshot.st_mtime_ns
    (line,) = _journal(path).read_text().splitlines()
    change = json.loads(line)
    assert change["files"] == {
        str(moved): {"inode": 1007, "offset": 99_999, "lines": 1_000, "tail": "y"},
        "/sessions/s00008.jsonl": None,
    }
    assert list(change["gone"]) == ["/sessions/s00008.jsonl"]
    assert len(line) < 400 < snapshot.st_size // 100
    state.close()
    again = WatchState(path)
    assert again.positions == state.positions
    assert again.gone == state.gone
    assert saved_state(path)["files"][str(moved)]["offset"] == 99_999


def test_a_journal_that_outgrows_its_snapshot_is_folded_into_a_new_one(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    state = _state_of(10, path)
    first = json.loads(path.read_text())["generation"]
    for offset in range(1, 20_000):  # a few hundred bytes a save: past 1 MiB
        state.positions[Path("/sessions/s00003.jsonl")] = FilePosition(1003, offset, None)
        state.save()
    kept = json.loads(path.read_text())
    assert kept["generation"] != first
    assert _journal(path).stat().st_size < 1 << 20
    state.close()
    assert WatchState(path).positions == state.positions


def test_a_journal_line_cut_short_by_a_crash_loses_nothing_saved_before_it_or_after(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    state = _state_of(5, path)
    state.positions[Path("/sessions/s00001.jsonl")] = FilePosition(1001, 111, None)
    state.save()
    state.close()
    with _journal(path).open("a") as journal:
        journal.write('{"generation": "')  # SIGKILL while a line was written
    restarted = WatchState(path)
    assert restarted.positions[Path("/sessions/s00001.jsonl")].offset == 111
    restarted.positions[Path("/sessions/s00002.jsonl")] = FilePosition(1002, 222, None)
    restarted.save()  # after a cut line: a new snapshot (a line appended after it would be lost)
    restarted.close()
    again = WatchState(path)
    assert again.positions[Path("/sessions/s00001.jsonl")].offset == 111
    assert again.positions[Path("/sessions/s00002.jsonl")].offset == 222


def test_a_journal_line_cut_just_before_its_newline_is_not_followed_by_the_next_save(tmp_path: Path) -> None:
    """A write cut right before its newline leaves a line that parses: the next save must not be
    appended to it (the two would be one line no one can read, and every save after it lost)."""
    path = tmp_path / "watch.json"
    state = _state_of(2, path)
    state.positions[Path("/sessions/s00000.jsonl")] = FilePosition(1000, 100, None)
    state.save()
    state.close()
    _journal(path).write_bytes(_journal(path).read_bytes().rstrip(b"\n"))
    restarted = WatchState(path)
    assert restarted.positions[Path("/sessions/s00000.jsonl")].offset == 100
    restarted.positions[Path("/sessions/s00001.jsonl")] = FilePosition(1001, 200, None)
    restarted.save()
    restarted.positions[Path("/sessions/s00000.jsonl")] = FilePosition(1000, 300, None)
    restarted.save()  # a clean stop's
    restarted.close()
    again = WatchState(path)
    assert again.positions[Path("/sessions/s00000.jsonl")].offset == 300
    assert again.positions[Path("/sessions/s00001.jsonl")].offset == 200


def test_the_gone_files_keep_their_age_across_a_restart(tmp_path: Path) -> None:
    """A file archived, put back and archived again at the same position is the newest gone
    file: a restart keeps that order, so the next file gone trims the oldest, not it."""
    path = tmp_path / "watch.json"
    state = WatchState(path)
    names = [Path(f"/sessions/{n:03d}.jsonl") for n in range(MAX_GONE)]
    for n, name in enumerate(names):
        state.positions[name] = FilePosition(n, n)
        state.forget(name)
    state.save()
    state.recall(names[0])
    state.forget(names[0])  # the same position: its entry is the same, its age not
    state.save()
    state.close()
    restarted = WatchState(path)
    assert list(restarted.gone) == list(state.gone)
    restarted.close()


def test_a_journal_that_cannot_be_removed_is_not_appended_to(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "watch.json"
    state = _state_of(1, path)
    name = Path("/sessions/s00000.jsonl")
    state.positions[name] = FilePosition(1000, 20, None)
    state.save()
    with _journal(path).open("a") as journal:
        journal.write('{"generation": "')  # a failed append's
    state._generation = None  # (what that failure leaves: a snapshot next)
    state.positions[name] = FilePosition(1000, 30, None)

    def refused(self: Path, missing_ok: bool = False) -> None:
        raise PermissionError(1, "Operation not permitted", str(self))

    monkeypatch.setattr(Path, "unlink", refused)
    with pytest.raises(PermissionError):
        state.save()
    monkeypatch.undo()
    state.positions[name] = FilePosition(1000, 40, None)
    state.save()
    state.close()
    assert WatchState(path).positions[name].offset == 40


def test_a_fifo_as_the_journal_is_never_appended_to(tmp_path: Path) -> None:
    """A FIFO named as the journal would block the first save with no reader: it is replaced."""
    path = tmp_path / "watch.json"
    _state_of(1, path).close()
    os.mkfifo(_journal(path))
    state = WatchState(path)
    state.positions[Path("/sessions/s00000.jsonl")] = FilePosition(1000, 50, None)
    state.save()  # (before: blocked for good)
    state.close()
    assert WatchState(path).positions[Path("/sessions/s00000.jsonl")].offset == 50


def test_the_journal_of_an_older_snapshot_is_passed_over(tmp_path: Path) -> None:
    """A crash between a new snapshot and the old journal's removal leaves that journal: its
    lines name the older snapshot, which the new one holds."""
    path = tmp_path / "watch.json"
    state = _state_of(3, path)
    state.positions[Path("/sessions/s00000.jsonl")] = FilePosition(1000, 5, None)
    state.save()
    left_behind = _journal(path).read_bytes()
    state.positions[Path("/sessions/s00000.jsonl")] = FilePosition(1000, 7, None)
    state._write_snapshot(  # (what a fold does), then the old journal put back
        {name: json.dumps(where) for name, where in saved_state(path)["files"].items()}
        | {"/sessions/s00000.jsonl": json.dumps({"inode": 1000, "offset": 7})},
        {},
    )
    _journal(path).write_bytes(left_behind)
    state.close()
    assert WatchState(path).positions[Path("/sessions/s00000.jsonl")].offset == 7


def test_a_state_written_before_the_journal_is_read_and_written_anew(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    entry = {"inode": 5, "offset": 40, "lines": 2}
    path.write_text(json.dumps({"version": 1, "files": {"/sessions/a.jsonl": entry}, "gone": {}}))
    state = WatchState(path)
    assert state.started_before
    assert state.positions[Path("/sessions/a.jsonl")] == FilePosition(5, 40, 2)
    state.save()
    assert json.loads(path.read_text())["files"] == {"/sessions/a.jsonl": entry}
    assert isinstance(json.loads(path.read_text())["generation"], str)


def test_one_state_one_watch(tmp_path: Path) -> None:
    path = tmp_path / "watch.json"
    first = WatchState(path)
    with pytest.raises(StateInUseError, match=rf"{path} is used by another watch \(process {os.getpid()}\)"):
        WatchState(path)
    first.close()
    WatchState(path).close()
    # A FIFO or a device is written into, never read: nothing to share, no lock.
    held = []
    for _ in range(2):
        with pytest.warns(TranscriptReadWarning, match="never read"):
            held.append(WatchState(Path(os.devnull)))


def _watch(state: Path, home: Path, runs: Path) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [*CLI, "watch", str(home), "--state", str(state), "--jsonl-dir", str(runs), "--idle", "inf"],
        env=subprocess_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_a_second_watch_on_the_same_state_refuses_to_start(tmp_path: Path) -> None:
    home, runs, state = tmp_path / "home", tmp_path / "runs", tmp_path / "watch.json"
    home.mkdir()
    first = _watch(state, home, runs)
    try:
        assert first.stdout is not None
        assert "following" in first.stdout.readline()
        second = _watch(state, home, runs)
        _, said = second.communicate(timeout=60)
        assert second.returncode == 2
        assert f"transcript-otel watch: {state} is used by another watch (process {first.pid})" in said
        assert "give this one a --state of its own" in said
        assert first.poll() is None  # the first goes on
        first.kill()  # however it ends, the OS lets go of its lock
        first.wait(timeout=60)
        third = _watch(state, home, runs)
        assert third.stdout is not None
        assert "following" in third.stdout.readline()
        third.send_signal(signal.SIGTERM)
        assert third.wait(timeout=60) == 0
    finally:
        first.kill()
        first.wait(timeout=60)


def test_a_round_with_lines_of_one_session_of_many_journals_that_session_alone(
    tmp_path: Path, polling_watcher: Callable[[], Watcher], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The real watcher over 300 sessions: a round in which one of them gains a line asks that
    session alone where it is (what its runs counted is built for each one asked), writes its
    positions, a few hundred bytes, and leaves the snapshot as it was."""
    (source,) = (CLAUDE / "tools/home/.claude/projects/-scratch-work").glob("*.jsonl")
    lines = source.read_bytes().splitlines(keepends=True)
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    for n in range(300):
        (project / f"{n:08d}-0000-4000-8000-000000000000.jsonl").write_bytes(b"".join(lines[:-1]))
    path = tmp_path / "watch.json"
    watcher = polling_watcher()
    snapshot = path.stat()
    grown = project / "00000042-0000-4000-8000-000000000000.jsonl"
    with grown.open("ab") as session:
        session.write(lines[-1])
    time.sleep(0.01)
    asked: list[Path] = []
    positions = SessionFollower.positions

    def counted(follower: SessionFollower) -> dict[Path, FilePosition]:
        asked.append(follower.session.path)
        return positions(follower)

    monkeypatch.setattr(SessionFollower, "positions", counted)
    assert watcher.poll_once() == 1
    assert asked == [grown]
    monkeypatch.undo()
    (line,) = _journal(path).read_text().splitlines()
    assert list(json.loads(line)["files"]) == [str(grown)]
    assert path.stat().st_mtime_ns == snapshot.st_mtime_ns
    assert len(line) < snapshot.st_size / 50
    watcher.close()
    assert saved_state(path)["files"][str(grown)]["offset"] == grown.stat().st_size
