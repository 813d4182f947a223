"""Line-stream adapters: every mapping row and every malformed-input rule, then selection.

RTF1 rows follow seed 002's schema, codex-json the `ThreadEvent`s of `codex exec
--json`; claude-stream-json reuses the stream-json mapping (its rows are in
test_mapping_claude_stream.py) and is tested here for what the line layer adds.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings import rtf1 as rtf1_module
from transcript_otel.mappings.codex_exec import CodexExecAdapter
from transcript_otel.mappings.lines import (
    ADAPTER_VARIABLE,
    AutoAdapter,
    ClaudeStreamJsonAdapter,
    LineAdapter,
    PlainAdapter,
    capabilities_of,
    select_adapter,
    stream_adapter_for,
)
from transcript_otel.mappings.rtf1 import Rtf1Adapter

from helpers import JSONISH


def rtf1(event: Any) -> str:
    return "@@RALPH@@ " + json.dumps(event) + "\n"


def one(entries: list[MappedEntry]) -> MappedEntry:
    (entry,) = entries
    return entry


# -- RTF1 ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tag", "entry_type"),
    [
        ("AI", "assistant_message"),
        ("THINK", "thinking"),
        ("USER", "user_message"),
        ("PROMPT", "user_message"),
        ("SYS", "system_event"),
        ("TOOL", "tool_result"),
    ],
)
def test_rtf1_text_by_tag(tag: str, entry_type: str) -> None:
    line = rtf1({"type": "text", "tag": tag, "text": "hello"})
    assert Rtf1Adapter().feed(line) == [MappedEntry(entry_type, {"text": "hello", "tag": tag}, line)]


def test_rtf1_text_without_tag_is_assistant_text() -> None:
    line = rtf1({"type": "text", "text": "hi"})
    assert one(Rtf1Adapter().feed(line)).entry_type == "assistant_message"


def test_rtf1_tool_start_output_end_give_a_use_and_one_joined_result() -> None:
    adapter = Rtf1Adapter()
    start = rtf1({"type": "tool_start", "tool": {"id": "t1", "name": "shell", "input": {"cmd": "ls"}}})
    end = rtf1({"type": "tool_end", "tool": {"id": "t1", "status": "ok", "duration_ms": 218}})
    assert adapter.feed(start) == [
        MappedEntry("tool_use", {"tool_use_id": "t1", "tool_name": "shell", "input": {"cmd": "ls"}}, start)
    ]
    assert adapter.feed(rtf1({"type": "tool_output", "tool": {"id": "t1"}, "text": "a.txt\n"})) == []
    assert adapter.feed(rtf1({"type": "tool_output", "tool": {"id": "t1"}, "text": "b.txt\n"})) == []
    assert adapter.feed(end) == [
        MappedEntry(
            "tool_result",
            {
                "tool_use_id": "t1",
                "tool_name": "shell",
                "status": "ok",
                "duration_ms": 218,
                "output": "a.txt\nb.txt\n",
                "is_error": False,
            },
            end,
        )
    ]
    assert adapter.flush() == []


def test_rtf1_a_failed_tool_is_an_error_result() -> None:
    adapter = Rtf1Adapter()
    adapter.feed(rtf1({"type": "tool_start", "tool": {"id": "t2", "name": "pytest"}}))
    result = one(adapter.feed(rtf1({"type": "tool_end", "tool": {"id": "t2", "status": "fail"}})))
    assert result.detail["is_error"] is True
    assert result.detail["status"] == "fail"
    assert "duration_ms" not in result.detail


def test_rtf1_calls_that_never_end_are_flushed_as_unknown_results() -> None:
    adapter = Rtf1Adapter()
    adapter.feed(rtf1({"type": "tool_start", "tool": {"id": "t3", "name": "build"}}))
    adapter.feed(rtf1({"type": "tool_output", "tool": {"id": "t3"}, "text": "partial"}))
    (result,) = adapter.flush()
    assert result == MappedEntry(
        "tool_result",
        {
            "tool_use_id": "t3",
            "tool_name": "build",
            "status": "unknown",
            "output": "partial",
            "is_error": False,
        },
        None,
    )
    assert adapter.flush() == []


def test_rtf1_usage_and_meta() -> None:
    usage = {"prompt_tokens": 1234, "completion_tokens": 567, "total_tokens": 1801, "model": "m"}
    line = rtf1({"type": "usage", "usage": usage})
    assert Rtf1Adapter().feed(line) == [MappedEntry("token_usage", {"usage": usage}, line)]
    meta = rtf1({"type": "meta", "meta": {"iteration": 3}})
    assert Rtf1Adapter().feed(meta) == [
        MappedEntry("system_event", {"subtype": "meta", "meta": {"iteration": 3}}, meta)
    ]


@pytest.mark.parametrize("line", ["Working on it\n", "no newline at the end", "  indented\r\n"])
def test_rtf1_other_lines_are_assistant_text(line: str) -> None:
    assert Rtf1Adapter().feed(line) == [MappedEntry("assistant_message", {"text": line.rstrip("\r\n")}, line)]


@pytest.mark.parametrize("line", ["\n", "   \n", ""])
def test_blank_lines_are_not_entries(line: str) -> None:
    assert Rtf1Adapter().feed(line) == []
    assert PlainAdapter().feed(line) == []
    assert CodexExecAdapter().feed(line) == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("@@RALPH@@ {not json\n", "invalid JSON: "),
        ("@@RALPH@@ [1, 2]\n", "an event must be a JSON object, got list"),
        (rtf1({"type": "dance"}), "unknown event type 'dance'"),
        (rtf1({"type": "text", "tag": "AI"}), "'text' needs a string 'text'"),
        (rtf1({"type": "text", "tag": "SHOUT", "text": "x"}), "'text' needs a tag among"),
        (rtf1({"type": "tool_start", "tool": {"name": "x"}}), "'tool_start' needs a string 'tool.id'"),
        (rtf1({"type": "tool_start", "tool": {"id": "t"}}), "'tool_start' needs a string 'tool.name'"),
        (rtf1({"type": "tool_start", "tool": {"id": "t", "name": "n", "input": 3}}), "'tool.input' must be"),
        (rtf1({"type": "tool_output", "tool": {"id": "t"}}), "'tool_output' needs"),
        (
            rtf1({"type": "tool_end", "tool": {"id": "t", "status": "maybe"}}),
            "'tool.status'",
        ),
        (
            rtf1({"type": "tool_end", "tool": {"id": "t", "status": ["ok"]}}),
            "'tool.status'",
        ),
        (rtf1({"type": "tool_end", "tool": {"id": "t", "duration_ms": "1s"}}), "'tool.duration_ms' must be"),
        (rtf1({"type": "usage", "usage": 5}), "'usage' needs a 'usage' object"),
        (rtf1({"type": "meta"}), "'meta' needs a 'meta' object"),
        (rtf1({"type": "tool_end"}), "'tool_end' needs a 'tool' object"),
    ],
)
def test_rtf1_malformed_events_are_visible_unknown_entries(line: str, reason: str) -> None:
    entry = one(Rtf1Adapter().feed(line))
    assert entry.entry_type == "unknown"
    parse_error = entry.detail["parse_error"]
    prefix = "invalid JSON: " if reason.startswith("invalid JSON") else "invalid RTF1 event: "
    assert parse_error.startswith(prefix)
    assert parse_error.removeprefix(prefix).startswith(reason.removeprefix("invalid JSON: "))
    assert entry.detail["line"] == line.rstrip("\n")
    assert entry.raw == line


# -- codex exec --json --------------------------------------------------------------------------


def codex(event: dict[str, Any]) -> str:
    return json.dumps(event) + "\n"


def item(kind: str, item_type: str, **fields: Any) -> dict[str, Any]:
    return {"type": kind, "item": {"id": "item_1", "type": item_type, **fields}}


@pytest.mark.parametrize(
    ("event", "entry_type", "extra"),
    [
        ({"type": "thread.started", "thread_id": "th_1"}, "system_event", {"subtype": "thread_started"}),
        ({"type": "turn.started"}, "system_event", {"subtype": "turn_started"}),
        (item("item.completed", "agent_message", text="Done."), "assistant_message", {}),
        (item("item.completed", "reasoning", text="Think"), "thinking", {}),
        (item("item.completed", "todo_list", items=[]), "system_event", {"subtype": "todo_list"}),
        (
            item("item.completed", "error", message="Model metadata not found"),
            "system_event",
            {"subtype": "warning"},
        ),
        ({"type": "turn.failed", "error": {"message": "quota"}}, "error", {}),
        (
            {"type": "error", "message": "Reconnecting... 1/5 (stream closed)"},
            "system_event",
            {"subtype": "retry"},
        ),
        ({"type": "error", "message": "stream broke"}, "system_event", {"subtype": "api_error"}),
        ({"type": "thread.archived"}, "unknown", {}),
        (item("item.completed", "hologram"), "unknown", {}),
    ],
)
def test_codex_events(event: dict[str, Any], entry_type: str, extra: dict[str, Any]) -> None:
    line = codex(event)
    assert CodexExecAdapter().feed(line) == [MappedEntry(entry_type, {"event": event, **extra}, line)]


def test_codex_turn_completed_is_token_usage() -> None:
    usage = {"input_tokens": 100, "cached_input_tokens": 40, "output_tokens": 20}
    event = {"type": "turn.completed", "usage": usage}
    assert one(CodexExecAdapter().feed(codex(event))).detail == {"event": event, "usage": usage}


def test_codex_thread_id_is_the_session_id() -> None:
    adapter = CodexExecAdapter()
    adapter.feed(codex({"type": "thread.started", "thread_id": "th_9"}))
    assert adapter.session_id == "th_9"


@pytest.mark.parametrize(
    ("item_type", "fields", "name"),
    [
        ("command_execution", {"command": "ls"}, "codex:command"),
        ("file_change", {"changes": []}, "codex:file_change"),
        ("web_search", {"query": "otel"}, "codex:web_search"),
        ("mcp_tool_call", {"server": "docs", "tool": "search"}, "docs:search"),
        ("mcp_tool_call", {}, "codex:mcp"),
        ("collab_tool_call", {"tool": "wait", "receiver_thread_ids": []}, "codex:wait"),
        ("collab_tool_call", {}, "codex:collab"),
    ],
)
def test_codex_tool_items_are_a_use_then_a_result(item_type: str, fields: dict[str, Any], name: str) -> None:
    adapter = CodexExecAdapter()
    started = item("item.started", item_type, status="in_progress", **fields)
    completed = item("item.completed", item_type, status="completed", **fields)
    assert one(adapter.feed(codex(started))) == MappedEntry(
        "tool_use", {"event": started, "tool_name": name, "tool_use_id": "item_1"}, codex(started)
    )
    assert one(adapter.feed(codex(completed))).detail == {
        "event": completed,
        "tool_name": name,
        "tool_use_id": "item_1",
        "is_error": False,
    }


@pytest.mark.parametrize(
    "fields", [{"exit_code": 1, "status": "completed"}, {"status": "failed"}, {"status": "declined"}]
)
def test_codex_failed_tools_are_error_results(fields: dict[str, Any]) -> None:
    adapter = CodexExecAdapter()
    adapter.feed(codex(item("item.started", "command_execution", status="in_progress")))
    entry = one(adapter.feed(codex(item("item.completed", "command_execution", **fields))))
    assert entry.detail["is_error"] is True


@pytest.mark.parametrize("item_type", ["file_change", "web_search"])
def test_codex_tool_items_completed_without_a_start_give_the_use_too(item_type: str) -> None:
    completed = item("item.completed", item_type, status="completed")
    line = codex(completed)
    use, result = CodexExecAdapter().feed(line)
    name = f"codex:{item_type}"
    assert use == MappedEntry(
        "tool_use", {"event": completed, "tool_name": name, "tool_use_id": "item_1"}, line
    )
    assert result == MappedEntry(
        "tool_result",
        {"event": completed, "tool_name": name, "tool_use_id": "item_1", "is_error": False},
        None,
    )


def test_codex_updates_and_started_messages_are_folded() -> None:
    adapter = CodexExecAdapter()
    assert adapter.feed(codex(item("item.updated", "command_execution", aggregated_output="a"))) == []
    assert adapter.feed(codex(item("item.started", "agent_message", text=""))) == []


@pytest.mark.parametrize(
    ("line", "reason"),
    [
        ("not json\n", "invalid JSON: "),
        ("[1]\n", "a codex exec event must be a JSON object with a string 'type'"),
        ('{"type": 5}\n', "a codex exec event must be a JSON object with a string 'type'"),
    ],
)
def test_codex_malformed_lines_are_unknown(line: str, reason: str) -> None:
    entry = one(CodexExecAdapter().feed(line))
    assert entry.entry_type == "unknown"
    assert entry.detail["parse_error"].startswith(reason)
    assert entry.raw == line


def test_codex_odd_item_types_do_not_raise() -> None:
    event = {"type": "item.completed", "item": {"type": ["command_execution"], "id": 3}}
    assert one(CodexExecAdapter().feed(codex(event))).entry_type == "unknown"


# -- claude-stream-json, plain ------------------------------------------------------------------


def test_claude_stream_json_keeps_the_line_as_raw_and_learns_the_session() -> None:
    adapter = ClaudeStreamJsonAdapter()
    message = {
        "type": "assistant",
        "message": {"content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Hi"}]},
        "session_id": "s-7",
    }
    line = json.dumps(message) + "\n"
    thinking, answer = adapter.feed(line)
    assert (thinking.entry_type, thinking.raw) == ("thinking", line)
    assert (answer.entry_type, answer.raw) == ("assistant_message", None)
    assert adapter.session_id == "s-7"
    assert one(adapter.feed("{oops\n")).detail["parse_error"].startswith("invalid JSON")


def test_plain_lines_are_assistant_text_with_the_line_as_raw() -> None:
    line = "caf\u00e9 \\xff\tdone\n"
    assert PlainAdapter().feed(line) == [MappedEntry("assistant_message", {"text": line[:-1]}, line)]


# -- selection ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "chosen"),
    [
        (codex({"type": "thread.started", "thread_id": "t"}), "codex-json"),
        (codex({"type": "item.completed", "item": {}}), "codex-json"),
        (json.dumps({"type": "system", "subtype": "init", "session_id": "s"}), "claude-stream-json"),
        (json.dumps({"type": "system"}), "rtf1"),  # no session id: not Claude's
        # An SDK-driven CLI's first line (tests/fixtures/line_streams/claude-sdk-stdout.jsonl's)
        (json.dumps({"type": "control_response", "response": {"subtype": "success"}}), "claude-stream-json"),
        (rtf1({"type": "text", "text": "x"}), "rtf1"),
        ("Just text\n", "rtf1"),  # reads text as plain does, and RTF1 lines if any come
        ("[1, 2]\n", "rtf1"),
    ],
)
def test_sniffing_is_deterministic(line: str, chosen: str) -> None:
    assert stream_adapter_for(line) == chosen


def test_auto_chooses_at_the_first_non_blank_line_and_keeps_the_blank_ones_before_it() -> None:
    adapter = AutoAdapter()
    assert adapter.feed("\n") == []
    assert adapter.chosen is None
    assert adapter.flush() == []
    event = {"type": "thread.started", "thread_id": "th"}
    (entry,) = adapter.feed(codex(event))
    assert entry.detail == {"event": event, "subtype": "thread_started"}
    assert adapter.chosen is not None
    assert adapter.chosen.name == "codex-json"
    assert adapter.session_id == "th"
    assert capabilities_of(adapter).turns is True


def test_auto_reads_plain_text_and_later_rtf1_lines() -> None:
    adapter = AutoAdapter()
    entries = adapter.feed("preface\n") + adapter.feed(rtf1({"type": "text", "tag": "THINK", "text": "t"}))
    assert [e.entry_type for e in entries] == ["assistant_message", "thinking"]
    assert capabilities_of(adapter).tool_events is True


def test_select_adapter_prefers_the_flag_then_the_variable_then_auto() -> None:
    assert select_adapter("plain", {ADAPTER_VARIABLE: "rtf1"}).name == "plain"
    assert select_adapter(None, {ADAPTER_VARIABLE: "rtf1"}).name == "rtf1"
    assert isinstance(select_adapter(None, {}), AutoAdapter)
    with pytest.raises(ValueError, match=r"unknown line adapter 'xml'; known: rtf1, codex-json"):
        select_adapter("xml", {})


# -- hostile input ------------------------------------------------------------------------------

ADAPTERS: list[Callable[[], LineAdapter]] = [
    Rtf1Adapter,
    CodexExecAdapter,
    ClaudeStreamJsonAdapter,
    PlainAdapter,
    AutoAdapter,
]
EVENTS = st.fixed_dictionaries(
    {
        "type": st.sampled_from(
            [
                "text",
                "tool_start",
                "tool_output",
                "tool_end",
                "usage",
                "meta",
                "item.completed",
                "turn.failed",
            ]
        )
        | JSONISH,
        "tag": st.sampled_from(["AI", "THINK", "TOOL"]) | JSONISH,
        "tool": st.fixed_dictionaries({"id": st.just("t") | JSONISH, "status": JSONISH}) | JSONISH,
        "item": st.fixed_dictionaries({"type": st.just("command_execution") | JSONISH}) | JSONISH,
        "text": JSONISH,
    }
)
LINES = (
    EVENTS.map(lambda event: "@@RALPH@@ " + json.dumps(event))
    | EVENTS.map(json.dumps)
    | st.text(max_size=40)
    | st.just("@@RALPH@@ " + "[" * 5000)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=6))
def test_any_lines_map_without_raising(lines: list[str]) -> None:
    for make in ADAPTERS:
        adapter = make()
        entries = [entry for line in lines for entry in adapter.feed(line)] + adapter.flush()
        assert all(entry.entry_type in CANONICAL_ENTRY_TYPES for entry in entries)


def test_rtf1_output_held_for_open_calls_is_bounded_all_together(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rtf1_module, "_MAX_OUTPUT_CHARS", 10)
    adapter = Rtf1Adapter()
    for call_id in ("a", "b"):
        adapter.feed(rtf1({"type": "tool_start", "tool": {"id": call_id, "name": "n"}}))
    adapter.feed(rtf1({"type": "tool_output", "tool": {"id": "a"}, "text": "12345678"}))
    adapter.feed(rtf1({"type": "tool_output", "tool": {"id": "b"}, "text": "12345678"}))  # over the budget
    first = one(adapter.feed(rtf1({"type": "tool_end", "tool": {"id": "a", "status": "ok"}})))
    assert first.detail["output"] == "12345678"
    assert "output_truncated" not in first.detail
    second = one(adapter.feed(rtf1({"type": "tool_end", "tool": {"id": "b", "status": "ok"}})))
    assert second.detail["output"] == ""
    assert second.detail["output_truncated"] is True
