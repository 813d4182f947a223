"""Where Claude Code and Codex keep their session logs, and the running totals a run that
resumes a session goes on from.

Claude Code writes each session to `$CLAUDE_CONFIG_DIR/projects/<project>/<session>.jsonl`
(default `~/.claude`), `<project>` being its working directory with each character but ASCII
letters and digits made `-` (cut at 200 characters, a hash added); Codex each thread to
`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-<time>-<thread>.jsonl` (default `~/.codex`). What a
resumed session's run prints are the session's running totals, the runs' before it included:
Claude Code's `result` (`total_cost_usd`, `modelUsage`; `claude --resume <id>`, `--continue`,
with `--fork-session` too; the SDK's `resume`, `continue_conversation`), Codex's
`turn.completed` usage (`codex exec resume <thread>`, `--last`). The session's totals in its
log before the run started are where the run's own count begins (docs/harnesses.md).
"""

from __future__ import annotations

import glob
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

from transcript_otel.mappings.session_lines import timestamp_ns
from transcript_otel.records.serialize import parse_json

COST_STATE_MARKER: Final = b'"type":"cost-state"'
# A rollout's running totals: `event_msg` `token_count`, `info.total_token_usage`.
_TOKEN_TOTALS_MARKER: Final = b'"total_token_usage"'
# A session id the CLI gives a file's name (a UUID); anything else names no file of it.
_SESSION_ID: Final = re.compile(r"[0-9A-Za-z_-]{1,128}")
_NOT_IN_PROJECT_NAMES: Final = re.compile(r"[^A-Za-z0-9]")
_READ_BYTES: Final = 1 << 20
# The longest project folder name Claude Code writes whole.
_MAX_PROJECT_NAME: Final = 200


def is_session_id(value: str) -> bool:
    """Whether `value` can be a session's id, which names its file (no `/`, no pattern)."""
    return _SESSION_ID.fullmatch(value) is not None


def claude_projects_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$CLAUDE_CONFIG_DIR/projects` (default `$HOME/.claude/projects`)."""
    return _cli_home(environ, "CLAUDE_CONFIG_DIR", ".claude") / "projects"


def codex_sessions_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$CODEX_HOME/sessions` (default `$HOME/.codex/sessions`)."""
    return _cli_home(environ, "CODEX_HOME", ".codex") / "sessions"


def codex_archived_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$CODEX_HOME/archived_sessions`, where `codex archive` moves a thread's rollout (flat)."""
    return _cli_home(environ, "CODEX_HOME", ".codex") / "archived_sessions"


def _cli_home(environ: Mapping[str, str] | None, variable: str, folder: str) -> Path:
    """A CLI's own folder as `environ` (default this process's environment: a CLI started with
    another one looks there) sets it: `variable`, else `folder` in `$HOME`."""
    environ = os.environ if environ is None else environ
    configured, home = environ.get(variable), environ.get("HOME")
    return Path(configured) if configured else (Path(home) if home else Path.home()) / folder


def last_line_holding(path: Path, before: int, marker: bytes, max_bytes: int) -> bytes | None:
    """The last line holding `marker` that ends before byte `before` of `path`, read backwards
    (at most `max_bytes` of it); None if there is none there, or the file cannot be read."""
    found = _last_holding(path, before, marker, max_bytes)
    return None if found is None else found[0]


def _last_holding(path: Path, before: int, marker: bytes, max_bytes: int) -> tuple[bytes, int] | None:
    """`last_line_holding`'s line, and the byte of the file it starts at."""
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
                        return tail[line_start : line_end if line_end >= 0 else len(tail)], end + line_start
    except OSError:
        return None
    return None


def resumed_cost_state(
    session_id: str | None, cwd: str, environ: Mapping[str, str] | None = None, max_bytes: int = 32 << 20
) -> bytes | None:
    """The last `cost-state` line of the session a run resumes, `session_id` (None: the latest
    session of the project, as `--continue` takes); None where no such file or line is."""
    try:
        project = _claude_project(claude_projects_dir(environ), _NOT_IN_PROJECT_NAMES.sub("-", cwd))
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


def _claude_project(projects: Path, name: str) -> Path:
    """The folder of the project `name` (its working directory's name, made as above). A name
    longer than `_MAX_PROJECT_NAME` is cut there and given a hash of the whole (`-ujyzzi`,
    measured: one Claude Code does not document), which is found by the part kept."""
    if len(name) <= _MAX_PROJECT_NAME:
        return projects / name
    found = [path for path in projects.glob(f"{glob.escape(name[:_MAX_PROJECT_NAME])}-*") if path.is_dir()]
    return found[0] if len(found) == 1 else projects / name


def resumed_thread_usage(
    thread_id: str, before_ns: int, environ: Mapping[str, str] | None = None, max_bytes: int = 32 << 20
) -> dict[str, Any] | None:
    """The token totals (`total_token_usage`) the Codex thread `thread_id` had reached before
    `before_ns` (when the run that resumes it started), from its rollout; None where no such
    rollout or totals are (a thread the run started). Totals written since, by the run itself,
    are passed over: it may have written some before its first line was read."""
    if not is_session_id(thread_id):
        return None
    try:
        path = min(codex_sessions_dir(environ).glob(f"*/*/*/rollout-*-{thread_id}.jsonl"), default=None)
        end = path.stat().st_size if path is not None else 0
        while path is not None and end > 0:
            found = _last_holding(path, end, _TOKEN_TOTALS_MARKER, max_bytes)
            if found is None:
                return None
            line, end = found
            totals, written_ns = _token_totals(line)
            if totals is not None and (written_ns is None or written_ns < before_ns):
                return totals
    except OSError:
        return None
    return None


def _token_totals(line: bytes) -> tuple[dict[str, Any] | None, int | None]:
    """A rollout line's `total_token_usage` (None: the line tells none, as a message quoting the
    name) and the time it was written."""
    try:
        entry = parse_json(line)
    except (ValueError, RecursionError):
        return None, None
    if not isinstance(entry, dict):
        return None, None
    payload = entry.get("payload")
    info = payload.get("info") if isinstance(payload, dict) else None
    totals = info.get("total_token_usage") if isinstance(info, dict) else None
    return (totals if isinstance(totals, dict) else None), timestamp_ns(entry.get("timestamp"))
