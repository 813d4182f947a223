"""The Gemini CLI line adapters on what the real Gemini CLI 0.61.0 printed
(`tests/fixtures/line_streams/gemini/`: every scenario in stream-json, json and text, each with a
`.meta.json` holding what the scripted model served), and on damaged output."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.genai.attributes import session_usage, tool_identity, usage_attributes
from transcript_otel.genai.facts import response_facts
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.gemini_command import GeminiCommand
from transcript_otel.mappings.gemini_json import GeminiJsonAdapter
from transcript_otel.mappings.gemini_stream import MAX_HELD_CHARS, GeminiStreamJsonAdapter
from transcript_otel.mappings.lines import LineAdapter, select_adapter, stream_adapter_for
from transcript_otel.reading.text import entry_text

from helpers import JSONISH

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

from gemini_cli import FIXTURES, MAIN_MODEL, ROUTER_MODEL, SHELL_ENTRY_TYPES, SPAN_USAGE, meta, served_usage  # noqa: E402

SCENARIOS = sorted({path.name.split(".")[0] for path in FIXTURES.glob("*.meta.json")})
EXTENSIONS = {"stream-json": "jsonl", "json": "json", "text": "txt"}
FAILING = {"error_500"}


def printed(scenario: str, mode: str) -> str:
    return (FIXTURES / f"{scenario}.{mode}.{EXTENSIONS[mode]}").read_text()


def mapped(adapter: LineAdapter, text: str) -> list[MappedEntry]:
    return [
        entry for line in text.splitlines(keepends=True) for entry in adapter.feed(line)
    ] + adapter.flush()


def as_span_usage(usage: dict[str, int]) -> dict[str, int]:
    return {SPAN_USAGE[name]: count for name, count in usage.items()}


def types(entries: list[MappedEntry]) -> list[str]:
    return [entry.entry_type for entry in entries]


# -- stream-json -----------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_stream_json_is_chosen_by_content_and_every_line_maps(scenario: str) -> None:
    text = printed(scenario, "stream-json")
    adapter = select_adapter("auto")
    entries = mapped(adapter, text)
    assert stream_adapter_for(text.splitlines()[0]) == "gemini-stream-json"
    events = [json.loads(line) for line in text.splitlines()]
    assert adapter.session_id == events[0]["session_id"]  # type: ignore[attr-defined]
    assert "unknown" not in types(entries)
    first = entries[:2]
    assert [(e.entry_type, e.detail.get("subtype")) for e in first] == [
        ("system_event", "init"),
        ("user_message", None),
    ]
    assert first[1].detail["text"] == meta(scenario, "stream-json")["arguments"][1]
    # Every line but the answer's chunks is the raw of its entry; the chunks are in the text.
    chunks = [line for line, event in zip(text.splitlines(), events, strict=True) if event.get("delta")]
    raws = [str(entry.raw).rstrip("\n") for entry in entries if entry.raw is not None]
    assert raws == [line for line in text.splitlines() if line not in chunks]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_stream_json_assistant_chunks_join_into_one_message_per_step(scenario: str) -> None:
    events = [json.loads(line) for line in printed(scenario, "stream-json").splitlines()]
    steps: list[list[str]] = [[]]
    for event in events:
        if event["type"] == "message" and event["role"] == "assistant":
            steps[-1].append(event["content"])
        elif steps[-1]:
            steps.append([])
    expected = ["".join(chunks) for chunks in steps if chunks]
    entries = mapped(GeminiStreamJsonAdapter(), printed(scenario, "stream-json"))
    said = [e.detail for e in entries if e.entry_type == "assistant_message"]
    assert [detail["text"] for detail in said] == expected
    assert [detail["deltas"] for detail in said] == [len(chunks) for chunks in steps if chunks]
    firsts = [
        e["timestamp"] for i, e in enumerate(events) if e.get("delta") and not events[i - 1].get("delta")
    ]
    assert [detail["timestamp"] for detail in said] == firsts


def test_stream_json_shell_pairs_the_call_and_its_result() -> None:
    entries = mapped(GeminiStreamJsonAdapter(), printed("shell", "stream-json"))
    assert types(entries) == SHELL_ENTRY_TYPES
    call, result = entries[3].detail, entries[4].detail
    assert tool_identity(call) == tool_identity(result)
    call_id, name = tool_identity(call)
    assert name == "run_shell_command"
    assert call_id is not None
    assert call_id.startswith("run_shell_command__")
    assert call["input"] == {
        "command": "printf 'one\\ntwo\\n' > data.txt && wc -l data.txt",
        "description": "Write data.txt and count its lines",
    }
    assert (result["content"], result["is_error"]) == ("2 data.txt", False)
    assert entry_text("tool_result", result) == "2 data.txt"
    assert entries[5].detail["text"] == "data.txt has 2 lines: one and two."


def test_stream_json_a_failing_command_is_what_the_cli_says_a_success() -> None:
    """`cat missing.txt` exits 1; the CLI reports `status: success` with the error's text."""
    entries = mapped(GeminiStreamJsonAdapter(), printed("failing_shell", "stream-json"))
    (result,) = [e.detail for e in entries if e.entry_type == "tool_result"]
    assert result["is_error"] is False
    assert result["content"] == "cat: missing.txt: No such file or directory"


