"""`transcript_otel.mappings.acp` on what the real ACP agents sent weakincentives' ACP client
(`tests/fixtures/acp/`, `tests/agents/record_acp_fixtures.py`), against what the scripted
model served them (`chat_scenarios.SCENARIOS`) and what OpenCode prices (`opencode_offline.COST`)."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.mappings.acp import ACPMapper, prompt_usage
from transcript_otel.model.entries import RawJson

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "model_servers"
sys.path.insert(0, str(EXAMPLES))

from chat_scenarios import SCENARIOS  # noqa: E402
from opencode_offline import COST  # noqa: E402

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "acp"
STEPS = SCENARIOS["shell"]["scripted-shell"]  # the two model calls of the `shell` scenario
(THOUGHT,) = SCENARIOS["thinking"]["scripted-thinking"]  # one call that thinks, then answers


def _fixture(agent: str, scenario: str = "shell") -> dict[str, Any]:
    recorded: dict[str, Any] = json.loads((FIXTURES / f"{agent}-{scenario}.json").read_text())
    return recorded


def _usage_updates(agent: str) -> list[dict[str, Any]]:
    return [u for u in _fixture(agent)["updates"] if u["sessionUpdate"] == "usage_update"]


def test_opencode_reports_the_usage_of_the_turns_last_model_call() -> None:
    answer = _fixture("opencode_acp")["answers"]["prompt"]
    entry = prompt_usage(answer)
    assert entry is not None
    last = STEPS[-1]
    assert entry.entry_type == "token_usage"
    assert entry.detail == {
        "usage": {
            "input_tokens": last.prompt_tokens,  # its `inputTokens` leaves the cache reads out
            "output_tokens": last.output_tokens,
            "cached_input_tokens": last.cached_tokens,
        },
        "provider_usage": answer["usage"],
        "stop_reason": "end_turn",
    }
    assert isinstance(entry.raw, RawJson)
    assert entry.raw.value == answer


def test_opencode_usage_update_is_the_sessions_cost_which_prices_every_call() -> None:
    (update,) = _usage_updates("opencode_acp")
    cost = sum(
        (
            (step.prompt_tokens - step.cached_tokens) * COST["input"]
            + step.output_tokens * COST["output"]
            + step.cached_tokens * COST["cache_read"]
        )
        / 1e6
        for step in STEPS
    )
    entry = ACPMapper().usage_update(update)
    assert entry is not None
    assert entry.entry_type == "token_usage"
    assert entry.detail == {
        "context_tokens": STEPS[-1].prompt_tokens,
        "context_window": 200000,
        "session_cost": pytest.approx(cost),
        "currency": "USD",
        "turn_cost_usd": pytest.approx(cost),
    }
    assert isinstance(entry.raw, RawJson)
    assert entry.raw.value == update


def test_each_usage_update_adds_what_the_sessions_cost_grew_by() -> None:
    (update,) = _usage_updates("opencode_acp")
    mapper = ACPMapper()
    first = mapper.usage_update(update)
    again = mapper.usage_update(update)  # the same total again: nothing new
    grown = mapper.usage_update({**update, "cost": {"amount": 0.004, "currency": "USD"}})
    assert first is not None
    assert again is not None
    assert grown is not None
    assert again.detail["turn_cost_usd"] == 0.0
    assert grown.detail["turn_cost_usd"] == pytest.approx(0.004 - update["cost"]["amount"])


def test_a_cost_in_another_currency_is_kept_but_not_counted_as_dollars() -> None:
    (update,) = _usage_updates("opencode_acp")
    entry = ACPMapper().usage_update({**update, "cost": {"amount": 1.5, "currency": "EUR"}})
    assert entry is not None
    assert entry.detail["session_cost"] == 1.5
    assert entry.detail["currency"] == "EUR"
    assert "turn_cost_usd" not in entry.detail


def test_gemini_reports_its_turns_calls_summed_in_its_meta_quota() -> None:
    answer = _fixture("gemini_acp")["answers"]["prompt"]
    assert "usage" not in answer
    entry = prompt_usage(answer)
    assert entry is not None
    assert entry.detail == {
        "usage": {
            "input_tokens": sum(step.prompt_tokens for step in STEPS),  # the cache included
            "output_tokens": sum(step.output_tokens for step in STEPS),
        },
        "provider_usage": answer["_meta"]["quota"],
        "stop_reason": "end_turn",
    }  # no `model`: its calls are named `gemini-3.8-flash` and `auto`


def test_gemini_sends_no_usage_update() -> None:
    assert _usage_updates("gemini_acp") == []


def test_opencode_reports_thought_tokens_apart_and_they_are_output() -> None:
    """OpenCode's `outputTokens` leaves the reasoning out (`thoughtTokens`), as its `totalTokens`
    (their sum with the input and cache reads) shows; the model served them as one count."""
    answer = _fixture("opencode_acp", "thinking")["answers"]["prompt"]
    assert answer["usage"]["thoughtTokens"] == THOUGHT.reasoning_tokens
    entry = prompt_usage(answer)
    assert entry is not None
    assert entry.detail["usage"] == {
        "input_tokens": THOUGHT.prompt_tokens,
        "output_tokens": THOUGHT.output_tokens + THOUGHT.reasoning_tokens,
        "cached_input_tokens": THOUGHT.cached_tokens,
        "reasoning_tokens": THOUGHT.reasoning_tokens,
    }


def test_gemini_reports_no_thought_tokens_and_names_the_model_of_a_single_call() -> None:
    answer = _fixture("gemini_acp", "thinking")["answers"]["prompt"]
    entry = prompt_usage(answer)
    assert entry is not None
    assert entry.detail["usage"] == {
        "input_tokens": THOUGHT.prompt_tokens,
        "output_tokens": THOUGHT.output_tokens,  # the 30 thought tokens are in no count
    }
    assert entry.detail["model"] == "gemini-3.8-flash"


@pytest.mark.parametrize("agent", ["opencode_acp", "gemini_acp"])
def test_both_agents_stream_their_thoughts(agent: str) -> None:
    """As `agent_thought_chunk`s (weakincentives' bridge folds them into one `thinking`)."""
    updates = _fixture(agent, "thinking")["updates"]
    thoughts = [u["content"]["text"] for u in updates if u["sessionUpdate"] == "agent_thought_chunk"]
    assert thoughts
    assert "That is Pari" in "".join(thoughts)


def test_acp_usage_counts_every_kind_apart_so_the_prompt_is_their_sum() -> None:
    """ACP's `Usage` (agent-client-protocol's schema): thought tokens and cache writes too."""
    answer = {
        "stopReason": "max_tokens",
        "usage": {
            "inputTokens": 10,
            "cachedReadTokens": 20,
            "cachedWriteTokens": 30,
            "outputTokens": 4,
            "thoughtTokens": 5,
            "totalTokens": 69,
        },
    }
    entry = prompt_usage(answer)
    assert entry is not None
    assert entry.detail["usage"] == {
        "input_tokens": 60,
        "output_tokens": 9,
        "cached_input_tokens": 20,
        "cache_write_input_tokens": 30,
        "reasoning_tokens": 5,
    }


@pytest.mark.parametrize(
    "answer",
    [None, "end_turn", {"stopReason": "end_turn"}, {"stopReason": "end_turn", "_meta": {"quota": "none"}}],
)
def test_an_answer_that_reports_no_usage_gives_no_entry(answer: Any) -> None:
    assert prompt_usage(answer) is None


def test_an_update_that_is_not_a_usage_update_gives_no_entry() -> None:
    (message,) = [u for u in _fixture("opencode_acp")["updates"] if u["sessionUpdate"] == "tool_call"]
    assert ACPMapper().usage_update(message) is None
    assert ACPMapper().usage_update("usage_update") is None
