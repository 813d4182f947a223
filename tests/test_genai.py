"""`genai_attributes`: GenAI semantic-convention keys read from each adapter's `detail` shape."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel.genai.attributes import (
    RunningUsage,
    genai_attributes,
    message_usage,
    session_usage,
    tool_identity,
    usage_attributes,
)
from transcript_otel.mappings.codex_exec import CodexExecAdapter

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

from claude_code import served_usage  # noqa: E402

from helpers import claude_code_entries, mirrored_entries  # noqa: E402

FIXTURES = TESTS / "fixtures"
CLAUDE_CODE_SCENARIOS = sorted(path.stem for path in (FIXTURES / "claude_code").glob("*.jsonl"))
CODEX_EXEC_SCENARIOS = sorted(path.stem for path in (FIXTURES / "codex" / "exec").glob("*.jsonl"))

CALL_ID = "gen_ai.tool.call.id"
TOOL_NAME = "gen_ai.tool.name"
INPUT = "gen_ai.usage.input_tokens"
OUTPUT = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE = "gen_ai.usage.cache_write.input_tokens"
CACHE_CREATION = "gen_ai.usage.cache_creation.input_tokens"
REASONING = "gen_ai.usage.reasoning.output_tokens"


# -- Codex app server -------------------------------------------------------------------


@pytest.mark.parametrize("entry_type", ["tool_use", "tool_result"])
@pytest.mark.parametrize(
    ("item_type", "name"),
    [
        ("commandExecution", "codex:command"),
        ("fileChange", "codex:file_change"),
        ("webSearch", "codex:web_search"),
    ],
)
def test_codex_item_id_is_the_call_id_and_its_type_names_the_tool(
    entry_type: str, item_type: str, name: str
) -> None:
    """Codex's command, file-change and web-search items name no tool: their records get the
    name their spans get (weakincentives' names too)."""
    detail = {
        "notification": {
            "threadId": "thr_1",
            "turnId": "turn_1",
            "item": {"id": "item_42", "type": item_type, "command": "ls -la", "status": "completed"},
        }
    }
    assert genai_attributes(entry_type, detail) == {CALL_ID: "item_42", TOOL_NAME: name}


def test_every_codex_tool_record_is_named_as_its_span() -> None:
    """On the real Codex demo run (bridged tool, commands, patch, MCP tool, web search), each
    tool entry's record names the tool as `tool_identity` (the span's name) does."""
    names = set()
    for entry_type, _, detail in mirrored_entries("wink-0.27-codex-real-demo.jsonl"):
        if entry_type in ("tool_use", "tool_result"):
            call_id, name = tool_identity(detail)
            assert name is not None
            assert genai_attributes(entry_type, detail) == {CALL_ID: call_id, TOOL_NAME: name}
            names.add(name)
    assert names == {"echo", "codex:command", "codex:file_change", "docs:lookup", "codex:web_search"}


def test_codex_mcp_tool_call_has_a_tool_name() -> None:
    detail = {
        "notification": {"item": {"id": "item_7", "type": "mcpToolCall", "server": "fs", "tool": "read"}}
    }
    # named as `codex exec --json` names it (`server:tool`), so both paths agree
    assert genai_attributes("tool_use", detail) == {CALL_ID: "item_7", TOOL_NAME: "fs:read"}


@pytest.mark.parametrize("entry_type", ["tool_use", "tool_result"])
def test_codex_bridged_tool_call(entry_type: str) -> None:
    detail = {"notification": {"callId": "call_abc", "tool": "wink_search", "arguments": {"q": "x"}}}
    assert genai_attributes(entry_type, detail) == {CALL_ID: "call_abc", TOOL_NAME: "wink_search"}


def test_codex_token_usage_uses_the_last_turn() -> None:
    detail = {
        "notification": {
            "threadId": "thr_1",
            "tokenUsage": {
                "last": {
                    "inputTokens": 1200,
                    "cachedInputTokens": 300,
                    "outputTokens": 250,
                    "reasoningOutputTokens": 64,
                    "totalTokens": 1450,
                },
                "total": {"inputTokens": 9999, "outputTokens": 8888},
            },
        }
    }
    assert genai_attributes("token_usage", detail) == {
        INPUT: 1200,
        OUTPUT: 250,
        CACHE_READ: 300,
        REASONING: 64,
    }


def test_codex_token_usage_falls_back_to_the_total() -> None:
    detail = {"notification": {"tokenUsage": {"total": {"inputTokens": 10, "outputTokens": 0}}}}
    assert genai_attributes("token_usage", detail) == {INPUT: 10, OUTPUT: 0}


# -- Claude Agent SDK -------------------------------------------------------------------


def test_claude_tool_use_block() -> None:
    detail = {
        "sdk_entry": {
            "type": "assistant",
            "message": {
                "id": "msg_1",
                "role": "assistant",
                "content": [
                    {"type": "text", "text": "Let me look."},
                    {"type": "tool_use", "id": "toolu_01", "name": "Bash", "input": {"command": "ls"}},
                ],
            },
        }
    }
    assert genai_attributes("tool_use", detail) == {CALL_ID: "toolu_01", TOOL_NAME: "Bash"}


def test_claude_tool_result_block() -> None:
    detail = {
        "sdk_entry": {
            "type": "user",
            "message": {
                "role": "user",
                "content": [{"type": "tool_result", "tool_use_id": "toolu_01", "content": "file.txt"}],
            },
        }
    }
    assert genai_attributes("tool_result", detail) == {CALL_ID: "toolu_01"}


def test_claude_top_level_tool_result_entry() -> None:
    detail = {"sdk_entry": {"type": "tool_result", "tool_use_id": "toolu_09", "content": "ok"}}
    assert genai_attributes("tool_result", detail) == {CALL_ID: "toolu_09"}


def test_claude_usage_in_the_message() -> None:
    detail = {
        "sdk_entry": {
            "type": "assistant",
            "message": {
                "content": "done",
                "usage": {
                    "input_tokens": 100,
                    "output_tokens": 20,
                    "cache_read_input_tokens": 50,
                    "cache_creation_input_tokens": 7,
                },
            },
        }
    }
    # Anthropic's input leaves out the cache; the conventions' input is the whole prompt
    assert genai_attributes("token_usage", detail) == {
        INPUT: 157,
        OUTPUT: 20,
        CACHE_READ: 50,
        CACHE_CREATION: 7,
        CACHE_WRITE: 7,
    }


def test_claude_usage_on_the_entry() -> None:
    detail = {"sdk_entry": {"usage": {"input_tokens": 5, "output_tokens": 6}}}
    assert genai_attributes("token_usage", detail) == {INPUT: 5, OUTPUT: 6}


# -- token semantics: the conventions' input is the whole prompt, cache included ----------

ANTHROPIC_KEYS = ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def test_claude_result_input_adds_the_cache_reads_and_writes() -> None:
    """The `result` the real CLI printed under claude-agent-sdk (`tests/fixtures/claude_sdk/tools`):
    2,500 input, 800 read from the cache, 800 written to it (what the model served its two calls):
    a prompt of 4,100, as Phoenix and Langfuse price it."""
    stdout = Path(__file__).parent / "fixtures" / "claude_sdk" / "tools.jsonl"
    [result] = [line for line in map(json.loads, stdout.read_text().splitlines()) if line["type"] == "result"]
    detail = {"sdk_entry": result}
    assert result["usage"]["input_tokens"] == 2500
    assert genai_attributes("token_usage", detail) == {
        INPUT: 4100,
        OUTPUT: 75,
        CACHE_READ: 800,
        CACHE_CREATION: 800,
        CACHE_WRITE: 800,
    }


@pytest.mark.parametrize("scenario", CLAUDE_CODE_SCENARIOS)
def test_real_claude_cli_usage_counts_the_whole_prompt(scenario: str) -> None:
    """Every usage the real CLI printed (results, subagents' model calls, the session's
    `modelUsage`): input is Anthropic's input plus its cache reads and writes."""
    checked = 0
    for entry_type, _, detail in claude_code_entries(scenario):
        raw_usages = []
        if entry_type == "token_usage":
            raw_usages.append((detail["sdk_entry"]["usage"], usage_attributes(detail)))
            if "session_usage" in detail:
                raw_usages.append((detail["session_usage"], session_usage(detail)))
        if "message_usage" in detail:
            raw_usages.append((detail["message_usage"], usage_attributes({"usage": detail["message_usage"]})))
        for raw, found in raw_usages:
            assert found[INPUT] == sum(raw[key] for key in ANTHROPIC_KEYS)
            assert found[CACHE_READ] == raw["cache_read_input_tokens"]
            assert found[CACHE_CREATION] == found[CACHE_WRITE] == raw["cache_creation_input_tokens"]
            checked += 1
    served = json.loads((FIXTURES / "claude_code" / f"{scenario}.served.json").read_text())["served"]
    assert checked or not any("usage" in answer for answer in served)


def test_the_session_input_is_what_the_model_was_served_in_all() -> None:
    """`tools`: the model was served 1200 + 1300 input tokens, 800 written to and 800 read from
    the cache over two calls; the session's input total is all of it."""
    served = json.loads((FIXTURES / "claude_code" / "tools.served.json").read_text())["served"]
    totals = served_usage(served)
    last = [d for kind, _, d in claude_code_entries("tools") if kind == "token_usage"][-1]
    assert session_usage(last)[INPUT] == sum(totals[key] for key in ANTHROPIC_KEYS) > totals["input_tokens"]


def test_a_claude_messages_usage_counts_the_whole_prompt() -> None:
    """A subagent's model call in the stream-json fixture: 400 input + 100 read from the cache."""
    detail = {
        "sdk_entry": {
            "message": {"id": "msg_3", "usage": {"input_tokens": 400, "cache_read_input_tokens": 100}}
        }
    }
    assert message_usage(detail) == ("msg_3", {INPUT: 500, CACHE_READ: 100})


@pytest.mark.parametrize("scenario", CODEX_EXEC_SCENARIOS)
def test_codex_exec_input_already_holds_the_cache(scenario: str) -> None:
    """`codex exec --json`'s `input_tokens` includes `cached_input_tokens` (OpenAI's way): kept."""
    adapter = CodexExecAdapter()
    lines = (FIXTURES / "codex" / "exec" / f"{scenario}.jsonl").read_text().splitlines()
    entries = [entry for line in lines for entry in adapter.feed(line)] + adapter.flush()
    for entry in entries:
        if entry.entry_type == "token_usage":
            usage = entry.detail["usage"]
            assert genai_attributes("token_usage", entry.detail) == {
                INPUT: usage["input_tokens"],
                OUTPUT: usage["output_tokens"],
                CACHE_READ: usage["cached_input_tokens"],
                CACHE_CREATION: usage["cache_write_input_tokens"],
                CACHE_WRITE: usage["cache_write_input_tokens"],
                REASONING: usage["reasoning_output_tokens"],
            }


def test_codex_app_server_input_already_holds_the_cache() -> None:
    """Codex's `totalTokens` is `inputTokens + outputTokens`: its input counts the cached tokens."""
    reports = [
        d for kind, _, d in mirrored_entries("wink-0.27-codex-real-demo.jsonl") if kind == "token_usage"
    ]
    assert any(d["notification"]["tokenUsage"]["last"]["cachedInputTokens"] for d in reports)
    for detail in reports:
        last = detail["notification"]["tokenUsage"]["last"]
        assert last["totalTokens"] == last["inputTokens"] + last["outputTokens"]
        found = genai_attributes("token_usage", detail)
        assert found[INPUT] == last["inputTokens"]
        assert found[CACHE_READ] == last["cachedInputTokens"]
        assert found[CACHE_CREATION] == found[CACHE_WRITE] == last["cacheWriteInputTokens"]


@pytest.mark.parametrize("run", ["wink-0.24-openai-tool.jsonl", "wink-0.24-litellm-parallel.jsonl"])
def test_chat_adapter_input_already_holds_the_cache(run: str) -> None:
    """WINK 0.24's usage (`input_tokens` beside `cached_input_tokens`) counts the cache already."""
    reports = [d for kind, _, d in mirrored_entries(run) if kind == "token_usage"]
    assert [genai_attributes("token_usage", d) for d in reports] == [
        {INPUT: 100, OUTPUT: 20, CACHE_READ: 5, REASONING: 3},
        {INPUT: 110, OUTPUT: 21, CACHE_READ: 5, REASONING: 3},
    ]


def test_litellm_usage_beside_anthropics_cache_keys_stays_inclusive() -> None:
    """LiteLLM reports Anthropic's cache counts under Anthropic's names, beside an OpenAI-style
    `prompt_tokens` that already includes them: nothing is added."""
    usage = {
        "prompt_tokens": 150,
        "completion_tokens": 9,
        "cache_read_input_tokens": 40,
        "cache_creation_input_tokens": 10,
    }
    assert usage_attributes({"usage": usage}) == {
        INPUT: 150,
        OUTPUT: 9,
        CACHE_READ: 40,
        CACHE_CREATION: 10,
        CACHE_WRITE: 10,
    }


@pytest.mark.parametrize(
    ("usage", "expected_input"),
    [
        ({"input_tokens": 10, "cache_read_input_tokens": None, "cache_creation_input_tokens": 4}, 14),
        ({"input_tokens": 10, "cache_read_input_tokens": "many"}, 10),
        ({"input_tokens": 2**63 - 1, "cache_read_input_tokens": 5}, 2**63 - 1),  # int64 for OTLP
    ],
)
def test_anthropic_cache_counts_that_are_not_counts_add_nothing(
    usage: dict[str, Any], expected_input: int
) -> None:
    assert usage_attributes({"usage": usage})[INPUT] == expected_input


def test_running_usage_of_codex_counts_cache_writes_under_both_names() -> None:
    running = RunningUsage()
    report = codex_usage(100, 100, 1)
    report["notification"]["tokenUsage"]["total"]["cacheWriteInputTokens"] = 7
    assert running.added(report) == {INPUT: 100, OUTPUT: 1}  # the first report adds its own call
    report = codex_usage(50, 150, 2)
    report["notification"]["tokenUsage"]["total"]["cacheWriteInputTokens"] = 9
    assert running.added(report) == {INPUT: 50, OUTPUT: 1, CACHE_CREATION: 2, CACHE_WRITE: 2}


# -- generic shapes --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        ({"tool_call_id": "c1", "tool_name": "grep"}, {CALL_ID: "c1", TOOL_NAME: "grep"}),
        ({"call_id": "c2", "name": "edit"}, {CALL_ID: "c2", TOOL_NAME: "edit"}),
        ({"toolCallId": "c3", "toolName": "run"}, {CALL_ID: "c3", TOOL_NAME: "run"}),
        ({"tool_use_id": "c4"}, {CALL_ID: "c4"}),
        ({"content": [{"type": "tool_use", "id": "c5", "name": "x"}]}, {CALL_ID: "c5", TOOL_NAME: "x"}),
    ],
)
def test_generic_tool_keys(detail: dict[str, Any], expected: dict[str, str]) -> None:
    assert genai_attributes("tool_use", detail) == expected


