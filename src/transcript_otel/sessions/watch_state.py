"""Where `transcript-otel watch` recorded each session file to, kept across its starts.

The state is a snapshot (`watch.json`: version, generation, every position) and a journal
beside it (`watch.json.journal`): each save appends one line holding only the positions that
changed since the last save, so a round that exported a few lines of a few sessions writes
those sessions' entries, not the thousands of others. The journal is folded into a new
snapshot once it outgrows the snapshot (each byte of state is written about twice at most).
A journal line names its snapshot's generation (a random token): the lines of a journal left
behind by a crash between a new snapshot and the removal of the old journal name another and
are passed over (the snapshot holds them). A line cut short by a crash ends the journal: the
positions of that save are the ones before it, so its lines are read again (at least once,
never lost), and the first save after it writes a new snapshot.

One watch at a time uses a state (`state_lock.py`): a second watch given the same state
refuses to start, where both would export every line.
"""

from __future__ import annotations

import json
import os
import secrets
import warnings
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.sessions.followed_file import FilePosition
from transcript_otel.sessions.regular import (
    NotRegularFileError,
    open_regular,
    real_path,
    write_in_place,
    written_in_place,
)
from transcript_otel.sessions.state_lock import hold_lock

_STATE_VERSION: Final = 1
# Files gone from the roots whose positions are kept, the latest: `codex archive` moves a
# rollout out and `codex unarchive` back (the same path and inode): it goes on where it was.
MAX_GONE: Final = 256
# The largest offset a file may have (a signed 64-bit `off_t`).
_MAX_OFFSET: Final = 1 << 63
# Unusable entries of a state named in the warning that says so.
_NAMED_DROPPED: Final = 5
# The longest session id or fingerprint a state's entry may give (the CLIs' ids are UUIDs).
_MAX_ID_CHARS: Final = 256
# A journal is folded into the snapshot once it is longer than this or than the snapshot.
_MIN_JOURNAL_BYTES: Final = 1 << 20


class _UnusableStateError(ValueError):
    """The state file is not one this watch can use: why."""


