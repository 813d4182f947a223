"""Where the Gemini CLI keeps its sessions: `$GEMINI_CLI_HOME/.gemini/tmp` (default `~/.gemini/tmp`).

The CLI (0.61) takes its home from `GEMINI_CLI_HOME`, else the user's home, and writes each
session to `<home>/.gemini/tmp/<project>/chats/session-<time>-<id8>.jsonl` (a subagent's to
`chats/<parent session>/<id>.jsonl`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Final

GEMINI_HOME_VARIABLE: Final = "GEMINI_CLI_HOME"


def gemini_sessions_dir(environ: Mapping[str, str] | None = None) -> Path:
    """`$GEMINI_CLI_HOME/.gemini/tmp`, else `$HOME/.gemini/tmp`, as `environ` (default this
    process's environment) sets them."""
    environ = os.environ if environ is None else environ
    home = environ.get(GEMINI_HOME_VARIABLE) or environ.get("HOME")
    return (Path(home) if home else Path.home()) / ".gemini" / "tmp"
