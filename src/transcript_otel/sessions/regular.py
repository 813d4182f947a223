"""Session files are regular files: anything else named like one is never read.

The folders `import` and `watch` read are not ours: a FIFO named like a session waits forever
for a writer when opened, a link to `/dev/zero` or `/dev/urandom` never ends. A path is read only
when it is a regular file (through links), and that is asked again of the file opened (the path
may be replaced in between), which is opened without waiting and without becoming a terminal's.

And a file written whole (an export, the watch's state) goes where its path leads, never in
place of something else: `written_in_place`, `real_path` (the rule `exports/destination.py`
states, here so that the layers below `exports`, the watch's, follow it too).
"""

from __future__ import annotations

import contextlib
import os
import stat
from pathlib import Path
from typing import BinaryIO, Final

_KINDS: Final = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)
_OPEN_FLAGS: Final = (
    os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
)


class NotRegularFileError(OSError):
    """A path named like a session file that is not a regular file (a FIFO, a device, ...)."""

    def __init__(self, path: Path, mode: int) -> None:
        super().__init__(f"{path}: not a regular file ({kind_of(mode)})")
        self.path = path
        self.mode = mode


def kind_of(mode: int) -> str:
    """What a file of `mode` is, in words (`a FIFO`)."""
    return next((kind for test, kind in _KINDS if test(mode)), "not a file")


def is_regular(path: Path) -> bool:
    """Whether `path` is a regular file, through links (False where it cannot be looked at)."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


def open_regular(path: Path) -> BinaryIO:
    """`path` opened to read, if it is a regular file; else `NotRegularFileError` (a device is not
    even opened: some act on being opened), without waiting (a FIFO with no writer)."""
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):
        raise NotRegularFileError(path, mode)
    descriptor = os.open(path, _OPEN_FLAGS)
    try:
        mode = os.fstat(descriptor).st_mode  # what was opened: the path may have changed meanwhile
        if not stat.S_ISREG(mode):
            raise NotRegularFileError(path, mode)
        os.set_blocking(descriptor, True)
        return os.fdopen(descriptor, "rb")
    except BaseException:
        os.close(descriptor)
        raise


def written_in_place(target: Path) -> bool:
    """Whether `target` exists and is neither a regular file nor a directory: written to as
    it is (a FIFO, a device), not replaced by a rename."""
    try:
        mode = os.stat(target).st_mode  # through symlinks
    except (OSError, ValueError):
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def real_path(target: Path) -> Path:
    """`target` with its symlinks followed (a link that points nowhere yet: where it points)."""
    return Path(os.path.realpath(target))


def write_in_place(target: Path, data: bytes) -> None:
    """`data` written into the FIFO or device `target`, what it takes of it now (a FIFO nobody
    reads takes nothing)."""
    flags = (
        os.O_WRONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0) | getattr(os, "O_CLOEXEC", 0)
    )
    try:
        descriptor = os.open(target, flags)
    except OSError:  # no reader (ENXIO), or gone
        return
    try:
        with contextlib.suppress(OSError):
            os.write(descriptor, data)
    finally:
        os.close(descriptor)
