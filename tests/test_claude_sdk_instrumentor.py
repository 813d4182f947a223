"""`ClaudeAgentSdkInstrumentor` on the real claude-agent-sdk, driving the real Claude Code CLI's
recorded output.

The SDK starts `tests/agents/replay_claude_cli.py` as its CLI (through `cli_path`, or as the
`claude` on PATH), which prints what the real CLI 2.1.332 printed when claude-agent-sdk drove it
against the scripted model (`tests/fixtures/claude_sdk/`, `tests/agents/record_sdk_stdout.py`)
and answers the SDK's control requests with the CLI's recorded responses: the SDK speaks its
real protocol, and every line it reads is one the real CLI printed. Spans go to an in-memory
exporter of the real OTel SDK, log records to an in-memory log exporter, entries to the JSONL
mirror: every test reads what a user would read there, and checks numbers against what the
recording says the CLI reported and the model served. The suite runs against the newest and
the oldest supported SDK (one per test environment, see the Makefile).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import importlib
import inspect
import json
import os
import sys
from collections import defaultdict
from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("claude_agent_sdk")
pytest.importorskip("opentelemetry.sdk")

import claude_agent_sdk
from claude_agent_sdk import (
    AssistantMessage,
    ClaudeAgentOptions,
    ClaudeSDKClient,
    ResultMessage,
    SystemMessage,
    query,
)
from opentelemetry.instrumentation.utils import suppress_instrumentation
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.trace import SpanKind, StatusCode

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor
from transcript_otel.model.invariants import check_invariants

from conftest import OTelHarness
from loopback import subprocess_env
from receivers import TapCollector, run_to_completion

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS.parent / "examples"))
from codex_agent import write_launcher  # noqa: E402  (the demo's launcher of an agent script)

REPLAY = TESTS / "agents" / "replay_claude_cli.py"
RECORDED = TESTS / "fixtures" / "claude_sdk"
PROMPT_NAME = "sdk-test"
ROOT = f"invoke_agent {PROMPT_NAME}"
SDK_VERSION = tuple(int(part) for part in claude_agent_sdk.__version__.split(".")[:3])
# Before 0.1.5x the SDK raised on message types it did not know; since, it skips them.
SDK_SKIPS_UNKNOWN_TYPES = SDK_VERSION >= (0, 1, 50)
SDK_PASSES_TRACEPARENT = SDK_VERSION >= (0, 1, 81)
# Newer SDKs prefer their bundled CLI to the one on PATH: they are given the replay's path.
HAS_CLI_PATH = "cli_path" in {field.name for field in dataclasses.fields(ClaudeAgentOptions)}


def recorded(name: str) -> list[dict[str, Any]]:
    """The lines the real CLI printed in recording `name`."""
    return [json.loads(line) for line in (RECORDED / f"{name}.jsonl").read_text().splitlines()]


def recording_meta(name: str) -> dict[str, Any]:
    meta: dict[str, Any] = json.loads((RECORDED / f"{name}.meta.json").read_text())
    return meta


def prompt_of(name: str) -> str:
    """The prompt the recording's CLI was given (the scripted model answered it)."""
    prompt: str = recording_meta(name)["prompts"][0]
    return prompt


def results_of(name: str) -> list[dict[str, Any]]:
    return [line for line in recorded(name) if line["type"] == "result"]


def init_of(name: str) -> dict[str, Any]:
    return next(line for line in recorded(name) if line.get("subtype") == "init")


# The chat spans are named after the model the CLI's `init` message names.
MODEL = init_of("tools")["model"]
CHAT = f"chat {MODEL}"
# The tools the real CLI's `init` message names.
CLI_TOOLS = [{"name": name} for name in init_of("tools")["tools"]]


def entry_types(name: str) -> list[str]:
    """The entries a turn of recording `name` gives, the prompt first: one per message the SDK
    hands the program (a system message each, consecutive progress frames of one kind folded
    into one; thinking, text and tool calls as the CLI printed them), the result's usage
    (`token_usage`, then `error` for an error result)."""
    types = ["user_message"]
    progress: tuple[Any, Any] | None = None  # the kind of the progress frames just before
    for line in recorded(name):
        kind = line["type"]
        if kind == "system" and line.get("sdk_host_only") and SDK_SKIPS_HOST_ONLY_LINES:
            continue
        frames = (line["subtype"], line.get("task_id")) if line.get("subtype") in PROGRESS else None
        if frames is not None and frames == progress:
            continue
        progress = frames
        if kind == "system":
            types.append("system_event")
        elif kind == "assistant" and line["message"]["model"] == "<synthetic>":
            types.append("system_event")  # the CLI's own words (an API error's), not the model's
        elif kind == "assistant":
            types.extend(BLOCK_ENTRIES[block["type"]] for block in line["message"]["content"])
        elif kind == "user":
            types.extend(
                "tool_result" for block in line["message"]["content"] if block["type"] == "tool_result"
            )
        elif kind == "result":
            types.extend(["token_usage", "error"] if line["is_error"] else ["token_usage"])
    return types


PROGRESS = ("thinking_tokens", "task_progress")
BLOCK_ENTRIES = {"text": "assistant_message", "thinking": "thinking", "tool_use": "tool_use"}


# Newer SDKs hand the program no message for a line the CLI marks `sdk_host_only` (its session
# state, which the SDK reads for itself); older ones hand over every line.
SDK_SKIPS_HOST_ONLY_LINES = "sdk_host_only" in inspect.getsource(
    importlib.import_module("claude_agent_sdk._internal.query")
)


