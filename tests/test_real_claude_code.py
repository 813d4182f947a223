"""The real Claude Code CLI (npm, pinned in the Makefile) against the scripted model.

The model is scripted (`examples/model_servers/`); the agent is the real `claude` binary.
Every scenario of `tests/agents/claude_code.CASES` runs under `transcript-otel run`, and the
main ones through claude-agent-sdk (`query()` and `ClaudeSDKClient`, instrumented): the
tests compare what the transcript and its spans recorded with what the model served and
what the CLI itself reported (its `result` messages and exit status).

Without the CLI (`make agents`) these tests skip, or fail where the Makefile requires
them (`TRANSCRIPT_OTEL_REQUIRE_REAL`, tests/requirements_switch.py).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from transcript_otel import read_records
from transcript_otel.model.invariants import check_invariants
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.text import entry_text

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import claude_code  # noqa: E402
import claude_offline  # noqa: E402
from anthropic_api import RETRY_AFTER_SECONDS  # noqa: E402
from captured_run import CapturedRun  # noqa: E402
from claude_code import CASES, USAGE_KEYS, record, served_usage  # noqa: E402
from instrumented_program import run_instrumented  # noqa: E402

from live_watch import live_watch  # noqa: E402

from requirements_switch import require  # noqa: E402

WRAPPER = (sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", "claude-code", "--")
FIXTURES = TESTS / "fixtures" / "claude_code"
# The conversation of the request the CLI's WebSearch tool makes itself.
WEB_SEARCH_REQUEST = "WEB-SEARCH-QUERY"
DIGEST_NAMES = {
    "input_tokens": "input",
    "output_tokens": "output",
    "cache_read_input_tokens": "cached_input",
    "cache_creation_input_tokens": "cache_write_input",
}


def require_cli() -> Path:
    reason = f"the real Claude Code CLI is not installed (`make agents`, or {claude_code.CLI_VARIABLE})"
    return require(claude_code.cli_path(), reason)


@dataclass
class ClaudeRun(CapturedRun):
    """A Claude Code run; its `result` messages as the transcript kept them."""

    prompt_name: str = "claude-code"
    prompt: str = ""  # the prompt the model server's scenario expects

    @property
    def results(self) -> list[dict[str, Any]]:
        """The CLI's `result` messages of the main thread, as the transcript kept them."""
        return [
            e["detail"]["sdk_entry"]
            for e in self.entries
            if e["entry_type"] == "token_usage" and e["source"] == "main" and "sdk_entry" in e["detail"]
        ]

    def chats(self) -> list[dict[str, Any]]:
        """Every chat span: the main turns' and each subagent's own."""
        return [span for span in self.spans if span["attributes"].get("gen_ai.operation.name") == "chat"]

    def turns(self) -> list[dict[str, Any]]:
        """The main agent's turns, in order: the chat spans with a `transcript.turn` (a subagent's
        chat span has none)."""
        turns = [span for span in self.chats() if "transcript.turn" in span["attributes"]]
        return sorted(turns, key=lambda span: span["attributes"]["transcript.turn"])

    def subagent_chat(self, subagent: dict[str, Any]) -> dict[str, Any]:
        """A subagent's own chat span: the one chat span among its children."""
        (chat,) = [span for span in self.chats() if span["parent_span_id"] == subagent["span_id"]]
        return chat


def span_usage(span: dict[str, Any]) -> dict[str, int]:
    """A span's token counts: a chat span's `gen_ai.usage.*`, an `invoke_agent` span's totals
    (`transcript.usage.*`: tokens are counted once in a trace, on the chat spans)."""
    attributes = span["attributes"]
    chat = attributes.get("gen_ai.operation.name") == "chat"
    prefix = "gen_ai.usage." if chat else "transcript.usage."
    other = "transcript.usage." if chat else "gen_ai.usage."
    assert not [key for key in attributes if key.startswith(other) and key != "transcript.usage.cost_usd"]
    names = {
        "input_tokens": "input_tokens",
        "output_tokens": "output_tokens",
        "cache_read_input_tokens": "cache_read.input_tokens",
        "cache_creation_input_tokens": "cache_write.input_tokens",
    }
    if chat:  # the cache writes go out under both names, v1.41's and the genai repo's
        assert attributes.get("gen_ai.usage.cache_creation.input_tokens") == attributes.get(
            "gen_ai.usage.cache_write.input_tokens"
        )
    return {key: attributes.get(prefix + name, 0) for key, name in names.items()}


def as_recorded(usage: dict[str, Any]) -> dict[str, int]:
    """Anthropic's usage counted as the GenAI conventions count it: its `input_tokens` leaves
    out the cache reads and writes, the recorded input is the whole prompt."""
    counts = {key: usage.get(key) or 0 for key in USAGE_KEYS}
    counts["input_tokens"] += counts["cache_read_input_tokens"] + counts["cache_creation_input_tokens"]
    return counts