class WatchState:
    """Where each session file was recorded to: a session's main file with what its runs
    counted up to there (`FilePosition.carried`, `SessionFollower`); and where the latest files
    that went away were (`forget`, `recall`). `save()` keeps what changed since the last.

    The file is where `path` leads, as an export's (`exports/destination.py`'s rule): a link's
    file is replaced, the link kept; a FIFO or a device (`/dev/null`) is written into as it is,
    whole, without waiting, and never read (each start is then a first start). A state this
    watch cannot use is said once, as the watch starts: a file that is not one it wrote (not
    JSON, another version) is a first start; an entry it cannot use (a negative offset, an inode
    that is not a number) is dropped alone, its file read again from its start (nothing of it
    lost)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.positions: dict[Path, FilePosition] = {}
        self.gone: dict[Path, FilePosition] = {}
        self.started_before = False
        self._final = real_path(path)  # a link's file, the link kept
        self._lock = None if written_in_place(path) else hold_lock(self._final)
        self._journal_path = _journal_of(self._final)
        # The snapshot's generation; None: the next save writes a snapshot (there is none this
        # watch can go on from, or its journal cannot take more lines).
        self._generation: str | None = None
        self._snapshot_bytes = 0
        self._journal_bytes = 0
        # What was last saved of each entry, as written: what a save compares with.
        self._saved_files: dict[str, str] = {}
        self._saved_gone: dict[str, str] = {}
        # The files `forget()` and `recall()` moved since the last save.
        self._moved: set[Path] = set()
        try:
            saved = self._read()
        except _UnusableStateError as exc:
            _say(f"{path}: unusable ({exc}): started as at a first start, each session taken up from its end")
            return
        if saved is None:
            return
        self.started_before = True
        dropped: list[tuple[str, str]] = []
        self.positions = _positions(saved.get("files"), dropped)
        self.gone = _positions(saved.get("gone"), dropped)
        self._saved_files = _written(saved.get("files"), self.positions)
        self._saved_gone = _written(saved.get("gone"), self.gone)
        if dropped:
            said = (
                "1 entry unusable, dropped (its file is read again from its start)"
                if len(dropped) == 1
                else f"{len(dropped)} entries unusable, dropped (their files are read again from their start)"
            )
            named = ", ".join(f"{name} ({why})" for name, why in dropped[:_NAMED_DROPPED])
            more = f", and {len(dropped) - _NAMED_DROPPED} more" if len(dropped) > _NAMED_DROPPED else ""
            _say(f"{path}: {said}: {named}{more}")

    def _read(self) -> dict[str, Any] | None:
        """The state saved, its journal applied; None where there is none to read;
        `_UnusableStateError` for one this watch cannot use."""
        try:
            loaded = _load(self.path)
        except NotRegularFileError as exc:
            _say(f"{exc}: the positions are written into it, never read: each start is a first start")
            return None
        if loaded is None:
            return None
        self._generation, self._snapshot_bytes, self._journal_bytes = (
            loaded.generation,
            loaded.snapshot_bytes,
            loaded.journal_bytes,
        )
        return loaded.saved

    def forget(self, path: Path) -> None:
        """`path` went away: it is recorded to no more, but where it was is kept a while."""
        position = self.positions.pop(path, None)
        if position is not None:
            self._moved.add(path)
            self.gone.pop(path, None)
            self.gone[path] = position
            while len(self.gone) > MAX_GONE:
                del self.gone[next(iter(self.gone))]

    def recall(self, path: Path) -> FilePosition | None:
        """Where `path` was recorded to before it went away, if it did: its follower goes on
        from there if what is back is that file, or that log rewritten (`SessionFollower`)."""
        position = self.gone.pop(path, None)
        if position is not None:
            self._moved.add(path)
            self.positions[path] = position
        return position

    def save(self, changed: Iterable[Path] | None = None) -> None:
        """What changed since the last save kept: a journal line, or a new snapshot once the
        journal has outgrown the one it follows (or into a FIFO or device: everything).
        `changed`: the only positions that may have moved since, but those `forget()` and
        `recall()` moved (None: any; each entry is then compared with the one saved)."""
        gone = _entries(self.gone)
        if written_in_place(self.path):  # a FIFO, a device: never replaced, never waited on
            write_in_place(self.path, _snapshot("", _entries(self.positions), gone))
            return
        if changed is None or self._generation is None:
            files = _entries(self.positions)
            changed_files = _changes(self._saved_files, files)
        else:
            files, changed_files = self._saved_files.copy(), {}
            for path in {*changed, *self._moved}:
                name, where = str(path), self.positions.get(path)
                written = None if where is None else json.dumps(_entry(where))
                if written is None and name in files:
                    del files[name]
                    changed_files[name] = None
                elif written is not None and written != files.get(name):
                    files[name] = written
                    changed_files[name] = json.loads(written)
        if self._generation is None:
            self._write_snapshot(files, gone)
        else:
            changed_gone = _changes(self._saved_gone, gone, ordered=True)
            if not changed_files and not changed_gone:
                self._moved.clear()
                return
            change = {"generation": self._generation, "files": changed_files, "gone": changed_gone}
            line = (json.dumps(change) + "\n").encode()
            if self._journal_bytes + len(line) > max(_MIN_JOURNAL_BYTES, self._snapshot_bytes):
                self._write_snapshot(files, gone)
            else:
                try:
                    with self._journal_path.open("ab") as journal:
                        journal.write(line)
                except OSError:
                    self._generation = None  # (part of the line may be there: a new snapshot next)
                    raise
                self._journal_bytes += len(line)
        self._saved_files, self._saved_gone = files, gone
        self._moved.clear()

    def _write_snapshot(self, files: dict[str, str], gone: dict[str, str]) -> None:
        """Every position in a new snapshot of the next generation, then an empty journal for it
        (a crash in between leaves the old journal, whose lines name the old generation)."""
        generation = secrets.token_hex(8)
        data = _snapshot(generation, files, gone)
        self._final.parent.mkdir(parents=True, exist_ok=True)
        partial = self._final.with_name(f"{self._final.name}.partial")
        partial.write_bytes(data)
        os.replace(partial, self._final)
        self._generation, self._snapshot_bytes = generation, len(data)
        try:
            self._journal_path.unlink()
        except FileNotFoundError:
            pass
        except OSError:
            self._generation = None  # the old journal is still there: a snapshot next, not a line after it
            raise
        self._journal_bytes = 0

    def close(self) -> None:
        """The lock let go: another watch may use this state now."""
        if self._lock is not None:
            self._lock.close()
            self._lock = None


def saved_state(path: Path) -> dict[str, Any]:
    """What a watch given `path` as its state would go on from (`{"files": …, "gone": …}`, each
    entry as saved; empty where there is none), for reading it while a watch runs (no lock
    taken). A state no watch can use is a `ValueError` saying why; a FIFO or a device, which no
    watch reads, a `NotRegularFileError`."""
    loaded = _load(path)
    return {"files": {}, "gone": {}} if loaded is None else loaded.saved


@dataclass(frozen=True)
class _Loaded:
    saved: dict[str, Any]  # its journal applied
    generation: str | None  # None: written before journals (or its journal cut short)
    snapshot_bytes: int
    journal_bytes: int


def _load(path: Path) -> _Loaded | None:
    """The snapshot at `path` and its journal; None where there is none (a first start);
    `_UnusableStateError` for one no watch can use; `NotRegularFileError` for a FIFO or a
    device."""
    try:
        with open_regular(path) as stream:
            text = stream.read()
    except FileNotFoundError:
        return None
    except NotRegularFileError:
        raise
    except OSError as exc:
        raise _UnusableStateError(f"cannot be read: {exc}") from exc
    saved = _state_object(text)
    version = saved.get("version")
    if type(version) is not int or version != _STATE_VERSION:
        raise _UnusableStateError(f"version {version!r}, not {_STATE_VERSION}")
    for key, what in (("files", "files"), ("gone", "gone files")):
        if not isinstance(saved.setdefault(key, {}), dict):
            raise _UnusableStateError(f"its {what} are not an object")
    generation = saved.get("generation")
    if not isinstance(generation, str) or not generation:  # (a state without one has no journal)
        return _Loaded(saved, None, len(text), 0)
    journal_bytes, whole = _apply_journal(_journal_of(real_path(path)), generation, saved)
    return _Loaded(saved, generation if whole else None, len(text), journal_bytes)


def _journal_of(final: Path) -> Path:
    return final.with_name(f"{final.name}.journal")


def _apply_journal(journal: Path, generation: str, saved: dict[str, Any]) -> tuple[int, bool]:
    """The changes `journal` holds for the snapshot of `generation`, applied to `saved` in order:
    the journal's length, and whether it was whole (not cut short by a crash)."""
    read = 0
    try:
        with open_regular(journal) as stream:
            for line in stream:
                read += len(line)
                try:
                    change = json.loads(line)
                except (ValueError, RecursionError):
                    return read, False
                if isinstance(change, dict) and change.get("generation") == generation:
                    for key in ("files", "gone"):  # (another generation's: the snapshot holds it)
                        table, named = saved[key], change.get(key)
                        for name, where in (named if isinstance(named, dict) else {}).items():
                            table.pop(name, None)  # (re-added last: the gone files' order is their age)
                            if where is not None:
                                table[name] = where
                if not line.endswith(b"\n"):
                    return read, False  # cut before its newline: whole, but no line may follow it
    except NotRegularFileError:
        return read, False  # (a FIFO, a device: never appended to; the next snapshot removes it)
    except OSError:
        pass  # none (no save since the snapshot), or not one to read
    return read, True


