"""The stream-json mapping on what the real Claude Code CLI printed (`tests/fixtures/claude_code/`).

Recorded by `make fixtures` from the pinned CLI against the scripted model; these tests
need neither npm nor the CLI. Each fixture's `.served.json` says what the model served.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.lines import ClaudeStreamJsonAdapter
from transcript_otel.model.entries import RawJson

sys.path.insert(0, str(Path(__file__).resolve().parent / "agents"))

from claude_code import USAGE_KEYS, served_usage

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "claude_code"
SCENARIOS = sorted(path.name.removesuffix(".served.json") for path in FIXTURES.glob("*.served.json"))


def lines(scenario: str) -> list[str]:
    return (FIXTURES / f"{scenario}.jsonl").read_text().splitlines(keepends=True)


def served(scenario: str) -> list[dict[str, Any]]:
    answers: list[dict[str, Any]] = json.loads((FIXTURES / f"{scenario}.served.json").read_text())["served"]
    return answers


def mapped(scenario: str) -> list[MappedEntry]:
    adapter = ClaudeStreamJsonAdapter()
    entries = [entry for line in lines(scenario) for entry in adapter.feed(line)]
    return entries + adapter.flush()


def served_totals(scenario: str) -> dict[str, int]:
    return served_usage(served(scenario))


def test_there_are_fixtures() -> None:
    assert len(SCENARIOS) >= 12


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_line_maps_and_none_is_unknown(scenario: str) -> None:
    entries = mapped(scenario)
    assert all(entry.entry_type != "unknown" for entry in entries)
    # Each line the CLI printed is some entry's raw (folded progress frames keep the last one's).
    raws = {entry.raw for entry in entries if isinstance(entry.raw, str)}
    frames = {"thinking_tokens", "task_progress"}
    kept = [line for line in lines(scenario) if json.loads(line).get("subtype") not in frames]
    assert set(kept) <= raws


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "unknown_flag"])
def test_the_last_session_usage_is_what_the_model_served(scenario: str) -> None:
    reports = [e.detail["session_usage"] for e in mapped(scenario) if "session_usage" in e.detail]
    if not served_totals(scenario)["input_tokens"]:  # nothing answered: no usage, or all zero
        assert all(not any(report.values()) for report in reports)
        return
    assert {key: reports[-1].get(key, 0) for key in USAGE_KEYS} == served_totals(scenario)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "unknown_flag"])
def test_the_turn_costs_add_up_to_the_clis_running_total(scenario: str) -> None:
    entries = mapped(scenario)
    totals = [e.detail["sdk_entry"]["total_cost_usd"] for e in entries if "turn_cost_usd" in e.detail]
    turn_costs = [e.detail["turn_cost_usd"] for e in entries if "turn_cost_usd" in e.detail]
    assert sum(turn_costs) == pytest.approx(max(totals))


def test_thinking_token_frames_fold_into_one_entry() -> None:
    frames = [line for line in lines("tools") if '"subtype":"thinking_tokens"' in line]
    (folded,) = [e for e in mapped("tools") if e.detail.get("subtype") == "thinking_tokens"]
    assert folded.detail["frames"] == len(frames) > 1
    assert isinstance(folded.raw, RawJson)
    assert folded.raw.value == json.loads(frames[-1])  # the last frame, written as JSON
    entry_types = [e.entry_type for e in mapped("tools")]
    assert entry_types.index("system_event", 1) < entry_types.index("thinking")  # before the answer


@pytest.mark.parametrize("scenario", ["bad_request", "fatal_500", "fatal_529", "no_api_key"])
def test_the_clis_api_error_message_is_a_system_event_not_the_models_words(scenario: str) -> None:
    entries = mapped(scenario)
    assert "assistant_message" not in [e.entry_type for e in entries]
    (message,) = [e for e in entries if e.detail.get("subtype") == "api_error_message"]
    assert message.detail["sdk_entry"]["message"]["model"] == "<synthetic>"
    assert [e.entry_type for e in entries][-1] == "error"


def test_a_background_launch_and_its_end_are_marked() -> None:
    entries = mapped("background_subagent")
    (launch,) = [e for e in entries if e.detail.get("background_launch")]
    assert launch.entry_type == "tool_result"
    assert launch.detail["sdk_entry"]["tool_use_id"] == "toolu_agent_bg"
    (ended,) = [e for e in entries if "background_call_ended" in e.detail]
    assert ended.detail["background_call_ended"] == "toolu_agent_bg"
    assert "is_error" not in ended.detail


def test_a_synchronous_subagents_notification_ends_no_call() -> None:
    """`run_in_background: false`: the notification comes before the call's own result, which
    ends the call; nothing says it ran on in the background."""
    entries = mapped("synchronous_subagent")
    (notification,) = [e for e in entries if e.detail.get("subtype") == "task_notification"]
    assert "background_call_ended" not in notification.detail
    assert not [e for e in entries if e.detail.get("background_launch")]
    (result,) = [e for e in entries if e.entry_type == "tool_result" and e.source == "main"]
    assert result.detail["sdk_entry"]["tool_use_id"] == "toolu_agent_sync"
    assert entries.index(notification) < entries.index(result)


def test_a_subagents_model_calls_carry_their_usage_once_each() -> None:
    entries = mapped("foreground_subagent")
    usages = [e.detail["message_usage"] for e in entries if "message_usage" in e.detail]
    subagent_served = [
        a["usage"] for a in served("foreground_subagent") if a["conversation"] == "SUBAGENT-COUNTER"
    ]
    assert [u["input_tokens"] for u in usages] == [u["input_tokens"] for u in subagent_served]
    assert all(e.source == "subagent:toolu_agent_fg" for e in entries if "message_usage" in e.detail)


@pytest.mark.parametrize("scenario", [s for s in SCENARIOS if s != "unknown_flag"])
def test_only_the_web_searchs_own_request_is_unlogged(scenario: str) -> None:
    """The CLI's WebSearch tool asks the API itself: its result's `usage` leaves that request
    out, the session's totals count it. Elsewhere the totals grew by no more than the results
    counted, or a subagent ran (its calls are its own)."""
    unlogged = [e.detail["unlogged_usage"] for e in mapped(scenario) if "unlogged_usage" in e.detail]
    if scenario != "web_search":
        assert unlogged == []
        return
    search = served_usage(served(scenario), "WEB-SEARCH-QUERY")
    assert unlogged == [{key: count for key, count in search.items() if count}]
    assert unlogged == [{"input_tokens": 600, "output_tokens": 25}]