@pytest.fixture(scope="module")
def wrapped(tmp_path_factory: pytest.TempPathFactory) -> dict[str, ClaudeRun]:
    """Each scenario once under `transcript-otel run`, run on first use."""
    require_cli()

    class Runs(dict[str, ClaudeRun]):
        def __missing__(self, scenario: str) -> ClaudeRun:
            scratch = tmp_path_factory.mktemp(scenario)
            mirror = scratch / "runs"
            environment = {"TRANSCRIPT_OTEL_JSONL_DIR": str(mirror)}
            recorded = record(scenario, scratch, WRAPPER, environment)
            (path,) = mirror.glob("*.jsonl")
            records = list(read_records(path))
            run = ClaudeRun(
                scenario,
                records,
                recorded.served,
                recorded.stdout,
                recorded.stderr,
                recorded.exit_code,
                prompt=recorded.prompt,
            )
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
    wrapped: dict[str, ClaudeRun], scenario: str
) -> None:
    run = wrapped[scenario]
    assert run.exit_code == expected_exit(scenario)
    assert check_invariants(run.records) == []
    # `claude -p PROMPT`: the prompt, which the CLI never prints, is the run's first entry (from
    # the command line); prompts on stdin are not on it, nor is one past an option `claude`
    # does not know (which word is the prompt cannot be told).
    prompts = [e for e in run.entries if e["entry_type"] == "user_message" and e["source"] == "main"]
    if CASES[scenario].follow_ups or scenario == "unknown_flag":
        assert prompts == []
    else:
        assert run.entries[0]["entry_type"] == "user_message"
        assert run.entries[0]["detail"] == {"text": run.prompt}
        assert run.prompt == claude_code.case_arguments(scenario, CASES[scenario])[-1]
        assert run.span(run.entries[0]["span_id"]) == run.turns()[0]  # in the first turn
    if scenario == "unknown_flag":  # the CLI refuses before printing anything
        assert "unknown option '--no-such-flag'" in run.stderr
        assert [e["entry_type"] for e in run.entries] == ["error"]
        return
    assert run.messages[0]["type"] == "system"
    assert run.messages[0]["subtype"] == "init"
    # One entry or more for every message the CLI printed (progress frames folded), none unknown.
    assert "unknown" not in {e["entry_type"] for e in run.entries}


@pytest.mark.parametrize("scenario", [s for s in CASES if s != "unknown_flag"])
def test_tokens_and_cost_are_what_the_model_served_and_the_cli_charged(
    wrapped: dict[str, ClaudeRun], scenario: str
) -> None:
    run = wrapped[scenario]
    digest = RunDigest.of(run.records)
    served = served_usage(run.served)
    recorded = {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()}
    assert recorded == as_recorded(served)
    # The CLI reports its running total: the run costs the last one, counted once.
    charged = max((r.get("total_cost_usd") or 0.0 for r in run.results), default=0.0)
    assert digest.cost_usd == pytest.approx(charged)
    assert run.root["attributes"].get("transcript.usage.cost_usd", 0.0) == pytest.approx(charged)
    assert span_usage(run.root) == as_recorded(served)
    if scenario == "mid_stream_error":
        # The CLI's `result` counts the input of the attempt whose stream broke too (700 twice),
        # its session totals (`modelUsage`) only what was served: the turn keeps the result's
        # count, the root the session's.
        (turn,) = run.chats()
        assert span_usage(turn)["input_tokens"] == 2 * span_usage(run.root)["input_tokens"] == 1400
    else:
        assert_chat_spans_add_up_to_the_root(run)


def assert_chat_spans_add_up_to_the_root(run: ClaudeRun) -> None:
    """Tokens are counted once, on chat spans (the turns' and each subagent's own): their input
    and cache tokens add up to the run's totals on its root (the session's, as the CLI tells
    them). Output adds up to at most the root's: a subagent's stream-json messages tell the
    output counted as each began, not all that the model served."""
    counted = sum((Counter(span_usage(chat)) for chat in run.chats()), Counter())
    totals = span_usage(run.root)
    for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
        assert counted[key] == totals[key], key
    assert counted["output_tokens"] <= totals["output_tokens"]
    if not [span for span in run.named("invoke_agent") if span is not run.root]:
        assert counted["output_tokens"] == totals["output_tokens"]


@pytest.mark.parametrize("scenario", [s for s in CASES if s != "unknown_flag"])
def test_each_turn_is_a_chat_span_with_its_results_usage(
    wrapped: dict[str, ClaudeRun], scenario: str
) -> None:
    run = wrapped[scenario]
    assert_turns_match_results(run)


