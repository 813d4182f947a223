"""Which files changed, as the kernel tells it (Linux inotify), so that an idle watch costs nothing.

One watch per directory reports the files written, made, deleted or moved in or out of it,
and the directories made in it. Where inotify is missing (another OS, a kernel without it, a
filesystem that does not report changes), `KernelChanges.open()` returns None and the watch
polls instead; where the kernel lost events (its queue overflowed), `pending()` says so and
the watch looks at everything once.
"""

from __future__ import annotations

import ctypes
import os
import select
import struct
from collections.abc import Mapping
from pathlib import Path
from typing import Final

_IN_MODIFY: Final = 0x00000002
_IN_MOVED_FROM: Final = 0x00000040
_IN_MOVED_TO: Final = 0x00000080
_IN_CREATE: Final = 0x00000100
_IN_DELETE: Final = 0x00000200
_IN_Q_OVERFLOW: Final = 0x00004000
_IN_NONBLOCK: Final = os.O_NONBLOCK
_IN_CLOEXEC: Final = os.O_CLOEXEC
# Deleted or moved away too: a session that is gone is forgotten (`Watcher._forget`).
_MASK: Final = _IN_MODIFY | _IN_CREATE | _IN_MOVED_TO | _IN_DELETE | _IN_MOVED_FROM
_EVENT: Final = struct.Struct("iIII")  # wd, mask, cookie, len (then len bytes of name)
_READ_BYTES: Final = 64 * 1024


class KernelChanges:
    """The files and directories changed below the directories added; never blocks but in `wait`."""

    def __init__(self, libc: ctypes.CDLL, fd: int) -> None:
        self._libc = libc
        self._fd = fd
        self._directories: dict[int, Path] = {}

    @classmethod
    def open(cls) -> KernelChanges | None:
        """Inotify, or None where this system has none."""
        try:
            libc = ctypes.CDLL(None, use_errno=True)
            fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
        except (OSError, AttributeError):
            return None
        return cls(libc, fd) if fd >= 0 else None

    def add(self, directory: Path) -> bool:
        """Report changes in `directory`; False where the kernel would not (then poll it)."""
        watch = self._libc.inotify_add_watch(self._fd, os.fsencode(directory), _MASK)
        if watch < 0:
            return False
        self._directories[watch] = directory
        return True

    def wait(self, timeout_s: float) -> None:
        """Until a change is pending, or `timeout_s` passed."""
        select.select([self._fd], [], [], timeout_s)

    def pending(self) -> set[Path] | None:
        """The paths changed since the last call (files and directories); None if the kernel
        lost some (look at everything)."""
        changed: set[Path] = set()
        while True:
            try:
                data = os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return changed
            read = changed_paths(data, self._directories)
            if read is None:
                self._drain()
                return None
            changed |= read

    def close(self) -> None:
        os.close(self._fd)

    def _drain(self) -> None:
        while True:
            try:
                os.read(self._fd, _READ_BYTES)
            except BlockingIOError:
                return


def changed_paths(data: bytes, directories: Mapping[int, Path]) -> set[Path] | None:
    """The paths one read of inotify events names (`directories`: by watch descriptor); None
    if one event says the kernel's queue overflowed: events were lost."""
    changed: set[Path] = set()
    offset = 0
    while offset + _EVENT.size <= len(data):
        watch, mask, _, length = _EVENT.unpack_from(data, offset)
        name = data[offset + _EVENT.size : offset + _EVENT.size + length].rstrip(b"\0")
        offset += _EVENT.size + length
        if mask & _IN_Q_OVERFLOW:
            return None
        directory = directories.get(watch)
        if directory is not None and name:
            changed.add(directory / os.fsdecode(name))
    return changed
