"""The `opencode-json` line adapter on what the real OpenCode 1.18.33 printed
(`tests/fixtures/line_streams/opencode/`, `tests/agents/record_gemini_opencode_fixtures.py`).

Each `.meta.json` holds what the scripted model served; `tests/fixtures/sessions/opencode/
<scenario>/tables.json` what OpenCode stored in its database for the `json` run. The entries,
their pairing, tokens and cost are checked against both, without npm.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.genai.attributes import cost_usd, tool_failed, usage_attributes
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.lines import AutoAdapter, select_adapter, stream_adapter_for
from transcript_otel.mappings.opencode_run import OpenCodeJsonAdapter
from transcript_otel.reading.text import entry_text

TESTS = Path(__file__).resolve().parent
LINES = TESTS / "fixtures" / "line_streams" / "opencode"
SESSIONS = TESTS / "fixtures" / "sessions" / "opencode"
SCENARIOS = sorted({path.name.split(".")[0] for path in LINES.glob("*.meta.json")})
JSON_MODES = ("json", "json-thinking")
RUNS = [(scenario, mode) for scenario in SCENARIOS for mode in JSON_MODES]
# What each printed line becomes.
ENTRY_TYPES = {
    "step_start": ["system_event"],
    "text": ["assistant_message"],
    "reasoning": ["thinking"],
    "tool_use": ["tool_use", "tool_result"],
    "step_finish": ["token_usage"],
    "error": ["error"],
}


def stream(scenario: str, mode: str) -> list[str]:
    return (LINES / f"{scenario}.{mode}.jsonl").read_text().splitlines(keepends=True)


def meta(scenario: str, mode: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((LINES / f"{scenario}.{mode}.meta.json").read_text())
    return found


def tables(scenario: str) -> dict[str, list[dict[str, Any]]]:
    found: dict[str, list[dict[str, Any]]] = json.loads((SESSIONS / scenario / "tables.json").read_text())
    return found


def mapped(lines: list[str]) -> tuple[OpenCodeJsonAdapter, list[MappedEntry]]:
    adapter = OpenCodeJsonAdapter()
    entries = [entry for line in lines for entry in adapter.feed(line)]
    return adapter, entries + adapter.flush()


def of_type(entries: list[MappedEntry], entry_type: str) -> list[MappedEntry]:
    return [entry for entry in entries if entry.entry_type == entry_type]


def served_steps(scenario: str, mode: str) -> list[dict[str, Any]]:
    """The usage of each model step the scripted model answered (the title request apart)."""
    return [
        call["usage"]
        for call in meta(scenario, mode)["served"]
        if call["kind"] == "turn" and call["status"] == 200
    ]


def stored_steps(scenario: str) -> list[dict[str, Any]]:
    """OpenCode's assistant messages (one per model step) as its database holds them."""
    return [row["data"] for row in tables(scenario)["message"] if row["data"]["role"] == "assistant"]


@pytest.mark.parametrize(("scenario", "mode"), RUNS)
def test_every_line_maps_to_its_entries_with_nothing_unknown(scenario: str, mode: str) -> None:
    lines = stream(scenario, mode)
    adapter, entries = mapped(lines)
    assert stream_adapter_for(lines[0]) == "opencode-json"
    expected = [kind for line in lines for kind in ENTRY_TYPES[json.loads(line)["type"]]]
    assert [entry.entry_type for entry in entries] == expected
    # The line is the raw of the first entry it gives; its event is in the detail.
    assert [entry.raw for entry in entries if entry.raw is not None] == lines
    assert {json.loads(line)["sessionID"] for line in lines} == {adapter.session_id}
    if mode == "json":  # the run whose database was kept
        (session,) = tables(scenario)["session"]
        assert adapter.session_id == session["id"]
    assert adapter.timestamp_ns == json.loads(lines[-1])["timestamp"] * 1_000_000


@pytest.mark.parametrize(("scenario", "mode"), RUNS)
def test_texts_and_thinking_are_what_opencode_stored(scenario: str, mode: str) -> None:
    _, entries = mapped(stream(scenario, mode))
    parts = [row["data"] for row in tables(scenario)["part"]]
    user = {row["id"] for row in tables(scenario)["message"] if row["data"]["role"] == "user"}
    answers = [
        part["text"]
        for row, part in zip(tables(scenario)["part"], parts, strict=True)
        if part["type"] == "text" and row["message_id"] not in user
    ]
    assert [entry.detail["text"] for entry in of_type(entries, "assistant_message")] == answers
    # Reasoning is stored always, printed with `--thinking` only.
    reasoning = [part["text"] for part in parts if part["type"] == "reasoning"]
    shown = [entry.detail["text"] for entry in of_type(entries, "thinking")]
    assert shown == (reasoning if mode == "json-thinking" else [])
    assert bool(reasoning) is (scenario == "thinking")