@pytest.mark.parametrize(
    ("detail", "expected"),
    [
        ({"input_tokens": 1, "output_tokens": 2}, {INPUT: 1, OUTPUT: 2}),
        ({"prompt_tokens": 3, "completion_tokens": 4}, {INPUT: 3, OUTPUT: 4}),
        ({"usage": {"prompt_tokens": 5, "reasoning_tokens": 6}}, {INPUT: 5, REASONING: 6}),
        ({"cached_input_tokens": 7}, {CACHE_READ: 7}),
    ],
)
def test_generic_usage_keys(detail: dict[str, Any], expected: dict[str, int]) -> None:
    assert genai_attributes("token_usage", detail) == expected


def test_only_tool_and_usage_entries_get_attributes() -> None:
    detail = {"tool_name": "grep", "tool_call_id": "c", "input_tokens": 5}
    for entry_type in ("user_message", "assistant_message", "thinking", "system_event", "error", "unknown"):
        assert genai_attributes(entry_type, detail) == {}
    assert genai_attributes("token_usage", detail) == {INPUT: 5}
    assert genai_attributes("tool_use", detail) == {CALL_ID: "c", TOOL_NAME: "grep"}


# -- garbage ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "detail",
    [
        None,
        "text",
        42,
        [{"tool_name": "x"}],
        {},
        {"notification": "not a mapping"},
        {"notification": {"item": ["not", "a", "mapping"]}},
        {"notification": {"item": {"id": 5, "tool": None}}},
        {"sdk_entry": 5, "content": "text"},
        {"sdk_entry": {"message": {"content": [None, 1, "x", {"type": "tool_use"}]}}},
        {"tool_name": "", "tool_call_id": 12},
        {1: "int key", (2, 3): "tuple key"},
    ],
)
def test_garbage_tool_detail_gives_nothing(detail: Any) -> None:
    assert genai_attributes("tool_use", detail) == {}
    assert genai_attributes("tool_result", detail) == {}


