"""Where Claude Code keeps its session logs, and the running totals a resumed session goes on from.

Claude Code writes each session to `$CLAUDE_CONFIG_DIR/projects/<project>/<session>.jsonl`
(default `~/.claude`), `<project>` being its working directory with each character but ASCII
letters and digits made `-`. Its `cost-state` lines are the session's running totals, and so
are the totals stdout's `result` reports: a run that resumes a session (`claude --resume
<id>`, `--continue`, with `--fork-session` too; the SDK's `resume`, `continue_conversation`)
reports the runs' before it with its own. The session's last `cost-state`, read before the run
starts, is where its own count begins (docs/harnesses.md).
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

COST_STATE_MARKER: Final = b'"type":"cost-state"'
# A session id the CLI gives a file's name (a UUID); anything else names no file of it.
_SESSION_ID: Final = re.compile(r"[0-9A-Za-z_-]{1,128}")
_NOT_IN_PROJECT_NAMES: Final = re.compile(r"[^A-Za-z0-9]")
_READ_BYTES: Final = 1 << 20


def is_session_id(value: str) -> bool:
    """Whether `value` can be a session's id, which names its file (no `/`, no pattern)."""
    return _SESSION_ID.fullmatch(value) is not None


def claude_projects_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$CLAUDE_CONFIG_DIR/projects` (default `$HOME/.claude/projects`) in `environ` (default
    this process's environment: a CLI started with another one looks there)."""
    environ = os.environ if environ is None else environ
    configured, home = environ.get("CLAUDE_CONFIG_DIR"), environ.get("HOME")
    return (
        Path(configured) if configured else (Path(home) if home else Path.home()) / ".claude"
    ) / "projects"


def last_line_holding(path: Path, before: int, marker: bytes, max_bytes: int) -> bytes | None:
    """The last line holding `marker` that ends before byte `before` of `path`, read backwards
    (at most `max_bytes` of it); None if there is none there, or the file cannot be read."""
    if before <= 0:
        return None
    try:
        with path.open("rb") as stream:
            end = before
            tail = b""
            while end > 0 and before - end < max_bytes:
                start = max(0, end - _READ_BYTES)
                stream.seek(start)
                tail = stream.read(end - start) + tail
                end = start
                found = tail.rfind(marker)
                if found >= 0:
                    line_start = tail.rfind(b"\n", 0, found) + 1
                    line_end = tail.find(b"\n", found)
                    if line_start > 0 or end == 0:
                        return tail[line_start : line_end if line_end >= 0 else len(tail)]
    except OSError:
        return None
    return None


def resumed_cost_state(
    session_id: str | None, cwd: str, environ: Mapping[str, str] | None = None, max_bytes: int = 32 << 20
) -> bytes | None:
    """The last `cost-state` line of the session a run resumes, `session_id` (None: the latest
    session of the project, as `--continue` takes); None where no such file or line is."""
    project = claude_projects_dir(environ) / _NOT_IN_PROJECT_NAMES.sub("-", cwd)
    try:
        if session_id is None:
            sessions = [path for path in project.glob("*.jsonl") if path.is_file()]
            path = max(sessions, key=lambda path: path.stat().st_mtime_ns) if sessions else None
        elif is_session_id(session_id):
            path = project / f"{session_id}.jsonl"
        else:
            return None
        if path is None:
            return None
        return last_line_holding(path, path.stat().st_size, COST_STATE_MARKER, max_bytes)
    except (OSError, ValueError):
        return None
