"""watch when the kernel lost events: its inotify queue overflowed (`IN_Q_OVERFLOW`).

The kernel then says only that it dropped some; the watch must look at everything once (every
folder, every session) and lose nothing. Raising `fs.inotify.max_queued_events` or lowering it
takes root: here the queue is overflowed for real, by more changes than it holds made between
two rounds, and the reader's parsing is given a synthetic overflow among other events.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry import trace

from test_watch_sessions import CLAUDE_PROJECT, CODEX_DAY, _imported, _said, _session_file
from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.sessions.changes import KernelChanges, changed_paths
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState
from transcript_otel.sinks import JsonlMirror

from inotify_watches import assert_told_by_the_kernel, inotify_watches, require_inotify

IN_MODIFY = 0x2
IN_CREATE = 0x100
IN_Q_OVERFLOW = 0x4000
MAX_QUEUED_EVENTS = Path("/proc/sys/fs/inotify/max_queued_events")


def event(watch: int, mask: int, name: bytes = b"") -> bytes:
    """One `struct inotify_event` as the kernel writes it: its name NUL-padded to 16 bytes."""
    padded = name + b"\0" * (16 - len(name) % 16) if name else b""
    return struct.pack("iIII", watch, mask, 0, len(padded)) + padded


def test_the_events_read_name_the_paths_changed_in_the_watched_folders(tmp_path: Path) -> None:
    folders = {1: tmp_path / "a", 2: tmp_path / "b"}
    data = (
        event(1, IN_MODIFY, b"session.jsonl")
        + event(2, IN_CREATE, b"new-folder")
        + event(1, IN_MODIFY, b"exactly-16-bytes")
        + event(7, IN_MODIFY, b"of-a-folder-no-longer-watched")
        + event(2, IN_MODIFY)  # the folder itself: no name
    )
    assert changed_paths(data, folders) == {
        tmp_path / "a" / "session.jsonl",
        tmp_path / "b" / "new-folder",
        tmp_path / "a" / "exactly-16-bytes",
    }


def test_an_overflow_among_the_events_read_says_events_were_lost(tmp_path: Path) -> None:
    folders = {1: tmp_path / "a"}
    before, after = event(1, IN_MODIFY, b"one.jsonl"), event(1, IN_MODIFY, b"two.jsonl")
    assert changed_paths(before + event(-1, IN_Q_OVERFLOW) + after, folders) is None
    assert changed_paths(event(-1, IN_Q_OVERFLOW), folders) is None


def _overflow_the_queue(folder: Path) -> None:
    """More changes than the kernel queues for one inotify instance, between two rounds: writes
    to two files in turn (the kernel merges a change into the one before it if they are alike)."""
    count = int(MAX_QUEUED_EVENTS.read_text()) + 100
    first = os.open(folder / "noise-1.txt", os.O_WRONLY | os.O_CREAT)
    second = os.open(folder / "noise-2.txt", os.O_WRONLY | os.O_CREAT)
    try:
        for _ in range(count):
            os.write(first, b".")
            os.write(second, b".")
    finally:
        os.close(first)
        os.close(second)


def test_after_the_kernels_queue_overflowed_watch_looks_at_everything_and_loses_nothing(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    """While the queue overflows, a followed session is written on, a new session is made in a
    new folder: the changes that said so are among those lost. The next round exports both
    whole, as an import of each gives it."""
    require_inotify()
    if int(MAX_QUEUED_EVENTS.read_text()) > 4_000_000:
        pytest.skip(f"{MAX_QUEUED_EVENTS} is too large to overflow in a test")
    told: list[set[Path] | None] = []
    read_pending = KernelChanges.pending

    def pending(self: KernelChanges) -> set[Path] | None:
        told.append(read_pending(self))
        return told[-1]

    monkeypatch.setattr(KernelChanges, "pending", pending)
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    before = set(inotify_watches())
    watcher = Watcher(
        [tmp_path / "home"],
        WatchState(tmp_path / "watch.json"),
        pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
        tracer=trace.get_tracer(__name__),
        kernel_changes=True,
    )
    try:
        assert_told_by_the_kernel(before, project)
        claude = _session_file(CLAUDE_PROJECT).read_bytes()
        claude_copy = project / _session_file(CLAUDE_PROJECT).name
        claude_copy.write_bytes(claude[: len(claude) // 2])
        watcher.poll_once()
        assert told[-1] == {claude_copy}  # the kernel's word, not a look at everything
        _overflow_the_queue(project)
        with claude_copy.open("ab") as out:
            out.write(claude[len(claude) // 2 :])
        codex_copy = tmp_path / "home" / "codex" / "2026" / _session_file(CODEX_DAY).name
        codex_copy.parent.mkdir(parents=True)
        codex_copy.write_bytes(_session_file(CODEX_DAY).read_bytes())
        watcher.poll_once()
        assert told[-1] is None  # the kernel lost events
    finally:
        watcher.close()
    runs = [_said(list(read_records(path))) for path in (tmp_path / "runs").glob("*.jsonl")]
    assert sorted(runs) == sorted([_imported(CLAUDE_PROJECT, tmp_path), _imported(CODEX_DAY, tmp_path)])