def assert_turns_match_results(run: ClaudeRun) -> None:
    turns = run.turns()
    assert len(turns) == len(run.results)
    # The other chat spans are the subagents' own: one under each subagent span, with its name.
    subagents = [span for span in run.named("invoke_agent") if span is not run.root]
    assert sorted(span["span_id"] for span in run.chats() if span not in turns) == sorted(
        run.subagent_chat(subagent)["span_id"] for subagent in subagents
    )
    # A WebSearch call's own request to the API: the result's `usage` leaves it out, the turn
    # counts it (its session totals do).
    search = as_recorded(served_usage(run.served, WEB_SEARCH_REQUEST))
    for turn, result in zip(turns, run.results, strict=True):
        reported = Counter(as_recorded(result["usage"]))
        if any(usage.get("webSearchRequests") for usage in result.get("modelUsage", {}).values()):
            reported.update(search)
        assert {k: v for k, v in span_usage(turn).items() if v} == {
            key: count for key, count in reported.items() if count
        }
        failed = result.get("is_error") is True
        assert (turn["status"] == "ERROR") is failed
        assert turn["parent_span_id"] == run.root["span_id"]


# -- scenario by scenario ------------------------------------------------------------------------


def test_tools_with_thinking(wrapped: dict[str, ClaudeRun]) -> None:
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
        ("synchronous_subagent", {"toolu_agent_sync": "SUBAGENT-COUNTER"}),
        ("parallel_subagents", {"toolu_agent_a": "SUBAGENT-COUNTER", "toolu_agent_b": "SUBAGENT-READER"}),
    ],
)
def test_each_subagent_runs_under_the_call_that_launched_it_with_its_own_usage(
    wrapped: dict[str, ClaudeRun], scenario: str, calls: dict[str, str]
) -> None:
    run = wrapped[scenario]
    for call_id, conversation in calls.items():
        launcher = run.tool(call_id)
        (subagent,) = [
            s
            for s in run.named("invoke_agent")
            if s["attributes"].get("transcript.subagent.call_id") == call_id
        ]
        assert subagent["parent_span_id"] == launcher["span_id"]
        # Named by its launching call; its agent id is the one the CLI's `task_started` tells.
        assert subagent["attributes"]["gen_ai.agent.id"] != call_id
        # The call covers the subagent's real work (it goes on after its "launched" result).
        assert launcher["start_time_unix_nano"] <= subagent["start_time_unix_nano"]
        assert launcher["end_time_unix_nano"] >= subagent["end_time_unix_nano"]
        subagent_entries = [e for e in run.entries if e["source"] == f"subagent:{call_id}"]
        assert subagent_entries
        assert all(e["span_id"] != run.root["span_id"] for e in subagent_entries)
        assert "transcript.tool.result_missing" not in launcher["attributes"]
        # Its model calls are a chat span of its own, under its span: its agent's name, no turn.
        chat = run.subagent_chat(subagent)
        assert chat["kind"] == "CLIENT"
        assert chat["attributes"]["gen_ai.agent.name"] == subagent["attributes"]["gen_ai.agent.name"]
        assert chat["attributes"]["gen_ai.provider.name"] == "anthropic"
        assert chat["name"] == f"chat {chat['attributes']['gen_ai.response.model']}"
        assert "transcript.turn" not in chat["attributes"]
        # Their input and cache tokens are exactly what the model served it, counted on the chat
        # span; the subagent's span says the same totals (`transcript.usage.*`).
        served = as_recorded(served_usage(run.served, conversation))
        usage = span_usage(chat)
        assert span_usage(subagent) == usage
        for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens"):
            assert usage[key] == served[key], key
        # Its Bash call is its own child.
        (bash,) = [s for s in run.named("execute_tool Bash") if s["parent_span_id"] == subagent["span_id"]]
        assert bash["status"] == "UNSET"


def test_a_background_subagents_notification_turn_is_a_turn_of_its_own(
    wrapped: dict[str, ClaudeRun],
) -> None:
    run = wrapped["background_subagent"]
    inits = [m for m in run.messages if m.get("subtype") == "init"]
    assert len(inits) == len(run.results) == 2  # the CLI's own turns
    first, second = run.turns()
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
    wrapped: dict[str, ClaudeRun], scenario: str, words: str
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
    assert turn["status_description"] == words.split(maxsplit=1)[0].rstrip(
        ":"
    )  # error.type, as the text says
    # The CLI's own error text is not an answer of the model.
    answers = [e for e in run.entries if e["entry_type"] == "assistant_message"]
    assert all(e["detail"]["sdk_entry"]["message"].get("model") != "<synthetic>" for e in answers)


def test_no_api_key_makes_no_request(wrapped: dict[str, ClaudeRun]) -> None:
    assert wrapped["no_api_key"].served == []


