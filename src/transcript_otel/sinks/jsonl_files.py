"""Where the JSONL mirror's files go, what they are called, and how they are opened.

One file per run in a 0700 directory, each file 0600, named
`{UTC start time}_{prompt}_{session or run id}.jsonl`, so `ls` sorts runs by time.
"""

from __future__ import annotations

import os
import re
import time
from pathlib import Path
from typing import Final

from transcript_otel.records.run import RunInfo

_UNSAFE: Final = re.compile(r"[^A-Za-z0-9._-]+")


def default_directory() -> Path:
    """`$XDG_STATE_HOME/transcript-otel/runs`, or `~/.local/state/...` without it."""
    state = os.environ.get("XDG_STATE_HOME") or os.path.join(os.path.expanduser("~"), ".local", "state")
    return Path(state) / "transcript-otel" / "runs"


def _slug(text: str, limit: int) -> str:
    return _UNSAFE.sub("-", text).strip("-.")[:limit] or "run"


def run_file_name(run: RunInfo) -> str:
    # `gmtime` and a format string: `datetime.strftime` is slow the first time in a process.
    t = time.gmtime(run.started_ns // 1_000_000_000)
    started = f"{t.tm_year:04d}{t.tm_mon:02d}{t.tm_mday:02d}T{t.tm_hour:02d}{t.tm_min:02d}{t.tm_sec:02d}Z"
    identity = _slug(run.session_id or run.run_id, 36)
    return f"{started}_{_slug(run.prompt_name, 60)}_{identity}.jsonl"


def open_private(target: Path) -> int:
    """Open `target` for appending: file 0600 in a 0700 directory."""
    _private_directory(target.parent)
    return os.open(target, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o600)


def claim_private(target: Path) -> bool:
    """Create `target` empty (0600 in a 0700 directory) unless it exists: False when it does.
    Atomic, so of two processes naming a file alike only one gets the name."""
    _private_directory(target.parent)
    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _private_directory(directory: Path) -> None:
    if not directory.is_dir():
        os.makedirs(directory, mode=0o700, exist_ok=True)
        os.chmod(directory, 0o700)
