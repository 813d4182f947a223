"""`transcript-otel watch`: every session the CLIs write, exported live as it is written.

The `Watcher` polls in rounds, four a second: each session file written to in the last
day every round (a stat; reading only what a file gained), older ones every
`SLOW_POLL_S`, and each directory below the roots for files that appear
(`WatchedDirectories`: a directory's time changes when one is made in it). A session's
lines go through its `SessionFollower` into the process's pipeline: the normal sinks,
the JSONL mirror and OTLP. Where each file was recorded to is kept in the state
directory once those lines are written, so a watch that stops and starts again goes on
from there, exporting no line twice and leaving none out. A session idle for `idle_s`
has its run ended; its next lines start another.

At its first start the watch takes sessions up from their current end (their past is what
`transcript-otel import` is for); files that appear later are read from their start, and so
are those of a root that was not there when the watch started (looked for every round).
"""

from __future__ import annotations

import contextlib
import threading
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Final

from opentelemetry import trace

from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.sessions.changes import KernelChanges
from transcript_otel.sessions.files import (
    SUBAGENTS_DIR,
    FileIdentity,
    SessionFiles,
    SessionKind,
    file_identity,
)
from transcript_otel.sessions.follow import SessionFollower
from transcript_otel.sessions.followed_file import position_at_end
from transcript_otel.sessions.watch_state import WatchState
from transcript_otel.sessions.watched_directories import RECENT_S, SLOW_POLL_S, WatchedDirectories
from transcript_otel.sinks.jsonl_write_failures import SINK_NAME as MIRROR

POLL_S: Final = 0.25
DEFAULT_IDLE_S: Final = 300.0
_WRITE_WAIT_S: Final = 30.0


