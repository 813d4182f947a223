"""Where Claude Code and Codex keep their session logs, and which files make one session.

Claude Code: `$CLAUDE_CONFIG_DIR` (default `~/.claude`) `/projects/<project>/<session>.jsonl`,
each subagent in `<session>/subagents/agent-<agentId>.jsonl` beside it (2.0 and before:
`agent-<agentId>.jsonl` in the project's folder itself, its lines naming their `sessionId`). Codex:
`$CODEX_HOME` (default `~/.codex`) `/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl`, one
file per thread (a resumed session appends to it): a subagent's thread (`multi_agent_v2`) has
a file of its own, whose `session_meta` names the session it belongs to (`session_id`, the
root thread's id, where its own is `id`), looked for beside the root's file and in the next
day's folder.

OpenCode: one SQLite database, `$XDG_DATA_HOME/opencode/opencode.db`, a session per row
(`sessions.opencode`).

Which CLI wrote a file is told by its content (`sessions.formats`), never by its name alone: a
rollout copied under another name is a Codex session, a saved stdout named like a log none.
"""

from __future__ import annotations

import functools
import os
import stat
import warnings
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import date, timedelta
from enum import StrEnum
from pathlib import Path
from typing import Final, NamedTuple

from transcript_otel.instrumentation.cli_logs import is_session_id
from transcript_otel.model.entries import MAIN_SOURCE, subagent_source
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.records.serialize import parse_json
from transcript_otel.sessions.formats import Format, format_of, not_a_session, read_head
from transcript_otel.sessions.opencode_db import DATABASE_NAME as OPENCODE_DATABASE
from transcript_otel.sessions.opencode_db import is_opencode_database, session_ids
from transcript_otel.sessions.regular import NotRegularFileError, open_regular

SUBAGENTS_DIR: Final = "subagents"
_SUBAGENT_PREFIX: Final = "agent-"
_ROLLOUT_PREFIX: Final = "rollout-"
# A rollout's first line (`session_meta`, with the ~21 KB system prompt) is read up to this.
_MAX_META_BYTES: Final = 1 << 20


# One file whatever path leads to it: its device and inode (the path, where it cannot be looked at).
FileIdentity = tuple[int, int] | Path


class SessionKind(StrEnum):
    CLAUDE_CODE = "claude_code"
    CODEX = "codex"
    GEMINI = "gemini"
    OPENCODE = "opencode"


class NotASessionError(ValueError):
    """A file named on its own is not a session one of the CLIs wrote: what it is."""

    def __init__(self, path: Path, found: Format) -> None:
        super().__init__(not_a_session(path, found))
        self.path = path
        self.found = found


@dataclass(frozen=True, slots=True)
class SessionFiles:
    """One session: its kind, its main file, and the files of its subagents with their sources."""

    kind: SessionKind
    path: Path
    subagents: tuple[tuple[Path, str], ...] = ()
    session_id: str | None = None  # which session of the file (OpenCode's database holds them all)

    def sources(self) -> list[tuple[Path, str]]:
        """Every file of the session with the source its entries belong to."""
        return [(self.path, MAIN_SOURCE), *self.subagents]