@pytest.mark.parametrize(
    "detail",
    [
        None,
        {"notification": {"tokenUsage": "lots"}},
        {"notification": {"tokenUsage": {"last": "x"}}},
        {"input_tokens": "100", "output_tokens": 1.5},
        {"input_tokens": True, "output_tokens": False},
        {"usage": ["input_tokens", 3]},
    ],
)
def test_garbage_usage_detail_gives_nothing(detail: Any) -> None:
    assert genai_attributes("token_usage", detail) == {}


JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.floats(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                ["notification", "item", "sdk_entry", "message", "content", "tokenUsage", "last", "id"]
            )
            | st.text(max_size=4),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@settings(max_examples=100, deadline=None)
@given(st.sampled_from(["tool_use", "tool_result", "token_usage", "user_message"]), JUNK)
def test_never_raises_and_returns_well_typed_values(entry_type: str, detail: Any) -> None:
    found = genai_attributes(entry_type, detail)
    for key, value in found.items():
        assert key.startswith("gen_ai.")
        if key.startswith("gen_ai.usage."):
            assert type(value) is int
        else:
            assert isinstance(value, str)
            assert value


def codex_usage(last_input: int, total_input: int, total_output: int) -> dict[str, Any]:
    last = {"inputTokens": last_input, "outputTokens": 1}
    total = {"inputTokens": total_input, "outputTokens": total_output}
    return {"notification": {"tokenUsage": {"last": last, "total": total}}}


