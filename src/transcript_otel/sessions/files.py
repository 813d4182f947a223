"""Where Claude Code and Codex keep their session logs, and which files make one session.

Claude Code: `$CLAUDE_CONFIG_DIR` (default `~/.claude`) `/projects/<project>/<session>.jsonl`,
each subagent in `<session>/subagents/agent-<agentId>.jsonl` beside it. Codex:
`$CODEX_HOME` (default `~/.codex`) `/sessions/YYYY/MM/DD/rollout-<time>-<session>.jsonl`,
one file per session (a resumed session appends to it).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from typing import Final

from transcript_otel.model.entries import MAIN_SOURCE, subagent_source

SUBAGENTS_DIR: Final = "subagents"
_SUBAGENT_PREFIX: Final = "agent-"
_ROLLOUT_PREFIX: Final = "rollout-"
_UUID: Final = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class SessionKind(StrEnum):
    CLAUDE_CODE = "claude_code"
    CODEX = "codex"


@dataclass(frozen=True, slots=True)
class SessionFiles:
    """One session: its kind, its main file, and the files of its subagents with their sources."""

    kind: SessionKind
    path: Path
    subagents: tuple[tuple[Path, str], ...] = ()

    def sources(self) -> list[tuple[Path, str]]:
        """Every file of the session with the source its entries belong to."""
        return [(self.path, MAIN_SOURCE), *self.subagents]


def claude_code_root() -> Path:
    configured = os.environ.get("CLAUDE_CONFIG_DIR")
    return (Path(configured) if configured else Path.home() / ".claude") / "projects"


def codex_root() -> Path:
    configured = os.environ.get("CODEX_HOME")
    return (Path(configured) if configured else Path.home() / ".codex") / "sessions"


def find_sessions(paths: Iterable[Path]) -> Iterator[SessionFiles]:
    """The sessions in `paths` (files, or directories searched below), each once, in path order.

    A subagent's file named on its own is part of its session, not one of its own. Raises
    `FileNotFoundError` for a path that does not exist.
    """
    seen: set[Path] = set()
    for path in paths:
        if not path.exists():
            raise FileNotFoundError(f"no such file or directory: {path}")
        # Below a directory, only what the CLIs name their logs: other JSONL (a mirror of ours,
        # a saved stdout) is not a session. A file named on its own is taken as one.
        candidates = (
            sorted(p for p in path.rglob("*.jsonl") if _named_as_a_log(p)) if path.is_dir() else [path]
        )
        for candidate in candidates:
            session = _session_of(candidate)
            if session is not None and session.path not in seen:
                seen.add(session.path)
                yield session


def _named_as_a_log(path: Path) -> bool:
    """Codex's `rollout-*.jsonl`; Claude Code's `<session uuid>.jsonl` and `agent-<id>.jsonl`."""
    name = path.name
    return name.startswith((_ROLLOUT_PREFIX, _SUBAGENT_PREFIX)) or _UUID.fullmatch(path.stem) is not None


def _session_of(path: Path) -> SessionFiles | None:
    if path.parent.name == SUBAGENTS_DIR:
        main = path.parent.parent.with_suffix(".jsonl")  # <session>/subagents/ -> <session>.jsonl
        return _session_of(main) if main.is_file() else None
    if path.name.startswith(_ROLLOUT_PREFIX):
        return SessionFiles(SessionKind.CODEX, path)
    return SessionFiles(SessionKind.CLAUDE_CODE, path, tuple(_subagents(path)))


def _subagents(main: Path) -> Iterator[tuple[Path, str]]:
    directory = main.with_suffix("") / SUBAGENTS_DIR
    if directory.is_dir():
        for path in sorted(directory.glob(f"{_SUBAGENT_PREFIX}*.jsonl")):
            yield path, subagent_source(path.stem.removeprefix(_SUBAGENT_PREFIX))