# json prints nothing on stdout for a failed run (its error goes to stderr).
WITH_USAGE = [
    (s, m) for m in ("stream-json", "json") for s in SCENARIOS if m == "stream-json" or s not in FAILING
]


@pytest.mark.parametrize(("scenario", "mode"), WITH_USAGE)
def test_usage_is_the_main_models_and_the_totals_what_the_cli_printed(scenario: str, mode: str) -> None:
    """The chat's usage is what the scripted API served the main model; the session's totals
    add the router's call, as the CLI's printed totals do (`gemini_usage`)."""
    served = meta(scenario, mode)["served"]
    adapter = GeminiStreamJsonAdapter() if mode == "stream-json" else GeminiJsonAdapter()
    (report,) = [e.detail for e in mapped(adapter, printed(scenario, mode)) if e.entry_type == "token_usage"]
    main, router = served_usage(served, MAIN_MODEL), served_usage(served, ROUTER_MODEL)
    assert report["model"] == MAIN_MODEL
    assert report["usage"] == main
    assert report["session_usage"] == {name: main[name] + router[name] for name in main}
    assert usage_attributes(report) == as_span_usage(main)
    assert session_usage(report) == as_span_usage(report["session_usage"])
    assert [(m["model"], m["usage"]) for m in report["models"]] == [
        (ROUTER_MODEL, router),
        (MAIN_MODEL, main),
    ]
    assert response_facts("token_usage", report).model == MAIN_MODEL
    if mode == "json":
        assert [m["role"] for m in report["models"]] == ["utility_router", "main"]
    else:  # the totals as printed: thoughts are in total_tokens, not in output_tokens
        stats = report["event"]["stats"]
        totals = report["session_usage"]
        assert (
            totals["reasoning_output_tokens"]
            == stats["total_tokens"] - stats["input_tokens"] - stats["output_tokens"]
        )
        assert totals["output_tokens"] == stats["output_tokens"] + totals["reasoning_output_tokens"]


def test_thinking_tokens_are_reasoning_within_the_output() -> None:
    (report,) = [
        e.detail
        for e in mapped(GeminiStreamJsonAdapter(), printed("thinking", "stream-json"))
        if e.entry_type == "token_usage"
    ]
    assert report["usage"] == {
        "input_tokens": 1500,
        "cached_input_tokens": 1000,
        "output_tokens": 32,
        "reasoning_output_tokens": 30,
    }


def test_stream_json_error_is_an_error_with_the_apis_message_after_the_routers_usage() -> None:
    entries = mapped(GeminiStreamJsonAdapter(), printed("error_500", "stream-json"))
    assert types(entries) == ["system_event", "user_message", "token_usage", "error"]
    usage, error = entries[2].detail, entries[3].detail
    assert usage["usage"] == dict.fromkeys(usage["usage"], 0)  # the main model answered nothing
    assert usage["session_usage"]["input_tokens"] == 400  # the router did
    words = entry_text("error", error)
    assert words.startswith("[API Error: ")
    assert "Internal error encountered (scripted 500)." in words


def test_a_retried_429_leaves_no_trace_but_its_tokens() -> None:
    entries = mapped(GeminiStreamJsonAdapter(), printed("rate_limit_429", "stream-json"))
    assert "error" not in types(entries)
    assert [m["status"] for m in meta("rate_limit_429", "stream-json")["served"]] == [200, 429, 200]