def test_running_usage_adds_what_codex_total_grew_by() -> None:
    """Codex 0.171 reports several updates per turn and repeats one after a stream retry: the
    run adds what the thread's total grew by, so it ends at Codex's own total."""
    running = RunningUsage()
    reports = [
        codex_usage(3000, 3000, 40),
        codex_usage(3200, 6200, 70),
        codex_usage(3200, 6200, 70),  # the same update again, after a stream retry
        codex_usage(3400, 9600, 85),
    ]
    added = [running.added(report) for report in reports]
    repeat = {INPUT: 0, OUTPUT: 0}
    assert added == [{INPUT: 3000, OUTPUT: 1}, {INPUT: 3200, OUTPUT: 30}, repeat, {INPUT: 3400, OUTPUT: 15}]
    assert sum(step.get(INPUT, 0) for step in added) == 9600


def test_running_usage_of_a_resumed_thread_starts_at_its_first_call() -> None:
    """A resumed thread's first total holds earlier sessions: the run adds that call's own counts."""
    running = RunningUsage()
    assert running.added(codex_usage(500, 80_000, 900)) == {INPUT: 500, OUTPUT: 1}
    assert running.added(codex_usage(600, 80_600, 950)) == {INPUT: 600, OUTPUT: 50}


def test_running_usage_of_reports_without_a_total_adds_each() -> None:
    running = RunningUsage()
    claude = {"usage": {"input_tokens": 10, "output_tokens": 2}}
    assert running.added(claude) == running.added(claude) == {INPUT: 10, OUTPUT: 2}


def test_a_claude_results_unlogged_usage_is_its_turns_too() -> None:
    """The calls the CLI made itself (`unlogged_usage`, session totals' keys): added to the
    result's own usage, cache reads in the input as always."""
    result = {
        "sdk_entry": {"usage": {"input_tokens": 10, "output_tokens": 2}},
        "unlogged_usage": {"cache_read_input_tokens": 5, "output_tokens": 3},
    }
    assert RunningUsage().added(result) == {INPUT: 15, OUTPUT: 5, CACHE_READ: 5}
    assert RunningUsage().added({**result, "unlogged_usage": "odd"}) == {INPUT: 10, OUTPUT: 2}
