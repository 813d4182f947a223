"""The tokens a user reads for a Claude Code or Codex session (each run's `chat` spans, its
summary, the HTML page's header) add up to what the CLI itself recorded, whatever the runs
were cut into: a session with no cost line yet, a watch that ended a run on idle or was
restarted in the middle of a turn (issue 47, items 2 and 4). The sessions are the real CLIs'
recordings (tests/fixtures/sessions), written out in steps as the CLI wrote them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import read_records
from transcript_otel.genai.attributes import session_usage
from transcript_otel.mappings.claude_stream import summed_model_usage
from transcript_otel.model.entries import TranscriptEvent

from loopback import subprocess_env
from session_fixtures import CLAUDE

CLI = [sys.executable, "-m", "transcript_otel.cli"]
INPUT, OUTPUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
COST_STATE = b'"type":"cost-state"'


def _main_file(scenario: str) -> Path:
    (path,) = (CLAUDE / scenario / "home/.claude/projects/-scratch-work").glob("*.jsonl")
    return path


def _claude_totals(session_file: Path) -> tuple[int, int]:
    """The session's input and output tokens as Claude Code recorded them (its last
    `cost-state`: every model call, subagents included), input counting cached tokens."""
    last = [line for line in session_file.read_bytes().splitlines() if COST_STATE in line][-1]
    totals = session_usage({"session_usage": summed_model_usage(json.loads(last)["modelUsage"])})
    return totals[INPUT], totals[OUTPUT]


def _chat_totals(records: list[dict[str, Any]]) -> tuple[int, int]:
    """What the `chat` spans of these records say, summed."""
    chats = [
        r["context"]["attributes"]
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and r["context"]["name"].startswith("chat")
    ]
    return sum(a.get(INPUT, 0) for a in chats), sum(a.get(OUTPUT, 0) for a in chats)


def _summary_tokens(run: Path) -> tuple[int, int]:
    """What `transcript-otel summary` says of the run's tokens."""
    said = subprocess.run(
        [*CLI, "summary", "--json", str(run)],
        env=subprocess_env(),
        capture_output=True,
        check=True,
        text=True,
    )
    tokens = json.loads(said.stdout)["tokens"]
    return tokens.get("input", 0), tokens.get("output", 0)


def _html_header_tokens(run: Path, page: Path) -> tuple[int, int]:
    """The input and output tokens the HTML page's header shows."""
    subprocess.run(
        [*CLI, "export", str(run), "--format", "html", "-o", str(page)], env=subprocess_env(), check=True
    )
    text = page.read_text()

    def shown(name: str) -> int:
        found = re.search(rf'data-field="tokens\.{name}" data-value="(\d+)"', text)
        return int(found.group(1)) if found else 0

    return shown("input"), shown("output")


@pytest.mark.parametrize("scenario", ["background_subagent", "tools"])
def test_a_claude_session_with_no_cost_line_counts_each_message_once(scenario: str, tmp_path: Path) -> None:
    """A session still open (the terminal UI writes its cost as it is left): every message's
    usage counts once, a message of tool calls or thinking only too (`background_subagent`: the
    main agent's and the subagent's first calls; `tools`: a message written as thinking, text
    and tool-call lines, each with its usage). Before: summary and header 2,750 / 38 against the
    chat spans' 4,250 / 108 (`background_subagent`)."""
    source = _main_file(scenario)
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    lines = source.read_bytes().splitlines(keepends=True)
    before_cost = next(i for i, line in enumerate(lines) if COST_STATE in line)
    (project / source.name).write_bytes(b"".join(lines[:before_cost]))
    if source.with_suffix("").is_dir():  # its subagents
        shutil.copytree(source.with_suffix(""), project / source.stem)
    runs = tmp_path / "runs"
    subprocess.run([*CLI, "import", str(project), "--jsonl-dir", str(runs)], env=subprocess_env(), check=True)
    (run,) = runs.glob("*.jsonl")
    expected = _claude_totals(source)
    assert _chat_totals(list(read_records(run))) == expected
    assert _summary_tokens(run) == expected
    assert _html_header_tokens(run, tmp_path / "page.html") == expected
