"""`ClaudeAgentSdkInstrumentor` on the real claude-agent-sdk, driving a scripted `claude` CLI.

The SDK starts `examples/fake_agents/fake_claude_stream.py` (through `cli_path`) and
speaks its real protocol with it; each scenario prints what the real CLI prints.
Spans go to an in-memory exporter of the real OTel SDK, log records to an
in-memory log exporter, entries to the JSONL mirror: every test reads what a user
would read there. The suite runs against the newest and the oldest supported SDK
(one per test environment, see the Makefile).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
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

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
sys.path.insert(0, str(EXAMPLES))
from codex_agent import write_launcher  # noqa: E402  (the demo's launcher of a fake agent)

FAKE_CLI = EXAMPLES / "fake_agents" / "fake_claude_stream.py"
PROMPT_NAME = "sdk-test"
ROOT = f"invoke_agent {PROMPT_NAME}"
CHAT = "chat claude-opus-4-6"  # named after the fake CLI's model, from its init message
SDK_VERSION = tuple(int(part) for part in claude_agent_sdk.__version__.split(".")[:3])
# Before 0.1.5x the SDK raised on message types it did not know; since, it skips them.
SDK_SKIPS_UNKNOWN_TYPES = SDK_VERSION >= (0, 1, 50)
SDK_PASSES_TRACEPARENT = SDK_VERSION >= (0, 1, 81)
# The entries of the `tool` scenario's turn.
TOOL_TURN = [
    "user_message",
    "system_event",
    "assistant_message",
    "tool_use",
    "tool_result",
    "assistant_message",
    "token_usage",
]
# Newer SDKs prefer their bundled CLI to the one on PATH: they are given the fake's path.
HAS_CLI_PATH = "cli_path" in {field.name for field in dataclasses.fields(ClaudeAgentOptions)}


@pytest.fixture
def cli(tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> str:
    """The fake CLI: `cli_path` where the SDK has that option, else the `claude` found on PATH.
    Each start appends the `TRACEPARENT` it inherited to `$FAKE_TRACEPARENT_LOG` (`started_under`)."""
    launcher = write_launcher(tmp_path_factory.mktemp("cli"), "claude", FAKE_CLI)
    monkeypatch.setenv("PATH", f"{Path(launcher).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    monkeypatch.setenv("FAKE_TRACEPARENT_LOG", str(Path(launcher).parent / "traceparents"))
    return launcher


def started_under() -> list[tuple[str, str]]:
    """(trace id, parent span id) of the `TRACEPARENT` each start of the fake CLI inherited."""
    starts = Path(os.environ["FAKE_TRACEPARENT_LOG"]).read_text().splitlines()
    parsed = [traceparent.split("-") for traceparent in starts]
    assert all(len(fields) == 4 and fields[0] == "00" for fields in parsed), starts
    return [(trace_id, parent_id) for _version, trace_id, parent_id, _flags in parsed]


@pytest.fixture
def instrumented(otel: OTelHarness, default_pipeline: TranscriptPipeline) -> Iterator[None]:
    instrumentor = ClaudeAgentSdkInstrumentor()
    instrumentor.instrument(tracer_provider=otel.tracer_provider, prompt_name=PROMPT_NAME)
    yield
    instrumentor.uninstrument()


def options(cli: str, scenario: str, **more: Any) -> Any:
    if HAS_CLI_PATH:
        more["cli_path"] = cli
    return ClaudeAgentOptions(env={"FAKE_SCENARIO": scenario}, **more)


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

    def run(scenario: str, prompt: Any = "Say hello", **more: Any) -> Capture:
        messages = asyncio.run(ask(prompt, options(cli, scenario, **more)))
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
    capture = run_query("plain", model="claude-opus-4-6")

    # The program sees exactly what the SDK gives it.
    assert [type(m).__name__ for m in capture.messages][-2:] == ["AssistantMessage", "ResultMessage"]
    assert capture.types() == ["user_message", "system_event", "assistant_message", "token_usage"]
    prompt, init, answer, usage = capture.entries
    assert prompt["detail"]["sdk_entry"]["message"] == {"role": "user", "content": "Say hello"}
    assert init["detail"]["subtype"] == "init"
    assert answer["detail"]["sdk_entry"]["message"]["content"] == [
        {"type": "text", "text": "Hello from fake claude"}
    ]
    session_id = init["detail"]["sdk_entry"]["session_id"]
    assert {entry["session_id"] for entry in capture.entries} == {session_id}  # the prompt's too
    assert {entry["adapter"] for entry in capture.entries} == {"claude_agent_sdk"}
    assert json.loads(usage["raw"])["total_cost_usd"] == 0.0123

    root, chat = capture.span(ROOT), capture.span(CHAT)
    assert root.parent is None
    assert capture.parent_of(chat) is root
    assert (root.attributes or {})["gen_ai.conversation.id"] == session_id
    assert (root.attributes or {})["gen_ai.provider.name"] == "anthropic"
    # Tokens are counted once, on the chat span (the turn's model calls, and their cost)...
    assert usage_of(chat) == {
        "gen_ai.usage.input_tokens": 108,  # the result's 100 plus 5 cache reads and 3 cache writes
        "gen_ai.usage.output_tokens": 20,
        "gen_ai.usage.cache_read.input_tokens": 5,
        "gen_ai.usage.cache_creation.input_tokens": 3,
        "gen_ai.usage.cache_write.input_tokens": 3,
        "transcript.usage.cost_usd": 0.0123,
        "gen_ai.usage.cost": 0.0123,
    }
    # ...the root says the run's totals under names of ours (the cache write once).
    assert usage_of(root) == {
        "transcript.usage.input_tokens": 108,
        "transcript.usage.output_tokens": 20,
        "transcript.usage.cache_read.input_tokens": 5,
        "transcript.usage.cache_write.input_tokens": 3,
        "transcript.usage.cost_usd": 0.0123,
    }
    # Entries are span events of their span and log records correlated with it.
    assert [event.name for event in chat.events] == ["transcript.entry"] * 4
    assert capture.span_of(prompt) is chat
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
        asyncio.run(ask("Say hello", options(cli, "plain")))
    capture = captured()
    root = capture.span(ROOT)
    assert root.parent is not None
    assert root.parent.span_id == job.get_span_context().span_id


# -- thinking and tools ------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_thinking_blocks_are_thinking_entries(run_query: Run) -> None:
    capture = run_query("thinking", "Greet me")
    assert capture.types() == ["user_message", "system_event", "thinking", "assistant_message", "token_usage"]
    thinking = capture.entries[2]
    assert thinking["detail"]["sdk_entry"] == {
        "type": "thinking",
        "thinking": "Let me think about greetings.",
        "signature": "sig-fake",
    }
    assert thinking["raw"] is not None
    assert json.loads(thinking["raw"])["type"] == "assistant"


@pytest.mark.usefixtures("instrumented")
def test_a_tool_call_is_an_execute_tool_span_holding_its_use_and_result(run_query: Run) -> None:
    capture = run_query("tool", "List the files")
    assert capture.types() == TOOL_TURN
    bash = capture.span("execute_tool Bash")
    assert capture.parent_of(bash) is capture.span(CHAT)
    assert (bash.attributes or {})["gen_ai.tool.call.id"] == "toolu_bash_1"
    assert bash.status.status_code is StatusCode.UNSET
    use, result = capture.entries[3], capture.entries[4]
    assert capture.span_of(use) is bash
    assert capture.span_of(result) is bash
    assert result["detail"]["tool_name"] == "Bash"
    assert result["detail"]["sdk_entry"]["content"] == "a.txt\nb.txt"


# -- subagents ---------------------------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_parallel_subagents_nest_under_the_calls_that_launched_them(run_query: Run) -> None:
    capture = run_query("parallel", "Count files and read the README")

    (chat,) = capture.turns()
    assert capture.parent_of(chat) is capture.span(ROOT)
    task_a, task_b = capture.tool("toolu_task_a"), capture.tool("toolu_task_b")
    assert capture.parent_of(task_a) is chat
    assert capture.parent_of(task_b) is chat
    counter, reader = capture.span("invoke_agent counter"), capture.span("invoke_agent reader")
    assert capture.parent_of(counter) is task_a
    assert capture.parent_of(reader) is task_b
    # The span is named by the launching call; `task_started` tells the real agent (task) id.
    for agent, agent_id, call_id in [(counter, "task-a", "toolu_task_a"), (reader, "task-b", "toolu_task_b")]:
        assert (agent.attributes or {})["gen_ai.agent.id"] == agent_id
        assert (agent.attributes or {})["transcript.subagent.call_id"] == call_id
    # The launchers call a subagent and wait for its answer; the subagents' tools are theirs.
    for launcher, target in [(task_a, "counter"), (task_b, "reader")]:
        assert (launcher.attributes or {})["gen_ai.transfer.mode"] == "return_to_caller"
        assert (launcher.attributes or {})["gen_ai.transfer.target.name"] == target
        assert (launcher.attributes or {})["gen_ai.agent.name"] == PROMPT_NAME
    assert (capture.tool("toolu_a_1").attributes or {})["gen_ai.agent.name"] == "counter"
    assert (capture.tool("toolu_b_1").attributes or {})["gen_ai.agent.name"] == "reader"
    assert (chat.attributes or {})["gen_ai.response.finish_reasons"] == ("stop",)
    assert (chat.attributes or {})["gen_ai.request.model"] == "claude-opus-4-6"
    assert capture.parent_of(capture.tool("toolu_a_1")) is counter
    assert capture.parent_of(capture.tool("toolu_b_1")) is reader
    # Each subagent's model calls are a chat span of its own, under it: its agent's name, its model,
    # no turn number (main turns have one); the chat spans are the turn and the two subagents'.
    chats = [s for s in capture.spans if (s.attributes or {}).get("gen_ai.operation.name") == "chat"]
    assert len(chats) == 3
    for agent, name in [(counter, "counter"), (reader, "reader")]:
        own = capture.chat_of(agent)
        attributes = own.attributes or {}
        assert own.kind is SpanKind.CLIENT
        assert own.name == CHAT  # renamed once a response named the model
        assert attributes["gen_ai.agent.name"] == name
        assert attributes["gen_ai.request.model"] == "claude-opus-4-6"
        assert attributes["gen_ai.provider.name"] == "anthropic"
        assert "transcript.turn" not in attributes
        assert own.end_time is not None
        assert agent.end_time is not None
        assert own.end_time <= agent.end_time
        # Its two messages' tokens (10 in, 5 out each) are counted on its chat span; its own span
        # says the same total under names of ours.
        assert usage_of(own) == {"gen_ai.usage.input_tokens": 20, "gen_ai.usage.output_tokens": 10}
        assert usage_of(agent) == {"transcript.usage.input_tokens": 20, "transcript.usage.output_tokens": 10}
    # The turn counts the result's usage only (the subagents' is theirs); the root the run's total.
    assert usage_of(chat)["gen_ai.usage.input_tokens"] == 108
    assert usage_of(chat)["gen_ai.usage.output_tokens"] == 20
    root_usage = usage_of(capture.span(ROOT))
    assert not [key for key in root_usage if key.startswith("gen_ai.usage")]
    for key in ("input_tokens", "output_tokens"):
        counted = sum(usage_of(span)[f"gen_ai.usage.{key}"] for span in chats)
        assert root_usage[f"transcript.usage.{key}"] == counted
    assert root_usage["transcript.usage.input_tokens"] == 108 + 20 + 20
    assert capture.tool("toolu_a_1").name == "execute_tool Bash"
    assert capture.tool("toolu_b_1").name == "execute_tool Read"

    # Each subagent's entries have their own source, gap-free sequence numbers, and sit in
    # its span or in the spans of its own tool calls.
    for call_id, agent, tool_name in [("toolu_task_a", counter, "Bash"), ("toolu_task_b", reader, "Read")]:
        source = f"subagent:{call_id}"
        assert capture.types(source) == ["user_message", "tool_use", "tool_result", "assistant_message"]
        assert [e["sequence_number"] for e in capture.of(source)] == [1, 2, 3, 4]
        assert capture.of(source)[2]["detail"]["tool_name"] == tool_name
        for entry in capture.of(source):
            span = capture.span_of(entry)
            assert span is agent or capture.parent_of(span) is agent
    main = capture.types()
    assert main.count("tool_use") == 2
    assert main.count("tool_result") == 2
    assert [e["sequence_number"] for e in capture.of("main")] == list(range(1, len(main) + 1))
    # A subagent span ends with the result of its launcher.
    assert counter.end_time is not None
    assert task_a.end_time is not None
    assert counter.end_time <= task_a.end_time


# -- results, errors, odd messages -------------------------------------------------------------


@pytest.mark.usefixtures("instrumented")
def test_an_error_result_is_an_error_entry_an_error_turn_and_a_failed_run(
    cli: str, captured: Callable[[], Capture]
) -> None:
    # The SDK yields the error result, then raises when the CLI exits with status 1.
    received: list[Any] = []

    async def read() -> None:
        async for message in query(prompt="Fail please", options=options(cli, "error")):
            received.append(message)

    with pytest.raises(Exception, match=r"exit code:? 1") as raised:
        asyncio.run(read())
    assert isinstance(received[-1], ResultMessage)
    assert received[-1].is_error
    capture = captured()
    assert_invariants(capture)
    assert capture.types() == [
        "user_message",
        "system_event",
        "assistant_message",
        "token_usage",
        "error",  # the result's
        "error",  # the exception the program got
    ]
    result_error, exception = capture.entries[4], capture.entries[5]
    assert result_error["detail"]["sdk_entry"]["errors"] == ["fake claude failure"]
    assert exception["detail"]["exception"]["type"] == type(raised.value).__name__
    chat = capture.span(CHAT)
    assert chat.status.status_code is StatusCode.ERROR
    assert (chat.attributes or {})["error.type"] == "error_during_execution"
    root = capture.span(ROOT)
    assert root.status.status_code is StatusCode.ERROR
    assert str((root.attributes or {})["error.type"]).endswith(type(raised.value).__name__)


@pytest.mark.usefixtures("instrumented")
def test_an_unknown_message_type_is_kept(cli: str, captured: Callable[[], Capture]) -> None:
    try:
        asyncio.run(ask("Surprise me", options(cli, "unknown")))
        raised: BaseException | None = None
    except Exception as error:
        raised = error
    assert (raised is None) == SDK_SKIPS_UNKNOWN_TYPES
    capture = captured()
    assert_invariants(capture)
    (unknown,) = [entry for entry in capture.entries if entry["entry_type"] == "unknown"]
    assert unknown["detail"]["sdk_entry"]["payload"] == {"x": 1}
    assert json.loads(unknown["raw"])["type"] == "mystery_event"
    if SDK_SKIPS_UNKNOWN_TYPES:
        compaction = [e for e in capture.entries if e["detail"].get("subtype") == "compaction"]
        assert len(compaction) == 1
        assert capture.types()[-2:] == ["assistant_message", "token_usage"]
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
    async def first_answer() -> Any:
        stream: Any = query(prompt="Stream a lot", options=options(cli, "slow"))  # an async generator
        async for message in stream:
            if isinstance(message, AssistantMessage):
                if how == "aclose":
                    await stream.aclose()
                elif how == "timeout":
                    await asyncio.sleep(60)  # cancelled by wait_for
                return message  # "break": the loop shuts the generator down at its end
        raise AssertionError("no answer")

    async def run() -> Any:
        return await asyncio.wait_for(first_answer(), 1 if how == "timeout" else 30)

    if how == "timeout":
        with pytest.raises(TimeoutError):
            asyncio.run(run())
    else:
        message = asyncio.run(run())
        assert message.content[0].text == "chunk 0"
    capture = captured()
    assert_invariants(capture)
    assert {span.name for span in capture.spans} == {ROOT, CHAT}  # both ended
    assert capture.records[-1]["event"] == "transcript.stop"
    assert "error" not in capture.types()
    assert capture.types().count("assistant_message") < 40  # it stopped reading
    assert capture.span(ROOT).status.status_code is StatusCode.UNSET


# -- what the agent was told: its system prompt and tools --------------------------------------

# The tools the fake CLI's `init` message names.
FAKE_CLI_TOOLS = [{"name": "Task"}, {"name": "Bash"}, {"name": "Read"}, {"name": "Write"}]


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
    capture = run_query("tool", "List the files", system_prompt=system_prompt)
    instructions = [call["system_instructions"] for call in described if "system_instructions" in call]
    assert instructions == ([] if told is None else [told])
    tools = [call["tool_definitions"] for call in described if "tool_definitions" in call]
    assert tools == [FAKE_CLI_TOOLS]  # the CLI's `init` message names them
    # The root and the chat span carry them (content is on: the policy is `full`).
    for span in (capture.span(ROOT), capture.span(CHAT)):
        attributes = span.attributes or {}
        if told is None:
            assert "gen_ai.system_instructions" not in attributes
        else:
            parts = json.loads(str(attributes["gen_ai.system_instructions"]))
            assert [part["content"] for part in parts] == [told]
        definitions = json.loads(str(attributes["gen_ai.tool.definitions"]))
        assert [definition["name"] for definition in definitions] == [t["name"] for t in FAKE_CLI_TOOLS]


@pytest.mark.usefixtures("instrumented")
def test_the_tools_are_described_again_only_when_they_change(
    cli: str, captured: Callable[[], Capture], described: list[dict[str, Any]]
) -> None:
    async def conversation() -> None:
        async with ClaudeSDKClient(options=options(cli, "tool")) as client:
            for prompt in ["List the files", "And again"]:  # an `init` message each
                await client.query(prompt)
                _ = [message async for message in client.receive_response()]

    asyncio.run(conversation())
    capture = captured()
    assert len([e for e in capture.entries if e["detail"].get("subtype") == "init"]) == 2
    assert described == [{"tool_definitions": FAKE_CLI_TOOLS}]


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
    async def conversation() -> list[list[Any]]:
        answers: list[list[Any]] = []
        async with ClaudeSDKClient(options=options(cli, "tool")) as client:
            for prompt in ["List the files", "And again"]:
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
    assert len(capture.named("execute_tool Bash")) == 2
    prompts = [entry for entry in capture.entries if entry["entry_type"] == "user_message"]
    assert [p["detail"]["sdk_entry"]["message"]["content"] for p in prompts] == [
        "List the files",
        "And again",
    ]
    assert [capture.span_of(p) for p in prompts] == turns
    # Both turns, 108 each (cache included): counted on the turns, the root says their total.
    assert [usage_of(turn)["gen_ai.usage.input_tokens"] for turn in turns] == [108, 108]
    assert usage_of(root)["transcript.usage.input_tokens"] == 216
    assert not [key for key in usage_of(root) if key.startswith("gen_ai.usage")]
    # The CLI reports the session's running cost: each turn gets its own share.
    assert [usage_of(turn)["transcript.usage.cost_usd"] for turn in turns] == pytest.approx([0.0123, 0.0123])
    assert usage_of(root)["transcript.usage.cost_usd"] == pytest.approx(0.0246)
    assert capture.records[-1]["event"] == "transcript.stop"
    if SDK_PASSES_TRACEPARENT:  # the CLI started at connect(), under the connection's span
        assert started_under() == [(f"{root.context.trace_id:032x}", f"{root.context.span_id:016x}")]


@pytest.mark.usefixtures("instrumented")
def test_a_streamed_prompt_gives_a_turn_per_message(run_query: Run) -> None:
    async def prompts() -> AsyncIterator[dict[str, Any]]:
        for text in ["List the files", "And again"]:
            yield {"type": "user", "message": {"role": "user", "content": text}, "parent_tool_use_id": None}

    capture = run_query("tool", prompts())
    turns = sorted(capture.named(CHAT), key=turn_of)
    assert [turn_of(span) for span in turns] == [1, 2]
    prompts_recorded = [entry for entry in capture.entries if entry["entry_type"] == "user_message"]
    assert [p["detail"]["sdk_entry"]["message"]["content"] for p in prompts_recorded] == [
        "List the files",
        "And again",
    ]
    # Each prompt opens its own turn, though both were sent before the first answer.
    assert [capture.span_of(p) for p in prompts_recorded] == turns
    assert capture.types() == [*TOOL_TURN, "user_message", *TOOL_TURN[1:]]


@pytest.mark.usefixtures("instrumented")
def test_a_client_that_stops_waiting_and_reads_on_keeps_one_turn(
    cli: str, captured: Callable[[], Capture]
) -> None:
    async def conversation() -> list[Any]:
        received: list[Any] = []
        async with ClaudeSDKClient(options=options(cli, "slow")) as client:
            await client.query("Stream a lot")
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(0.5):
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
    assert capture.types().count("assistant_message") == 40


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
        await asyncio.gather(ask("one", options(cli, "tool")), ask("two", options(cli, "thinking")))

    asyncio.run(both())
    capture = captured()
    assert_invariants(capture)
    roots = capture.named(ROOT)
    assert len(roots) == 2
    by_run: dict[str, list[str]] = defaultdict(list)
    for entry in capture.entries:
        by_run[entry["session_id"]].append(entry["entry_type"])
    assert sorted(by_run.values()) == sorted(
        [
            TOOL_TURN,
            ["user_message", "system_event", "thinking", "assistant_message", "token_usage"],
        ]
    )
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
        asyncio.run(ask("quiet", options(cli, "plain")))
    instrumentor.uninstrument()
    # Both names of parse_message are the SDK's own function again.
    parser = sys.modules["claude_agent_sdk._internal.message_parser"]
    assert sys.modules["claude_agent_sdk._internal.client"].parse_message is parser.parse_message
    assert not hasattr(parser.parse_message, "__wrapped__")
    messages = asyncio.run(ask("after", options(cli, "plain")))
    assert isinstance(messages[-1], ResultMessage)
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
        asyncio.run(ask("Say hello", options(cli, "plain")))
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
                FAKE_CLAUDE_CLI=cli,
                PATH=os.environ["PATH"],  # the fixture put the fake `claude` first
            )
            command = [str(instrument), sys.executable, str(program), "parallel", "Count and read"]
            returncode, stdout, stderr = await run_to_completion(command, 60, env=env)
            await tap.wait_for(
                lambda: any(s.name.startswith("invoke_agent claude-agent-sdk") for s in tap.spans)
            )
            await asyncio.sleep(0.2)
            return returncode, stdout, stderr, list(tap.spans), list(tap.logs)

    returncode, stdout, stderr, spans, logs = asyncio.run(run())
    assert returncode == 0, stderr.decode(errors="replace")
    assert json.loads(stdout)[-1] == "ResultMessage"

    by_id = {span.span_id: span for span in spans}
    (root,) = [span for span in spans if span.name == "invoke_agent claude-agent-sdk"]
    counter = next(span for span in spans if span.name == "invoke_agent counter")
    launcher = by_id[counter.parent_span_id]
    assert launcher.name == "execute_tool Task"
    assert by_id[by_id[launcher.parent_span_id].parent_span_id] is root  # Task → chat → root
    bash = next(span for span in spans if span.name == "execute_tool Bash")
    assert bash.parent_span_id == counter.span_id

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
        FAKE_CLAUDE_CLI=cli,
        PATH=os.environ["PATH"],
        # The fake CLI is a Python program that inherits the auto-instrumentation: OpenInference's
        # instrumentor (the `test` group) would import claude_agent_sdk there, and our warning
        # would come from the CLI's process too.
        OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="claude_agent_sdk",
    )
    command = [str(instrument), sys.executable, str(program), "tool", "Read the README"]
    returncode, stdout, stderr = asyncio.run(run_to_completion(command, 60, env=env))
    errors = stderr.decode(errors="replace")
    assert returncode == 0, errors
    assert json.loads(stdout)[-1] == "ResultMessage"

    assert errors.splitlines() == [
        f"transcript-otel: claude-agent-sdk 0.3.0 is newer than the newest version tested ({NEWEST_TESTED}); "
        "instrumenting it anyway (a patch target this version lacks is reported)"
    ]
    records = [record for path in (tmp_path / "runs").glob("*.jsonl") for record in read_records(path)]
    assert check_invariants(records) == []
    entries = [r["context"]["entry_type"] for r in records if r["event"] == "transcript.entry"]
    assert entries == TOOL_TURN