def _state_object(text: bytes) -> dict[str, Any]:
    try:
        saved = json.loads(text)
    except RecursionError:
        raise _UnusableStateError("nested too deeply") from None
    except ValueError:
        raise _UnusableStateError("not JSON") from None
    if not isinstance(saved, dict):
        raise _UnusableStateError("not an object")
    return saved


def _say(message: str) -> None:
    warnings.warn(message, TranscriptReadWarning, stacklevel=2)


def _snapshot(generation: str, files: dict[str, str], gone: dict[str, str]) -> bytes:
    """The whole state as one JSON object, from each entry as written."""

    def table(entries: dict[str, str]) -> str:
        return "{" + ", ".join(f"{json.dumps(name)}: {where}" for name, where in entries.items()) + "}"

    return (
        f'{{"version": {_STATE_VERSION}, "generation": {json.dumps(generation)}, '
        f'"files": {table(files)}, "gone": {table(gone)}}}'
    ).encode()


def _changes(saved: dict[str, str], now: dict[str, str], *, ordered: bool = False) -> dict[str, Any]:
    """The entries that differ from those saved, as JSON values (None: gone), in `now`'s order
    after those dropped. `ordered` (the gone files, whose order is their age): every entry from
    the first one out of the order saved on, so that a replay, which puts each entry it reads
    last, gives `now`'s order."""
    changed: dict[str, Any] = {name: None for name in saved if name not in now}
    kept = [name for name in saved if name in now]
    moved = False
    for index, (name, where) in enumerate(now.items()):
        moved = moved or (ordered and (index >= len(kept) or kept[index] != name))
        if moved or saved.get(name) != where:
            changed[name] = json.loads(where)
    return changed


