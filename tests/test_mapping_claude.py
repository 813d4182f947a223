"""`ClaudeTranscriptMapper`: Claude Code transcript lines to canonical entries (the Claude table).

Every row of the table, the source mapping, the tool_use / tool_result splits that
weakincentives 0.26+ also makes, then lines that are not JSON objects at all.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.genai.attributes import message_usage, usage_attributes
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings.claude_transcript import ClaudeTranscriptMapper

SOURCES = ["main", "subagent:abc"]


def line_of(entry: Any) -> str:
    return json.dumps(entry)


def assistant(*blocks: dict[str, Any], message_id: str = "msg_1") -> dict[str, Any]:
    return {
        "type": "assistant",
        "uuid": "u-a",
        "message": {"id": message_id, "role": "assistant", "content": list(blocks)},
    }


def user(*blocks: Any) -> dict[str, Any]:
    return {"type": "user", "uuid": "u-u", "message": {"role": "user", "content": list(blocks)}}


def text(value: str) -> dict[str, Any]:
    return {"type": "text", "text": value}


def tool_use(call_id: str, name: str, **tool_input: Any) -> dict[str, Any]:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def tool_result(call_id: str, content: str = "ok") -> dict[str, Any]:
    return {"type": "tool_result", "tool_use_id": call_id, "content": content}


# -- the table --------------------------------------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
@pytest.mark.parametrize(
    ("entry", "entry_type", "extra"),
    [
        pytest.param(
            {"type": "user", "message": {"role": "user", "content": "hi"}}, "user_message", {}, id="user"
        ),
        pytest.param(
            {"type": "user", "message": {"role": "user", "content": [text("hi")]}},
            "user_message",
            {},
            id="user-blocks",
        ),
        pytest.param(assistant(text("hello")), "assistant_message", {}, id="assistant"),
        pytest.param(
            {"type": "assistant", "message": {"content": "plain"}},
            "assistant_message",
            {},
            id="assistant-str",
        ),
        pytest.param(
            {"type": "tool_result", "tool_use_id": "t1", "content": "out"},
            "tool_result",
            {},
            id="tool_result",
        ),
        pytest.param({"type": "thinking", "thinking": "hmm"}, "thinking", {}, id="thinking"),
        pytest.param(
            {"type": "summary", "summary": "compacted", "leafUuid": "l"},
            "system_event",
            {"subtype": "compaction"},
            id="summary",
        ),
        pytest.param(
            {"type": "system", "subtype": "compact_boundary", "content": "c"},
            "system_event",
            {"subtype": "compact_boundary"},
            id="system-with-subtype",
        ),
        pytest.param({"type": "system", "subtype": 7}, "system_event", {}, id="system-non-str-subtype"),
        pytest.param({"type": "system"}, "system_event", {}, id="system-bare"),
        pytest.param({"type": "file-history-snapshot", "snapshot": {}}, "unknown", {}, id="other"),
        pytest.param({"type": "queue-operation"}, "unknown", {}, id="other-2"),
        pytest.param({"message": {"content": "no type"}}, "unknown", {}, id="no-type"),
        pytest.param({"type": ["user"]}, "unknown", {}, id="type-not-str"),
        pytest.param({"type": None}, "unknown", {}, id="type-null"),
    ],
)
def test_table_rows(entry: dict[str, Any], entry_type: str, extra: dict[str, Any], source: str) -> None:
    line = line_of(entry)
    (mapped,) = ClaudeTranscriptMapper().line(line, source)
    assert mapped == MappedEntry(entry_type, {"sdk_entry": entry, **extra}, line, source)


# -- assistant lines holding tool_use blocks --------------------------------------------------


@pytest.mark.parametrize("source", SOURCES)
def test_assistant_line_with_tool_uses_is_split(source: str) -> None:
    thinking = {"type": "thinking", "thinking": "plan", "signature": "s"}
    read, grep = tool_use("t1", "Read", path="a"), tool_use("t2", "Grep", pattern="x")
    entry = assistant(thinking, read, text("Looking"), grep)
    line = line_of(entry)
    message, first, second = ClaudeTranscriptMapper().line(line, source)

    assert message.entry_type == "assistant_message"
    assert message.raw == line
    assert message.source == source
    kept = message.detail["sdk_entry"]
    assert kept["message"]["content"] == [thinking, text("Looking")]
    assert {k: v for k, v in kept.items() if k != "message"} == {"type": "assistant", "uuid": "u-a"}
    assert kept["message"]["id"] == "msg_1"
    assert entry["message"]["content"] == [thinking, read, text("Looking"), grep]  # input untouched

    assert first == MappedEntry("tool_use", {"sdk_entry": read}, None, source)
    assert second == MappedEntry("tool_use", {"sdk_entry": grep}, None, source)


def test_assistant_line_with_only_tool_uses_has_no_assistant_message() -> None:
    """Its first call keeps the message's id and usage: the model call's tokens go with no other entry."""
    read, grep = tool_use("t1", "Read"), tool_use("t2", "Grep")
    line = assistant(read, grep)
    line["message"]["usage"] = {"input_tokens": 10, "output_tokens": 2}
    entries = ClaudeTranscriptMapper().line(line_of(line), "main")
    message = {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 2}}
    assert entries == [
        MappedEntry("tool_use", {"sdk_entry": read, "claude_message": message}, None, "main"),
        MappedEntry("tool_use", {"sdk_entry": grep}, None, "main"),
    ]
    assert message_usage(entries[0].detail) == ("msg_1", usage_attributes({"usage": message["usage"]}))


# -- user lines holding tool_result blocks ----------------------------------------------------


def test_tool_result_only_line_is_named_after_its_tool_use_and_keeps_raw() -> None:
    mapper = ClaudeTranscriptMapper()
    mapper.line(line_of(assistant(tool_use("t1", "Read"), tool_use("t2", "Bash"))), "main")
    line = line_of(user(tool_result("t2"), tool_result("t1")))
    second, first = mapper.line(line, "main")
    assert second == MappedEntry(
        "tool_result", {"sdk_entry": tool_result("t2"), "tool_name": "Bash"}, line, "main"
    )
    assert first == MappedEntry(
        "tool_result", {"sdk_entry": tool_result("t1"), "tool_name": "Read"}, line, "main"
    )


def test_user_line_with_other_blocks_gives_a_user_message_then_raw_less_results() -> None:
    mapper = ClaudeTranscriptMapper()
    mapper.line(line_of(assistant(tool_use("t1", "Read"))), "main")
    entry = user(tool_result("t1"), text("and also this"))
    line = line_of(entry)
    message, result = mapper.line(line, "main")
    assert message.entry_type == "user_message"
    assert message.raw == line
    assert message.detail["sdk_entry"]["message"]["content"] == [text("and also this")]
    assert message.detail["sdk_entry"]["uuid"] == "u-u"
    assert result == MappedEntry("tool_result", {"sdk_entry": tool_result("t1"), "tool_name": "Read"}, None)


def test_tool_names_are_per_source() -> None:
    mapper = ClaudeTranscriptMapper()
    mapper.line(line_of(assistant(tool_use("t1", "Read"))), "main")
    mapper.line(line_of(assistant(tool_use("t1", "Grep"))), "subagent:abc")
    line = line_of(user(tool_result("t1")))

    (other_source,) = mapper.line(line, "subagent:zzz")
    assert "tool_name" not in other_source.detail
    (sub,) = mapper.line(line, "subagent:abc")
    assert sub.detail["tool_name"] == "Grep"
    assert sub.source == "subagent:abc"
    (main,) = mapper.line(line, "main")
    assert main.detail["tool_name"] == "Read"


def test_a_result_without_a_seen_tool_use_has_no_tool_name() -> None:
    line = line_of(user(tool_result("never-seen")))
    (result,) = ClaudeTranscriptMapper().line(line, "main")
    assert result == MappedEntry("tool_result", {"sdk_entry": tool_result("never-seen")}, line, "main")


def test_non_dict_blocks_stay_in_the_message() -> None:
    entry = user("stray", 5, tool_result("t1"))
    message, result = ClaudeTranscriptMapper().line(line_of(entry), "main")
    assert message.detail["sdk_entry"]["message"]["content"] == ["stray", 5]
    assert result.entry_type == "tool_result"


# -- lines that are not JSON objects --------------------------------------------------------------


@pytest.mark.parametrize("line", ["{not json", "", "   ", '{"type": "user"', "NaNx", "[" * 100_000])
def test_invalid_json_is_unknown_with_the_line_as_raw(line: str) -> None:
    (entry,) = ClaudeTranscriptMapper().line(line, "subagent:abc")
    assert entry.entry_type == "unknown"
    assert entry.detail["parse_error"].startswith("Invalid JSON")
    assert entry.raw == line
    assert entry.source == "subagent:abc"


@pytest.mark.parametrize("line", ["[1, 2]", '"text"', "3", "null", "true"])
def test_json_that_is_not_an_object_is_unknown(line: str) -> None:
    (entry,) = ClaudeTranscriptMapper().line(line, "main")
    assert entry.entry_type == "unknown"
    assert "must be a JSON object" in entry.detail["parse_error"]
    assert entry.raw == line


def test_bytes_lines_are_decoded() -> None:
    entry = {"type": "user", "message": {"content": "café"}}
    (mapped,) = ClaudeTranscriptMapper().line(json.dumps(entry, ensure_ascii=False).encode(), "main")
    assert mapped.entry_type == "user_message"
    assert mapped.detail["sdk_entry"] == entry


def test_bytes_with_invalid_utf8_are_kept_as_text() -> None:
    (mapped,) = ClaudeTranscriptMapper().line(b'{"type": "user", "message": {"content": "\xff"}}', "main")
    assert mapped.entry_type == "unknown"
    assert mapped.detail["parse_error"].startswith("Invalid JSON")
    assert mapped.raw == '{"type": "user", "message": {"content": "\\xff"}}'


@pytest.mark.parametrize("line", [None, 5, ["a"], {"type": "user"}])
def test_a_line_that_is_not_text_is_unknown(line: Any) -> None:
    (entry,) = ClaudeTranscriptMapper().line(line, "main")
    assert entry == MappedEntry("unknown", {"parse_error": "line is not text"}, repr(line), "main")


def test_lone_surrogates_in_the_line_do_not_raise() -> None:
    line = '{"type": "user", "message": {"content": "\ud800"}}'
    (entry,) = ClaudeTranscriptMapper().line(line, "main")
    assert entry.entry_type == "user_message"
    assert entry.raw == line


BLOCK = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["text", "tool_use", "tool_result", "thinking"]) | st.integers(),
        "id": st.sampled_from(["t1", "t2"]) | st.none() | st.integers(),
        "tool_use_id": st.sampled_from(["t1", "t2"]) | st.lists(st.integers(), max_size=2),
        "name": st.text(max_size=3) | st.none(),
    }
)
CONTENT = st.lists(BLOCK | st.text(max_size=3) | st.integers() | st.none(), max_size=4) | st.text()
LINES = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["user", "assistant", "summary", "system", "x"]) | st.integers(),
        "subtype": st.text(max_size=3) | st.none(),
        "message": st.fixed_dictionaries({"content": CONTENT}) | st.none() | st.text(max_size=3),
    }
).map(json.dumps)


@settings(max_examples=300, deadline=None)
@given(
    lines=st.lists(st.text(st.characters(codec=None, exclude_categories=())) | LINES, max_size=4),
    source=st.sampled_from(SOURCES),
)
def test_arbitrary_lines_never_raise(lines: list[str], source: str) -> None:
    mapper = ClaudeTranscriptMapper()
    for line in lines:
        entries = mapper.line(line, source)
        assert entries
        for entry in entries:
            assert entry.entry_type in CANONICAL_ENTRY_TYPES
            assert entry.source == source