@pytest.mark.parametrize("scenario", ["retry_500", "rate_limited", "mid_stream_error"])
def test_a_retried_request_is_one_answer(wrapped: dict[str, ClaudeRun], scenario: str) -> None:
    run = wrapped[scenario]
    assert len([a for a in run.served if "usage" in a]) == 1
    assert RunDigest.of(run.records).status == "completed"
    assert [e["entry_type"] for e in run.entries if e["source"] == "main"].count("assistant_message") == 1


def test_a_rate_limit_is_retried_after_the_time_it_names(wrapped: dict[str, ClaudeRun]) -> None:
    """The model refused the first attempt with 429 and a `retry-after`: the CLI said it would
    retry, and the retry was answered."""
    run = wrapped["rate_limited"]
    assert [answer["status"] for answer in run.served] == [429, 200]
    (retry,) = [e for e in run.entries if e["detail"].get("subtype") == "api_retry"]
    assert retry["detail"]["sdk_entry"]["error_status"] == 429
    assert retry["detail"]["sdk_entry"]["retry_delay_ms"] >= 1000 * RETRY_AFTER_SECONDS


def test_a_web_search_is_a_tool_call_whose_result_names_what_the_api_found(
    wrapped: dict[str, ClaudeRun],
) -> None:
    """The model's WebSearch call: the CLI asks the API to search (a request of its own, whose
    answer holds the API's server_tool_use and web_search_tool_result), and hands the model
    what it found as the call's result."""
    run = wrapped["web_search"]
    search = [answer for answer in run.served if answer["conversation"] == WEB_SEARCH_REQUEST]
    assert [answer["usage"]["server_tool_use"] for answer in search] == [{"web_search_requests": 1}]
    call = run.tool("toolu_search_1")
    assert call["name"] == "execute_tool WebSearch"
    assert "https://weather.example/paris" in call["attributes"]["gen_ai.tool.call.result"]
    assert "Paris is sunny today." in call["attributes"]["gen_ai.tool.call.result"]
    # The session's totals, the root's, count the search request too, and so does the turn
    # whose result's session totals grew by it: 1,000 + 600 + 1,400 in, 30 + 25 + 12 out.
    assert span_usage(run.root) == as_recorded(served_usage(run.served))
    (turn,) = run.turns()
    assert span_usage(turn) == span_usage(run.root)
    assert (span_usage(turn)["input_tokens"], span_usage(turn)["output_tokens"]) == (3000, 67)


def test_redacted_thinking_is_thinking_whose_text_is_not_shown(wrapped: dict[str, ClaudeRun]) -> None:
    run = wrapped["redacted_thinking"]
    (thinking,) = [e for e in run.entries if e["entry_type"] == "thinking"]
    assert thinking["detail"]["sdk_entry"]["type"] == "redacted_thinking"
    assert RunDigest.of(run.records).status == "completed"


def test_a_denied_tool_fails_its_call(wrapped: dict[str, ClaudeRun]) -> None:
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


# -- claude-agent-sdk, instrumented, driving the real CLI ---------------------------------------

SDK_PROMPT_NAME = "claude-sdk"


@pytest.fixture
def sdk_run(
    otel: Any, default_pipeline: Any, runs_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, Callable[[Any, str], Coroutine[Any, Any, None]]], ClaudeRun]]:
    """`sdk_run(scenario, drive)`: `drive(options, prompt)` with claude-agent-sdk instrumented."""
    cli = require_cli()
    sdk = pytest.importorskip("claude_agent_sdk")
    from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor

    # SDKs without `cli_path` run the `claude` found on PATH.
    has_cli_path = "cli_path" in {field.name for field in dataclasses.fields(sdk.ClaudeAgentOptions)}
    if not has_cli_path:
        monkeypatch.setenv("PATH", f"{cli.parent}{os.pathsep}{os.environ.get('PATH', '')}")
    instrumentor = ClaudeAgentSdkInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, prompt_name=SDK_PROMPT_NAME)

    def run(scenario: str, drive: Callable[[Any, str], Coroutine[Any, Any, None]]) -> ClaudeRun:
        home, work = tmp_path / "home", tmp_path / "work"
        home.mkdir()
        work.mkdir()
        with claude_offline.model_server(scenario, tmp_path) as model:
            options = sdk.ClaudeAgentOptions(
                **({"cli_path": str(cli)} if has_cli_path else {}),
                env=claude_offline.offline_environment(model, home),
                cwd=str(work),
                permission_mode="bypassPermissions",
            )
            asyncio.run(drive(options, model.prompt))
            served = model.served()
        assert default_pipeline.flush(10.0)
        assert default_pipeline.flush(10.0)  # spans end on the writer, after their entries
        records = [record for path in sorted(runs_dir.glob("*.jsonl")) for record in read_records(path)]
        assert check_invariants(records) == []
        return ClaudeRun(scenario, records, served, prompt_name=SDK_PROMPT_NAME)

    yield run
    instrumentor.uninstrument()