def find_sessions(
    paths: Iterable[Path],
    unsettled: set[Path] | None = None,
    skipped: set[Path] | None = None,
    refused: dict[Path, Format] | None = None,
) -> Iterator[SessionFiles]:
    """The sessions in `paths` (files, or directories searched below), each once, in path order.

    Whether a file is a session, and whose, is told by its first lines (`sessions.formats`).
    Below a directory every `*.jsonl` file is looked at; one that is no session log goes in
    `refused` with what it is. A file named on its own that is none raises `NotASessionError`.
    A file still empty or whose first line is not whole yet: with `unsettled` (files being
    written), added to it and no session yet; without, taken as it is (an empty file is none).
    A subagent's file named on its own is part of its session, not one of its own. Raises
    `FileNotFoundError` for a path that does not exist. OpenCode's database (an SQLite file with
    its tables, named or `opencode.db` below a directory) gives a session per `session` row; one
    that cannot be read now raises `OpenCodeDatabaseError` (a watch leaves it to `opencode_watch`).

    Below a directory, links to directories are not gone into (a link to `..` would make the
    search endless, one to a folder another copy of it). A file is one file whatever paths lead
    to it (links, hard links: one device and inode): its session is given once, for the first.
    A path named like a session that is not a regular file (a FIFO, a link to a device) is
    skipped with a warning, once for the paths in `skipped` (where they are added), else at
    each search; reading one would wait or never end.
    """
    seen: set[FileIdentity] = set()
    folders = _Folders(unsettled, skipped)
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        named = not path.is_dir()
        candidates = [path] if named else sorted(path.rglob("*.jsonl"))
        if not named and unsettled is None:  # (a watch follows OpenCode's database apart: `opencode_watch`)
            candidates += sorted(path.rglob(OPENCODE_DATABASE))
        for candidate in candidates:
            if not folders.regular(candidate):
                continue
            found = folders.format_of(candidate)
            if folders.unsettled is not None and found.may_become_a_session:
                folders.unsettled.add(candidate)  # whose it is, is said next time
                continue
            if found is Format.SQLITE and unsettled is None and is_opencode_database(candidate):
                if (identity := file_identity(candidate)) not in seen:
                    seen.add(identity)
                    for session_id in session_ids(candidate):
                        yield SessionFiles(SessionKind.OPENCODE, candidate, session_id=session_id)
                continue
            if not found.is_session:
                if named:
                    raise NotASessionError(candidate, found)
                if refused is not None:
                    refused[candidate] = found
                continue
            session = _session_of(candidate, folders, found)
            if session is not None and folders.unsettled is not None and session.path in folders.unsettled:
                continue  # whose it is, is said next time
            if session is not None and (identity := file_identity(session.path)) not in seen:
                seen.add(identity)
                yield session


def file_identity(path: Path) -> FileIdentity:
    """What tells one file from another whatever path leads to it: its device and inode (the
    path itself, where it cannot be looked at)."""
    try:
        status = os.stat(path)
    except (OSError, ValueError):
        return path
    return (status.st_dev, status.st_ino)


def _session_of(path: Path, folders: _Folders, found: Format) -> SessionFiles | None:
    if found is Format.GEMINI:  # one file (a subagent's, in `chats/<parent>/`, a session of its own)
        return SessionFiles(SessionKind.GEMINI, path)
    if path.parent.name == SUBAGENTS_DIR and found is Format.CLAUDE_CODE:
        main = path.parent.parent.with_suffix(".jsonl")  # <session>/subagents/ -> <session>.jsonl
        return _main_session(main, folders, alone=None)
    if path.name.startswith(_SUBAGENT_PREFIX) and found is Format.CLAUDE_CODE:
        session_id = folders.ids_of(path).session_id  # Claude Code 2.0: beside its session's file
        if session_id is not None and (main := path.with_name(f"{session_id}.jsonl")).is_file():
            return _main_session(main, folders, alone=SessionFiles(SessionKind.CLAUDE_CODE, path))
        return SessionFiles(SessionKind.CLAUDE_CODE, path)
    if found is Format.CODEX:
        thread = folders.ids_of(path)
        # A subagent's thread: part of its root's session (a thread that does not say its own id
        # is not known to be another's: a session of its own, never left out).
        if thread.own_id is not None and thread.session_id != thread.own_id:
            root = _codex_root_file(path, thread.session_id)
            if root is not None and _is_root(folders.ids_of(root), thread.session_id):
                return _main_session(root, folders, alone=None)  # (unsettled: its first line not whole)
            return SessionFiles(SessionKind.CODEX, path)  # no root thread's file: it alone
        # Its subagents' threads begin beside it, or in the next day's folder after midnight.
        days = (path.parent, *_other_day(path.parent, 1))
        subagents = tuple(file for day in days for file in folders.subagents_in(day, thread.own_id))
        return SessionFiles(SessionKind.CODEX, path, subagents)
    directory = path.with_suffix("") / SUBAGENTS_DIR
    subagents = tuple(
        (file, subagent_source(file.stem.removeprefix(_SUBAGENT_PREFIX)))
        for file in (sorted(directory.glob(f"{_SUBAGENT_PREFIX}*.jsonl")) if directory.is_dir() else [])
        if folders.regular(file)
    )
    return SessionFiles(
        SessionKind.CLAUDE_CODE, path, (*subagents, *folders.subagents_in(path.parent, path.stem))
    )


