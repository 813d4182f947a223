"""The real Claude Code CLI (npm, pinned in the Makefile) against the scripted model.

The model is scripted (`examples/model_servers/`); the agent is the real `claude` binary.
Every scenario of `tests/agents/claude_code.CASES` runs under `transcript-otel run`, and the
main ones through claude-agent-sdk (`query()` and `ClaudeSDKClient`, instrumented): the
tests compare what the transcript and its spans recorded with what the model served and
what the CLI itself reported (its `result` messages and exit status).

Without the CLI (`make agents`) these tests skip, or fail where the Makefile requires
them (`TRANSCRIPT_OTEL_REQUIRE_REAL_AGENTS=1`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from transcript_otel import read_records
from transcript_otel.invariants import check_invariants
from transcript_otel.reading.digest import RunDigest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import claude_code  # noqa: E402
from claude_code import CASES, Recorded, record  # noqa: E402

WRAPPER = (sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", "claude-code", "--")
FIXTURES = TESTS / "fixtures" / "claude_code"
USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
DIGEST_NAMES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cached_input",
    "cache_creation_input_tokens": "cache_write_input",
}


def require_cli() -> Path:
    cli = claude_code.cli_path()
    if cli is None:
        reason = f"the real Claude Code CLI is not installed (`make agents`, or {claude_code.CLI_VARIABLE})"
        if os.environ.get("TRANSCRIPT_OTEL_REQUIRE_REAL_AGENTS") == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return cli


@dataclass
class WrappedRun:
    """One scenario under `transcript-otel run`: what the CLI did and what the mirror holds."""

    scenario: str
    recorded: Recorded
    records: list[dict[str, Any]]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.recorded.stdout.splitlines() if line.strip()]

    @property
    def results(self) -> list[dict[str, Any]]:
        return [m for m in self.messages if m.get("type") == "result" and m.get("parent_tool_use_id") is None]

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.entry"]

    @property
    def spans(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.span"]

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"].startswith(prefix)]

    def span(self, span_id: str) -> dict[str, Any]:
        (found,) = [span for span in self.spans if span["span_id"] == span_id]
        return found

    def parent(self, span: dict[str, Any]) -> dict[str, Any]:
        return self.span(span["parent_span_id"])

    @property
    def root(self) -> dict[str, Any]:
        (root,) = self.named("invoke_agent claude-code")
        return root

    def tool(self, call_id: str) -> dict[str, Any]:
        (found,) = [s for s in self.spans if s["attributes"].get("gen_ai.tool.call.id") == call_id]
        return found


def served_usage(served: list[dict[str, Any]], conversation: str | None = None) -> dict[str, int]:
    """What the model answered in all (or in one conversation), summed."""
    totals: Counter[str] = Counter()
    for answer in served:
        if "usage" in answer and conversation in (None, answer["conversation"]):
            totals.update({key: answer["usage"][key] for key in USAGE_KEYS})
    return dict(totals)


def span_usage(span: dict[str, Any]) -> dict[str, int]:
    attributes = span["attributes"]
    names = {
        "input_tokens": "gen_ai.usage.input_tokens",
        "output_tokens": "gen_ai.usage.output_tokens",
        "cache_read_input_tokens": "gen_ai.usage.cache_read.input_tokens",
        "cache_creation_input_tokens": "gen_ai.usage.cache_write.input_tokens",
    }
    return {key: attributes.get(name, 0) for key, name in names.items()}


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, WrappedRun]:
    """Each scenario once under `transcript-otel run`, run on first use."""
    require_cli()
    class Runs(dict[str, WrappedRun]):
        def __missing__(self, scenario: str) -> WrappedRun:
            scratch = tmp_path_factory.mktemp(scenario)
            mirror = scratch / "runs"
            environment = {"TRANSCRIPT_OTEL_JSONL_DIR": str(mirror)}
            recorded = record(scenario, scratch, WRAPPER, environment)
            (path,) = mirror.glob("*.jsonl")
            run = WrappedRun(scenario, recorded, list(read_records(path)))
            self[scenario] = run
            return run

    return Runs()


def expected_exit(scenario: str) -> int:
    """The CLI's exit status when it ran this scenario without the wrapper (the fixture's)."""
    meta = json.loads((FIXTURES / f"{scenario}.served.json").read_text())
    exit_code: int = meta["exit_code"]
    return exit_code


# -- every scenario: the wrapper is transparent, the run is valid, the numbers are the CLI's ----


@pytest.mark.parametrize("scenario", list(CASES))
def test_every_scenario_under_run_keeps_the_exit_status_and_a_valid_transcript(
    wrapped: dict[str, WrappedRun], scenario: str
) -> None:
    run = wrapped[scenario]
    assert run.recorded.exit_code == expected_exit(scenario)
    assert check_invariants(run.records) == []
    if scenario == "unknown_flag":  # the CLI refuses before printing anything
        assert "unknown option '--no-such-flag'" in run.recorded.stderr
        assert [e["entry_type"] for e in run.entries] == ["error"]
        return
    assert run.messages[0]["type"] == "system"
    assert run.messages[0]["subtype"] == "init"
    # One entry or more for every message the CLI printed (progress frames folded), none unknown.
    assert "unknown" not in {e["entry_type"] for e in run.entries}


@pytest.mark.parametrize("scenario", [s for s in CASES if s != "unknown_flag"])
def test_tokens_and_cost_are_what_the_model_served_and_the_cli_charged(
    wrapped: dict[str, WrappedRun], scenario: str
) -> None:
    run = wrapped[scenario]
    digest = RunDigest.of(run.records)
    served = served_usage(run.recorded.served)
    recorded = {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()}
    assert recorded == {key: served.get(key, 0) for key in USAGE_KEYS}
    # The CLI reports its running total: the run costs the last one, counted once.
    charged = max((r.get("total_cost_usd") or 0.0 for r in run.results), default=0.0)
    assert digest.cost_usd == pytest.approx(charged)
    assert run.root["attributes"].get("transcript.usage.cost_usd", 0.0) == pytest.approx(charged)
    assert span_usage(run.root) == {key: served.get(key, 0) for key in USAGE_KEYS}


@pytest.mark.parametrize("scenario", [s for s in CASES if s != "unknown_flag"])
def test_each_turn_is_a_chat_span_with_its_results_usage(
    wrapped: dict[str, WrappedRun], scenario: str
) -> None:
    run = wrapped[scenario]
    turns = sorted(run.named("chat"), key=lambda span: span["attributes"]["transcript.turn"])
    assert len(turns) == len(run.results)
    for turn, result in zip(turns, run.results, strict=True):
        assert {k: v for k, v in span_usage(turn).items() if v} == {
            key: result["usage"][key] for key in USAGE_KEYS if result["usage"].get(key)
        }
        failed = result.get("is_error") is True
        assert (turn["status"] == "ERROR") is failed
        assert turn["parent_span_id"] == run.root["span_id"]


# -- scenario by scenario ------------------------------------------------------------------------


def test_tools_with_thinking(wrapped: dict[str, WrappedRun]) -> None:
    run = wrapped["tools"]
    types = [e["entry_type"] for e in run.entries]
    assert types.count("thinking") == 1
    assert "system_event" in types
    bash = run.tool("toolu_main_1")
    assert bash["name"] == "execute_tool Bash"
    assert bash["status"] == "UNSET"
    assert run.parent(bash)["name"].startswith("chat")
    # The thinking-token progress frames of the answer fold into one entry.
    folded = [e for e in run.entries if e["detail"].get("subtype") == "thinking_tokens"]
    frames = sum(1 for m in run.messages if m.get("subtype") == "thinking_tokens")
    assert len(folded) == 1
    assert folded[0]["detail"]["frames"] == frames > 1


@pytest.mark.parametrize(
    ("scenario", "calls"),
    [
        ("foreground_subagent", {"toolu_agent_fg": "SUBAGENT-COUNTER"}),
        ("background_subagent", {"toolu_agent_bg": "SUBAGENT-COUNTER"}),
        ("parallel_subagents", {"toolu_agent_a": "SUBAGENT-COUNTER", "toolu_agent_b": "SUBAGENT-READER"}),
    ],
)
def test_each_subagent_runs_under_the_call_that_launched_it_with_its_own_usage(
    wrapped: dict[str, WrappedRun], scenario: str, calls: dict[str, str]
) -> None:
    run = wrapped[scenario]
    for call_id, conversation in calls.items():
        launcher = run.tool(call_id)
        (subagent,) = [
            s for s in run.named("invoke_agent") if s["attributes"].get("gen_ai.agent.id") == call_id
        ]
        assert subagent["parent_span_id"] == launcher["span_id"]
        # The call covers the subagent's real work (it goes on after its "launched" result).
        assert launcher["start_time_unix_nano"] <= subagent["start_time_unix_nano"]
        assert launcher["end_time_unix_nano"] >= subagent["end_time_unix_nano"]
        subagent_entries = [e for e in run.entries if e["source"] == f"subagent:{call_id}"]
        assert subagent_entries
        assert all(e["span_id"] != run.root["span_id"] for e in subagent_entries)
        assert "transcript.tool.result_missing" not in launcher["attributes"]
        # Its model calls' input and cache tokens are exactly what the model served it.
        served = served_usage(run.recorded.served, conversation)
        usage = span_usage(subagent)
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            assert usage[key] == served[key], key
        # Its Bash call is its own child.
        (bash,) = [s for s in run.named("execute_tool Bash") if s["parent_span_id"] == subagent["span_id"]]
        assert bash["status"] == "UNSET"


def test_a_background_subagents_notification_turn_is_a_turn_of_its_own(
    wrapped: dict[str, WrappedRun],
) -> None:
    run = wrapped["background_subagent"]
    inits = [m for m in run.messages if m.get("subtype") == "init"]
    assert len(inits) == len(run.results) == 2  # the CLI's own turns
    first, second = sorted(run.named("chat"), key=lambda span: span["attributes"]["transcript.turn"])
    texts = {
        e["span_id"]: e["detail"]["sdk_entry"]["message"]["content"][0]["text"]
        for e in run.entries
        if e["entry_type"] == "assistant_message" and e["source"] == "main"
    }
    assert texts[first["span_id"]] == "I started the counter in the background."
    assert texts[second["span_id"]] == "The counter subagent reports 3 files."


@pytest.mark.parametrize(
    ("scenario", "words"),
    [
        ("bad_request", "api_error 400: API Error: 400"),
        ("fatal_500", "api_error 500: API Error: 500"),
        ("fatal_529", "api_error 529:"),
        ("no_api_key", "api_error"),
        ("max_turns", "error_max_turns: Reached maximum number of turns (1)"),
    ],
)
def test_errors_read_as_what_went_wrong_and_fail_the_turn(
    wrapped: dict[str, WrappedRun], scenario: str, words: str
) -> None:
    run = wrapped[scenario]
    digest = RunDigest.of(run.records)
    assert digest.status == "failed"
    # The CLI's error, then the wrapper's: the CLI exited with status 1.
    error, exit_status = digest.errors
    assert error.startswith(words)
    assert exit_status.startswith("CommandFailed:")
    (turn,) = run.named("chat")
    assert turn["status"] == "ERROR"
    # The CLI's own error text is not an answer of the model.
    answers = [e for e in run.entries if e["entry_type"] == "assistant_message"]
    assert all(e["detail"]["sdk_entry"]["message"].get("model") != "<synthetic>" for e in answers)


def test_no_api_key_makes_no_request(wrapped: dict[str, WrappedRun]) -> None:
    assert wrapped["no_api_key"].recorded.served == []


@pytest.mark.parametrize("scenario", ["retry_500", "mid_stream_error"])
def test_a_retried_request_is_one_answer(wrapped: dict[str, WrappedRun], scenario: str) -> None:
    run = wrapped[scenario]
    assert len([a for a in run.recorded.served if "usage" in a]) == 1
    assert RunDigest.of(run.records).status == "completed"
    assert [e["entry_type"] for e in run.entries if e["source"] == "main"].count("assistant_message") == 1


def test_a_denied_tool_fails_its_call(wrapped: dict[str, WrappedRun]) -> None:
    run = wrapped["denied_tool"]
    call = run.tool("toolu_denied_1")
    assert call["status"] == "ERROR"
    denied = [e for e in run.entries if e["detail"].get("subtype") == "permission_denied"]
    assert len(denied) == 1


def test_fixtures_are_the_real_clis_output() -> None:
    """The recorded streams say they come from the pinned CLI version."""
    for scenario in CASES:
        meta = json.loads((FIXTURES / f"{scenario}.served.json").read_text())
        assert meta["claude_code"] == claude_code.CLAUDE_CODE_VERSION
        lines = (FIXTURES / f"{scenario}.jsonl").read_text().splitlines()
        inits = [json.loads(line) for line in lines if '"subtype":"init"' in line]
        assert all(init["claude_code_version"] == claude_code.CLAUDE_CODE_VERSION for init in inits)


def test_the_cli_is_the_pinned_version() -> None:
    cli = require_cli()
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, timeout=60, check=True)
    assert version.stdout.startswith(f"{claude_code.CLAUDE_CODE_VERSION} ")