async def query_to_the_end(options: Any, prompt: str) -> None:
    from claude_agent_sdk import query

    async for _ in query(prompt=prompt, options=options):
        pass


def assert_numbers_are_the_clis(run: ClaudeRun) -> None:
    digest = RunDigest.of(run.records)
    served = served_usage(run.served)
    assert {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()} == as_recorded(served)
    assert span_usage(run.root) == as_recorded(served)
    assert_chat_spans_add_up_to_the_root(run)
    charged = max((r.get("total_cost_usd") or 0.0 for r in run.results), default=0.0)
    assert digest.cost_usd == pytest.approx(charged)
    assert_turns_match_results(run)


@pytest.mark.parametrize(
    "scenario", ["tools", "parallel_subagents", "background_subagent", "synchronous_subagent", "retry_500"]
)
def test_query_with_the_real_cli(sdk_run: Any, scenario: str) -> None:
    run = sdk_run(scenario, query_to_the_end)
    assert_numbers_are_the_clis(run)
    agents = run.named("execute_tool Agent")
    if agents:  # each subagent is one call, whether it ran in the background or not
        assert RunDigest.of(run.records).tools["Agent"].calls == len(agents)
    assert next(e["entry_type"] for e in run.entries if e["source"] == "main") == "user_message"
    for subagent in run.named("invoke_agent general-purpose"):
        launcher = run.parent(subagent)
        assert launcher["name"] == "execute_tool Agent"
        assert launcher["end_time_unix_nano"] >= subagent["end_time_unix_nano"]
        assert span_usage(subagent)["input_tokens"] > 0
        assert span_usage(run.subagent_chat(subagent)) == span_usage(subagent)


def test_query_raising_an_error_result_records_it_readably(sdk_run: Any) -> None:
    async def drive(options: Any, prompt: str) -> None:
        with pytest.raises(Exception):  # noqa: B017, PT011 (ResultError, or an older SDK's ProcessError)
            await query_to_the_end(options, prompt)

    run = sdk_run("bad_request", drive)
    digest = RunDigest.of(run.records)
    assert digest.status == "failed"
    assert digest.errors[0].startswith("api_error 400: API Error: 400 scripted failure 400")
    (turn,) = run.turns()
    assert run.chats() == [turn]
    assert turn["status"] == "ERROR"
    assert run.root["status"] == "ERROR"


def test_a_client_prompted_again_while_its_subagent_runs(sdk_run: Any) -> None:
    """The second prompt comes while the first turn's background subagent still works."""
    from claude_agent_sdk import ClaudeSDKClient, ResultMessage

    async def drive(options: Any, prompt: str) -> None:
        async with ClaudeSDKClient(options=options) as client:
            await client.query(prompt)
            async for _ in client.receive_response():
                pass
            await client.query("TWO-PROMPTS second: anything new?")
            results = 0
            async for message in client.receive_messages():
                results += isinstance(message, ResultMessage)
                if results == 2:  # the answer to the second prompt, then the notification turn's
                    break

    run = sdk_run("two_prompts", drive)
    assert_numbers_are_the_clis(run)
    # One span for the subagent, under the call that launched it, its Bash call inside it.
    (subagent,) = run.named("invoke_agent general-purpose")
    assert run.parent(subagent)["attributes"]["gen_ai.tool.call.id"] == "toolu_agent_tp"
    bash = run.tool("toolu_sub_slow_1")
    assert bash["parent_span_id"] == subagent["span_id"]
    assert "transcript.tool.result_missing" not in bash["attributes"]
    (result,) = [
        e for e in run.entries if e["entry_type"] == "tool_result" and e["span_id"] == bash["span_id"]
    ]
    assert result["source"] == "subagent:toolu_agent_tp"
    assert len(run.results) == 3


@pytest.mark.parametrize("fork", [False, True], ids=["resumed", "forked"])
def test_a_query_that_resumes_a_session_records_its_own_tokens_and_cost(sdk_run: Any, fork: bool) -> None:
    """A second `query()` with `resume=<the first's session>` (and `fork_session`): its result
    reports the session's running totals, the first query's included; its run records its own."""
    from claude_agent_sdk import ClaudeAgentOptions, ResultMessage, query

    if fork and "fork_session" not in {field.name for field in dataclasses.fields(ClaudeAgentOptions)}:
        pytest.skip("this SDK version has no fork_session")
    results: list[Any] = []

    async def drive(options: Any, prompt: str) -> None:
        for step, prompt_now in enumerate((prompt, "And now?")):
            if step:
                resume = {"resume": results[0].session_id, **({"fork_session": True} if fork else {})}
                options = dataclasses.replace(options, **resume)
            async for message in query(prompt=prompt_now, options=options):
                if isinstance(message, ResultMessage):
                    results.append(message)

    run = sdk_run("stream_json_input", drive)
    traces = {r["context"]["trace_id"] for r in run.records if "trace_id" in r["context"]}
    assert len(traces) == 2  # a run each
    (resumed,) = {
        e["trace_id"] for e in run.entries if entry_text(e["entry_type"], e["detail"]) == "And now?"
    }
    digest = RunDigest.of([r for r in run.records if r["context"].get("trace_id") == resumed])
    recorded = {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()}
    assert recorded == as_recorded(served_usage(run.served[1:]))
    assert digest.cost_usd == pytest.approx(results[1].total_cost_usd - results[0].total_cost_usd)