def _say(message: str) -> None:
    warnings.warn(message, TranscriptReadWarning, stacklevel=2)


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
        kernel_changes: bool = True,
        on_follow: Callable[[SessionFiles], None] | None = None,
        on_root: Callable[[Path], None] | None = None,
    ) -> None:
        """`kernel_changes`: learn which files changed from the kernel where it can say (then a
        round looks only at those, and at everything every `SLOW_POLL_S`); else poll.
        `on_follow`: told of each session as it starts following it (the command says so);
        `on_root`: of each of `roots` that was not there (`missing_roots`) as it appears."""
        self.roots = roots
        self._on_follow = on_follow
        self.state = state
        self.idle_s = idle_s
        self._pipeline = pipeline
        self._tracer = tracer
        self._followers: dict[Path, SessionFollower] = {}
        self._last_gain: dict[Path, float] = {}
        self._polled: dict[Path, float] = {}
        self._recent: dict[Path, bool] = {}  # by session file: written to lately, at its last poll
        self._session_of_file: dict[Path, Path] = {}  # a session's file -> its main file
        # The main file each followed session's is, by device and inode: a file another path
        # leads to (a link, a hard link) is followed once, under the first path found.
        self._main_files: dict[FileIdentity, Path] = {}
        self._identity_of: dict[Path, FileIdentity] = {}
        # Sessions whose lines the mirror could not write: read again from their kept positions
        # no sooner than this (`_rewind`).
        self._rewound: dict[Path, float] = {}
        # Sessions whose last poll stopped before the end of their files (a backlog): polled
        # again the next round, which comes at once (the kernel will not say they changed).
        self._behind: set[Path] = set()
        self._positions_owed = False  # the last round's lines were not written in time
        # Sessions whose positions may have moved since they were last kept (a round keeps
        # only theirs: asking every follower costs a round as much as the sessions there are).
        self._unkept: set[Path] = set()
        self._changes = KernelChanges.open() if kernel_changes else None
        self._directories = WatchedDirectories(roots, self._changes, on_root)
        self._last_sweep = time.monotonic()
        self.stopped = threading.Event()
        first_start = not state.started_before
        for path in [path for path in state.positions if not path.exists()]:
            state.forget(path)  # gone while the watch was not running
        self._directories.know_all()
        unsettled: set[Path] = set()
        for session in self._directories.sessions_in(self.roots, unsettled):
            if self._another_path_to_a_followed_file(session.path) is not None:
                continue
            if first_start:  # its past is `import`'s: take it up from its end
                for path, _ in session.sources():
                    state.positions[path] = position_at_end(path)
            self._follow(session)
        for path in [path for path in state.positions if path not in self._session_of_file]:
            state.forget(path)  # not followed now (not a session's yet, or another path to one)
        self._directories.note_unsettled(unsettled)
        self._save_positions(everything=True)  # (as the followers tell them: a round saves what it moved)

    @property
    def missing_roots(self) -> list[Path]:
        """The roots not there yet (a CLI never run on this machine): looked for every round."""
        return self._directories.missing_roots

    def run(self) -> None:
        while not self.stopped.is_set():
            self.poll_once()
            if self._behind and not self._behind.issubset(self._rewound):
                continue  # a backlog: taken at the speed it can be read, as `import` does
            if self._changes is not None:
                self._changes.wait(POLL_S)  # asleep until a file changes (or the round is up)
            else:
                self.stopped.wait(POLL_S)
        self.close()

    def poll_once(self) -> int:
        """One round: new files found, new lines recorded and written, positions kept. The lines."""
        now = time.monotonic()
        changed = self._changes.pending() if self._changes is not None else None
        if changed is None or now - self._last_sweep >= SLOW_POLL_S:
            # Everything: polling, a sweep behind the kernel's word, or after it lost events.
            self._last_sweep = now
            everything = self._changes is not None
            self._discover(self._directories.due(now, everything))
            polled = [path for path in self._followers if everything or self._due(path, now)]
        else:
            polled = self._changed_sessions(changed)
        if self._directories.missing_roots:
            polled = list(dict.fromkeys([*polled, *self._discover(self._directories.roots_appeared())]))
        polled += [path for path in self._behind if path not in polled]
        polled = [path for path in polled if self._rewound.get(path, now) <= now]
        polled += [path for path, at in self._rewound.items() if at <= now and path not in polled]
        known = len(self._followers)
        failures = self._pipeline.sink_failures[MIRROR]
        gained: dict[Path, int] = {}
        for path in polled:
            if self.stopped.is_set():  # (a round over thousands of sessions: the rest are read next start)
                break
            if path in self._followers:
                gained[path] = self._poll(path, now)
        recorded = sum(gained.values())
        self._end_idle_runs(now)
        # Lines, sessions forgotten, or positions not kept yet: a round whose lines the writer had
        # not written within `_WRITE_WAIT_S` keeps them at the next, lines or not (else never,
        # once no more lines come, until the watch stops).
        if recorded or len(self._followers) < known or self._positions_owed:
            # Written first, then the positions: a line is never left out; a crash in between
            # exports this round's lines again after the restart (a clean stop does not).
            written = self._pipeline.flush(_WRITE_WAIT_S)
            if self._pipeline.sink_failures[MIRROR] != failures:
                # The mirror could not write them (a full disk): read again, a while later.
                self._rewind([path for path, count in gained.items() if count], now)
            elif self._rewound:
                for path in gained:
                    self._rewound.pop(path, None)
                if not self._rewound:
                    _say("the mirror writes again: the lines it could not write are written")
            if written:  # (else still queued: kept at the next round)
                self._keep_positions()
            self._positions_owed = not written
        return recorded

    def _rewind(self, sessions: list[Path], now: float) -> None:
        """The lines these sessions' followers read this round were not written: each goes back
        to where its files were kept, to read them again in `SLOW_POLL_S` (said once until the
        mirror writes again)."""
        if not sessions:  # (only runs' ends were lost: nothing to read again)
            return
        if not self._rewound:
            _say(
                f"the mirror could not write the lines of {len(sessions)} session(s) (see the warning "
                f"above): they are read again every {SLOW_POLL_S:g} s until it can"
            )
        for path in sessions:
            self._followers[path].rewind(self.state.positions)
            self._unkept.add(path)
            self._rewound[path] = now + SLOW_POLL_S
        self._pipeline.flush(_WRITE_WAIT_S)  # the runs' ends, failing too: not counted in the next round

    def close(self) -> None:
        for follower in self._followers.values():
            follower.finish()
        if self._changes is not None:
            self._changes.close()
            self._changes = self._directories.changes = None
        failures = self._pipeline.sink_failures[MIRROR]
        # As long as the writer gets on (a slow one ends thousands of runs): what it has not
        # written when the process exits is lost, so the positions past it are not kept.
        written = self._pipeline.flush_while_writing(_WRITE_WAIT_S, lambda: False)
        if written and self._pipeline.sink_failures[MIRROR] == failures:
            self._keep_positions(everything=True)  # each run just ended (else they stay as kept)
        self.state.close()  # (another watch may use it now)

    def _keep_positions(self, *, everything: bool = False) -> None:
        """`_save_positions`, a state that cannot be written leaving the positions kept as they
        were (read again at the next start)."""
        with contextlib.suppress(OSError):
            self._save_positions(everything=everything)

    def _save_positions(self, *, everything: bool = False) -> None:
        """The positions of the sessions that moved since they were last kept (`everything`:
        of every session)."""
        sessions = self._followers if everything else self._unkept
        moved: list[Path] = []
        for follower in [self._followers[path] for path in sessions if path in self._followers]:
            positions = follower.positions()
            self.state.positions.update(positions)
            moved += positions
        self.state.save(None if everything else moved)
        self._unkept.clear()

    def _poll(self, path: Path, now: float) -> int:
        follower = self._followers[path]
        self._polled[path] = now
        before = follower.progress()
        self._find_subagents_made(follower)
        gained = follower.poll()
        if gained or follower.progress() != before:
            self._unkept.add(path)
        if follower.behind:
            self._behind.add(path)
        else:
            self._behind.discard(path)
        known = self._identity_of.get(path)
        if isinstance(known, tuple) and known[1] != follower.main_inode:
            self._identified(path)  # rewritten (another inode): known by its new one
        if gained:
            self._recent[path] = True
            self._last_gain[path] = now
            return gained
        try:
            self._recent[path] = time.time() - path.stat().st_mtime < RECENT_S
        except FileNotFoundError:
            self._forget(path)
        except OSError:
            self._recent[path] = False
        return 0

    def _find_subagents_made(self, follower: SessionFollower) -> None:
        """A Claude Code session's subagent files made since the round began, found before the
        session's files are read (a stat when there are none): the main agent's cost line after
        a subagent's work gives the session's totals, the subagent's calls included, so a
        subagent file first read at a later round has its calls counted twice. A round over
        thousands of sessions may last a whole subagent's life."""
        if follower.session.kind is not SessionKind.CLAUDE_CODE:
            return
        directory = follower.session.path.with_suffix("") / SUBAGENTS_DIR
        if self._directories.changed(directory, unknown=-1):
            self._discover([directory])

    def _forget(self, main: Path) -> None:
        """A session whose main file is gone (the CLIs delete old sessions: Claude Code after
        `cleanupPeriodDays`): its run ends, and neither the watch nor its state file keeps it,
        so a watch that runs for months holds the sessions there are, not all there were."""
        follower = self._followers.pop(main)
        follower.finish()
        self._behind.discard(main)
        identity = self._identity_of.pop(main, main)
        if self._main_files.get(identity) == main:
            del self._main_files[identity]
        self.state.positions.update(follower.positions())
        for path in follower.positions():
            self.state.forget(path)
            self._session_of_file.pop(path, None)
        for table in (self._last_gain, self._polled, self._recent, self._rewound):
            table.pop(main, None)

    def _end_idle_runs(self, now: float) -> None:
        """End the runs of sessions idle past `idle_s` (the sessions that gained lately only)."""
        for path, gained_at in list(self._last_gain.items()):
            if now - gained_at > self.idle_s:
                self._followers[path].finish()
                self._unkept.add(path)  # (what its runs counted: no run open now)
                del self._last_gain[path]
                # The state then says the run ended, else a crash would have it reported again.
                self._positions_owed = True

    def _changed_sessions(self, changed: set[Path]) -> list[Path]:
        """The sessions whose files the kernel said changed; directories it said were made are
        looked into, and files not known yet found."""
        new_directories = [path for path in changed if self._directories.is_new(path)]
        sessions = dict.fromkeys(self._discover(new_directories) if new_directories else [])
        for path in changed:
            if path.suffix != ".jsonl":
                continue
            main = self._session_of_file.get(path)
            if main is None and (main := self._another_path_to_a_followed_file(path)) is None:
                sessions.update(dict.fromkeys(self._discover([path.parent])))
                main = self._session_of_file.get(path)
            if main is not None:  # (a followed file written under another path: that file)
                sessions[main] = None
        return list(sessions)

    def _due(self, path: Path, now: float) -> bool:
        """Every round for a file written to lately; every `SLOW_POLL_S` for the others (whether
        a file is recent is looked at when it is polled, not every round)."""
        if self._recent.get(path, True):
            return True
        return now - self._polled.get(path, -SLOW_POLL_S) >= SLOW_POLL_S

    def _discover(self, directories: list[Path]) -> list[Path]:
        """Sessions in those of `directories` whose time changed since the last look (a file or
        a directory was made in them); new directories are looked into at once. The sessions
        found, or that gained a file."""
        touched: list[Path] = []
        for session in self._directories.sessions_made_in(directories):
            follower = self._followers.get(session.path)
            if follower is None:
                if self._another_path_to_a_followed_file(session.path) is not None:
                    continue
                self._follow(session)
                touched.append(session.path)
            else:
                for path, source in session.subagents:
                    if path not in self._session_of_file:
                        follower.add_file(path, source, self.state.recall(path))
                        self._session_of_file[path] = session.path
                        touched.append(session.path)
        return touched

    def _another_path_to_a_followed_file(self, main: Path) -> Path | None:
        """The followed session's main file `main` is under another path (`main` a link to it, a
        hard link), if it is one."""
        identity = file_identity(main)
        followed = self._main_files.get(identity)
        if followed is None or followed == main or followed not in self._followers:
            return None
        if self._identified(followed) != identity:  # rewritten since, not polled yet: another file
            return None
        return followed

    def _identified(self, main: Path) -> FileIdentity:
        """`main`'s file identity looked at again, and kept (a file rewritten is another inode)."""
        identity = file_identity(main)
        known = self._identity_of.get(main)
        if known != identity:
            if known is not None and self._main_files.get(known) == main:
                del self._main_files[known]
            self._identity_of[main] = identity
            self._main_files.setdefault(identity, main)
        return identity

    def _follow(self, session: SessionFiles) -> None:
        self._identified(session.path)
        for path, _ in session.sources():
            self._session_of_file[path] = session.path
            if path not in self.state.positions:
                self.state.recall(path)  # a file that went away and is back goes on where it was
        follower = self._followers[session.path] = SessionFollower(
            session,
            self.state.positions,
            tracer=self._tracer,
            pipeline=self._pipeline,
            skipped=self._directories.skipped,
        )
        self._unkept.add(session.path)
        if follower.running:  # (taken over from a killed watch's run: it ends on idle too)
            self._last_gain[session.path] = time.monotonic()
        if self._on_follow is not None:
            self._on_follow(session)