def _positions(saved: object, dropped: list[tuple[str, str]]) -> dict[Path, FilePosition]:
    """The positions saved; each entry that cannot be one added to `dropped` with why."""
    found: dict[Path, FilePosition] = {}
    for name, where in (saved if isinstance(saved, dict) else {}).items():
        position = _position(where)
        if not name or "\0" in name:
            dropped.append((repr(name), "bad path"))
        elif isinstance(position, str):
            dropped.append((name, position))
        else:
            found[Path(name)] = position
    return found


def _written(saved: object, kept: dict[Path, FilePosition]) -> dict[str, str]:
    """Each entry read as it would be written again; one dropped as unusable is "" (it differs
    from any entry: the next save drops it from the state too)."""
    return {
        name: json.dumps(_entry(kept[Path(name)])) if name and "\0" not in name and Path(name) in kept else ""
        for name in (saved if isinstance(saved, dict) else {})
    }


def _position(where: object) -> FilePosition | str:
    """The position an entry says, or why it cannot be one."""
    if not isinstance(where, dict):
        return "not an entry"
    inode, offset, lines = where.get("inode", 0), where.get("offset"), where.get("lines")
    if type(inode) is not int or not 0 <= inode < 1 << 64:
        return "bad inode"
    if type(offset) is not int or not 0 <= offset < _MAX_OFFSET:
        return "bad offset"
    if lines is not None and (type(lines) is not int or not 0 <= lines <= offset):
        return "bad lines"  # (a line is a byte at least)
    carried = where.get("carried")  # (one its follower cannot use is passed over there)
    # What tells the file from one written anew: where it is not a short text, not known (the
    # file is taken as the one read, as a state written before these were kept says).
    tail, session = (_short_text(where.get(key)) for key in ("tail", "session"))
    return FilePosition(
        inode, offset, lines, carried if isinstance(carried, dict) else None, tail=tail, session=session
    )


def _short_text(value: object) -> str | None:
    return value if isinstance(value, str) and len(value) <= _MAX_ID_CHARS else None


def _entries(positions: dict[Path, FilePosition]) -> dict[str, str]:
    """Each position as the JSON its entry is written as."""
    return {str(path): json.dumps(_entry(where)) for path, where in positions.items()}


def _entry(where: FilePosition) -> dict[str, Any]:
    entry: dict[str, Any] = {"inode": where.inode, "offset": where.offset}
    if where.lines is not None:
        entry["lines"] = where.lines
    if where.carried is not None:  # a session's main file: what its runs counted
        entry["carried"] = where.carried
    for key, known in (("tail", where.tail), ("session", where.session)):
        if known is not None:
            entry[key] = known
    return entry