def _main_session(main: Path, folders: _Folders, alone: SessionFiles | None) -> SessionFiles | None:
    """The session whose main file is `main`; where `main` holds none, `alone` (a subagent's file
    as a session of its own), and None while what `main` holds is not known yet."""
    if not main.is_file() or not folders.regular(main):
        return alone
    found = folders.format_of(main)
    if folders.unsettled is not None and found.may_become_a_session:
        folders.unsettled.add(main)
        return None
    return _session_of(main, folders, found) if found.is_session else alone


class _Folders:
    """The subagent files lying among the sessions' own in each folder one search looks in
    (Claude Code 2.0's `agent-*.jsonl`, Codex subagent threads' rollouts), by the session they
    belong to: each folder read once a search, not once for each session in it. `unsettled`:
    where the files whose first line is not whole yet go, when the search is told of them;
    `skipped`: the paths not regular files already said (`find_sessions`)."""

    def __init__(self, unsettled: set[Path] | None, skipped: set[Path] | None) -> None:
        self._by_session: dict[Path, dict[str, list[tuple[Path, str]]]] = {}
        self.unsettled = unsettled
        self._skipped = set() if skipped is None else skipped

    def regular(self, path: Path) -> bool:
        """Whether `path` is a regular file (through links); a path that is something else is
        said once. (One that cannot be looked at, gone meanwhile, is not one, unsaid.)"""
        try:
            status = os.stat(path)
        except (OSError, ValueError):
            return False
        if stat.S_ISREG(status.st_mode):
            self._skipped.discard(path)  # said again if it is replaced by something else
            return True
        if path not in self._skipped:
            self._skipped.add(path)
            skipped = NotRegularFileError(path, status.st_mode)
            warnings.warn(f"{skipped}: skipped", TranscriptReadWarning, stacklevel=2)
        return False

    def format_of(self, path: Path) -> Format:
        """What `path` holds, from its first lines. A watch (`unsettled` given) looks at whole
        lines only, an import takes the file as it is, its last line too."""
        taken_whole = self.unsettled is None
        try:
            return _format_of(path, path.stat().st_ino, taken_whole)
        except _NotKnownYetError as not_yet:
            return not_yet.found
        except OSError:
            return Format.UNREADABLE

    def ids_of(self, path: Path) -> _Ids:
        ids = _ids_of(path)
        if not ids.whole and self.unsettled is not None:
            self.unsettled.add(path)
        return ids

    def subagents_in(self, directory: Path, session_id: str | None) -> list[tuple[Path, str]]:
        if session_id is None:
            return []
        found = self._by_session.get(directory)
        if found is None:
            found = self._by_session[directory] = self._subagents_by_session(directory)
        return found.get(session_id, [])

    def _subagents_by_session(self, directory: Path) -> dict[str, list[tuple[Path, str]]]:
        found: dict[str, list[tuple[Path, str]]] = {}
        for path in sorted(directory.glob("*.jsonl")):
            if not path.name.startswith((_SUBAGENT_PREFIX, _ROLLOUT_PREFIX)):
                continue  # a Claude Code session's own file
            if not self.regular(path):
                continue
            ids = self.ids_of(path)
            if path.name.startswith(_SUBAGENT_PREFIX):
                source = subagent_source(path.stem.removeprefix(_SUBAGENT_PREFIX))
            elif ids.own_id not in (None, ids.session_id):
                source = subagent_source(str(ids.own_id))
            else:
                continue  # a Codex root thread
            if ids.session_id is not None:
                found.setdefault(ids.session_id, []).append((path, source))
        return found


