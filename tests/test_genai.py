"""`genai_attributes`: GenAI semantic-convention keys read from each adapter's `detail` shape."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel._genai import RunningUsage, genai_attributes

CALL_ID = "gen_ai.tool.call.id"
TOOL_NAME = "gen_ai.tool.name"
INPUT = "gen_ai.usage.input_tokens"
OUTPUT = "gen_ai.usage.output_tokens"
CACHE_READ = "gen_ai.usage.cache_read.input_tokens"
CACHE_WRITE = "gen_ai.usage.cache_write.input_tokens"
REASONING = "gen_ai.usage.reasoning.output_tokens"


# -- Codex app server -------------------------------------------------------------------


@pytest.mark.parametrize("entry_type", ["tool_use", "tool_result"])
def test_codex_item_id_is_the_call_id(entry_type: str) -> None:
    detail = {
        "notification": {
            "threadId": "thr_1",
            "turnId": "turn_1",
            "item": {"id": "item_42", "type": "commandExecution", "command": "ls -la", "status": "completed"},
        }
    }
    assert genai_attributes(entry_type, detail) == {CALL_ID: "item_42"}


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
    assert genai_attributes("token_usage", detail) == {INPUT: 100, OUTPUT: 20, CACHE_READ: 50, CACHE_WRITE: 7}


def test_claude_usage_on_the_entry() -> None:
    detail = {"sdk_entry": {"usage": {"input_tokens": 5, "output_tokens": 6}}}
    assert genai_attributes("token_usage", detail) == {INPUT: 5, OUTPUT: 6}


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
