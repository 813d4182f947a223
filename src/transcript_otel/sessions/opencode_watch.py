"""`transcript-otel watch --opencode`: OpenCode's sessions recorded live, from its database.

OpenCode writes its sessions into one SQLite database (`opencode_db`), updating rows in place
(a text part as it streams, a tool part pending → running → completed). The
`OpenCodeWatcher` looks at the database's `-wal` and `.db` files each round (a stat); when
they changed it reads, read-only and in short transactions, the rows updated since the last
read (a few seconds of slack: a row's time is the writer's clock when it made it, its commit
a little later), and each session's mapper gives each row's entries once, whatever number of
times the row is read. A session's entries go into a live run (`SessionRecorder`), ended after
`idle_s` without new entries; its next entries start another.

At its first start the watch takes the sessions already there up from where they are (their
past is `import`'s): it reads them once and records only what changes after. Stopped, it keeps
how far it read (the latest row time, in `position`); started again it records what was
written since, each session's in a run of its own. A database that
cannot be read (locked, being made, its `-shm` not there) is read again next round, said once.
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Final

from opentelemetry import trace

from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.sessions.files import SessionKind
from transcript_otel.sessions.opencode_db import (
    OpenCodeDatabaseError,
    changed_sessions,
    read_only,
    rows_timeline,
    session_lines,
)
from transcript_otel.sessions.recorder import HARNESSES, SessionRecorder, WentBefore, run_id_of

POLL_S: Final = 0.25
# Rows updated this long before the last one read are read again (a row's time is when it
# was made; it may be committed after a later one).
_SLACK_MS: Final = 5_000
_WRITE_WAIT_S: Final = 30.0


class _Session:
    """One session followed: its mapper (for the watch's life), its run while it is active."""

    def __init__(self, session_id: str, database: Path) -> None:
        self.session_id = session_id
        self.map_line = HARNESSES[SessionKind.OPENCODE].line_mapper(None, database)
        self.recorder: SessionRecorder | None = None
        self.went_before = WentBefore()
        self.from_start = True  # its first run records it from its first row (the import's run id)
        self.read = 0  # its lines read so far (their numbers)
        self.gained_at = 0.0


class OpenCodeWatcher:
    """Follows OpenCode's database `database`; `poll_once()` is one round, `run()` rounds until stopped."""

    def __init__(
        self,
        database: Path,
        *,
        pipeline: TranscriptPipeline,
        tracer: trace.Tracer,
        idle_s: float,
        on_follow: Callable[[str], None] | None = None,
        position: Path | None = None,
    ) -> None:
        """`position`: the file where the watch keeps how far it read the database, when it stops:
        started again, it goes on from there (without one, or a first start: from where the
        sessions are)."""
        self.database = database
        self._position = position
        self._resume_ms = _recalled(position, database)
        self.idle_s = idle_s
        self._pipeline = pipeline
        self._tracer = tracer
        self._on_follow = on_follow
        self._sessions: dict[str, _Session] = {}
        self._since_ms = 0  # rows updated before this were read
        self._seen: tuple[int, int, int, int] | None = None  # the files' sizes and times, last read
        self._started = False  # the sessions there at the start were taken up
        self._failing: str | None = None  # why the last read failed, said once

    def run(self, stopped: threading.Event) -> None:
        """Rounds until `stopped`, then `close()`. A failure of ours in a round is said, and the
        next round goes on (the session files' watch, beside it, is not stopped by it)."""
        while not stopped.is_set():
            try:
                self.poll_once()
            except Exception as exc:
                warnings.warn(
                    f"{self.database}: a round failed: {exc!r}", TranscriptReadWarning, stacklevel=2
                )
            stopped.wait(POLL_S)
        self.close()

    def poll_once(self) -> int:
        """One round: the rows that changed, recorded; runs idle too long ended. The lines read."""
        now = time.monotonic()
        read = 0
        seen = self._files_seen()
        if seen is None:
            self._started = True  # no database yet: every session it will hold is new
        elif seen != self._seen:
            try:
                read = self._read()
            except OpenCodeDatabaseError as exc:
                # (Its tables not made yet: OpenCode is making the database, read next round.)
                if self._failing is None and "no such table" not in str(exc):
                    warnings.warn(f"{exc} (read again each round)", TranscriptReadWarning, stacklevel=2)
                self._failing = str(exc)
            else:
                self._seen, self._failing = seen, None
        for followed in self._sessions.values():
            if followed.recorder is not None and now - followed.gained_at > self.idle_s:
                self._end(followed)
        return read

    def close(self) -> None:
        """End every run, and wait for the writer to write them (as a stop of the watch does)."""
        for followed in self._sessions.values():
            if followed.recorder is not None:
                self._end(followed)
        written = self._pipeline.flush(_WRITE_WAIT_S)
        if written and self._position is not None and self._started:
            _keep(self._position, self.database, self._since_ms)

    def _files_seen(self) -> tuple[int, int, int, int] | None:
        """The database's and its WAL's sizes and times (None: no database yet): what changes when
        OpenCode writes."""
        try:
            main = os.stat(self.database)
        except OSError:
            return None
        try:
            wal = os.stat(f"{self.database}-wal")
        except OSError:
            return (main.st_size, main.st_mtime_ns, -1, -1)
        return (main.st_size, main.st_mtime_ns, wal.st_size, wal.st_mtime_ns)

    def _read(self) -> int:
        read = 0
        with read_only(self.database) as connection:
            since = max(self._since_ms - _SLACK_MS, 0)
            changed = changed_sessions(connection, since)
            for session_id in changed:
                followed = self._sessions.get(session_id)
                if followed is not None:
                    read += self._record(followed, session_lines(connection, session_id, since))
                    continue
                followed = self._sessions[session_id] = _Session(session_id, self.database)
                lines = session_lines(connection, session_id)
                if self._on_follow is not None:
                    self._on_follow(session_id)
                if self._started:
                    read += self._record(followed, lines)
                    continue
                # There before the watch: what it read before it stopped is mapped as given, the
                # rows updated since are recorded (a first start: taken up from where it is).
                # (Rows of the last millisecond read were read: a row updated in it after the stop
                # is the one left out, where reading it again would give what it gave twice.)
                resume = self._resume_ms
                later = session_lines(connection, session_id, resume + 1) if resume else []
                known = set(later)
                earlier = [line for line in lines[1:] if line not in known]
                if later and not earlier:  # made while the watch was stopped: recorded whole
                    read += self._record(followed, lines)
                    continue
                self._take_up(followed, lines[:1] + earlier if later else lines)
                read += self._record(followed, later)
        self._started = True
        self._since_ms = max(self._since_ms, *changed.values(), 0)
        return read

    def _take_up(self, followed: _Session, lines: list[bytes]) -> None:
        """What the session holds already is its past: mapped, so that it is given no more."""
        for line in lines:
            followed.map_line(line, "")
        followed.from_start = False
        followed.read = len(lines)

    def _record(self, followed: _Session, lines: list[bytes]) -> int:
        timed = list(rows_timeline(lines, followed.map_line, followed.read))
        followed.read += len(lines)
        first = next((line for line in timed if line.said.entries), None)
        if first is None:
            return 0
        if followed.recorder is None:  # (begun at its first entry: the session row is older)
            followed.recorder = self._recorder(followed, first.at_ns)
        for line in timed:
            followed.recorder.apply(line)
        followed.gained_at = time.monotonic()
        return len(timed)

    def _recorder(self, followed: _Session, started_ns: int) -> SessionRecorder:
        """A run of the session from now: its first from its start is the one `import` makes."""
        part = None if followed.from_start else str(followed.read)
        followed.from_start = False
        return SessionRecorder(
            HARNESSES[SessionKind.OPENCODE],
            session_id=followed.session_id,
            run_id=run_id_of(SessionKind.OPENCODE, followed.session_id, part),
            started_ns=started_ns,
            pipeline=self._pipeline,
            tracer=self._tracer,
            went_before=followed.went_before,
        )

    def _end(self, followed: _Session) -> None:
        recorder = followed.recorder
        if recorder is not None:
            followed.went_before = recorder.goes_on_as()
            recorder.finish()
            followed.recorder = None


def _recalled(position: Path | None, database: Path) -> int | None:
    """How far a watch that stopped read `database` (epoch ms of the last row), if it says."""
    try:
        kept = json.loads(position.read_text()) if position is not None else None
    except (OSError, ValueError):
        return None
    if not isinstance(kept, dict) or kept.get("database") != str(database):
        return None
    until = kept.get("read_until_ms")
    return until if isinstance(until, int) and until > 0 else None


def _keep(position: Path, database: Path, until_ms: int) -> None:
    """Where the watch stopped, written whole (a file that cannot be written: taken up again)."""
    partial = position.with_name(f".{position.name}.writing")
    with contextlib.suppress(OSError):
        position.parent.mkdir(parents=True, exist_ok=True)
        partial.write_text(json.dumps({"database": str(database), "read_until_ms": until_ms}) + "\n")
        os.replace(partial, position)
