"""A synchronous subagent (`run_in_background: false`) is one call, on what the real CLI printed.

Claude Code 2.1.332 runs such a subagent in the turn that asked for it, even in `-p`: its
`task_notification` comes first, then the call's real `tool_result` (`tool_use_result.status:
completed`). `tests/fixtures/claude_code/synchronous_subagent.jsonl` is that stream, recorded
from the real CLI (`make fixtures`); `transcript-otel run` reads it here from `cat`. The session
log the CLI wrote for the same conversation is imported too.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import read_records
from transcript_otel.reading.digest import RunDigest

from loopback import subprocess_env
from session_fixtures import CLAUDE

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

from captured_run import CapturedRun  # noqa: E402

RECORDING = TESTS / "fixtures" / "claude_code" / "synchronous_subagent.jsonl"
# The session log the same conversation left (tests/agents/record_session_fixtures.py).
SESSION_LOGS = CLAUDE / "synchronous_subagent" / "home" / ".claude" / "projects" / "-scratch-work"
CALL_ID = "toolu_agent_sync"
CLI = [sys.executable, "-m", "transcript_otel.cli"]
RUN = [*CLI, "run", "--adapter", "claude-stream-json", "--prompt-name", "claude-code", "--"]


def run_stream(stream: Path, runs: Path) -> Path:
    """`stream` under `transcript-otel run`: its mirror file."""
    done = subprocess.run(
        [*RUN, "cat", str(stream)],
        env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(runs)),
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (path,) = runs.glob("*.jsonl")
    return path


@pytest.fixture(scope="module")
def mirror(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return run_stream(RECORDING, tmp_path_factory.mktemp("runs"))


def subagent_chat(run: CapturedRun) -> dict[str, Any]:
    (subagent,) = [s for s in run.named("invoke_agent") if s["parent_span_id"] is not None]
    (chat,) = [s for s in run.named("chat") if s["parent_span_id"] == subagent["span_id"]]
    return chat


def test_the_recording_is_a_synchronous_subagent() -> None:
    """What the real CLI printed: asked not to background it, it did not, and it notified
    before the call's result."""
    messages = [json.loads(line) for line in RECORDING.read_text().splitlines()]
    (call,) = [
        block
        for m in messages
        if m["type"] == "assistant"
        for block in m["message"]["content"]
        if block.get("id") == CALL_ID
    ]
    assert call["input"]["run_in_background"] is False
    (started,) = [m for m in messages if m.get("subtype") == "task_started"]
    assert started["is_backgrounded"] is False
    # The main thread's notification and results, in order: the subagent ends before its result.
    main = [m for m in messages if m.get("parent_tool_use_id") is None]
    said = [m.get("subtype") or m["type"] for m in main if m["type"] in ("user", "system")]
    assert said[said.index("task_notification") :] == ["task_notification", "user"]
    (result,) = [m["tool_use_result"] for m in main if m["type"] == "user"]
    assert result["status"] == "completed"
    assert {"agentType", "totalTokens", "toolStats", "usage"} <= set(result)


