"""The recorded session logs (tests/fixtures/sessions/) are what docs/session-logs.md says.

No CLI needed: these read the files `tests/agents/record_session_fixtures.py` recorded with
Claude Code 2.1.332 and Codex 0.171.0, and check the facts an importer is to rely on.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from session_fixtures import (
    CLAUDE,
    CLAUDE_FORKED_SCENARIOS,
    CLAUDE_INTERACTIVE_SCENARIOS,
    CLAUDE_OLDER_SCENARIOS,
    CLAUDE_SCENARIOS,
    CODEX,
    CODEX_FORKED_SCENARIOS,
    CODEX_INTERACTIVE_SCENARIOS,
    CODEX_OLDER_SCENARIOS,
    CODEX_SCENARIOS,
    SESSIONS,
)

CONVERSATION = ("user", "assistant", "attachment", "system")
CONVERSATION_FIELDS = ("uuid", "parentUuid", "isSidechain", "timestamp", "sessionId", "version", "cwd")
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
CODEX_USAGE_KEYS = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def lines(path: Path) -> list[dict[str, Any]]:
    text = path.read_text()
    assert text.endswith("\n"), path
    return [json.loads(line) for line in text.splitlines()]


def claude_main(scenario: str) -> Path:
    (path,) = (CLAUDE / scenario / "home" / ".claude" / "projects" / "-scratch-work").glob("*.jsonl")
    return path


def claude_subagents(scenario: str) -> list[Path]:
    main = claude_main(scenario)
    return sorted((main.parent / main.stem / "subagents").glob("agent-*.jsonl"))


def codex_rollout(scenario: str) -> Path:
    """The file of the thread `codex exec` ran (a subagent's thread has a file of its own)."""
    thread = json.loads((CODEX / scenario / "stdout-1.jsonl").read_text().splitlines()[0])["thread_id"]
    (path,) = (CODEX / scenario / "codex-home" / "sessions").glob(f"*/*/*/rollout-*-{thread}.jsonl")
    return path


def codex_rollouts(scenario: str) -> list[Path]:
    return sorted((CODEX / scenario / "codex-home" / "sessions").glob("*/*/*/rollout-*.jsonl"))


def every_jsonl() -> Iterator[Path]:
    yield from sorted(SESSIONS.rglob("*.jsonl"))


def test_the_documented_scenarios_are_all_there() -> None:
    assert sorted(p.name for p in CLAUDE.iterdir()) == sorted(
        CLAUDE_SCENARIOS + CLAUDE_INTERACTIVE_SCENARIOS + CLAUDE_OLDER_SCENARIOS + CLAUDE_FORKED_SCENARIOS
    )
    assert sorted(p.name for p in CODEX.iterdir()) == sorted(
        CODEX_SCENARIOS + CODEX_OLDER_SCENARIOS + CODEX_INTERACTIVE_SCENARIOS + CODEX_FORKED_SCENARIOS
    )


@pytest.mark.parametrize("path", list(every_jsonl()), ids=lambda p: str(p.relative_to(SESSIONS)))
def test_every_line_is_a_json_object_and_no_machine_path_is_left(path: Path) -> None:
    assert all(isinstance(line, dict) for line in lines(path))
    assert not re.search(r"/tmp/tmp[a-z0-9_]{8}", path.read_text())


@pytest.mark.parametrize("scenario", CLAUDE_SCENARIOS + CLAUDE_FORKED_SCENARIOS + CODEX_SCENARIOS)
def test_meta_names_the_cli_version_and_the_session_files(scenario: str) -> None:
    for cli, version in (("claude_code", "2.1.332"), ("codex", "0.171.0")):
        directory = SESSIONS / cli / scenario
        if not directory.exists():
            continue
        meta = json.loads((directory / "meta.json").read_text())
        assert meta[cli] == version
        assert meta["session_files"]
        assert all((directory / f).is_file() for f in meta["session_files"])
        # Each run printed a stream, or (a terminal UI's run: `codex fork`) what it showed as it ended.
        printed = [*directory.glob("stdout-*.jsonl"), *directory.glob("terminal-*.txt")]
        assert len(printed) == len(meta["runs"])


@pytest.mark.parametrize("scenario", CLAUDE_SCENARIOS)
def test_claude_lines_carry_what_an_importer_relies_on(scenario: str) -> None:
    for path in [claude_main(scenario), *claude_subagents(scenario)]:
        subagent = "subagents" in path.parts
        seen: set[str] = set()
        session_id = claude_main(scenario).stem
        for line in lines(path):
            assert line["sessionId"] == session_id
            if line["type"] not in CONVERSATION:
                continue
            assert all(field in line for field in CONVERSATION_FIELDS), line
            assert line["version"] == "2.1.332"
            assert line["isSidechain"] is subagent
            if subagent:
                assert line["agentId"] == path.stem.removeprefix("agent-")
            # The tree: every parent is an earlier line of the same file.
            assert line["parentUuid"] is None or line["parentUuid"] in seen
            seen.add(line["uuid"])
            if line["type"] == "assistant":
                message = line["message"]
                assert message["id"]
                assert message["model"]
                assert all(isinstance(message["usage"][key], int) for key in USAGE_KEYS)
                assert len(message["content"]) == 1  # one line per content block


def test_claude_assistant_blocks_repeat_the_usage_of_their_message() -> None:
    by_message: dict[str, list[dict[str, Any]]] = {}
    for line in lines(claude_main("tools")):
        if line["type"] == "assistant":
            by_message.setdefault(line["message"]["id"], []).append(line["message"])
    blocks = [[m["content"][0]["type"] for m in ms] for ms in by_message.values()]
    assert blocks == [["thinking", "text", "tool_use"], ["text"]]
    for messages in by_message.values():
        assert len({json.dumps(m["usage"], sort_keys=True) for m in messages}) == 1
        assert {m["stop_reason"] for m in messages} != {None}
    # On stdout the same blocks have no stop reason and a placeholder output count.
    streamed = [json.loads(x) for x in (CLAUDE / "tools" / "stdout-1.jsonl").read_text().splitlines()]
    partial = [s["message"] for s in streamed if s["type"] == "assistant"]
    assert [m["stop_reason"] for m in partial] == [None] * 4
    assert {m["usage"]["output_tokens"] for m in partial} == {1}


def test_claude_assistant_lines_point_at_their_request() -> None:
    main = lines(claude_main("tools"))
    requests = {line["id"]: line for line in main if line["type"] == "api-request"}
    for line in main:
        if line["type"] == "assistant":
            request = requests[line["requestRef"]]
            assert request["timestamp"] <= line["timestamp"]
            assert request["params"]["model"] == line["message"]["model"]


@pytest.mark.parametrize("scenario", CLAUDE_SCENARIOS)
def test_claude_sessions_end_with_a_cost_state(scenario: str) -> None:
    main = lines(claude_main(scenario))
    assert main[-1]["type"] == "cost-state"
    costs = [line for line in main if line["type"] == "cost-state"]
    assert len(costs) == len(json.loads((CLAUDE / scenario / "meta.json").read_text())["runs"])
    totals = [cost["totalCostUSD"] for cost in costs]
    assert totals == sorted(totals)  # cumulative over the runs of a resumed session
    if scenario not in ("fatal_500", "bad_request"):
        assert totals[-1] > 0
        assert all("costUSD" in usage for usage in costs[-1]["modelUsage"].values())


def test_claude_cost_state_counts_subagents() -> None:
    served = json.loads((CLAUDE / "background_subagent" / "meta.json").read_text())["served"]
    final = [line for line in lines(claude_main("background_subagent")) if line["type"] == "cost-state"][-1]
    ((model, usage),) = final["modelUsage"].items()
    assert usage["inputTokens"] == sum(s["usage"]["input_tokens"] for s in served if "usage" in s)
    assert model == "claude-opus-5-5"


@pytest.mark.parametrize(
    ("scenario", "count"), [("foreground_subagent", 1), ("background_subagent", 1), ("parallel_subagents", 2)]
)
def test_claude_subagent_files_are_where_the_launch_says(scenario: str, count: int) -> None:
    main = lines(claude_main(scenario))
    agent_calls = {
        block["id"]
        for line in main
        if line["type"] == "assistant"
        for block in line["message"]["content"]
        if block["type"] == "tool_use" and block["name"] == "Agent"
    }
    launched = {
        line["toolUseResult"]["agentId"]: line["message"]["content"][0]["tool_use_id"]
        for line in main
        if line["type"] == "user"
        and isinstance(line.get("toolUseResult"), dict)
        and "agentId" in line["toolUseResult"]
    }
    files = claude_subagents(scenario)
    assert len(files) == count == len(launched) == len(agent_calls)
    for path in files:
        agent_id = path.stem.removeprefix("agent-")
        meta = json.loads(path.with_suffix(".meta.json").read_text())
        assert meta["toolUseId"] == launched[agent_id]
        assert meta["toolUseId"] in agent_calls
        first = lines(path)[0]
        assert first["parentUuid"] is None
        assert first["type"] == "user"
    notifications = [
        line
        for line in main
        if line["type"] == "user" and "<task-notification>" in str(line["message"]["content"])
    ]
    assert len(notifications) == count


@pytest.mark.parametrize(("scenario", "status"), [("fatal_500", 500), ("bad_request", 400)])
def test_claude_api_errors_are_synthetic_assistant_lines(scenario: str, status: int) -> None:
    (error,) = [line for line in lines(claude_main(scenario)) if line.get("isApiErrorMessage")]
    assert error["message"]["model"] == "<synthetic>"
    assert error["apiErrorStatus"] == status
    assert json.loads((CLAUDE / scenario / "meta.json").read_text())["runs"][0]["exit_code"] == 1


def test_claude_denied_tool_and_max_turns() -> None:
    (denied,) = [line for line in lines(claude_main("denied_tool")) if "toolDenialKind" in line]
    assert denied["message"]["content"][0]["is_error"] is True
    assert denied["permissionDecision"]["decision"] == "reject"
    attachments = [
        line["attachment"]["type"] for line in lines(claude_main("max_turns")) if line["type"] == "attachment"
    ]
    assert "max_turns_reached" in attachments


def test_claude_resume_appends_to_the_same_file_and_continues_the_chain() -> None:
    main = lines(claude_main("resumed"))
    prompts = [
        line for line in main if line["type"] == "user" and isinstance(line["message"]["content"], str)
    ]
    assert [p["message"]["content"] for p in prompts][1] == "And now?"
    conversation = [line for line in main if line["type"] in CONVERSATION]
    second = conversation.index(prompts[1])
    assert prompts[1]["parentUuid"] == conversation[second - 1]["uuid"]


def test_claude_compaction_marker() -> None:
    main = lines(claude_main("compacted"))
    (boundary,) = [line for line in main if line.get("subtype") == "compact_boundary"]
    assert boundary["parentUuid"] is None
    assert boundary["logicalParentUuid"]
    assert boundary["compactMetadata"]["trigger"] == "manual"
    (summary,) = [line for line in main if line.get("isCompactSummary")]
    assert summary["parentUuid"] == boundary["uuid"]


@pytest.mark.parametrize("scenario", CODEX_SCENARIOS)
def test_codex_lines_carry_what_an_importer_relies_on(scenario: str) -> None:
    path = codex_rollout(scenario)
    rollout = lines(path)
    meta = rollout[0]
    assert meta["type"] == "session_meta"
    assert meta["payload"]["cli_version"] == "0.171.0"
    assert path.stem.endswith(meta["payload"]["id"])
    assert [line["ordinal"] for line in rollout] == list(range(len(rollout)))
    stamps = [line["timestamp"] for line in rollout]
    assert stamps == sorted(stamps)
    assert sum(line["type"] == "session_meta" for line in rollout) == 1
    assert all(set(line) >= {"timestamp", "ordinal", "type", "payload"} for line in rollout)
    served_models = {s["model"] for s in json.loads((CODEX / scenario / "meta.json").read_text())["served"]}
    assert {line["payload"]["model"] for line in rollout if line["type"] == "turn_context"} == served_models
    records = [line["payload"] for line in rollout if line["type"] == "token_usage_record"]
    assert records
    for record in records:
        assert record["response_id"].startswith("resp_")
        for part in ("usage", "turn_token_usage", "thread_token_usage"):
            assert all(isinstance(record[part][key], int) for key in CODEX_USAGE_KEYS)
    # The per-response usage sums to the last running total.
    last = records[-1]["thread_token_usage"]
    assert sum(r["usage"]["input_tokens"] for r in records) == last["input_tokens"]
    # The per-response records, in the thread's file and its subagents', are what the scripted
    # model served.
    served = json.loads((CODEX / scenario / "meta.json").read_text())["served"]
    answered = [s["response_id"] for s in served if "usage" in s]
    every_record = [
        line["payload"]["response_id"]
        for rollout in codex_rollouts(scenario)
        for line in lines(rollout)
        if line["type"] == "token_usage_record"
    ]
    assert sorted(every_record) == sorted(answered)


def test_codex_subagent_threads_name_their_session_and_parent() -> None:
    """`multi_agent_v2`: the subagent's file is named after its own thread; its `session_meta`
    names the root thread as its session and parent, and the parent's file tells when it
    started (with the spawning call's id) and completed."""
    root = codex_rollout("subagent")
    (child,) = [path for path in codex_rollouts("subagent") if path != root]
    root_id = lines(root)[0]["payload"]["id"]
    meta = lines(child)[0]["payload"]
    assert child.stem.endswith(meta["id"])
    assert meta["session_id"] == meta["parent_thread_id"] == root_id != meta["id"]
    assert meta["source"]["subagent"]["thread_spawn"]["agent_path"] == "/root/helper"
    activity = [
        line["payload"]["item"]
        for line in lines(root)
        if line["type"] == "event_msg"
        and line["payload"]["type"] == "item_completed"
        and line["payload"]["item"]["type"] == "SubAgentActivity"
    ]
    assert [(a["kind"], a["agent_thread_id"]) for a in activity] == [
        ("started", meta["id"]),
        ("completed", meta["id"]),
    ]
    assert activity[0]["id"] == "call_spawn_1"


def test_codex_tool_items_and_error() -> None:
    kinds = {
        scenario: {
            line["payload"]["item"]["type"]
            for line in lines(codex_rollout(scenario))
            if line["type"] == "event_msg" and line["payload"]["type"] == "item_completed"
        }
        for scenario in CODEX_SCENARIOS
    }
    assert "CommandExecution" in kinds["shell"]
    assert "FileChange" in kinds["apply_patch"]
    assert "McpToolCall" in kinds["mcp_tool"]
    assert "ContextCompaction" in kinds["compacted"]
    (complete,) = [
        line["payload"]
        for line in lines(codex_rollout("tool_then_500"))
        if line["type"] == "event_msg" and line["payload"]["type"] == "task_complete"
    ]
    assert complete["error"]["message"]
    assert complete["last_agent_message"] is None


def test_codex_resume_appends_and_stdout_usage_is_thread_cumulative() -> None:
    rollout = lines(codex_rollout("resumed"))
    starts = [
        line for line in rollout if line["type"] == "event_msg" and line["payload"]["type"] == "task_started"
    ]
    assert len(starts) == 2
    records = [line["payload"] for line in rollout if line["type"] == "token_usage_record"]
    streamed = [json.loads(x) for x in (CODEX / "resumed" / "stdout-2.jsonl").read_text().splitlines()]
    (completed,) = [s for s in streamed if s["type"] == "turn.completed"]
    assert completed["usage"]["input_tokens"] == records[-1]["thread_token_usage"]["input_tokens"]
    assert completed["usage"]["input_tokens"] != records[-1]["turn_token_usage"]["input_tokens"]


def test_codex_compaction_output_is_marked() -> None:
    rollout = lines(codex_rollout("compacted"))
    (compacted,) = [line for line in rollout if line["type"] == "compacted"]
    assert compacted["payload"]["replacement_history"]
    marked = [line for line in rollout if line.get("metadata", {}).get("compaction_output")]
    assert [line["payload"]["type"] for line in marked] == ["reasoning", "message"]
    assert all(line["ordinal"] < compacted["ordinal"] for line in marked)


# -- the recorder ---------------------------------------------------------------------------------

# The recorder with its recording replaced: `resumed`, which both CLIs have, fails for Codex.
FAILING_RECORDER = """
import sys
sys.path.insert(0, sys.argv[1])
import record_session_fixtures

def record_one(cli, name):
    if cli == "codex":
        raise RuntimeError("the scripted model was never asked")
    print(f"{cli}/{name}: recorded")

record_session_fixtures.record_one = record_one
record_session_fixtures.main(["resumed"])
"""


def test_a_scenario_that_fails_to_re_record_fails_the_recorder_naming_it() -> None:
    agents = Path(__file__).resolve().parent / "agents"
    done = subprocess.run(
        [sys.executable, "-c", FAILING_RECORDER, str(agents)], capture_output=True, text=True, timeout=120
    )
    assert done.returncode == 1, done.stderr
    assert done.stdout == "claude_code/resumed: recorded\n"  # the others are still recorded
    assert done.stderr.splitlines() == [
        "codex/resumed: FAILED RuntimeError: the scripted model was never asked",
        "1 of 2 scenarios failed to re-record: codex/resumed",
    ]