@pytest.mark.parametrize(("scenario", "mode"), RUNS)
def test_tool_calls_and_results_pair_by_call_id(scenario: str, mode: str) -> None:
    _, entries = mapped(stream(scenario, mode))
    calls, results = of_type(entries, "tool_use"), of_type(entries, "tool_result")
    stored = [row["data"] for row in tables(scenario)["part"] if row["data"]["type"] == "tool"]
    assert [call.detail["tool_use_id"] for call in calls] == [part["callID"] for part in stored]
    assert [result.detail["tool_use_id"] for result in results] == [part["callID"] for part in stored]
    for call, result, part in zip(calls, results, stored, strict=True):
        assert call.detail["tool_name"] == result.detail["tool_name"] == part["tool"] == "bash"
        assert call.detail["input"] == part["state"]["input"]
        assert (
            entry_text("tool_use", call.detail)
            == f"bash({json.dumps(part['state']['input'], separators=(',', ':'))})"
        )
        assert result.detail["output"] == part["state"]["output"]
        # OpenCode says `completed` for a command that failed; its exit status says otherwise.
        assert part["state"]["status"] == result.detail["status"] == "completed"
        assert result.detail["exit_code"] == part["state"]["metadata"]["exit"]
        assert tool_failed(result.detail) is (scenario == "failing_shell")
    assert len(calls) == (1 if scenario in ("shell", "failing_shell") else 0)


@pytest.mark.parametrize(("scenario", "mode"), RUNS)
def test_each_steps_usage_is_what_the_model_served_and_its_cost_what_opencode_charged(
    scenario: str, mode: str
) -> None:
    _, entries = mapped(stream(scenario, mode))
    reports = of_type(entries, "token_usage")
    served = served_steps(scenario, mode)
    assert len(reports) == len(served)
    for report, usage in zip(reports, served, strict=True):
        assert usage_attributes(report.detail) == {
            "gen_ai.usage.input_tokens": usage["prompt_tokens"],
            "gen_ai.usage.output_tokens": usage["completion_tokens"],
            "gen_ai.usage.cache_read.input_tokens": usage["prompt_tokens_details"]["cached_tokens"],
            "gen_ai.usage.cache_write.input_tokens": 0,
            "gen_ai.usage.cache_creation.input_tokens": 0,
            "gen_ai.usage.reasoning.output_tokens": usage["completion_tokens_details"]["reasoning_tokens"],
        }
    # The json run's steps are the ones OpenCode stored: the same cost, step by step.
    if mode == "json":
        stored = [step for step in stored_steps(scenario) if "error" not in step]
        assert [cost_usd(report.detail) for report in reports] == [step["cost"] for step in stored]
        assert [report.detail["finish_reason"] for report in reports] == [step["finish"] for step in stored]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_runs_tokens_and_cost_add_up_to_opencodes_session_totals(scenario: str) -> None:
    """OpenCode's own arithmetic, undone: its `input` is the prompt less the cache's tokens, its
    `output` leaves out the reasoning; the session row sums the steps (the title request apart)."""
    _, entries = mapped(stream(scenario, "json"))
    reports = of_type(entries, "token_usage")
    totals: Counter[str] = Counter()
    for report in reports:
        totals.update(usage_attributes(report.detail))
    cost = 0.0
    for report in reports:
        cost += cost_usd(report.detail)
    (session,) = tables(scenario)["session"]
    cached = totals["gen_ai.usage.cache_read.input_tokens"]
    written = totals["gen_ai.usage.cache_write.input_tokens"]
    reasoning = totals["gen_ai.usage.reasoning.output_tokens"]
    assert totals["gen_ai.usage.input_tokens"] - cached - written == session["tokens_input"]
    assert totals["gen_ai.usage.output_tokens"] - reasoning == session["tokens_output"]
    assert (cached, written, reasoning) == (
        session["tokens_cache_read"],
        session["tokens_cache_write"],
        session["tokens_reasoning"],
    )
    assert cost == session["cost"]


@pytest.mark.parametrize("mode", JSON_MODES)
def test_an_api_error_is_an_error_entry_with_the_apis_message_and_status(mode: str) -> None:
    lines = stream("error_500", mode)
    _, entries = mapped(lines)
    (error,) = entries
    (failed,) = stored_steps("error_500")
    assert failed["error"]["data"]["statusCode"] == 500
    assert error.entry_type == "error"
    assert error.detail["exception"] == {"type": "APIError", "message": failed["error"]["data"]["message"]}
    assert error.detail["status_code"] == 500
    assert entry_text("error", error.detail) == f"APIError: {failed['error']['data']['message']}"
    assert stream_adapter_for(lines[0]) == "opencode-json"  # an error, first line and all