def tool_calls(run: Path) -> list[tuple[str, str]]:
    """What `transcript-otel summary` says of each tool: its name and its number of calls."""
    done = subprocess.run(
        [*CLI, "summary", str(run)], env=subprocess_env(), capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return re.findall(r"(\w+): (\d+) calls?,", done.stdout)


def test_summary_counts_one_agent_call(mirror: Path) -> None:
    assert tool_calls(mirror) == [("Agent", "1"), ("Bash", "1")]
    digest = RunDigest.of(read_records(mirror))
    assert digest.tools["Agent"].calls == 1


def test_its_session_log_imports_as_one_agent_call_with_the_same_tokens(tmp_path: Path) -> None:
    """The session file the same CLI wrote holds the subagent's last answer in its own file:
    imported, the run says what the stream said."""
    done = subprocess.run(
        [*CLI, "import", str(SESSION_LOGS)],
        env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path)),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    (imported,) = tmp_path.glob("*.jsonl")
    assert tool_calls(imported) == [("Agent", "1"), ("Bash", "1")]
    run = CapturedRun("synchronous_subagent", list(read_records(imported)), [], prompt_name="claude-code")
    chats = [s for s in run.spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    assert sorted(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats) == [950, 2100]


def test_one_execute_tool_span_holds_the_subagent(mirror: Path) -> None:
    run = CapturedRun("synchronous_subagent", list(read_records(mirror)), [], prompt_name="claude-code")
    (launcher,) = run.named("execute_tool Agent")
    assert launcher["attributes"]["gen_ai.tool.call.id"] == CALL_ID
    assert launcher["status"] == "UNSET"
    assert "transcript.tool.result_missing" not in launcher["attributes"]
    (subagent,) = [
        s for s in run.named("invoke_agent") if s["attributes"].get("transcript.subagent.call_id") == CALL_ID
    ]
    assert subagent["parent_span_id"] == launcher["span_id"]
    # Every entry of the subagent is in its span or under it; the call's own result closes it.
    children = {s["span_id"] for s in run.spans if s["parent_span_id"] == subagent["span_id"]}
    under = {subagent["span_id"], *children}
    subagent_entries = [e for e in run.entries if e["source"] == f"subagent:{CALL_ID}"]
    assert len(subagent_entries) == 3  # its prompt, its Bash call and that call's result
    assert {e["span_id"] for e in subagent_entries} <= under
    (result,) = [e for e in run.entries if e["entry_type"] == "tool_result" and e["source"] == "main"]
    assert result["span_id"] == launcher["span_id"]


def test_the_subagents_last_call_told_only_by_its_result_is_counted_on_its_chat_span(mirror: Path) -> None:
    """stream-json prints the subagent's Bash call (400 input, 100 cache read) but not its last
    answer (450 input): the call's result tells that one's usage and model. The chat spans add
    up to the session's input, as the CLI counts it."""
    run = CapturedRun("synchronous_subagent", list(read_records(mirror)), [], prompt_name="claude-code")
    chat = subagent_chat(run)
    assert chat["name"] == "chat claude-opus-5-5"
    assert chat["attributes"]["gen_ai.response.model"] == "claude-opus-5-5"
    assert chat["attributes"]["gen_ai.usage.input_tokens"] == 400 + 100 + 450
    chats = [s for s in run.spans if s["attributes"].get("gen_ai.operation.name") == "chat"]
    counted = sum(s["attributes"]["gen_ai.usage.input_tokens"] for s in chats)
    assert counted == run.root["attributes"]["transcript.usage.input_tokens"] == 3050


def test_a_last_answer_that_was_printed_is_not_counted_again_from_the_result(tmp_path: Path) -> None:
    """Were the subagent's last answer printed as a message of its own (as a background
    subagent's is), the result's copy of its usage adds nothing."""
    lines = RECORDING.read_text().splitlines(keepends=True)
    (answer,) = [  # the subagent's Bash call, made its answer
        m for m in map(json.loads, lines) if m["type"] == "assistant" and m["parent_tool_use_id"] == CALL_ID
    ]
    answer["message"]["id"] = "msg_the_answer"
    answer["message"]["content"] = [{"type": "text", "text": "There are 3 files."}]
    answer["message"]["usage"].update(input_tokens=450, cache_read_input_tokens=0)
    (notified,) = [n for n, line in enumerate(lines) if '"task_notification"' in line]
    printed = tmp_path / "printed.jsonl"
    printed.write_text("".join([*lines[:notified], json.dumps(answer) + "\n", *lines[notified:]]))
    run = CapturedRun("printed", list(read_records(run_stream(printed, tmp_path / "runs"))), [])
    assert subagent_chat(run)["attributes"]["gen_ai.usage.input_tokens"] == 400 + 100 + 450