def test_opentelemetry_instrument_with_no_code_of_ours(tmp_path: Path) -> None:
    """A claude-agent-sdk program run under `opentelemetry-instrument`, the real CLI below it."""
    cli = require_cli()
    pytest.importorskip("claude_agent_sdk")
    program = TESTS / "agents" / "claude_sdk_program.py"
    done = run_instrumented(
        program,
        "parallel_subagents",
        cli,
        tmp_path,
        cwd=tmp_path,
        timeout_s=120,
        variables={"PATH": f"{cli.parent}{os.pathsep}{os.environ.get('PATH', '')}"},  # SDKs without cli_path
    )
    completed, served = done.completed, done.served
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout.splitlines()[-1])[-1] == "ResultMessage"
    (path,) = done.mirror.glob("*.jsonl")
    records = list(read_records(path))
    assert check_invariants(records) == []
    run = ClaudeRun("parallel_subagents", records, served, prompt_name="claude-agent-sdk")
    assert_numbers_are_the_clis(run)
    assert len(run.named("invoke_agent general-purpose")) == 2


# -- the weakincentives Claude adapters (0.25, 0.27) on the real CLI -----------------------------


def wink_claude_environment(model: Any, tmp_path: Path) -> dict[str, str]:
    """The offline environment of the CLI under weakincentives: the model's and the CLI's
    settings, not HOME (weakincentives makes its own)."""
    environment = claude_offline.offline_environment(model, tmp_path)
    return {k: v for k, v in environment.items() if k.startswith(("ANTHROPIC_", "CLAUDE", "DISABLE", "IS_"))}


@pytest.mark.wink
@pytest.mark.parametrize(
    "version",
    [
        pytest.param(
            "0.25.0",
            marks=pytest.mark.xfail(
                strict=True,
                reason="weakincentives 0.25's transcript collector stats the session file of the CLI's "
                "first hook once, before the real CLI has created it (ENOENT, logged as "
                "transcript.collector.error), and never retries: no lines reach _emit_entry, so no "
                "entries; 0.27 emits its own",
            ),
        ),
        "0.27.0",
    ],
)
def test_weakincentives_claude_adapter_on_the_real_cli(version: str, tmp_path: Path) -> None:
    """`ClaudeAgentSDKAdapter.evaluate()` with the real CLI below claude-agent-sdk: weakincentives
    reads the CLI's own session files; the scripted model gives its default answer."""
    from wink_driver import REAL_CLAUDE_CLI

    from wink_harness import run_driver

    cli = require_cli()
    with claude_offline.model_server("tools", tmp_path) as model:
        run = run_driver(
            version,
            tmp_path / "wink",
            ("--configure", "--adapter", "claude", "--scenarios", "plain"),
            extra_env={**wink_claude_environment(model, tmp_path), REAL_CLAUDE_CLI: str(cli)},
        )
        served = model.served()
    result = run.results["claude-plain"]
    assert result["ok"], (result, run.stderr[-2000:])
    assert result["text"] == "OK."
    assert [answer["conversation"] for answer in served] == [None]  # the default answer, once
    assert "assistant_message" in run.entry_types("claude-plain")
    assert check_invariants(run.mirror["claude-plain"]) == []
    root = run.root_span("claude-plain")
    assert root.status.code != 2  # not ERROR


