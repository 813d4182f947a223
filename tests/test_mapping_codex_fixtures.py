"""The mappings on what the real Codex CLI 0.171 printed (`tests/fixtures/codex/`, `make fixtures`).

`app-server/*.jsonl` is the stdout of `codex app-server` under weakincentives 0.27;
`exec/*.jsonl` is `codex exec --json`. Each `.served.json` holds what the scripted model
served, so the tokens the mappings record can be checked against it without npm.
"""

from __future__ import annotations

import json
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.genai.attributes import RunningUsage, tool_identity
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.codex import CodexMapper
from transcript_otel.mappings.codex_exec import CodexExecAdapter
from transcript_otel.reading.text import entry_text

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

from codex_cli import USAGE_PATHS, served_usage  # noqa: E402
from codex_scenarios import FAILING  # noqa: E402

FIXTURES = TESTS / "fixtures" / "codex"
APP_SERVER = sorted(path.stem for path in (FIXTURES / "app-server").glob("*.jsonl"))
EXEC = sorted(path.stem for path in (FIXTURES / "exec").glob("*.jsonl"))
# Codex's usage names → the `gen_ai.usage.*` attributes the mappings give.
ATTRIBUTES = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "reasoning_output_tokens": "gen_ai.usage.reasoning.output_tokens",
}


def served(kind: str, scenario: str) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((FIXTURES / kind / f"{scenario}.served.json").read_text())
    return meta


def messages(scenario: str) -> list[dict[str, Any]]:
    lines = (FIXTURES / "app-server" / f"{scenario}.jsonl").read_text().splitlines()
    return [json.loads(line) for line in lines if line.strip()]


def app_server_entries(scenario: str) -> list[MappedEntry]:
    """The transcript weakincentives 0.25's instrumentation builds from these messages."""
    mapper = CodexMapper()
    entries: list[MappedEntry | None] = []
    for message in messages(scenario):
        if message.get("method") == "item/tool/call":  # a server request: a bridged WINK tool
            entries.append(mapper.tool_call(message["params"]))
        elif "method" in message and "id" not in message:
            entries.append(mapper.notification(message["method"], message.get("params")))
    return [entry for entry in entries if entry is not None]


def recorded_usage(entries: list[MappedEntry]) -> dict[str, int]:
    running = RunningUsage()
    totals: Counter[str] = Counter()
    for entry in entries:
        if entry.entry_type == "token_usage":
            totals.update(running.added(entry.detail))
    return {name: totals[attribute] for name, attribute in ATTRIBUTES.items()}


@pytest.mark.parametrize("scenario", APP_SERVER)
def test_app_server_fixture_maps_with_nothing_unknown(scenario: str) -> None:
    entries = app_server_entries(scenario)
    assert entries, scenario
    assert "unknown" not in {entry.entry_type for entry in entries}
    notifications = [m for m in messages(scenario) if "method" in m and "id" not in m]
    reasoning = [
        m
        for m in notifications
        if m["method"] == "item/completed" and m["params"]["item"]["type"] == "reasoning"
    ]
    assert [e for e in entries if e.entry_type == "thinking"] == [
        CodexMapper().notification("item/completed", m["params"]) for m in reasoning
    ]
    diffs = sum(1 for m in notifications if m["method"] == "turn/diff/updated")
    assert sum(1 for e in entries if e.detail.get("subtype") == "turn_diff") == diffs


# weakincentives (0.25-0.27) ends a turn at the first `turn/completed`, a subagent thread's
# included: it stops reading, and the model responses after it are never reported to it.
STOPPED_AT_A_SUBAGENTS_TURN = {"subagent"}


@pytest.mark.parametrize("scenario", sorted(set(APP_SERVER) - STOPPED_AT_A_SUBAGENTS_TURN))
def test_app_server_tokens_are_what_the_model_served(scenario: str) -> None:
    """Several `thread/tokenUsage/updated` per turn: the run counts what Codex's total grew by."""
    entries = app_server_entries(scenario)
    assert recorded_usage(entries) == served_usage(served("app-server", scenario)["served"])
    updates = [m for m in messages(scenario) if m.get("method") == "thread/tokenUsage/updated"]
    if updates:
        total = updates[-1]["params"]["tokenUsage"]["total"]
        assert recorded_usage(entries)["input_tokens"] == total["inputTokens"]


@pytest.mark.parametrize("scenario", sorted(set(APP_SERVER) & FAILING))
def test_app_server_failed_turn_reads_its_reason(scenario: str) -> None:
    entries = app_server_entries(scenario)
    (error,) = [e for e in entries if e.entry_type == "error"]
    reason = error.detail["notification"]["turn"]["error"]
    assert entry_text("error", error.detail) == reason["message"]
    subtypes = [e.detail.get("subtype") for e in entries if e.entry_type == "system_event"]
    assert subtypes[-2:] == ["retry", "api_error"]


def exec_entries(scenario: str) -> list[MappedEntry]:
    adapter = CodexExecAdapter()
    lines = (FIXTURES / "exec" / f"{scenario}.jsonl").read_text().splitlines()
    return [entry for line in lines for entry in adapter.feed(line)] + adapter.flush()


