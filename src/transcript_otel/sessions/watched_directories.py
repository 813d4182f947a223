"""The directories `transcript-otel watch` looks into for sessions, and what it found there.

A directory's time changes when a file or a directory is made in it: `WatchedDirectories`
keeps each one's time at the last look and looks into it again once that time changed
(where the kernel tells which files changed, `KernelChanges` is told of each directory
looked at). Directories changed in the last day are looked at every round, the others every
`SLOW_POLL_S`. A file whose first line, which says whose it is, is not whole yet is looked
at again once it changes; a file below the roots that is no session log is said once; a
root not there yet is looked for every round.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Final

from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.sessions.changes import KernelChanges
from transcript_otel.sessions.files import SessionFiles, find_sessions
from transcript_otel.sessions.formats import Format, not_a_session

SLOW_POLL_S: Final = 5.0
# A file or a directory written to within this long is looked at every round; others every
# `SLOW_POLL_S`.
RECENT_S: Final = 24 * 3600.0
# A file as it was: inode, size, time written (None: it could not be looked at).
_Seen = tuple[int, int, int] | None


class WatchedDirectories:
    """The directories below the watch's roots, each with its time at the last look."""

    def __init__(
        self,
        roots: list[Path],
        changes: KernelChanges | None,
        on_root: Callable[[Path], None] | None = None,
    ) -> None:
        """`changes`: the kernel's word on the files of the directories looked at, where it
        gives one; `on_root`: told of each of `roots` that was not there (`missing_roots`) as
        it appears."""
        self.roots = roots
        self.changes = changes
        self._on_root = on_root
        # Roots not there yet (a CLI never run on this machine): looked for every round, and
        # followed once they are, their sessions from their start (`roots_appeared`).
        self.missing_roots = [root for root in roots if not root.is_dir()]
        self._times: dict[Path, int] = {}  # by directory: its time at the last look
        self._looked: dict[Path, float] = {}
        # Paths named like session files that are not regular files, said once (never read).
        self.skipped: set[Path] = set()
        # Files below the roots that are no session log (a saved stdout): what each is, said once.
        self._refused: dict[Path, Format] = {}
        # Directories holding a file whose first line, which says whose it is, is not whole yet
        # (an empty file just made): each such file as it was then, the directory looked into
        # again once one of them changed (not every round: a file may stay empty for good).
        self._unsettled_in: dict[Path, dict[Path, _Seen]] = {}

    def know_all(self) -> None:
        """Every directory below the roots there are, looked at from now on."""
        for root in self.roots:
            if root.is_dir():
                for directory, _, _ in os.walk(root):
                    self._know(Path(directory))

    def sessions_made_in(self, directories: list[Path]) -> Iterator[SessionFiles]:
        """The sessions in those of `directories` whose time changed since the last look (a file
        or a directory was made in them); new directories below them are looked into at once."""
        changed = [directory for directory in directories if self.changed(directory)]
        while changed:
            directory = changed.pop()
            self._know(directory)
            seen = self._look_into(directory, changed)
            unsettled: set[Path] = set()
            sessions = self.sessions_in([directory], unsettled)
            if unsettled:  # looked at again once they change: no new time of the directory says so
                self._unsettled_in[directory] = {path: seen.get(path) or _seen(path) for path in unsettled}
            else:
                self._unsettled_in.pop(directory, None)
            yield from sessions

    def changed(self, directory: Path, unknown: int | None = None) -> bool:
        """Whether `directory`'s time is not the one it had at the last look (`unknown`: the time
        of a directory never looked at), or a file of it whose first line was not whole changed."""
        return _mtime(directory) != self._times.get(directory, unknown) or self._unsettled_changed(directory)

    def is_new(self, path: Path) -> bool:
        """Whether `path` is a directory (not a link to one) never looked at."""
        return _is_directory(path) and path not in self._times

    def note_unsettled(self, paths: set[Path]) -> None:
        """Files whose first line is not whole yet, each as it is now: its directory is looked
        into again once one of them changes."""
        for path in paths:
            self._unsettled_in.setdefault(path.parent, {})[path] = _seen(path)

    def sessions_in(self, paths: list[Path], unsettled: set[Path]) -> list[SessionFiles]:
        """`_sessions_in`'s, each file below them that is no session log said once."""
        refused: dict[Path, Format] = {}
        sessions = _sessions_in(paths, unsettled, self.skipped, refused)
        for path, found in refused.items():
            if self._refused.get(path) is not found:
                self._refused[path] = found
                warnings.warn(f"skipped {not_a_session(path, found)}", TranscriptReadWarning, stacklevel=1)
        return sessions

    def due(self, now: float, everything: bool) -> list[Path]:
        """The directories to look at this round: those changed in the last day every round (a
        session being written, its project, its day), the others every `SLOW_POLL_S`."""
        due: list[Path] = []
        wall = time.time()
        for directory, seen in self._times.items():
            recent = everything or (seen > 0 and wall - seen / 1e9 < RECENT_S)
            if recent or now - self._looked.get(directory, -SLOW_POLL_S) >= SLOW_POLL_S:
                self._looked[directory] = now
                due.append(directory)
        return due

    def roots_appeared(self) -> list[Path]:
        """The missing roots that are there now (told to `on_root`): looked into from now on."""
        appeared = [root for root in self.missing_roots if root.is_dir()]
        for root in appeared:
            self.missing_roots.remove(root)
            if self._on_root is not None:
                self._on_root(root)
        return appeared

    def _know(self, directory: Path) -> None:
        """Look at `directory` from now on: its time, and the kernel's word on its files."""
        if directory not in self._times and self.changes is not None:
            self.changes.add(directory)  # where it will not, the sweeps find what changed
        self._times[directory] = _mtime(directory)

    def _look_into(self, directory: Path, changed: list[Path]) -> dict[Path, _Seen]:
        """`directory`'s folders not known yet added to `changed`; its session-named files as they
        are now, before they are read (one written meanwhile is looked at again)."""
        seen: dict[Path, _Seen] = {}
        with contextlib.suppress(OSError):
            for entry in os.scandir(directory):
                # Not a link to a directory: `proj/loop -> ..` would be endless, a link to
                # a folder a second copy of its sessions (as `import` does not either).
                if entry.is_dir(follow_symlinks=False):
                    if Path(entry.path) not in self._times:
                        changed.append(Path(entry.path))
                elif entry.name.endswith(".jsonl"):
                    seen[Path(entry.path)] = _seen(Path(entry.path))
        return seen

    def _unsettled_changed(self, directory: Path) -> bool:
        """Whether a file of `directory` whose first line was not whole has changed since."""
        files = self._unsettled_in.get(directory)
        return files is not None and any(_seen(path) != seen for path, seen in files.items())


def _seen(path: Path) -> _Seen:
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return None
    return (status.st_ino, status.st_size, status.st_mtime_ns)


def _mtime(path: Path) -> int:
    try:
        return os.stat(path).st_mtime_ns
    except OSError:
        return -1


def _sessions_in(
    paths: list[Path],
    unsettled: set[Path] | None = None,
    skipped: set[Path] | None = None,
    refused: dict[Path, Format] | None = None,
) -> list[SessionFiles]:
    """The sessions in `paths`; files not known to be a session's yet (being written) go in
    `unsettled` (by default, none is left out); `skipped`, `refused`: as `find_sessions`'s."""
    with contextlib.suppress(OSError):  # a directory removed meanwhile
        return list(find_sessions([path for path in paths if path.exists()], unsettled, skipped, refused))
    return []


def _is_directory(path: Path) -> bool:
    """Whether `path` is a directory itself, not a link to one."""
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except (OSError, ValueError):
        return False