# -- json --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", sorted(set(SCENARIOS) - FAILING))
def test_json_object_maps_to_the_last_steps_answer_and_usage(scenario: str) -> None:
    text = printed(scenario, "json")
    assert not text.endswith("\n")  # printed at exit with no newline after it
    document = json.loads(text)
    adapter = select_adapter("gemini-json")
    entries = mapped(adapter, text)
    assert stream_adapter_for(text.splitlines()[0]) == "rtf1"  # a `{` alone: any JSON's
    assert adapter.session_id == document["session_id"]  # type: ignore[attr-defined]
    assert types(entries) == ["assistant_message", "token_usage"]
    assert entries[0].detail == {"text": document["response"], "last_step_only": True}
    assert entries[0].raw == text
    assert entries[1].detail["stats"] == document["stats"]


def test_json_keeps_only_the_last_steps_text() -> None:
    """`shell` said "I will count the lines." before its call: json does not print it."""
    (said,) = [
        e.detail["text"]
        for e in mapped(GeminiJsonAdapter(), printed("shell", "json"))
        if e.entry_type == "assistant_message"
    ]
    assert said == "data.txt has 2 lines: one and two."


def test_json_of_a_failed_run_is_on_stderr_and_stdout_is_empty() -> None:
    assert printed("error_500", "json") == ""
    assert mapped(GeminiJsonAdapter(), "") == []
    stderr = meta("error_500", "json")["stderr"]
    assert json.loads(stderr[stderr.rindex("\n{") :])["error"]["code"] == 500


def test_json_maps_when_its_closing_line_comes_not_at_the_end() -> None:
    adapter = GeminiJsonAdapter()
    lines = printed("plain", "json").splitlines(keepends=True)
    assert [e for line in lines[:-1] for e in adapter.feed(line)] == []
    assert types(adapter.feed(lines[-1])) == ["assistant_message", "token_usage"]
    assert adapter.flush() == []


def test_json_error_object_is_an_error() -> None:
    text = json.dumps(
        {"session_id": "s1", "error": {"type": "Error", "message": "quota", "code": 429}}, indent=2
    )
    entries = mapped(GeminiJsonAdapter(), text)
    assert types(entries) == ["error"]
    assert entry_text("error", entries[0].detail) == "quota"


# -- text ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_text_is_read_as_plain_lines(scenario: str) -> None:
    text = printed(scenario, "text")
    entries = mapped(select_adapter("auto"), text)
    assert [e.detail["text"] for e in entries] == [line for line in text.splitlines() if line.strip()]
    assert set(types(entries)) <= {"assistant_message"}


# -- damaged output ------------------------------------------------------------------------------------


