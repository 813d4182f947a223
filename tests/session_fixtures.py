"""Where the recorded session logs of the real CLIs are (tests/agents/record_session_fixtures.py
records them; docs/session-logs.md says what they show), for every test that reads them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Final

SESSIONS: Final = Path(__file__).resolve().parent / "fixtures" / "sessions"
CLAUDE: Final = SESSIONS / "claude_code"
CODEX: Final = SESSIONS / "codex"
# The CLIs whose recorded sessions (recorded by record_session_fixtures.py, with a `meta.json`
# each) the generic import tests read. gemini/ (recorded by record_gemini_opencode_fixtures.py,
# what was served in tests/fixtures/line_streams/gemini/) has tests of its own:
# test_gemini_sessions.py. opencode/ holds rows of its database:
# tests/opencode_fixtures.py builds databases of them for test_opencode_sessions.py.
IMPORTED: Final = (CLAUDE, CODEX)
GEMINI: Final = SESSIONS / "gemini"
GEMINI_SCENARIOS: Final = ("plain", "shell", "failing_shell", "thinking", "error_500", "rate_limit_429")
_LINE_STREAMS: Final = SESSIONS.parent / "line_streams"
CLAUDE_SCENARIOS: Final = (
    "tools",
    "foreground_subagent",
    "synchronous_subagent",
    "background_subagent",
    "parallel_subagents",
    "denied_tool",
    "web_search",
    "fatal_500",
    "bad_request",
    "max_turns",
    "resumed",
    "compacted",
    "auto_compacted",
)
CODEX_SCENARIOS: Final = (
    "shell",
    "apply_patch",
    "mcp_tool",
    "web_search",
    "tour",
    "subagent",
    "code_mode",
    "tool_then_500",
    "resumed",
    "compacted",
)
# The same conversations in an older CLI's rollout format (docs/session-logs.md); one of them
# as the pinned CLI's `codex migrate-rollouts --apply` rewrote it.
CODEX_OLDER_SCENARIOS: Final = ("v0.140_shell", "v0.140_mcp_tool", "v0.140_resumed", "v0.140_shell_migrated")
# A session forked from another (`--fork-session`): two session files, the fork's beginning
# with a copy of the other's lines.
CLAUDE_FORKED_SCENARIOS: Final = ("forked", "forked_twice")
# A thread forked in the terminal UI (`codex fork <thread> PROMPT`) after a `codex exec` run:
# two rollouts, the fork's holding only its own turn (the history is the other's, by reference).
CODEX_FORKED_SCENARIOS: Final = ("forked",)
# The same conversations in an older Claude Code's log format (docs/session-logs.md).
CLAUDE_OLDER_SCENARIOS: Final = ("v2.0.32_tools",)
# The terminal UIs as a person runs them (`claude PROMPT`, `codex PROMPT`): what they printed
# as they ended (`terminal-1.txt`), no stdout stream.
CLAUDE_INTERACTIVE_SCENARIOS: Final = (
    "interactive",
    "interactive_two_prompts",
    "interactive_subagents",
    "interactive_typed_while_busy",
    "interactive_interrupted",
    "interactive_compacted",
)
CODEX_INTERACTIVE_SCENARIOS: Final = (
    "interactive",
    "interactive_two_prompts",
    "interactive_subagent",
    "interactive_typed_while_busy",
    "interactive_interrupted",
    "interactive_compacted",
)


def codex_day(scenario: str) -> Path:
    """The day folder (`sessions/YYYY/MM/DD`) Codex wrote the scenario's rollouts in (the day of
    its recording)."""
    (day,) = {
        path.parent for path in (CODEX / scenario / "codex-home" / "sessions").glob("*/*/*/rollout-*.jsonl")
    }
    return day


def codex_threads(scenario: str) -> tuple[str, str]:
    """(root thread id, subagent thread id) of a scenario with one subagent, as their rollouts'
    `session_meta` lines say (the subagent's names a `parent_thread_id`)."""
    metas = [
        json.loads(path.read_text().splitlines()[0])["payload"]
        for path in (CODEX / scenario / "codex-home" / "sessions").glob("*/*/*/rollout-*.jsonl")
    ]
    ((root,), (child,)) = (
        [meta["id"] for meta in metas if "parent_thread_id" not in meta],
        [meta["id"] for meta in metas if "parent_thread_id" in meta],
    )
    return str(root), str(child)


def gemini_session_file(scenario: str) -> Path:
    """The session file the Gemini CLI wrote in the scenario's run (`-o stream-json`)."""
    (path,) = (GEMINI / scenario / "home" / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
    return path


def gemini_served(scenario: str) -> list[dict[str, Any]]:
    """The main model's answers the scripted Gemini API served in that run, with their usage (the
    router's call, which the CLI records in no session, left out)."""
    meta = json.loads((_LINE_STREAMS / "gemini" / f"{scenario}.stream-json.meta.json").read_text())
    return [call for call in meta["served"] if call.get("kind") == "stream" and call.get("status") == 200]