@pytest.mark.wink
def test_weakincentives_claude_adapter_keeps_the_runs_usage_when_the_session_file_is_never_read(
    tmp_path: Path,
) -> None:
    """0.27 stands in for a session file its collector never read (not flushed in time under
    load, or not written) with the answer's text alone; the SDK's `result` still tells the
    tokens the model served and the cost the CLI charged. Here the CLI cannot write its file:
    its config folder's `projects` is a file."""
    from wink_driver import REAL_CLAUDE_CLI

    from wink_harness import attributes, run_driver

    cli = require_cli()
    config = tmp_path / "config"
    config.mkdir()
    (config / "projects").write_text("not a folder\n")
    launcher = tmp_path / "claude-without-session-file"
    launcher.write_text(f'#!/bin/bash\nexport CLAUDE_CONFIG_DIR="{config}"\nexec "{cli}" "$@"\n')
    launcher.chmod(0o755)
    with claude_offline.model_server("tools", tmp_path) as model:
        run = run_driver(
            "0.27.0",
            tmp_path / "wink",
            ("--configure", "--adapter", "claude", "--scenarios", "plain"),
            extra_env={**wink_claude_environment(model, tmp_path), REAL_CLAUDE_CLI: str(launcher)},
        )
        served = model.served()
    assert run.results["claude-plain"]["ok"], run.stderr[-2000:]
    assert "transcript file not accessible" in run.stderr
    assert run.entry_types("claude-plain") == ["user_message", "assistant_message", "token_usage"]
    _, assistant, usage = run.entries("claude-plain")
    assert assistant["detail"] == {"text": "OK."}  # weakincentives' fallback
    result = usage["detail"]["sdk_entry"]
    assert result["type"] == "result"
    assert result["num_turns"] == 1
    assert usage.get("raw") is None  # the SDK's parse of the line, not the line
    expected = served_usage(served)
    assert {key: result["usage"][key] for key in expected} == expected
    assert usage["detail"]["turn_cost_usd"] == result["total_cost_usd"] > 0
    assert check_invariants(run.mirror["claude-plain"]) == []
    (chat,) = [s for s in run.tree("claude-plain") if s.name.startswith("chat ")]
    found = attributes(chat)
    assert found["gen_ai.usage.input_tokens"] == expected["input_tokens"] > 0
    assert found["gen_ai.usage.output_tokens"] == expected["output_tokens"] > 0
    assert found["gen_ai.usage.cost"] == result["total_cost_usd"]
    # The model: the one the result's `modelUsage` names (the fallback's text names none).
    (model,) = result["modelUsage"]
    assert found["gen_ai.response.model"] == found["gen_ai.request.model"] == model
    assert chat.name == f"chat {model}"


# A working directory whose project folder name Claude Code cuts at 200 characters (and hashes).
DEEP = "/".join(["a-folder-name-that-goes-on-and-on-and-on-and-on"] * 5)


@pytest.mark.parametrize(
    ("how", "folder"),
    [
        (("--resume",), "."),
        (("--resume", "--fork-session"), "."),
        (("--continue",), "."),
        (("--resume",), DEEP),
    ],
    ids=["resumed", "forked", "continued", "resumed-in-a-deep-folder"],
)
def test_a_run_that_resumes_a_session_records_its_own_tokens_and_cost(
    how: tuple[str, ...], folder: str, tmp_path: Path
) -> None:
    """`transcript-otel run -- claude -p --resume <id> [--fork-session] PROMPT` (or `--continue`): the CLI's
    `result` reports the session's running totals, the first run's included (the real CLI
    printed 1900 input tokens and $0.00804 for a run of 1000 and $0.00424); the run records
    its own, counted from the session's last `cost-state` before it started."""
    from captured_run import run_cli, scratch_dirs
    from claude_scenarios import prompt_for

    cli = require_cli()
    home, work = scratch_dirs(tmp_path)
    work = work / folder
    work.mkdir(parents=True, exist_ok=True)
    runs = tmp_path / "runs"
    case = CASES["stream_json_input"]
    with claude_offline.model_server("stream_json_input", tmp_path) as model:
        environment = claude_code.case_environment(case, model, home)
        arguments = claude_code.print_args(*case.arguments)
        first = run_cli([str(cli), *arguments, prompt_for("stream_json_input")], model, environment, work)
        (session_id,) = {line["session_id"] for line in map(json.loads, first.stdout.splitlines())}
        before = len(model.served())
        resume = [how[0], *([session_id] if how[0] == "--resume" else []), *how[1:]]
        command = [*WRAPPER, str(cli), *claude_code.print_args(*case.arguments, *resume), "And now?"]
        second = run_cli(command, model, {**environment, "TRANSCRIPT_OTEL_JSONL_DIR": str(runs)}, work)
        served = model.served()[before:]
    assert second.exit_code == 0, second.stderr
    (first_result,), (second_result,) = (
        [line for line in map(json.loads, run.stdout.splitlines()) if line["type"] == "result"]
        for run in (first, second)
    )
    assert second_result["modelUsage"]["claude-opus-5-5"]["inputTokens"] == 1900  # the session's
    (run,) = runs.glob("*.jsonl")
    digest = RunDigest.of(list(read_records(run)))
    assert {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()} == as_recorded(
        served_usage(served)
    )
    own_cost = second_result["total_cost_usd"] - first_result["total_cost_usd"]
    assert digest.cost_usd == pytest.approx(own_cost)


