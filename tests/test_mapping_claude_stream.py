"""`ClaudeStreamMapper`: the stream-json messages of the `claude` CLI to canonical entries.

One test per row of the mapping (assistant, user, result, system, the other event
messages, what is not conversation, unknown types), the source rule
(`parent_tool_use_id`), the splits, `raw` placement, then hostile input.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.model.entries import RawJson, is_valid_source

from helpers import JSONISH


def assistant(*blocks: Any, parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "assistant",
        "message": {"id": "msg_1", "role": "assistant", "model": "claude-x", "content": list(blocks)},
        "parent_tool_use_id": parent,
        "session_id": "s-1",
        "uuid": "u-a",
    }


def user(content: Any, parent: str | None = None) -> dict[str, Any]:
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": parent,
        "session_id": "s-1",
    }


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def thinking(value: str) -> dict[str, Any]:
    return {"type": "thinking", "thinking": value, "signature": "sig"}


def tool_use(call_id: str, name: str, kind: str = "tool_use") -> dict[str, Any]:
    return {"type": kind, "id": call_id, "name": name, "input": {"x": 1}}


def tool_result(call_id: str, *, is_error: bool = False) -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": "out", "is_error": is_error}


def result(**fields: Any) -> dict[str, Any]:
    return {"type": "result", "subtype": "success", "is_error": False, "session_id": "s-1", **fields}


USAGE = {"input_tokens": 100, "output_tokens": 20}


def with_content(message: dict[str, Any], *blocks: Any) -> dict[str, Any]:
    return {**message, "message": {**message["message"], "content": list(blocks)}}


# -- assistant messages ----------------------------------------------------------------------


def test_assistant_text_is_one_assistant_message_with_the_message_as_raw() -> None:
    message = assistant(text("Hello"))
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("assistant_message", {"sdk_entry": message}, RawJson(message), "main")
    ]


def test_thinking_blocks_become_thinking_entries_before_the_text() -> None:
    first, second = thinking("plan"), {"type": "redacted_thinking", "data": "xx"}
    message = assistant(first, text("Answer"), second)
    entries = ClaudeStreamMapper().message(message)
    assert entries == [
        MappedEntry("thinking", {"sdk_entry": first}, RawJson(message), "main"),
        MappedEntry("thinking", {"sdk_entry": second}, None, "main"),
        MappedEntry("assistant_message", {"sdk_entry": with_content(message, text("Answer"))}, None, "main"),
    ]
    assert message["message"]["content"] == [first, text("Answer"), second]  # the input is untouched


def test_tool_use_blocks_become_tool_use_entries_after_the_text() -> None:
    bash, search = tool_use("t1", "Bash"), tool_use("t2", "web_search", kind="server_tool_use")
    message = assistant(text("Running"), bash, search)
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry(
            "assistant_message", {"sdk_entry": with_content(message, text("Running"))}, RawJson(message)
        ),
        MappedEntry("tool_use", {"sdk_entry": bash}),
        MappedEntry("tool_use", {"sdk_entry": search}),
    ]


def test_a_tool_only_message_has_no_assistant_message_and_its_first_tool_use_keeps_raw() -> None:
    bash = tool_use("t1", "Bash")
    message = assistant(bash)
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("tool_use", {"sdk_entry": bash}, RawJson(message))
    ]


@pytest.mark.parametrize("content", [[], "plain text", None])
def test_an_assistant_message_without_blocks_is_one_assistant_message(content: Any) -> None:
    message = assistant()
    message["message"]["content"] = content
    (entry,) = ClaudeStreamMapper().message(message)
    assert entry == MappedEntry("assistant_message", {"sdk_entry": message}, RawJson(message))


# -- user messages ---------------------------------------------------------------------------


@pytest.mark.parametrize("content", ["What is 2+2?", [text("What is 2+2?")]])
def test_a_prompt_is_a_user_message(content: Any) -> None:
    message = user(content)
    (entry,) = ClaudeStreamMapper().message(message)
    assert entry == MappedEntry("user_message", {"sdk_entry": message}, RawJson(message))


def test_tool_results_are_named_after_their_tool_use() -> None:
    mapper = ClaudeStreamMapper()
    mapper.message(assistant(tool_use("t1", "Bash"), tool_use("t2", "Read")))
    message = user([tool_result("t2"), tool_result("t1", is_error=True)])
    assert mapper.message(message) == [
        MappedEntry("tool_result", {"sdk_entry": tool_result("t2"), "tool_name": "Read"}, RawJson(message)),
        MappedEntry("tool_result", {"sdk_entry": tool_result("t1", is_error=True), "tool_name": "Bash"}),
    ]


def test_a_user_message_with_text_and_tool_results_is_split() -> None:
    mapper = ClaudeStreamMapper()
    message = user([tool_result("t9"), text("and also")])
    assert mapper.message(message) == [
        MappedEntry("user_message", {"sdk_entry": with_content(message, text("and also"))}, RawJson(message)),
        MappedEntry("tool_result", {"sdk_entry": tool_result("t9")}),  # its tool_use was never seen
    ]


# -- sources ---------------------------------------------------------------------------------


def test_a_subagent_message_has_the_source_of_the_call_that_launched_it() -> None:
    mapper = ClaudeStreamMapper()
    entries = [
        *mapper.message(assistant(tool_use("t1", "Bash"), parent="toolu_task")),
        *mapper.message(user([tool_result("t1")], parent="toolu_task")),
        *mapper.message(user([tool_result("t1")])),  # main never saw a t1: no name
    ]
    assert [(e.entry_type, e.source) for e in entries] == [
        ("tool_use", "subagent:toolu_task"),
        ("tool_result", "subagent:toolu_task"),
        ("tool_result", "main"),
    ]
    assert entries[1].detail["tool_name"] == "Bash"
    assert "tool_name" not in entries[2].detail


@pytest.mark.parametrize("parent", [None, "", 7, ["x"]])
def test_a_missing_or_odd_parent_means_main(parent: Any) -> None:
    (entry,) = ClaudeStreamMapper().message(assistant(text("hi"), parent=parent))
    assert entry.source == "main"


# -- results ---------------------------------------------------------------------------------


def test_a_successful_result_is_token_usage_with_the_turns_cost() -> None:
    message = result(usage=USAGE, total_cost_usd=0.01)
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("token_usage", {"sdk_entry": message, "turn_cost_usd": 0.01}, RawJson(message))
    ]


def test_the_cost_of_each_turn_is_the_difference_of_the_running_totals() -> None:
    mapper = ClaudeStreamMapper()
    costs = [
        mapper.message(result(total_cost_usd=total))[0].detail["turn_cost_usd"]
        for total in (0.01, 0.03, 0.03)
    ]
    assert costs == pytest.approx([0.01, 0.02, 0.0])


def session(input_tokens: int, output_tokens: int) -> dict[str, Any]:
    """A result's `modelUsage`: the session's running totals."""
    return {"claude-x": {"inputTokens": input_tokens, "outputTokens": output_tokens}}


def unlogged(entries: list[MappedEntry]) -> Any:
    return entries[0].detail.get("unlogged_usage")


def test_what_the_session_grew_by_beyond_the_results_usage_is_unlogged() -> None:
    """A call the CLI made itself (a WebSearch's request) is in the session's totals only."""
    mapper = ClaudeStreamMapper()
    assert unlogged(mapper.message(result(usage=USAGE, modelUsage=session(160, 25)))) == {
        "input_tokens": 60,
        "output_tokens": 5,
    }
    # Each report: what grew since the last one; a result without totals waits for the next.
    assert unlogged(mapper.message(result(usage=USAGE, modelUsage=session(260, 45)))) is None
    assert unlogged(mapper.message(result(usage=USAGE))) is None
    assert unlogged(mapper.message(result(usage=USAGE, modelUsage=session(470, 85)))) == {"input_tokens": 10}
    # A result that counts more than the session (a broken stream's attempt): nothing.
    assert unlogged(mapper.message(result(usage=USAGE, modelUsage=session(500, 90)))) is None


@pytest.mark.parametrize(
    "subagent",
    [
        assistant(text("sub"), parent="toolu_agent"),
        assistant(tool_use("toolu_agent", "Agent")),
        user([tool_result("toolu_agent")]) | {"tool_use_result": {"status": "async_launched"}},
    ],
)
def test_nothing_is_unlogged_where_a_subagent_ran_since_the_last_report(subagent: dict[str, Any]) -> None:
    """A subagent's calls are in the session's totals, and its messages may come after the result."""
    mapper = ClaudeStreamMapper()
    mapper.message(subagent)
    assert unlogged(mapper.message(result(usage=USAGE, modelUsage=session(300, 40)))) is None


def test_a_cost_alone_is_token_usage() -> None:
    (entry,) = ClaudeStreamMapper().message(result(total_cost_usd=0.5))
    assert entry.entry_type == "token_usage"


@pytest.mark.parametrize(
    "fields",
    [
        {"subtype": "error_during_execution", "is_error": True},
        {"subtype": "error_max_turns", "is_error": False},
        {"subtype": "success", "is_error": True},
    ],
)
def test_an_error_result_is_token_usage_then_error(fields: dict[str, Any]) -> None:
    message = result(usage=USAGE, **fields)
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("token_usage", {"sdk_entry": message}, RawJson(message)),
        MappedEntry("error", {"sdk_entry": message}),
    ]


def test_an_error_result_without_usage_is_one_error_keeping_raw() -> None:
    message = result(subtype="error_during_execution", is_error=True)
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("error", {"sdk_entry": message}, RawJson(message))
    ]


def test_a_result_reporting_nothing_is_still_kept() -> None:
    message = result()
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("system_event", {"sdk_entry": message, "subtype": "result"}, RawJson(message))
    ]


# -- system and event messages ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("subtype", "canonical"),
    [
        ("init", "init"),
        ("compact_boundary", "compaction"),
        ("task_started", "task_started"),
        ("task_notification", "task_notification"),
        ("hook_response", "hook_response"),
    ],
)
def test_system_messages_are_system_events_with_their_subtype(subtype: str, canonical: str) -> None:
    message = {"type": "system", "subtype": subtype, "session_id": "s-1"}
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("system_event", {"sdk_entry": message, "subtype": canonical}, RawJson(message))
    ]


def test_a_system_message_without_subtype_is_a_system_event() -> None:
    message = {"type": "system", "subtype": 3}
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("system_event", {"sdk_entry": message}, RawJson(message))
    ]


@pytest.mark.parametrize("message_type", ["rate_limit_event", "conversation_reset"])
def test_event_messages_are_system_events(message_type: str) -> None:
    message = {"type": message_type, "uuid": "u", "session_id": "s-1"}
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("system_event", {"sdk_entry": message, "subtype": message_type}, RawJson(message))
    ]


@pytest.mark.parametrize(
    "message_type",
    ["stream_event", "control_request", "control_response", "control_cancel_request", "transcript_mirror"],
)
def test_deltas_and_protocol_frames_are_not_transcript_content(message_type: str) -> None:
    assert ClaudeStreamMapper().message({"type": message_type, "event": {}}) == []


def test_an_unknown_message_type_is_kept_whole() -> None:
    message = {"type": "mystery_event", "payload": {"x": 1}, "parent_tool_use_id": "toolu_9"}
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry("unknown", {"sdk_entry": message}, RawJson(message), "subagent:toolu_9")
    ]


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("message", [None, 5, "text", ["a"], b"\xff"])
def test_a_message_that_is_not_an_object_is_unknown(message: Any) -> None:
    (entry,) = ClaudeStreamMapper().message(message)
    assert entry.entry_type == "unknown"
    assert entry.detail["parse_error"].startswith("a stream-json message must be a JSON object, got ")
    assert entry.raw == RawJson(message)


@pytest.mark.parametrize("message_type", [None, 3, ["user"]])
def test_a_message_without_a_string_type_is_unknown(message_type: Any) -> None:
    message = {"type": message_type, "message": {}}
    assert ClaudeStreamMapper().message(message) == [
        MappedEntry(
            "unknown",
            {"parse_error": "the message has no string 'type'", "sdk_entry": message},
            RawJson(message),
        )
    ]


BLOCK = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["text", "thinking", "tool_use", "server_tool_use", "tool_result"]) | JSONISH,
        "id": st.sampled_from(["t1", "t2"]) | JSONISH,
        "tool_use_id": st.sampled_from(["t1", "t2"]) | JSONISH,
        "name": st.text(max_size=3) | JSONISH,
    }
)
MESSAGES = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["user", "assistant", "result", "system", "stream_event", "x"]) | JSONISH,
        "message": st.fixed_dictionaries({"content": st.lists(BLOCK | JSONISH, max_size=4) | JSONISH})
        | JSONISH,
        "parent_tool_use_id": st.sampled_from(["toolu_a", None, ""]) | JSONISH,
        "subtype": st.sampled_from(["error_x", "success", "compact_boundary"]) | JSONISH,
        "is_error": JSONISH,
        "usage": JSONISH,
    }
)


@settings(max_examples=300, deadline=None)
@given(MESSAGES | JSONISH)
def test_any_message_maps_without_raising(message: Any) -> None:
    mapper = ClaudeStreamMapper()
    for _ in range(2):  # the second pass sees the tool names the first one left
        for entry in mapper.message(message):
            assert entry.entry_type in CANONICAL_ENTRY_TYPES
            assert is_valid_source(entry.source)
            assert isinstance(entry.detail, dict)


def test_hostile_keys_and_deep_nesting_do_not_raise() -> None:
    deep: Any = "leaf"
    for _ in range(5000):
        deep = {"content": [deep]}
    for message in [
        {"type": "assistant", "message": {"content": [deep, {"type": "tool_use", "id": "\ud800"}]}, 1: 2},
        {"type": "user", "message": {"content": [{"type": "tool_result", "tool_use_id": "\udfff"}]}},
        {"type": "\ud800", "parent_tool_use_id": "\ud800"},
    ]:
        assert all(
            entry.entry_type in CANONICAL_ENTRY_TYPES for entry in ClaudeStreamMapper().message(message)
        )
