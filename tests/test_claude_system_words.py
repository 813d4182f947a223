"""What `show` and the exports say of Claude Code's `system` messages: words, not their JSON.

Each case is a line the real CLI (2.1.332) printed, from the recordings under tests/fixtures.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.reading.text import entry_text

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _recorded(path: str, subtype: str) -> dict[str, Any]:
    for line in (FIXTURES / path).read_text().splitlines():
        try:
            message = json.loads(line)
        except ValueError:
            continue  # the recordings keep a line the CLI garbled too
        if message.get("type") == "system" and message.get("subtype") == subtype:
            return dict(message)
    raise AssertionError(f"no {subtype} line in {path}")


STREAM = "line_streams/claude-stream-json.jsonl"


@pytest.mark.parametrize(
    ("path", "subtype", "words"),
    [
        (
            STREAM,
            "init",
            "init: model claude-opus-5-5 · 22 tools · cwd /scratch/work · permission mode bypassPermissions",
        ),
        (STREAM, "task_started", "task started: counter task (general-purpose, in the background)"),
        (STREAM, "task_progress", "task progress: Running Run it · 506 tokens · 1 tool use · last tool Bash"),
        (STREAM, "task_updated", "task updated: completed"),
        (STREAM, "background_tasks_changed", "background tasks changed: 1 running: counter task"),
        (
            "sessions/claude_code/fatal_500/stdout-1.jsonl",
            "api_retry",
            "api retry: attempt 1 of 1 · in 521 ms · after 500 server_error",
        ),
        (
            "sessions/claude_code/denied_tool/stdout-1.jsonl",
            "permission_denied",
            "permission denied: Bash: rm in '/tmp/nothing-here' needs approval.",
        ),
        (
            "sessions/claude_code/tools/stdout-1.jsonl",
            "thinking_tokens",
            "thinking tokens: about 6 thinking tokens",
        ),
        ("line_streams/claude-sdk-stdout.jsonl", "session_state_changed", "session state changed: running"),
    ],
)
def test_a_claude_system_message_reads_as_words(path: str, subtype: str, words: str) -> None:
    said = entry_text("system_event", {"subtype": subtype, "sdk_entry": _recorded(path, subtype)})
    assert said.startswith(words), said
    assert "{" not in said


def test_a_subtype_not_known_here_keeps_its_fields_as_short_json() -> None:
    said = entry_text(
        "system_event",
        {"subtype": "new_thing", "sdk_entry": {"type": "system", "subtype": "new_thing", "n": 1}},
    )
    assert said == 'new thing: {"n":1}'