def _exported(records: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """Each entry's type and subtype, each span's name, in the order they were written."""
    return [
        (
            r["context"].get("entry_type") or r["context"].get("name"),
            r["context"].get("detail", {}).get("subtype"),
        )
        for r in records
        if r["event"] in ("transcript.entry", "transcript.span")
    ]


def test_watch_follows_a_session_a_person_runs_in_the_terminal_ui(tmp_path: Path) -> None:
    """The real terminal UI (`claude PROMPT` on a pseudo-terminal, two prompts) while
    `transcript-otel watch` follows its projects folder: each turn is in the mirror, ended,
    while the UI is still open; the cost the UI logs as it is left follows; the tokens are what
    the model served."""
    from claude_scenarios import prompt_for
    from terminal_ui import CLAUDE_UI, as_after_first_use, run_ui

    from terminal_session import require_script

    cli, _ = require_cli(), require_script()
    home, work, runs = tmp_path / "home", tmp_path / "work", tmp_path / "runs"
    projects = home / ".claude" / "projects"
    for folder in (work, projects):
        folder.mkdir(parents=True)
    as_after_first_use(home, work)
    with live_watch(projects, tmp_path / "watch.json", runs, os.environ) as watch:
        while_open: list[list[tuple[str, str | None]]] = []

        def both_turns(found: list[tuple[str, str | None]]) -> bool:
            return found.count(("system_event", "turn_duration")) == 2

        with claude_offline.model_server("stream_json_input", tmp_path) as model:
            environment = claude_code.case_environment(CASES["tools"], model, home)
            run_ui(
                CLAUDE_UI,
                [str(cli), prompt_for("stream_json_input")],
                environment,
                work,
                projects,
                follow_ups=("And now?",),
                while_open=lambda: while_open.append(watch.wait_for(_exported, both_turns)),
            )
            served = served_usage(model.served())
        (seen,) = while_open
        assert [kind for kind in seen if kind[0].startswith("chat")] == [("chat claude-opus-5-5", None)] * 2
        assert ("token_usage", None) not in seen  # the UI logs its cost only as it is left
        watch.wait_for(_exported, lambda found: ("token_usage", None) in found)
    (run,) = runs.glob("*.jsonl")
    digest = RunDigest.of(list(read_records(run)))
    assert {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()} == as_recorded(served)
    assert digest.cost_usd > 0


def test_a_client_that_stops_reading_while_a_subagent_runs_says_so_and_where_the_rest_is(
    sdk_run: Any, tmp_path: Path
) -> None:
    """A `ClaudeSDKClient` left after its first result while its background subagent still works
    (issue 47 item 7): what the CLI does after that is not read (recent SDKs let the CLI finish,
    its subagent's answer and the notification turn: 2600 of the CLI's 4150 input tokens read),
    and the run says so, naming the call and the session log; imported, that log has the
    session's whole numbers."""
    from claude_agent_sdk import ClaudeSDKClient

    async def drive(options: Any, prompt: str) -> None:
        async with ClaudeSDKClient(options=options) as client:
            await client.query(prompt)
            async for _ in client.receive_response():
                pass

    run = sdk_run("background_subagent", drive)
    whole = as_recorded(served_usage(run.served))
    digest = RunDigest.of(run.records)
    read = {key: digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()}
    assert read["input_tokens"] <= whole["input_tokens"]  # 0.1.0 ends the CLI as it disconnects
    (said,) = [r for r in run.records if r["event"] == "transcript.error"]
    assert said["context"]["background_calls_unread"] == ["toolu_agent_bg"]
    session = run.root["attributes"]["gen_ai.conversation.id"]
    assert said["context"]["error"].startswith(
        "the program stopped reading the CLI while 1 call was still running in the background "
        "(toolu_agent_bg): this run's tokens and cost stop at the last message read; what the "
        f"CLI did after that is in its session log ({session}.jsonl under ~/.claude/projects)"
    )
    (log,) = (tmp_path / "home" / ".claude" / "projects").glob(f"*/{session}.jsonl")
    mirror = tmp_path / "imported"
    imported = subprocess.run(
        [sys.executable, "-m", "transcript_otel", "import", str(log), "--jsonl-dir", str(mirror)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert imported.returncode == 0, imported.stderr
    (path,) = mirror.glob("*.jsonl")
    whole_digest = RunDigest.of(read_records(path))
    imported_tokens = {key: whole_digest.tokens.get(name, 0) for key, name in DIGEST_NAMES.items()}
    if read["input_tokens"] < whole["input_tokens"]:  # the SDK let the CLI finish before it returned
        assert imported_tokens == whole
    else:  # 0.1.0 ends the CLI as it disconnects: what it still wrote came after `served` was read
        assert imported_tokens["input_tokens"] >= whole["input_tokens"]
