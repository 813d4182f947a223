"""`transcript-otel watch`: every session the CLIs write, exported live as it is written.

The `Watcher` polls in rounds, four a second: each session file written to in the last day
every round (a stat; reading only what a file gained), older ones every `SLOW_POLL_S`, and
each directory below the roots for files that appear (a directory's time changes when one is
made in it). A session's lines go through its `SessionFollower` into the process's pipeline: the normal
sinks, the JSONL mirror and OTLP. Where each file was recorded to is kept in the state
directory once those lines are written, so a watch that stops and starts again goes on from
there, exporting no line twice and leaving none out. A session idle for `idle_s` has its run
ended; its next lines start another.

At its first start the watch takes sessions up from their current end (their past is what
`transcript-otel import` is for); files that appear later are read from their start.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
from pathlib import Path
from typing import Final

from opentelemetry import trace

from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.sessions.files import SessionFiles, find_sessions
from transcript_otel.sessions.follow import FilePosition, SessionFollower

POLL_S: Final = 0.25
SLOW_POLL_S: Final = 5.0
# A file written to within this long is polled at `POLL_S`; others at `SLOW_POLL_S`.
RECENT_S: Final = 24 * 3600.0
DEFAULT_IDLE_S: Final = 300.0
_STATE_VERSION: Final = 1
_WRITE_WAIT_S: Final = 30.0


class WatchState:
    """Where each session file was recorded to, kept in one JSON file (written whole, then
    moved into place: a crash leaves the last one)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.positions: dict[Path, FilePosition] = {}
        self.started_before = False
        try:
            saved = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return
        if isinstance(saved, dict) and saved.get("version") == _STATE_VERSION:
            self.started_before = True
            for name, where in dict(saved.get("files") or {}).items():
                if isinstance(where, dict) and isinstance(where.get("offset"), int):
                    self.positions[Path(name)] = FilePosition(int(where.get("inode") or 0), where["offset"])

    def save(self) -> None:
        files = {str(p): {"inode": w.inode, "offset": w.offset} for p, w in self.positions.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        partial = self.path.with_suffix(".partial")
        partial.write_text(json.dumps({"version": _STATE_VERSION, "files": files}), encoding="utf-8")
        os.replace(partial, self.path)


class Watcher:
    """Follows the sessions below `roots`; `poll_once()` is one round, `run()` rounds until stopped."""

    def __init__(
        self,
        roots: list[Path],
        state: WatchState,
        *,
        pipeline: TranscriptPipeline,
        tracer: trace.Tracer,
        idle_s: float = DEFAULT_IDLE_S,
    ) -> None:
        self.roots = roots
        self.state = state
        self.idle_s = idle_s
        self._pipeline = pipeline
        self._tracer = tracer
        self._followers: dict[Path, SessionFollower] = {}
        self._last_gain: dict[Path, float] = {}
        self._polled: dict[Path, float] = {}
        self._recent: dict[Path, bool] = {}  # by session file: written to lately, at its last poll
        self._directories: dict[Path, int] = {}
        self.stopped = threading.Event()
        first_start = not state.started_before
        self._know_directories()
        for session in self._sessions():
            if first_start:  # its past is `import`'s: take it up from its end
                for path, _ in session.sources():
                    state.positions[path] = _end_of(path)
            self._follow(session)
        state.save()

    def run(self) -> None:
        while not self.stopped.is_set():
            self.poll_once()
            self.stopped.wait(POLL_S)
        self.close()

    def poll_once(self) -> int:
        """One round: new files found, new lines recorded and written, positions kept. The lines."""
        now = time.monotonic()
        self._discover()
        recorded = 0
        for path, follower in list(self._followers.items()):
            if not self._due(path, now):
                continue
            self._polled[path] = now
            gained = follower.poll()
            self._note_recency(path, gained)
            recorded += gained
            if gained:
                self._last_gain[path] = now
            elif now - self._last_gain.get(path, now) > self.idle_s:
                follower.finish()
                self._last_gain.pop(path, None)
        if recorded:
            # Written first, then the positions: a line is never left out; a crash in between
            # exports this round's lines again after the restart (a clean stop does not).
            self._pipeline.flush(_WRITE_WAIT_S)
            self._keep_positions()
        return recorded

    def close(self) -> None:
        for follower in self._followers.values():
            follower.finish()
        self._pipeline.flush(_WRITE_WAIT_S)
        self._keep_positions()

    def _keep_positions(self) -> None:
        for follower in self._followers.values():
            self.state.positions.update(follower.positions())
        with contextlib.suppress(OSError):
            self.state.save()

    def _due(self, path: Path, now: float) -> bool:
        """Every round for a file written to lately; every `SLOW_POLL_S` for the others (whether
        a file is recent is looked at when it is polled, not every round)."""
        if self._recent.get(path, True):
            return True
        return now - self._polled.get(path, -SLOW_POLL_S) >= SLOW_POLL_S

    def _note_recency(self, path: Path, gained: int) -> None:
        recent = gained > 0
        if not recent:
            with contextlib.suppress(OSError):
                recent = time.time() - path.stat().st_mtime < RECENT_S
        self._recent[path] = recent

    def _discover(self) -> None:
        """Sessions in the directories whose time changed since the last look (a file or a
        directory was made in them); new directories are looked into at once."""
        changed = [d for d, seen in list(self._directories.items()) if _mtime(d) != seen]
        while changed:
            directory = changed.pop()
            self._directories[directory] = _mtime(directory)
            with contextlib.suppress(OSError):
                for entry in os.scandir(directory):
                    if entry.is_dir() and Path(entry.path) not in self._directories:
                        changed.append(Path(entry.path))
            for session in _sessions_in([directory]):
                follower = self._followers.get(session.path)
                if follower is None:
                    self._follow(session)
                else:
                    for path, source in session.subagents:
                        follower.add_file(path, source)

    def _know_directories(self) -> None:
        for root in self.roots:
            if root.is_dir():
                self._directories[root] = _mtime(root)
                for directory, _, _ in os.walk(root):
                    self._directories[Path(directory)] = _mtime(Path(directory))

    def _sessions(self) -> list[SessionFiles]:
        return _sessions_in(self.roots)

    def _follow(self, session: SessionFiles) -> None:
        self._followers[session.path] = SessionFollower(
            session, self.state.positions, tracer=self._tracer, pipeline=self._pipeline
        )


def _end_of(path: Path) -> FilePosition:
    status = path.stat()
    return FilePosition(status.st_ino, status.st_size)


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _sessions_in(paths: list[Path]) -> list[SessionFiles]:
    with contextlib.suppress(OSError):  # a directory removed meanwhile
        return list(find_sessions([path for path in paths if path.exists()]))
    return []