@pytest.mark.parametrize("scenario", EXEC)
def test_exec_fixture_maps_with_nothing_unknown_and_codex_tokens(scenario: str) -> None:
    entries = exec_entries(scenario)
    assert "unknown" not in {entry.entry_type for entry in entries}
    usage = [entry.detail["usage"] for entry in entries if entry.entry_type == "token_usage"]
    expected = [] if scenario in FAILING else [served_usage(served("exec", scenario)["served"])]
    assert [{name: report[name] for name in USAGE_PATHS} for report in usage] == expected
    errors = [entry for entry in entries if entry.entry_type == "error"]
    assert len(errors) == (1 if scenario in FAILING else 0)
    assert served("exec", scenario)["exit_code"] == (1 if scenario in FAILING else 0)


def test_exec_tour_names_every_tool() -> None:
    tools = [
        (entry.detail["tool_name"], entry.detail["is_error"])
        for entry in exec_entries("tour")
        if entry.entry_type == "tool_result"
    ]
    assert tools == [
        ("codex:command", False),
        ("codex:command", True),
        ("codex:file_change", False),
        ("docs:lookup", False),
        ("codex:web_search", False),
    ]


def test_retries_and_warnings_read_as_codex_worded_them() -> None:
    """Each says Codex's message once, what Codex added after it in parentheses, nothing doubled."""
    retry = "retry: Reconnecting... 1/1 (stream disconnected before completion: stream closed before "
    retry += "response.completed)"
    exec_events = {e.detail["subtype"]: e.detail for e in exec_entries("stream_cut") if "subtype" in e.detail}
    assert entry_text("system_event", exec_events["retry"]) == retry
    app_server = [e for e in app_server_entries("stream_cut") if e.detail.get("subtype") == "retry"]
    assert [entry_text("system_event", e.detail) for e in app_server] == [retry]
    (warning,) = [e for e in exec_entries("unknown_model") if e.detail.get("subtype") == "warning"]
    assert entry_text("system_event", warning.detail) == (
        "warning: Model metadata for `gpt-scripted-unknown` not found. Defaulting to fallback metadata; "
        "this can degrade performance and cause issues."
    )


@pytest.mark.parametrize("kind", ["exec", "app-server"])
@pytest.mark.parametrize(
    ("scenario", "first_attempt", "cause"),
    [
        (
            "rate_limited",
            {"status": 429},
            "exceeded retry limit, last status: 429 Too Many Requests, request id: req_",
        ),
        (
            "stream_error",
            {"status": 200, "failure": "error_event"},
            "stream disconnected before completion: stream closed before response.completed",
        ),
    ],
)
def test_a_rate_limit_or_a_stream_error_is_one_retry_and_one_answer(
    kind: str, scenario: str, first_attempt: dict[str, Any], cause: str
) -> None:
    """A 429 that says `retry-after`, and a stream ended by an `error` event: Codex retries once
    and says why; the run holds the retry's one answer and only its tokens."""
    answers = served(kind, scenario)["served"]
    assert [{key: answer.get(key) for key in first_attempt} for answer in answers[:1]] == [first_attempt]
    assert [answer["status"] for answer in answers[1:]] == [200]
    entries = exec_entries(scenario) if kind == "exec" else app_server_entries(scenario)
    retries = [entry_text("system_event", e.detail) for e in entries if e.detail.get("subtype") == "retry"]
    assert len(retries) == 1
    assert retries[0].startswith(f"retry: Reconnecting... 1/1 ({cause}")
    assert recorded_usage(entries) == served_usage(answers)


def test_app_server_subagent_threads_are_counted_each_from_its_own_total() -> None:
    """`multi_agent_v2` in the app-server: the subagent's thread speaks on the same connection,
    its notifications mapped as the run's (source `main`, as the specification has it for
    Codex; `detail.notification.threadId` says whose). Each thread reports its own running
    token total: the subagent's tokens are counted, and the run's next report is not taken
    for a drop. The model's `spawn_agent` call (a `subAgentActivity` item) and `wait` (a
    `collabAgentToolCall`) are tool calls; the subagent's completion a `system_event`."""
    entries = app_server_entries("subagent")
    assert "unknown" not in {entry.entry_type for entry in entries}
    assert {entry.source for entry in entries} == {"main"}
    said = [(entry.entry_type, entry_text(entry.entry_type, entry.detail)) for entry in entries]
    assert ("assistant_message", "Hi from the helper.") in said
    tools = [
        (entry.entry_type, *tool_identity(entry.detail))
        for entry in entries
        if entry.entry_type in ("tool_use", "tool_result")
    ]
    assert tools == [
        ("tool_use", "call_spawn_1", "spawn_agent"),
        ("tool_result", "call_spawn_1", "spawn_agent"),
        ("tool_use", "call_wait_1", "codex:wait"),
    ]
    (completed,) = [entry for entry in entries if entry.detail.get("subtype") == "subagent_completed"]
    spawned = next(entry for entry in entries if entry.entry_type == "tool_use")
    assert completed.detail["agent_thread_id"] == spawned.detail["notification"]["item"]["agentThreadId"]
    # The run's first response and the subagent's one, each from its thread's total (the run's
    # next response was served after weakincentives stopped reading, at the subagent's
    # `turn/completed`: never reported to it).
    served_calls = served("app-server", "subagent")["served"]
    assert [call["conversation"] for call in served_calls][:3] == [
        "SUBAGENT-SCENARIO",
        "SUBAGENT-SCENARIO",
        "SUBAGENT-CHILD-TASK",
    ]
    assert recorded_usage(entries) == served_usage([served_calls[0], served_calls[2]])