def test_damaged_stream_json_lines_are_unknown_and_nothing_held_is_lost() -> None:
    adapter = GeminiStreamJsonAdapter()
    lines = printed("shell", "stream-json").splitlines()
    entries = [e for line in lines[:3] for e in adapter.feed(line)]  # init, prompt, a chunk held
    cut = lines[3][: len(lines[3]) // 2]
    entries += adapter.feed(cut)
    entries += adapter.feed('["not", "an", "event"]')
    entries += adapter.feed('{"type": "checkpoint", "at": 1}')
    entries += adapter.flush()
    assert types(entries) == [
        "system_event",
        "user_message",
        "assistant_message",
        "unknown",
        "unknown",
        "unknown",
    ]
    assert entries[2].detail["text"] == "I will count the lines."
    assert entries[3].raw == cut
    assert "invalid JSON" in entries[3].detail["parse_error"]
    assert entries[4].detail["event"] == ["not", "an", "event"]
    assert entries[5].detail == {"event": {"type": "checkpoint", "at": 1}}


def test_a_stream_cut_before_its_result_keeps_the_chunks_held() -> None:
    lines = printed("shell", "stream-json").splitlines()[:-2]  # the last chunk and the result gone
    entries = mapped(GeminiStreamJsonAdapter(), "\n".join(lines))
    assert types(entries)[-1] == "assistant_message"
    assert entries[-1].detail["text"] == "data.txt has 2 lines: on"


def test_a_long_answer_is_written_in_parts_past_the_bound() -> None:
    adapter = GeminiStreamJsonAdapter()
    chunk = "x" * (MAX_HELD_CHARS // 2 + 1)
    line = json.dumps({"type": "message", "role": "assistant", "content": chunk, "delta": True})
    entries = adapter.feed(line) + adapter.feed(line) + adapter.flush()
    assert [e.detail["text"] for e in entries] == [chunk, chunk]


def test_a_result_without_stats_still_ends_the_turn_and_an_unknown_tool_result_keeps_its_id() -> None:
    adapter = GeminiStreamJsonAdapter()
    result = adapter.feed(
        '{"type":"tool_result","tool_id":"t9","status":"error","error":{"type":"X","message":"boom"}}'
    )
    assert result[0].detail["tool_use_id"] == "t9"
    assert "tool_name" not in result[0].detail
    assert (result[0].detail["content"], result[0].detail["is_error"]) == ("boom", True)
    ended = adapter.feed('{"type":"result","status":"success"}')
    assert types(ended) == ["token_usage"]
    assert "usage" not in ended[0].detail
    warned = adapter.feed('{"type":"error","severity":"warning","message":"Loop detected"}')
    assert warned[0].detail["subtype"] == "warning"


def test_a_cut_json_object_is_kept_as_plain_lines() -> None:
    lines = printed("shell", "json").splitlines(keepends=True)[:7]
    entries = mapped(GeminiJsonAdapter(), "".join(lines))
    assert [e.detail["text"] for e in entries] == [line.rstrip("\n") for line in lines]


def test_another_programs_object_is_read_as_plain_lines() -> None:
    text = '{\n  "name": "package",\n  "version": "1.0.0"\n}\nafter\n'
    entries = mapped(GeminiJsonAdapter(), text)
    assert [e.detail["text"] for e in entries] == [
        "{",
        '  "name": "package",',
        '  "version": "1.0.0"',
        "}",
        "after",
    ]


def test_lines_after_the_object_are_plain_text() -> None:
    entries = mapped(GeminiJsonAdapter(), printed("plain", "json") + "\nwarning: shutting down\n")
    assert types(entries) == ["assistant_message", "token_usage", "assistant_message"]
    assert entries[-1].detail == {"text": "warning: shutting down"}


EVENTS = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["init", "message", "tool_use", "tool_result", "error", "result"]) | JSONISH,
        "role": st.sampled_from(["user", "assistant"]) | JSONISH,
        "delta": st.just(True) | JSONISH,
        "content": JSONISH,
        "tool_id": st.just("t") | JSONISH,
        "status": st.sampled_from(["success", "error"]) | JSONISH,
        "stats": st.fixed_dictionaries({"models": st.dictionaries(st.text(max_size=3), JSONISH, max_size=2)})
        | JSONISH,
    }
)
LINES = (
    EVENTS.map(json.dumps)
    | EVENTS.map(lambda event: json.dumps(event, indent=2))
    | st.sampled_from(["{", "}", ""])
    | st.text(max_size=40)
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=8))
def test_any_lines_map_without_raising(lines: list[str]) -> None:
    for adapter in (GeminiStreamJsonAdapter(), GeminiJsonAdapter()):
        text = "\n".join(lines)
        entries = mapped(adapter, text)
        assert all(entry.entry_type in CANONICAL_ENTRY_TYPES for entry in entries)


# -- the command line ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("command", "facts"),
    [
        (["gemini", "-p", "hi", "-o", "json"], ("hi", "json", None, "gemini-json", "hi")),
        (
            ["/opt/bin/gemini", "--prompt=hi", "--output-format", "stream-json"],
            ("hi", "stream-json", None, "gemini-stream-json", None),
        ),
        (
            ["gemini", "count", "files", "-m", "gemini-2.5-pro"],
            ("count files", "text", "gemini-2.5-pro", None, "count files"),
        ),
        (
            ["npx", "@google/gemini-cli@0.61.0", "-p", "x", "-o=stream-json"],
            ("x", "stream-json", None, "gemini-stream-json", None),
        ),
        (["gemini", "--include-directories", "a", "b", "-y", "-p", "q"], ("q", "text", None, None, "q")),
        (["gemini", "-p", "q", "--", "-not-an-option"], ("q", "text", None, None, "q")),
        (["gemini", "--unknown-option", "which", "words"], (None, "text", None, None, None)),
        (["gemini", "-y", "--no-sandbox", "list", "files"], ("list files", "text", None, None, "list files")),
    ],
)
def test_gemini_command_reads_prompt_format_and_model(
    command: list[str], facts: tuple[str | None, str, str | None, str | None, str | None]
) -> None:
    found = GeminiCommand.of(command)
    assert found is not None
    assert (found.typed_prompt, found.output_format, found.model, found.adapter, found.prompt) == facts
    assert found.provider == "gcp.gemini"


@pytest.mark.parametrize(
    "command", [["gemini", "mcp", "list"], ["codex", "exec", "hi"], ["npx", "cowsay", "-p", "x"], []]
)
def test_gemini_command_is_only_a_gemini_prompt(command: list[str]) -> None:
    assert GeminiCommand.of(command) is None