class _Ids(NamedTuple):
    own_id: str | None  # a Codex thread's id
    session_id: str | None  # the session it belongs to (a Codex root thread's is its own)
    whole: bool = True  # False: the first line is not whole yet (an empty file: just made)


class _NotKnownYetError(ValueError):
    """A file's format that may change as it is written (empty, its first line under way): not
    remembered."""

    def __init__(self, found: Format) -> None:
        super().__init__(found.value)
        self.found = found


@functools.lru_cache(maxsize=4096)
def _format_of(path: Path, _inode: int, taken_whole: bool) -> Format:  # a file replaced is read again
    head, at_end = read_head(path)
    found = format_of(head, whole_file=at_end and taken_whole)
    if found.may_become_a_session:
        raise _NotKnownYetError(found)
    return found


class _FirstLineNotWhole(ValueError):
    """The file is being written: its first line is asked again next time."""


def _ids_of(path: Path) -> _Ids:
    """What a log's first line says of whose it is: a rollout's `session_meta`, a Claude Code
    2.0 subagent's `sessionId`; (None, None) where it says nothing, not whole yet included.
    What a whole line said is remembered."""
    try:
        return _first_line_ids(path, path.stat().st_ino)
    except _FirstLineNotWhole:
        return _Ids(None, None, whole=False)
    except (OSError, ValueError, RecursionError):
        return _Ids(None, None)


@functools.lru_cache(maxsize=4096)
def _first_line_ids(path: Path, _inode: int) -> _Ids:  # a file replaced at the same path is read again
    """Raises for a first line not (yet) whole or not JSON: a failure is not remembered."""
    with open_regular(path) as stream:
        first = stream.readline(_MAX_META_BYTES)
    if not first.endswith(b"\n"):
        raise _FirstLineNotWhole(path)
    line = parse_json(first)
    if not isinstance(line, dict):
        return _Ids(None, None)
    if "payload" not in line:  # a Claude Code line (a rollout's are `timestamp`/`type`/`payload`)
        return _Ids(None, _id(line.get("sessionId")))
    payload = line.get("payload") if line.get("type") == "session_meta" else None
    if not isinstance(payload, dict):
        return _Ids(None, None)
    thread = _id(payload.get("id"))
    return _Ids(thread, _id(payload.get("session_id")) or thread)


def _id(value: object) -> str | None:
    """An id a file's name can hold (the CLIs' are UUIDs); None for anything else, which names
    no other file (a `/`, a pattern, another subagent's file)."""
    if isinstance(value, str) and is_session_id(value) and not value.startswith(_SUBAGENT_PREFIX):
        return value
    return None


def _is_root(ids: _Ids, session_id: str | None) -> bool:
    """Whether a rollout whose first line said `ids` is the root thread of `session_id`, or may
    be (not whole yet): never a thread of another session, nor a subagent's (files that name
    each other make no cycle)."""
    return not ids.whole or ids.own_id == ids.session_id == session_id


def _codex_root_file(path: Path, session_id: str | None) -> Path | None:
    """The root thread's file of a subagent's rollout: beside it, else a day before."""
    if session_id is None:
        return None
    for directory in (path.parent, *_other_day(path.parent, -1)):
        found = sorted(p for p in directory.glob(f"{_ROLLOUT_PREFIX}*-{session_id}.jsonl") if p.is_file())
        if found:
            return found[0]
    return None


def _other_day(directory: Path, days: int) -> list[Path]:
    """`.../YYYY/MM/DD` moved by `days`, if the folder is one and exists."""
    try:
        day = date(int(directory.parent.parent.name), int(directory.parent.name), int(directory.name))
    except ValueError:
        return []
    other = day + timedelta(days=days)
    found = directory.parent.parent.parent / f"{other.year:04d}" / f"{other.month:02d}" / f"{other.day:02d}"
    return [found] if found.is_dir() else []
