"""One watch at a time for a state: an OS lock on `<state>.lock`, held while the watch runs.

The OS lets go of it when the process ends, however it ends (SIGKILL included), so a lock
file left behind never keeps a watch from starting. The file holds the holder's process id,
for the message a second watch gives.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import IO

try:
    import fcntl
except ImportError:  # (not POSIX: no lock)
    fcntl = None  # type: ignore[assignment]


class StateInUseError(OSError):
    """Another watch holds the state: two would export every line twice."""


def hold_lock(final: Path) -> IO[str] | None:
    """The lock of the state at `final`, held (close it to let go); `StateInUseError` where
    another watch holds it."""
    if fcntl is None:
        return None
    final.parent.mkdir(parents=True, exist_ok=True)
    holder = final.with_name(f"{final.name}.lock").open("a+")
    try:
        fcntl.flock(holder, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder.seek(0)
        pid = holder.read().strip()
        holder.close()
        by = f" (process {pid})" if pid.isdigit() else ""
        raise StateInUseError(
            f"{final} is used by another watch{by}: two would export every line twice; "
            "stop that one, or give this one a --state of its own"
        ) from None
    holder.seek(0)
    holder.truncate()
    holder.write(f"{os.getpid()}\n")
    holder.flush()
    return holder