@pytest.fixture
def cli(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """The replay of the real CLI: `cli_path` where the SDK has that option, else the `claude`
    found on PATH. Each start appends the `TRACEPARENT` it inherited to a log (`started_under`)."""
    launcher = write_launcher(tmp_path_factory.mktemp("cli"), "claude", REPLAY)
    monkeypatch.setenv("PATH", f"{Path(launcher).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("CLAUDE_REPLAY_TRACEPARENT_LOG", str(Path(launcher).parent / "traceparents"))
    return launcher


def started_under() -> list[tuple[str, str]]:
    """(trace id, parent span id) of the `TRACEPARENT` each start of the CLI inherited."""
    starts = Path(os.environ["CLAUDE_REPLAY_TRACEPARENT_LOG"]).read_text().splitlines()
    parsed = [traceparent.split("-") for traceparent in starts]
    assert all(len(fields) == 4 and fields[0] == "00" for fields in parsed), starts
    return [(trace_id, parent_id) for _version, trace_id, parent_id, _flags in parsed]


@pytest.fixture
def instrumented(otel: OTelHarness, default_pipeline: TranscriptPipeline) -> Iterator[None]:
    instrumentor = ClaudeAgentSdkInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, prompt_name=PROMPT_NAME)
    yield
    instrumentor.uninstrument()


def options(cli: str, recording: str | Path, pace: float = 0.0, **more: Any) -> Any:
    """The SDK's options that start the replay of `recording` (a name in tests/fixtures/claude_sdk,
    or a path), each line `pace` seconds after the last."""
    if HAS_CLI_PATH:
        more["cli_path"] = cli
    path = recording if isinstance(recording, Path) else RECORDED / f"{recording}.jsonl"
    return ClaudeAgentOptions(env={"CLAUDE_REPLAY": str(path), "CLAUDE_REPLAY_PACE": str(pace)}, **more)


async def ask(prompt: Any, opts: Any) -> list[Any]:
    return [message async for message in query(prompt=prompt, options=opts)]


@dataclass
class Capture:
    """What the run left in each sink: spans by name, log records, the JSONL mirror."""

    spans: list[ReadableSpan]
    logs: list[Any]
    records: list[dict[str, Any]]
    messages: list[Any] = dataclasses.field(default_factory=list)  # what the program received

    def span(self, name: str) -> ReadableSpan:
        (found,) = [span for span in self.spans if span.name == name]
        return found

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def turns(self) -> list[ReadableSpan]:
        """The main agent's chat spans, in turn order (a subagent's own chat span has no turn)."""
        chats = [s for s in self.spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
        return sorted([s for s in chats if "transcript.turn" in (s.attributes or {})], key=turn_of)

    def chat_of(self, agent: ReadableSpan) -> ReadableSpan:
        """A subagent's own chat span: the one chat span among its children."""
        (found,) = [
            s
            for s in self.spans
            if s.parent is not None
            and s.parent.span_id == agent.context.span_id
            and (s.attributes or {}).get("gen_ai.operation.name") == "chat"
        ]
        return found

    def tool(self, call_id: str) -> ReadableSpan:
        (found,) = [s for s in self.spans if (s.attributes or {}).get("gen_ai.tool.call.id") == call_id]
        return found

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.entry"]

    def of(self, source: str) -> list[dict[str, Any]]:
        return [entry for entry in self.entries if entry["source"] == source]

    def types(self, source: str = "main") -> list[str]:
        return [entry["entry_type"] for entry in self.of(source)]

    def parent_of(self, span: ReadableSpan) -> ReadableSpan:
        assert span.parent is not None
        (found,) = [s for s in self.spans if s.context.span_id == span.parent.span_id]
        return found

    def span_of(self, entry: dict[str, Any]) -> ReadableSpan:
        """The span an entry belongs to (its log record and span event are there)."""
        (span,) = [s for s in self.spans if f"{s.context.span_id:016x}" == entry["span_id"]]
        return span


@pytest.fixture
def captured(
    otel: OTelHarness, default_pipeline: TranscriptPipeline, runs_dir: Path
) -> Callable[[], Capture]:
    def capture() -> Capture:
        assert default_pipeline.flush(10.0)
        assert default_pipeline.flush(10.0)  # spans end on the writer, after their entries
        records = [record for path in sorted(runs_dir.glob("*.jsonl")) for record in read_records(path)]
        return Capture(otel.finished_spans(), otel.finished_logs(), records)

    return capture


Run = Callable[..., Capture]


@pytest.fixture
def run_query(cli: str, captured: Callable[[], Capture]) -> Run:
    """`run(scenario, prompt, **options)`: one `query()` to the end; what it left, invariants checked."""

    def run(recording: str, prompt: Any = None, **more: Any) -> Capture:
        said = prompt_of(recording) if prompt is None else prompt
        messages = asyncio.run(ask(said, options(cli, recording, **more)))
        capture = captured()
        capture.messages = messages
        assert_invariants(capture)
        return capture

    return run


def usage_of(span: ReadableSpan) -> dict[str, Any]:
    attributes = span.attributes or {}
    return {
        key: value
        for key, value in attributes.items()
        if key.startswith(("gen_ai.usage", "transcript.usage"))
    }


def turn_of(span: ReadableSpan) -> int:
    turn = (span.attributes or {})["transcript.turn"]
    assert isinstance(turn, int)
    return turn


def assert_invariants(capture: Capture) -> None:
    assert check_invariants(capture.records) == []


# -- query(): the plain answer -----------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_plain_query_is_one_run_with_a_turn(run_query: Run) -> None:
    capture = run_query("plain")

    # The program sees exactly what the SDK gives it.
    assert [type(m).__name__ for m in capture.messages if not isinstance(m, SystemMessage)] == [
        "AssistantMessage",
        "ResultMessage",
    ]
    assert capture.types() == entry_types("plain")
    prompt = capture.entries[0]
    (init,) = [entry for entry in capture.entries if entry["detail"].get("subtype") == "init"]
    (answer,) = [entry for entry in capture.entries if entry["entry_type"] == "assistant_message"]
    (usage,) = [entry for entry in capture.entries if entry["entry_type"] == "token_usage"]
    assert prompt["detail"]["sdk_entry"]["message"] == {"role": "user", "content": prompt_of("plain")}
    assert answer["detail"]["sdk_entry"]["message"]["content"] == [{"type": "text", "text": "First answer."}]
    session_id = init["detail"]["sdk_entry"]["session_id"]
    assert {entry["session_id"] for entry in capture.entries} == {session_id}  # the prompt's too
    assert {entry["adapter"] for entry in capture.entries} == {"claude_agent_sdk"}
    (result,) = results_of("plain")
    assert json.loads(usage["raw"])["total_cost_usd"] == result["total_cost_usd"] == 0.0038

    root, chat = capture.span(ROOT), capture.span(CHAT)
    assert root.parent is None
    assert capture.parent_of(chat) is root
    assert (root.attributes or {})["gen_ai.conversation.id"] == session_id
    assert (root.attributes or {})["gen_ai.provider.name"] == "anthropic"
    # Tokens are counted once, on the chat span (the turn's model calls, and their cost): the
    # result's 900 in and 10 out, what the model served, and its cache counts (none)...
    served = recording_meta("plain")["served"]
    assert [(s["usage"]["input_tokens"], s["usage"]["output_tokens"]) for s in served] == [(900, 10)]
    assert usage_of(chat) == {
        "gen_ai.usage.input_tokens": 900,
        "gen_ai.usage.output_tokens": 10,
        "gen_ai.usage.cache_read.input_tokens": 0,
        "gen_ai.usage.cache_creation.input_tokens": 0,
        "gen_ai.usage.cache_write.input_tokens": 0,
        "transcript.usage.cost_usd": 0.0038,
        "gen_ai.usage.cost": 0.0038,
    }
    # ...the root says the run's totals under names of ours.
    assert usage_of(root) == {
        "transcript.usage.input_tokens": 900,
        "transcript.usage.output_tokens": 10,
        "transcript.usage.cache_read.input_tokens": 0,
        "transcript.usage.cache_write.input_tokens": 0,
        "transcript.usage.cost_usd": 0.0038,
    }
    # Entries are span events of their span and log records correlated with it: the turn's,
    # up to its result, on the chat span; a line after it (the CLI's idle state, which older
    # SDKs hand over) on the run's.
    in_turn = capture.entries.index(usage) + 1
    assert [event.name for event in chat.events] == ["transcript.entry"] * in_turn
    assert {capture.span_of(entry) for entry in capture.entries[:in_turn]} == {chat}
    assert {capture.span_of(entry) for entry in capture.entries[in_turn:]} <= {root}
    # Every record but the spans' (those reach the backend as spans) is also a log record.
    assert len(capture.logs) == len([r for r in capture.records if r["event"] != "transcript.span"])
    assert {log.log_record.trace_id for log in capture.logs} == {root.context.trace_id}


@pytest.mark.skipif(not SDK_PASSES_TRACEPARENT, reason="this SDK version passes no TRACEPARENT to the CLI")
@pytest.mark.usefixtures("instrumented")
def test_the_cli_is_started_under_the_run_span(run_query: Run) -> None:
    capture = run_query("plain")
    root = capture.span(ROOT)
    assert started_under() == [(f"{root.context.trace_id:032x}", f"{root.context.span_id:016x}")]


@pytest.mark.usefixtures("instrumented")
def test_the_run_is_a_child_of_the_programs_span(
    cli: str, captured: Callable[[], Capture], otel: OTelHarness
) -> None:
    with otel.tracer.start_as_current_span("my-job") as job:
        asyncio.run(ask(prompt_of("plain"), options(cli, "plain")))
    capture = captured()
    root = capture.span(ROOT)
    assert root.parent is not None
    assert root.parent.span_id == job.get_span_context().span_id


# -- thinking and tools ------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_thinking_blocks_are_thinking_entries(run_query: Run) -> None:
    capture = run_query("tools")
    assert capture.types() == entry_types("tools")
    (thinking,) = [entry for entry in capture.entries if entry["entry_type"] == "thinking"]
    # The block as the CLI printed it: the model's thinking and its signature.
    assert thinking["detail"]["sdk_entry"] == {
        "type": "thinking",
        "thinking": "The user wants a shell command run. I will use Bash.",
        "signature": "c2lnbmF0dXJl0",
    }
    assert thinking["raw"] is not None
    assert json.loads(thinking["raw"])["type"] == "assistant"


@pytest.mark.usefixtures("instrumented")
def test_a_tool_call_is_an_execute_tool_span_holding_its_use_and_result(run_query: Run) -> None:
    capture = run_query("tools")
    assert capture.types() == entry_types("tools")
    bash = capture.span("execute_tool Bash")
    assert capture.parent_of(bash) is capture.span(CHAT)
    assert (bash.attributes or {})["gen_ai.tool.call.id"] == "toolu_main_1"
    assert bash.status.status_code is StatusCode.UNSET
    (use,) = [entry for entry in capture.entries if entry["entry_type"] == "tool_use"]
    (result,) = [entry for entry in capture.entries if entry["entry_type"] == "tool_result"]
    assert capture.span_of(use) is bash
    assert capture.span_of(result) is bash
    assert result["detail"]["tool_name"] == "Bash"
    assert result["detail"]["sdk_entry"]["content"] == "hello from bash"  # what the command printed


# -- subagents ---------------------------------------------------------------------------------


def served_to(name: str, conversation: str) -> dict[str, int]:
    """What the model served one conversation of recording `name`, summed, its input counted as
    the GenAI conventions count it (cache reads and writes included)."""
    totals = {"input": 0, "output": 0, "cache_read": 0}
    for answer in recording_meta(name)["served"]:
        if answer["conversation"] == conversation and "usage" in answer:
            usage = answer["usage"]
            totals["input"] += sum(
                usage[key]
                for key in ("input_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")
            )
            totals["output"] += usage["output_tokens"]
            totals["cache_read"] += usage["cache_read_input_tokens"]
    return totals


@pytest.mark.usefixtures("instrumented")
def test_parallel_subagents_nest_under_the_calls_that_launched_them(run_query: Run) -> None:
    capture = run_query("parallel_subagents")

    # The CLI ran three turns: the one that launched both subagents in the background, then a
    # notification turn as each finished; each is a chat span under the run.
    turns = capture.turns()
    assert len(turns) == len(results_of("parallel_subagents")) == 3
    root = capture.span(ROOT)
    assert all(capture.parent_of(turn) is root for turn in turns)
    task_a, task_b = capture.tool("toolu_agent_a"), capture.tool("toolu_agent_b")
    assert capture.parent_of(task_a) is turns[0]
    assert capture.parent_of(task_b) is turns[0]
    agents = capture.named("invoke_agent general-purpose")  # both are general-purpose agents
    assert len(agents) == 2
    (counter,) = [agent for agent in agents if capture.parent_of(agent) is task_a]
    (reader,) = [agent for agent in agents if capture.parent_of(agent) is task_b]
    # The span is named by the agent type; `task_started` tells the real agent (task) id.
    started = {
        line["tool_use_id"]: line["task_id"]
        for line in recorded("parallel_subagents")
        if line.get("subtype") == "task_started"
    }
    for agent, call_id in [(counter, "toolu_agent_a"), (reader, "toolu_agent_b")]:
        assert (agent.attributes or {})["gen_ai.agent.id"] == started[call_id]
        assert (agent.attributes or {})["transcript.subagent.call_id"] == call_id
    # The launchers call a subagent and wait for its answer; the subagents' tools are theirs.
    for launcher in (task_a, task_b):
        assert (launcher.attributes or {})["gen_ai.transfer.mode"] == "return_to_caller"
        assert (launcher.attributes or {})["gen_ai.transfer.target.name"] == "general-purpose"
        assert (launcher.attributes or {})["gen_ai.agent.name"] == PROMPT_NAME
    for call_id, agent in [("toolu_sub_count_1", counter), ("toolu_sub_read_1", reader)]:
        tool = capture.tool(call_id)
        assert tool.name == "execute_tool Bash"
        assert capture.parent_of(tool) is agent
        assert (tool.attributes or {})["gen_ai.agent.name"] == "general-purpose"
    assert (turns[0].attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert (turns[0].attributes or {})["gen_ai.request.model"] == MODEL
    # Each subagent's model calls are a chat span of its own, under it: its agent's name, its
    # model, no turn number (main turns have one).
    chats = [s for s in capture.spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 3 + 2
    for agent, conversation in [(counter, "SUBAGENT-COUNTER"), (reader, "SUBAGENT-READER")]:
        own = capture.chat_of(agent)
        attributes = own.attributes or {}
        assert own.kind is SpanKind.CLIENT
        assert own.name == CHAT  # renamed once a response named the model
        assert attributes["gen_ai.agent.name"] == "general-purpose"
        assert attributes["gen_ai.request.model"] == MODEL
        assert attributes["gen_ai.provider.name"] == "anthropic"
        assert "transcript.turn" not in attributes
        assert own.end_time is not None
        assert agent.end_time is not None
        assert own.end_time <= agent.end_time
        # Its two model calls' input (cache reads included) is what the model served it; their
        # output, what the CLI printed as each message began (one token each): the stream tells
        # no more of a subagent's. Its own span says the same under names of ours.
        served = served_to("parallel_subagents", conversation)
        usage = usage_of(own)
        assert usage["gen_ai.usage.input_tokens"] == served["input"]
        assert usage["gen_ai.usage.cache_read.input_tokens"] == served["cache_read"]
        assert usage["gen_ai.usage.output_tokens"] == 2
        assert usage_of(agent)["transcript.usage.input_tokens"] == served["input"]
        assert usage_of(agent)["transcript.usage.output_tokens"] == 2
    assert served_to("parallel_subagents", "SUBAGENT-COUNTER")["input"] == 400 + 100 + 450
    # A turn counts its result's usage only (the subagents' is theirs).
    first_result = results_of("parallel_subagents")[0]
    assert usage_of(turns[0])["gen_ai.usage.input_tokens"] == first_result["usage"]["input_tokens"] == 2500
    assert usage_of(turns[0])["gen_ai.usage.output_tokens"] == first_result["usage"]["output_tokens"] == 100
    # The root says the run's totals: the input the chat spans add up to, which is all the model
    # was served; the output all it served (the session's, as the CLI's last result tells it),
    # more than the chat spans hold of the subagents'.
    root_usage = usage_of(root)
    assert not [key for key in root_usage if key.startswith("gen_ai.usage")]
    counted = sum(usage_of(span)["gen_ai.usage.input_tokens"] for span in chats)
    everything = [
        served_to("parallel_subagents", c)
        for c in ("PARALLEL-SUBAGENTS-SCENARIO", "SUBAGENT-COUNTER", "SUBAGENT-READER")
    ]
    assert (
        root_usage["transcript.usage.input_tokens"] == counted == sum(s["input"] for s in everything) == 7400
    )
    assert root_usage["transcript.usage.output_tokens"] == sum(s["output"] for s in everything) == 210
    assert sum(usage_of(span)["gen_ai.usage.output_tokens"] for span in chats) == 133 + 2 + 2
    assert root_usage["transcript.usage.cost_usd"] == results_of("parallel_subagents")[-1]["total_cost_usd"]

    # Each subagent's entries have their own source, gap-free sequence numbers, and sit in
    # its span or in the spans of its own tool calls.
    for call_id, agent in [("toolu_agent_a", counter), ("toolu_agent_b", reader)]:
        source = f"subagent:{call_id}"
        assert capture.types(source) == ["tool_use", "tool_result", "assistant_message"]
        assert [e["sequence_number"] for e in capture.of(source)] == [1, 2, 3]
        assert capture.of(source)[1]["detail"]["tool_name"] == "Bash"
        for entry in capture.of(source):
            span = capture.span_of(entry)
            assert span is agent or capture.parent_of(span) is agent
    main = capture.types()
    assert main.count("tool_use") == 2
    assert main.count("tool_result") == 2
    assert [e["sequence_number"] for e in capture.of("main")] == list(range(1, len(main) + 1))
    # A subagent span ends with the call that launched it.
    assert counter.end_time is not None
    assert task_a.end_time is not None
    assert counter.end_time <= task_a.end_time


# -- results, errors, odd messages -------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_an_error_result_is_an_error_entry_an_error_turn_and_a_failed_run(
    cli: str, captured: Callable[[], Capture]
) -> None:
    # The API refused the request (400): the CLI printed its error as an error result and
    # exited with status 1; the SDK yields the result, then raises.
    received: list[Any] = []

    async def read() -> None:
        async for message in query(prompt=prompt_of("bad_request"), options=options(cli, "bad_request")):
            received.append(message)

    with pytest.raises(Exception, match=r"exit code:? 1") as raised:
        asyncio.run(read())
    assert recording_meta("bad_request")["exit_code"] == 1
    results = [message for message in received if isinstance(message, ResultMessage)]
    assert [result.is_error for result in results] == [True]
    capture = captured()
    assert_invariants(capture)
    assert capture.types() == [*entry_types("bad_request"), "error"]  # and the exception the program got
    (result,) = results_of("bad_request")
    (result_error, exception) = [entry for entry in capture.entries if entry["entry_type"] == "error"]
    assert (
        result_error["detail"]["sdk_entry"]["result"]
        == result["result"]
        == "API Error: 400 scripted failure 400"
    )
    assert exception["detail"]["exception"]["type"] == type(raised.value).__name__
    chat = capture.span(CHAT)
    assert chat.status.status_code is StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "api_error"
    root = capture.span(ROOT)
    assert root.status.status_code is StatusCode.ERROR
    assert str((root.attributes or {})["error.type"]).endswith(type(raised.value).__name__)


@pytest.mark.usefixtures("instrumented")
def test_an_unknown_message_type_is_kept(cli: str, captured: Callable[[], Capture], tmp_path: Path) -> None:
    # A message of a type no CLI has printed yet (a newer CLI's), in the real CLI's recorded
    # answer, before its result: the one line of this stream the real CLI did not print.
    lines = (RECORDED / "plain.jsonl").read_text().splitlines(keepends=True)
    at = next(number for number, line in enumerate(lines) if json.loads(line)["type"] == "result")
    session_id = init_of("plain")["session_id"]
    mystery = json.dumps({"type": "mystery_event", "payload": {"x": 1}, "session_id": session_id}) + "\n"
    changed = tmp_path / "plain.jsonl"
    changed.write_text("".join([*lines[:at], mystery, *lines[at:]]))
    changed.with_suffix(".meta.json").write_text((RECORDED / "plain.meta.json").read_text())
    try:
        asyncio.run(ask(prompt_of("plain"), options(cli, changed)))
        raised: BaseException | None = None
    except Exception as error:
        raised = error
    assert (raised is None) == SDK_SKIPS_UNKNOWN_TYPES
    capture = captured()
    assert_invariants(capture)
    (unknown,) = [entry for entry in capture.entries if entry["entry_type"] == "unknown"]
    assert unknown["detail"]["sdk_entry"]["payload"] == {"x": 1}
    assert json.loads(unknown["raw"])["type"] == "mystery_event"
    if SDK_SKIPS_UNKNOWN_TYPES:  # the rest of the answer is read on
        assert capture.types()[-2:] == ["unknown", "token_usage"]
    else:  # the SDK's own exception reached the program, and the transcript says so
        assert capture.types()[-1] == "error"
        assert capture.entries[-1]["detail"]["exception"]["type"] == type(raised).__name__


@pytest.mark.skipif(
    SDK_VERSION < (0, 2, 0),
    reason="SDK 0.1.x leaves the CLI's subprocess transport of a stream stopped early to the garbage "
    "collector after its event loop closed: an unraisable error in a later test, with or without us",
)
@pytest.mark.parametrize("how", ["aclose", "break", "timeout"])
@pytest.mark.usefixtures("instrumented")
def test_a_consumer_that_stops_early_ends_every_span_without_an_error(
    how: str, cli: str, captured: Callable[[], Capture]
) -> None:
    # The CLI's lines come slowly (a model that takes its time): the consumer stops at the
    # first answer, before the rest arrives.
    async def first_answer() -> Any:
        slowly = options(cli, "tools", pace=PACE)
        stream: Any = query(prompt=prompt_of("tools"), options=slowly)  # an async generator
        async for message in stream:
            if isinstance(message, AssistantMessage):
                if how == "aclose":
                    await stream.aclose()
                elif how == "timeout":
                    await asyncio.sleep(60)  # cancelled by wait_for
                return message  # "break": the loop shuts the generator down at its end
        raise AssertionError("no answer")

    async def run() -> Any:
        # Time out once the first answer is in, before the result.
        return await asyncio.wait_for(first_answer(), 10 * PACE if how == "timeout" else 30)

    if how == "timeout":
        with pytest.raises(TimeoutError):
            asyncio.run(run())
    else:
        message = asyncio.run(run())
        assert message.content[0].thinking == "The user wants a shell command run. I will use Bash."
    capture = captured()
    assert_invariants(capture)
    assert {span.name for span in capture.spans} == {ROOT, CHAT}  # both ended
    assert capture.records[-1]["event"] == "transcript.stop"
    assert "error" not in capture.types()
    assert "token_usage" not in capture.types()  # it stopped reading before the result
    assert capture.span(ROOT).status.status_code is StatusCode.UNSET


# Seconds between two lines of a slow CLI.
PACE = 0.3


# -- what the agent was told: its system prompt and tools --------------------------------------


@pytest.fixture
def described(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What each `AgentRun.describe_agent()` call of the test was told (the call still runs)."""
    from transcript_otel.instrumentation.span_tree.agent_run import AgentRun

    calls: list[dict[str, Any]] = []
    original = AgentRun.describe_agent

    def spy(self: AgentRun, **description: Any) -> None:
        calls.append(description)
        original(self, **description)

    monkeypatch.setattr(AgentRun, "describe_agent", spy)
    return calls


@pytest.mark.parametrize(
    ("system_prompt", "told"),
    [
        ("You are a terse file lister.", "You are a terse file lister."),
        ({"type": "preset", "preset": "claude_code", "append": "Answer in French."}, "Answer in French."),
        ({"type": "preset", "preset": "claude_code"}, None),  # Claude Code's own: not known here
    ],
    ids=["text", "preset-append", "preset"],
)
@pytest.mark.usefixtures("instrumented")
def test_the_options_system_prompt_and_the_inits_tools_describe_the_agent(
    run_query: Run, described: list[dict[str, Any]], system_prompt: Any, told: str | None
) -> None:
    capture = run_query("tools", system_prompt=system_prompt)
    instructions = [call["system_instructions"] for call in described if "system_instructions" in call]
    assert instructions == ([] if told is None else [told])
    tools = [call["tool_definitions"] for call in described if "tool_definitions" in call]
    assert tools == [CLI_TOOLS]  # the CLI's `init` message names them
    # The root and the chat span carry them (content is on: the policy is `full`).
    for span in (capture.span(ROOT), capture.span(CHAT)):
        attributes = span.attributes or {}
        if told is None:
            assert "gen_ai.system_instructions" not in attributes
        else:
            parts = json.loads(str(attributes["gen_ai.system_instructions"]))
            assert [part["content"] for part in parts] == [told]
        definitions = json.loads(str(attributes["gen_ai.tool.definitions"]))
        assert [definition["name"] for definition in definitions] == [t["name"] for t in CLI_TOOLS]


@pytest.mark.usefixtures("instrumented")
def test_the_tools_are_described_again_only_when_they_change(
    cli: str, captured: Callable[[], Capture], described: list[dict[str, Any]]
) -> None:
    async def conversation() -> None:
        async with ClaudeSDKClient(options=options(cli, "two_prompts")) as client:
            for prompt in recording_meta("two_prompts")["prompts"]:  # an `init` message each
                await client.query(prompt)
                _ = [message async for message in client.receive_response()]

    asyncio.run(conversation())
    capture = captured()
    assert len([e for e in capture.entries if e["detail"].get("subtype") == "init"]) == 2
    assert described == [{"tool_definitions": CLI_TOOLS}]


def test_system_instructions_read_every_form_of_the_option() -> None:
    from transcript_otel.instrumentation.claude_agent_sdk._state import system_instructions

    assert system_instructions("Be brief.") == "Be brief."
    assert system_instructions({"type": "custom", "prompt": "Be brief."}) == "Be brief."
    preset = {"type": "preset", "preset": "claude_code"}
    assert system_instructions({**preset, "append": "And kind."}) == "And kind."
    for unknown in (None, "", preset, {"type": "file", "path": "p.md"}, 3):
        assert system_instructions(unknown) is None


# -- ClaudeSDKClient ---------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_a_client_is_one_run_with_a_turn_per_prompt(cli: str, captured: Callable[[], Capture]) -> None:
    said = recording_meta("two_prompts")["prompts"]

    async def conversation() -> list[list[Any]]:
        answers: list[list[Any]] = []
        async with ClaudeSDKClient(options=options(cli, "two_prompts")) as client:
            for prompt in said:
                await client.query(prompt)
                answers.append([message async for message in client.receive_response()])
        return answers

    first, second = asyncio.run(conversation())
    assert isinstance(first[-1], ResultMessage)
    assert isinstance(second[-1], ResultMessage)
    capture = captured()
    assert_invariants(capture)
    root = capture.span(ROOT)
    turns = sorted(capture.named(CHAT), key=turn_of)
    assert turns == capture.turns()
    assert [turn_of(span) for span in turns] == [1, 2]
    assert all(capture.parent_of(turn) is root for turn in turns)
    prompts = [entry for entry in capture.entries if entry["entry_type"] == "user_message"]
    assert [p["detail"]["sdk_entry"]["message"]["content"] for p in prompts] == said
    assert [capture.span_of(p) for p in prompts] == turns
    # Each turn counts its result's tokens, what the model served it (900 and 1,000 in); the
    # root says their total.
    served = [answer["usage"]["input_tokens"] for answer in recording_meta("two_prompts")["served"]]
    assert served == [result["usage"]["input_tokens"] for result in results_of("two_prompts")] == [900, 1000]
    assert [usage_of(turn)["gen_ai.usage.input_tokens"] for turn in turns] == [900, 1000]
    assert usage_of(root)["transcript.usage.input_tokens"] == 1900
    assert not [key for key in usage_of(root) if key.startswith("gen_ai.usage")]
    # The CLI reports the session's running cost ($0.0038, then $0.00804): each turn gets its
    # own share, the root the last.
    assert [result["total_cost_usd"] for result in results_of("two_prompts")] == [0.0038, 0.00804]
    costs = [usage_of(turn)["transcript.usage.cost_usd"] for turn in turns]
    assert costs == pytest.approx([0.0038, 0.00804 - 0.0038])
    assert usage_of(root)["transcript.usage.cost_usd"] == pytest.approx(0.00804)
    assert capture.records[-1]["event"] == "transcript.stop"
    if SDK_PASSES_TRACEPARENT:  # the CLI started at connect(), under the connection's span
        assert started_under() == [(f"{root.context.trace_id:032x}", f"{root.context.span_id:016x}")]


@pytest.mark.usefixtures("instrumented")
def test_a_streamed_prompt_gives_a_turn_per_message(run_query: Run) -> None:
    said = recording_meta("two_prompts")["prompts"]

    async def prompts() -> AsyncIterator[dict[str, Any]]:
        for text in said:
            yield {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None}

    capture = run_query("two_prompts", prompts())
    turns = sorted(capture.named(CHAT), key=turn_of)
    assert [turn_of(span) for span in turns] == [1, 2]
    prompts_recorded = [entry for entry in capture.entries if entry["entry_type"] == "user_message"]
    assert [p["detail"]["sdk_entry"]["message"]["content"] for p in prompts_recorded] == said
    # Each prompt opens its own turn, though both were sent before the first answer.
    assert [capture.span_of(p) for p in prompts_recorded] == turns
    answers = [entry for entry in capture.entries if entry["entry_type"] == "assistant_message"]
    assert [capture.span_of(a) for a in answers] == turns


@pytest.mark.usefixtures("instrumented")
def test_a_client_that_stops_waiting_and_reads_on_keeps_one_turn(
    cli: str, captured: Callable[[], Capture]
) -> None:
    async def conversation() -> list[Any]:
        received: list[Any] = []
        async with ClaudeSDKClient(options=options(cli, "tools", pace=PACE)) as client:
            await client.query(prompt_of("tools"))
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(2 * PACE):
                    async for message in client.receive_response():
                        received.append(message)
            received.extend([message async for message in client.receive_response()])
        return received

    received = asyncio.run(conversation())
    assert isinstance(received[-1], ResultMessage)
    capture = captured()
    assert_invariants(capture)
    assert "error" not in capture.types()
    (turn,) = capture.named(CHAT)
    assert turn.status.status_code is StatusCode.UNSET
    # All of it up to the result, once (older SDKs hand over the CLI's idle state after it).
    expected = entry_types("tools")
    through_result = expected[: expected.index("token_usage") + 1]
    assert capture.types()[: len(through_result)] == through_result
    assert capture.types()[len(through_result) :] in ([], expected[len(through_result) :])


@pytest.mark.usefixtures("instrumented")
def test_a_client_that_cannot_connect_is_a_failed_run(
    cli: str, captured: Callable[[], Capture], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))  # no `claude` anywhere
    missing = str(tmp_path / "no-such-claude")

    async def connect() -> None:
        client = ClaudeSDKClient(options=options(missing, "plain"))
        await client.connect()

    with pytest.raises(claude_agent_sdk.ClaudeSDKError) as raised:
        asyncio.run(connect())
    capture = captured()
    root = capture.span(ROOT)
    assert root.status.status_code is StatusCode.ERROR
    (error,) = capture.entries
    assert error["entry_type"] == "error"
    assert error["detail"]["exception"]["type"] == type(raised.value).__name__


@pytest.mark.usefixtures("instrumented")
def test_concurrent_queries_are_separate_runs(cli: str, captured: Callable[[], Capture]) -> None:
    async def both() -> None:
        await asyncio.gather(
            ask(prompt_of("tools"), options(cli, "tools")), ask(prompt_of("plain"), options(cli, "plain"))
        )

    asyncio.run(both())
    capture = captured()
    assert_invariants(capture)
    roots = capture.named(ROOT)
    assert len(roots) == 2
    by_run: dict[str, list[str]] = defaultdict(list)
    for entry in capture.entries:
        by_run[entry["session_id"]].append(entry["entry_type"])
    assert sorted(by_run.values()) == sorted([entry_types("tools"), entry_types("plain")])
    tool = capture.span("execute_tool Bash")
    assert tool.context.trace_id in {root.context.trace_id for root in roots}


# -- switching capture off ---------------------------------------------------------------------


def test_uninstrument_and_suppression_capture_nothing(
    cli: str, otel: OTelHarness, default_pipeline: TranscriptPipeline, captured: Callable[[], Capture]
) -> None:
    instrumentor = ClaudeAgentSdkInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, prompt_name=PROMPT_NAME)
    assert "claude_agent_sdk._internal.client:InternalClient.process_query" in instrumentor.applied_patches
    with suppress_instrumentation():
        asyncio.run(ask(prompt_of("plain"), options(cli, "plain")))
    instrumentor.uninstrument()
    # Both names of parse_message are the SDK's own function again.
    parser = sys.modules["claude_agent_sdk._internal.message_parser"]
    assert sys.modules["claude_agent_sdk._internal.client"].parse_message is parser.parse_message
    assert not hasattr(parser.parse_message, "__wrapped__")
    messages = asyncio.run(ask(prompt_of("plain"), options(cli, "plain")))
    assert [type(m).__name__ for m in messages if isinstance(m, ResultMessage)] == ["ResultMessage"]
    capture = captured()
    assert capture.spans == []
    assert capture.records == []


@pytest.mark.usefixtures("instrumented")
def test_a_conversation_already_captured_by_an_outer_claude_run_is_left_to_it(
    cli: str, otel: OTelHarness, captured: Callable[[], Capture]
) -> None:
    # What the weakincentives Claude adapter's instrumentation looks like from here: an
    # AgentRun of adapter `claude_agent_sdk` current around the SDK calls.
    from transcript_otel.instrumentation.span_tree.agent_run import AgentRun

    outer = AgentRun(
        otel.tracer_provider.get_tracer("wink"),
        prompt_name="wink",
        adapter="claude_agent_sdk",
        session_id=None,
    )
    with outer.activate():
        asyncio.run(ask(prompt_of("plain"), options(cli, "plain")))
    outer.finish()
    capture = captured()
    assert [span.name for span in capture.spans] == ["invoke_agent wink"]
    assert capture.entries == []


def test_the_entry_point_loads_the_instrumentor() -> None:
    from importlib.metadata import entry_points

    (entry_point,) = [
        ep
        for ep in entry_points(group="opentelemetry_instrumentor")
        if ep.name == "transcript_claude_agent_sdk"
    ]
    assert entry_point.load() is ClaudeAgentSdkInstrumentor


# -- a program with no code of ours, over OTLP -------------------------------------------------


def test_opentelemetry_instrument_exports_a_program_with_no_code_of_ours(cli: str, tmp_path: Path) -> None:
    """`opentelemetry-instrument python program.py`: our configurator and instrumentor are found
    through their entry points, the run goes over OTLP/HTTP to a real receiver, and the JSONL
    mirror has the same records."""
    program = Path(__file__).resolve().parent / "agents" / "claude_sdk_program.py"
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"

    async def run() -> tuple[int, bytes, bytes, list[Any], list[Any]]:
        async with TapCollector() as tap:
            env = subprocess_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=tap.endpoint,
                OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
                OTEL_SERVICE_NAME="sdk-program",
                TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"),
                CLAUDE_CLI=cli,
                CLAUDE_REPLAY=str(RECORDED / "parallel_subagents.jsonl"),
                PATH=os.environ["PATH"],  # the fixture put the replay's `claude` first
            )
            command = [str(instrument), sys.executable, str(program), prompt_of("parallel_subagents")]
            returncode, stdout, stderr = await run_to_completion(command, 60, env=env)
            await tap.wait_for(
                lambda: any(s.name.startswith("invoke_agent claude-agent-sdk") for s in tap.spans)
            )
            await asyncio.sleep(0.2)
            return returncode, stdout, stderr, list(tap.spans), list(tap.logs)

    returncode, stdout, stderr, spans, logs = asyncio.run(run())
    assert returncode == 0, stderr.decode(errors="replace")
    assert json.loads(stdout).count("ResultMessage") == len(results_of("parallel_subagents"))

    by_id = {span.span_id: span for span in spans}
    (root,) = [span for span in spans if span.name == "invoke_agent claude-agent-sdk"]
    agents = [span for span in spans if span.name == "invoke_agent general-purpose"]
    assert len(agents) == 2
    for agent in agents:
        launcher = by_id[agent.parent_span_id]
        assert launcher.name == "execute_tool Agent"
        assert by_id[by_id[launcher.parent_span_id].parent_span_id] is root  # Agent → chat → root
    bashes = [span for span in spans if span.name == "execute_tool Bash"]
    assert sorted(bash.parent_span_id for bash in bashes) == sorted(agent.span_id for agent in agents)

    records = [record for path in (tmp_path / "runs").glob("*.jsonl") for record in read_records(path)]
    assert check_invariants(records) == []
    assert len(logs) == len([r for r in records if r["event"] != "transcript.span"])
    assert {log.trace_id for log in logs} == {root.trace_id}
    if SDK_PASSES_TRACEPARENT:
        assert started_under() == [(root.trace_id.hex(), root.span_id.hex())]


# -- a newer SDK than the newest tested ---------------------------------------------------------


def test_a_newer_sdk_than_tested_is_captured_with_one_warning(cli: str, tmp_path: Path) -> None:
    """`opentelemetry-instrument` on an SDK that says it is 0.3.0 (a dist-info first on the path,
    in front of the real code): our instrumentor loads, the run reaches the mirror, and one
    WARNING, the only line on stderr, names the installed version and the newest tested one."""
    from transcript_otel.instrumentation.claude_agent_sdk.package import NEWEST_TESTED

    fake = tmp_path / "fake" / "claude_agent_sdk-0.3.0.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: claude-agent-sdk\nVersion: 0.3.0\n")
    # It configures no logging: the warning reaches stderr all the same (Python's last resort).
    program = Path(__file__).resolve().parent / "agents" / "claude_sdk_program.py"
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    env = subprocess_env(
        PYTHONPATH=str(fake.parent),
        OTEL_SERVICE_NAME="sdk-program",
        TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"),
        CLAUDE_CLI=cli,
        CLAUDE_REPLAY=str(RECORDED / "tools.jsonl"),
        PATH=os.environ["PATH"],
        # The replay is a Python program that inherits the auto-instrumentation: OpenInference's
        # instrumentor (the `test` group) would import claude_agent_sdk there, and our warning
        # would come from the CLI's process too.
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="claude_agent_sdk",
    )
    command = [str(instrument), sys.executable, str(program), prompt_of("tools")]
    returncode, stdout, stderr = asyncio.run(run_to_completion(command, 60, env=env))
    errors = stderr.decode(errors="replace")
    assert returncode == 0, errors
    assert "ResultMessage" in json.loads(stdout)

    assert errors.splitlines() == [
        f"transcript-otel: claude-agent-sdk 0.3.0 is newer than the newest version tested ({NEWEST_TESTED}); "
        "instrumenting it anyway (a patch target this version lacks is reported)"
    ]
    records = [record for path in (tmp_path / "runs").glob("*.jsonl") for record in read_records(path)]
    assert check_invariants(records) == []
    entries = [r["context"]["entry_type"] for r in records if r["event"] == "transcript.entry"]
    assert entries == entry_types("tools")
