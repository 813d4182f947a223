"""The inotify instances a process holds and the inodes each watches, as Linux's /proc tells.

A watch told by the kernel (`kernel_changes=True`) that could not open inotify polls instead,
and would pass the same tests more slowly: these let a test see that it really asked the kernel.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

# /proc/<pid>/fdinfo/<fd> of an inotify instance: one line per watch (the inode number in hex).
_WATCH_LINE = re.compile(r"^inotify wd:\S+ ino:([0-9a-f]+) ", re.MULTILINE)


def inotify_watches(pid: int | str = "self") -> dict[int, set[int]]:
    """By file descriptor of each inotify instance `pid` holds: the inode numbers it watches."""
    found: dict[int, set[int]] = {}
    for link in Path(f"/proc/{pid}/fd").iterdir():
        try:
            if os.readlink(link) != "anon_inode:inotify":
                continue
            info = Path(f"/proc/{pid}/fdinfo/{link.name}").read_text()
        except OSError:  # closed meanwhile (the listing's own descriptor, another thread's)
            continue
        found[int(link.name)] = {int(inode, 16) for inode in _WATCH_LINE.findall(info)}
    return found


def inotify_here() -> bool:
    return Path("/proc/self/fdinfo").is_dir()


def require_inotify() -> None:
    if not inotify_here():
        pytest.skip("inotify and /proc/<pid>/fdinfo are Linux's")


def assert_told_by_the_kernel(before: set[int], directory: Path) -> None:
    """An inotify instance opened since `before` (the descriptors `inotify_watches()` gave)
    watches `directory` if it is there: the watch does not poll it."""
    opened = {fd: inodes for fd, inodes in inotify_watches().items() if fd not in before}
    assert opened, "no inotify instance was opened: the watch polls"
    watched = set().union(*opened.values())
    if directory.is_dir():
        assert directory.stat().st_ino in watched, f"inotify does not watch {directory}: it is polled"