def test_a_retried_rate_limit_leaves_one_answered_step() -> None:
    served = [call["status"] for call in meta("rate_limit_429", "json")["served"] if call["kind"] == "turn"]
    assert served == [429, 200]
    _, entries = mapped(stream("rate_limit_429", "json"))
    assert [entry.entry_type for entry in entries] == [
        "system_event",
        "assistant_message",
        "token_usage",
    ]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_default_output_is_read_as_plain_text_with_or_without_its_ansi_stderr(scenario: str) -> None:
    """`--format default` prints each text part on stdout, tool calls and errors (ANSI-coloured)
    on stderr: read as plain text, merged with stderr or not, nothing fails or is unknown."""
    for mode in ("default", "default-thinking"):
        stdout = (LINES / f"{scenario}.{mode}.txt").read_text()
        for output in (stdout, stdout + meta(scenario, mode)["stderr"]):
            adapter = select_adapter(None, {})
            entries = [entry for line in output.splitlines(keepends=True) for entry in adapter.feed(line)]
            entries += adapter.flush()
            assert {entry.entry_type for entry in entries} <= {"assistant_message"}
            printed = [line for line in stdout.splitlines() if line.strip()]
            assert [entry.detail["text"] for entry in entries][: len(printed)] == printed


@pytest.mark.parametrize("cut", [1, 20, 60, -3, -2])
def test_a_damaged_line_is_unknown_and_loses_nothing_else(cut: int) -> None:
    lines = stream("shell", "json-thinking")
    _, whole = mapped(lines)
    damaged = lines[2][:cut] + "\n"  # the tool call, cut short
    adapter, entries = mapped([*lines[:2], damaged, *lines[3:]])
    (unknown,) = of_type(entries, "unknown")
    assert unknown.raw == damaged
    assert unknown.detail["parse_error"].startswith("invalid JSON")
    assert entry_text("unknown", unknown.detail).startswith("(unreadable: invalid JSON")
    assert [entry for entry in entries if entry is not unknown] == [
        entry for entry in whole if entry.entry_type not in ("tool_use", "tool_result")
    ]
    assert adapter.timestamp_ns == json.loads(lines[-1])["timestamp"] * 1_000_000


@pytest.mark.parametrize(
    "line",
    [
        "[1, 2]",
        '{"type": 7}',
        '{"type": "tool_use", "sessionID": "ses_1", "part": {"state": {}}}',  # no call id
        '{"type": "text", "sessionID": "ses_1", "part": {"text": null}}',
        '{"type": "step_finish", "sessionID": "ses_1"}',
        '{"type": "error", "sessionID": "ses_1", "error": "boom"}',
        '{"type": "session.idle", "sessionID": "ses_1", "part": {}}',  # a type this version never prints
    ],
)
def test_events_of_another_shape_are_unknown_with_the_line(line: str) -> None:
    adapter = OpenCodeJsonAdapter()
    (entry,) = adapter.feed(line)
    assert (entry.entry_type, entry.raw) == ("unknown", line)
    assert "event" in entry.detail or "parse_error" in entry.detail


def test_a_tool_call_that_errored_is_a_failed_result_with_its_error() -> None:
    """OpenCode prints a call whose state is `error` as a `tool_use` too (its binary emits both
    `completed` and `error`): the error's text is the result's output."""
    (line,) = [line for line in stream("shell", "json") if '"tool_use"' in line]
    event = json.loads(line)
    state = event["part"]["state"]
    event["part"]["state"] = {
        "status": "error",
        "input": state["input"],
        "error": "denied",
        "time": state["time"],
    }
    _, result = OpenCodeJsonAdapter().feed(json.dumps(event))
    assert result.detail["is_error"] is True
    assert result.detail["output"] == "denied"
    assert "exit_code" not in result.detail


def test_the_first_line_chooses_the_adapter_and_other_json_streams_keep_theirs() -> None:
    auto = AutoAdapter()
    auto.feed("\n")
    auto.feed(stream("plain", "json")[0])
    assert auto.chosen is not None
    assert auto.chosen.name == "opencode-json"
    # Gemini CLI's stream-json has a `tool_use` type too, without `sessionID` and `part`.
    gemini = TESTS / "fixtures" / "line_streams" / "gemini" / "shell.stream-json.jsonl"
    (tool_use,) = [line for line in gemini.read_text().splitlines() if '"type":"tool_use"' in line]
    assert stream_adapter_for(tool_use) != "opencode-json"
