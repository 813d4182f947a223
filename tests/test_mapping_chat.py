"""`ChatMapper`: role-based (OpenAI chat format) messages to canonical entries, row by row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.genai.attributes import usage_attributes
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings.chat import ChatMapper, usage_entry
from transcript_otel.model.entries import RawJson

from helpers import JSONISH


def call(call_id: str, name: str, arguments: str = '{"path": "a.txt"}') -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


@pytest.mark.parametrize("role", ["system", "user", "developer"])
def test_prompts_are_user_messages(role: str) -> None:
    message = {"role": role, "content": "Review the diff."}
    assert ChatMapper().message(message) == [
        MappedEntry("user_message", {"message": message, "text": "Review the diff."}, RawJson(message))
    ]


def test_content_parts_are_joined_into_the_text() -> None:
    message = {
        "role": "user",
        "content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"text": "b"}],
    }
    (entry,) = ChatMapper().message(message)
    assert entry.detail["text"] == "a\nb"


def test_an_assistant_answer_is_an_assistant_message() -> None:
    message = {"role": "assistant", "content": "Looks good."}
    assert ChatMapper().message(message) == [
        MappedEntry("assistant_message", {"message": message, "text": "Looks good."}, RawJson(message))
    ]


def test_tool_calls_are_tool_uses_after_the_text() -> None:
    message = {
        "role": "assistant",
        "content": "Reading.",
        "tool_calls": [call("c1", "read"), call("c2", "grep")],
    }
    text, first, second = ChatMapper().message(message)
    assert text.entry_type == "assistant_message"
    assert text.raw == RawJson(message)
    assert first == MappedEntry(
        "tool_use",
        {
            "tool_call": call("c1", "read"),
            "tool_use_id": "c1",
            "tool_name": "read",
            "input": {"path": "a.txt"},
        },
    )
    assert second.detail["tool_use_id"] == "c2"


def test_a_call_only_message_has_no_assistant_message_and_keeps_raw_on_its_first_call() -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [call("c1", "read")]}
    (use,) = ChatMapper().message(message)
    assert use.entry_type == "tool_use"
    assert use.raw == RawJson(message)


def test_arguments_that_are_not_json_are_kept_as_text() -> None:
    message = {"role": "assistant", "tool_calls": [call("c1", "read", "{broken")]}
    (use,) = ChatMapper().message(message)
    assert use.detail["input"] == "{broken"
    assert use.detail["input_parse_error"].startswith("arguments are not JSON: ")


def test_a_legacy_function_call_is_a_tool_use() -> None:
    message = {"role": "assistant", "content": None, "function_call": {"name": "read", "arguments": "{}"}}
    (use,) = ChatMapper().message(message)
    assert (use.entry_type, use.detail["tool_name"], use.detail["input"]) == ("tool_use", "read", {})


def test_tool_results_are_named_after_their_call() -> None:
    mapper = ChatMapper()
    mapper.message({"role": "assistant", "tool_calls": [call("c1", "read")]})
    message = {"role": "tool", "tool_call_id": "c1", "content": "hello"}
    assert mapper.message(message) == [
        MappedEntry(
            "tool_result",
            {
                "message": message,
                "text": "hello",
                "content": "hello",
                "tool_use_id": "c1",
                "tool_name": "read",
            },
            RawJson(message),
        )
    ]
    legacy = {"role": "function", "name": "read", "content": "hi"}
    (entry,) = mapper.message(legacy)
    assert (entry.entry_type, entry.detail["tool_name"]) == ("tool_result", "read")


@pytest.mark.parametrize("message", [{"role": "critic", "content": "x"}, {"content": "no role"}, {"role": 5}])
def test_other_roles_are_unknown(message: dict[str, Any]) -> None:
    (entry,) = ChatMapper().message(message)
    assert entry.entry_type == "unknown"
    assert entry.detail["message"] == message


@pytest.mark.parametrize("message", [None, "hi", 3, ["user"]])
def test_a_message_that_is_not_an_object_is_unknown(message: Any) -> None:
    (entry,) = ChatMapper().message(message)
    assert entry.entry_type == "unknown"
    assert entry.detail["parse_error"].startswith("a chat message must be an object, got ")


def test_new_messages_maps_only_what_was_appended() -> None:
    mapper = ChatMapper()
    conversation: list[Any] = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert [e.entry_type for e in mapper.new_messages(conversation)] == ["user_message", "user_message"]
    conversation += [
        {"role": "assistant", "content": None, "tool_calls": [call("c1", "read")]},
        {"role": "tool", "tool_call_id": "c1", "content": "x"},
    ]
    assert [e.entry_type for e in mapper.new_messages(conversation)] == ["tool_use", "tool_result"]
    assert mapper.new_messages(conversation) == []
    assert [e.entry_type for e in mapper.new_messages([{"role": "user", "content": "again"}])] == [
        "user_message"
    ]
    assert mapper.new_messages("not a list") == []


def test_unseen_returns_the_appended_messages_once() -> None:
    mapper = ChatMapper()
    conversation: list[Any] = [{"role": "system", "content": "Be brief."}]
    assert mapper.unseen(conversation) == [{"role": "system", "content": "Be brief."}]
    conversation.append({"role": "tool", "tool_call_id": "c1", "content": "x"})
    assert mapper.unseen(conversation) == [{"role": "tool", "tool_call_id": "c1", "content": "x"}]
    assert mapper.unseen(conversation) == []


CHAT_USAGE = {
    "prompt_tokens": 110,
    "completion_tokens": 21,
    "total_tokens": 131,
    "prompt_tokens_details": {"cached_tokens": 5},
    "completion_tokens_details": {"reasoning_tokens": 3},
}
RESPONSES_USAGE = {
    "input_tokens": 110,
    "output_tokens": 21,
    "total_tokens": 131,
    "input_tokens_details": {"cached_tokens": 5},
    "output_tokens_details": {"reasoning_tokens": 3},
}


@pytest.mark.parametrize("usage", [CHAT_USAGE, RESPONSES_USAGE], ids=["chat-completions", "responses"])
def test_a_responses_usage_is_token_usage_under_canonical_names(usage: dict[str, Any]) -> None:
    entry = usage_entry(usage, model="gpt-test")
    assert entry == MappedEntry(
        "token_usage",
        {
            "usage": {
                "input_tokens": 110,
                "output_tokens": 21,
                "total_tokens": 131,
                "cached_input_tokens": 5,
                "reasoning_output_tokens": 3,
            },
            "provider_usage": usage,
            "model": "gpt-test",
        },
        RawJson(usage),
    )
    # … which the spans read as the semantic conventions' token counts.
    assert usage_attributes(entry.detail) == {
        "gen_ai.usage.input_tokens": 110,
        "gen_ai.usage.output_tokens": 21,
        "gen_ai.usage.cache_read.input_tokens": 5,
        "gen_ai.usage.reasoning.output_tokens": 3,
    }


def test_usage_without_counts_keeps_only_what_was_sent() -> None:
    entry = usage_entry({"prompt_tokens": "many", "completion_tokens_details": None})
    assert entry.entry_type == "token_usage"
    assert entry.detail == {
        "usage": {},
        "provider_usage": {"prompt_tokens": "many", "completion_tokens_details": None},
    }


@pytest.mark.parametrize("usage", [None, 12, "lots", [1, 2]])
def test_usage_that_is_not_an_object_is_unknown(usage: Any) -> None:
    entry = usage_entry(usage)
    assert entry.entry_type == "unknown"
    assert entry.detail["parse_error"].startswith("usage must be an object, got ")
    assert entry.raw == RawJson(usage)


FIXTURE = Path(__file__).parent / "fixtures" / "chat" / "conversation.json"


def test_the_fixture_conversation_maps_in_order() -> None:
    fixture = json.loads(FIXTURE.read_text())
    entries = ChatMapper().new_messages(fixture["messages"])
    assert [(e.entry_type, e.detail.get("tool_name")) for e in entries] == [
        ("user_message", None),
        ("user_message", None),
        ("assistant_message", None),
        ("tool_use", "read_file"),
        ("tool_use", "run_tests"),
        ("tool_result", "read_file"),
        ("tool_result", "run_tests"),
        ("tool_use", "read_file"),
        ("tool_result", "read_file"),
        ("assistant_message", None),
        ("unknown", None),
        ("unknown", None),
    ]
    assert entries[1].detail["text"] == "Review src/app.py."
    assert entries[3].detail["input"] == {"path": "src/app.py"}
    assert entries[4].detail["input"] == '{"target": "tests/"'
    assert entries[4].detail["input_parse_error"].startswith("arguments are not JSON")
    assert [e.detail.get("tool_use_id") for e in entries[5:7]] == ["call_read", "call_test"]
    assert entries[9].detail["text"].startswith("The code is fine")
    assert "parse_error" in entries[11].detail
    chat, responses = (usage_entry(r["usage"], model=r["model"]) for r in fixture["responses"])
    assert chat.detail["usage"] == {
        "input_tokens": 412,
        "output_tokens": 58,
        "total_tokens": 470,
        "cached_input_tokens": 384,
        "reasoning_output_tokens": 0,
    }
    assert responses.detail["usage"] == {
        "input_tokens": 328,
        "output_tokens": 52,
        "total_tokens": 380,
        "cached_input_tokens": 0,
        "reasoning_output_tokens": 16,
    }


FUNCTIONS = st.fixed_dictionaries({"name": JSONISH, "arguments": JSONISH}) | JSONISH
MESSAGES = st.fixed_dictionaries(
    {
        "role": st.sampled_from(["system", "user", "assistant", "tool", "function"]) | JSONISH,
        "content": JSONISH,
        "tool_calls": st.lists(
            st.fixed_dictionaries(
                {"id": JSONISH, "function": st.fixed_dictionaries({"name": JSONISH}) | JSONISH}
            )
            | JSONISH,
            max_size=3,
        )
        | JSONISH,
        "tool_call_id": JSONISH,
        "function_call": JSONISH,
    }
)


@settings(max_examples=300, deadline=None)
@given(st.lists(MESSAGES | JSONISH, max_size=5))
def test_any_messages_map_without_raising(messages: list[Any]) -> None:
    mapper = ChatMapper()
    entries = mapper.new_messages(messages) + [e for m in messages for e in mapper.message(m)]
    entries += [usage_entry(m) for m in messages]
    for entry in entries:
        assert entry.entry_type in CANONICAL_ENTRY_TYPES
