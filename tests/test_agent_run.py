"""`AgentRun`: the GenAI span tree of one run, built from its canonical entries.

Driven directly with a real SDK tracer provider, in-memory exporters and the full
pipeline (JSONL mirror, OTel log records, span events) as the default pipeline.
Spans end on the writer thread, so every test flushes after `finish()`.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor
from opentelemetry.trace import SpanKind, StatusCode

from transcript_otel import TranscriptPipeline
from transcript_otel.cli.line_recorder import LineRecorder
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings.claude_transcript import ClaudeTranscriptMapper
from transcript_otel.mappings.codex import CodexMapper
from transcript_otel.mappings.lines import select_adapter
from transcript_otel.records.content import ContentPolicy

from conftest import OTelHarness
from helpers import WRITTEN_WITHIN_S, ReprRaises, entry_contexts, run_records

MODEL = "gpt-5"
ROOT = "invoke_agent review"
CHAT = f"chat {MODEL}"
COMMAND = "execute_tool codex:command"


@dataclass
class Driver:
    """One `AgentRun` fed with mapped entries; `finish()` returns the spans by name."""

    otel: OTelHarness
    run: AgentRun
    codex: CodexMapper = field(default_factory=CodexMapper)
    claude: ClaudeTranscriptMapper = field(default_factory=ClaudeTranscriptMapper)

    def feed(self, *entries: MappedEntry | None) -> None:
        for entry in entries:
            assert entry is not None
            self.run.record(entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw)

    def notify(self, method: str, params: dict[str, Any]) -> None:
        """Record the notification's entry, if it makes one (deltas do not)."""
        entry = self.codex.notification(method, params)
        if entry is not None:
            self.feed(entry)

    def line(self, entry: dict[str, Any], source: str = "main") -> None:
        self.feed(*self.claude.line(json.dumps(entry), source))

    def finish(self, error: BaseException | None = None) -> dict[str, list[ReadableSpan]]:
        self.run.finish(error)
        assert self.run.emitter.flush(WRITTEN_WITHIN_S)
        spans = self.otel.finished_spans()
        assert_well_formed(spans)
        by_name: dict[str, list[ReadableSpan]] = {}
        for span in spans:
            by_name.setdefault(span.name, []).append(span)
        return by_name

    def records(self) -> list[dict[str, Any]]:
        return entry_contexts(run_records(self.run.emitter))


Start = Callable[..., Driver]


@pytest.fixture
def start(default_pipeline: TranscriptPipeline, otel: OTelHarness) -> Iterator[Start]:
    runs: list[AgentRun] = []

    def start_run(**options: Any) -> Driver:
        settings: dict[str, Any] = {
            "prompt_name": "review",
            "adapter": "codex_app_server",
            "session_id": "s1",
            "provider": "openai",
            "model": MODEL,
            **options,
        }
        run = AgentRun(otel.tracer_provider.get_tracer("test"), **settings)
        runs.append(run)
        return Driver(otel, run)

    yield start_run
    for run in runs:
        run.finish()  # a test that failed half-way still ends its spans


def assert_well_formed(spans: Sequence[ReadableSpan]) -> None:
    """One trace; every span ended, not before it started, and inside its parent's trace."""
    assert spans
    assert len({span.context.trace_id for span in spans if span.context is not None}) == 1
    for span in spans:
        assert span.start_time is not None
        assert span.end_time is not None
        assert span.end_time >= span.start_time, span.name


def only(spans: dict[str, list[ReadableSpan]], name: str) -> ReadableSpan:
    (span,) = spans[name]
    return span


def turn_span(spans: dict[str, list[ReadableSpan]], name: str = "chat") -> ReadableSpan:
    """The one main turn named `name` (a subagent's model calls have a chat span of their own)."""
    (span,) = [span for span in spans[name] if "transcript.turn" in (span.attributes or {})]
    return span


def span_id(span: ReadableSpan) -> int:
    assert span.context is not None
    return int(span.context.span_id)


def parent_id(span: ReadableSpan) -> int | None:
    return None if span.parent is None else span.parent.span_id


def hex_id(span: ReadableSpan) -> str:
    return format(span_id(span), "016x")


def entry_events(span: ReadableSpan) -> list[Any]:
    return [
        (e.attributes or {})["transcript.entry_type"] for e in span.events if e.name == "transcript.entry"
    ]


def command(item_id: str, **fields: Any) -> dict[str, Any]:
    return {"threadId": "th", "turnId": "tu", "item": {"type": "commandExecution", "id": item_id, **fields}}


def token_usage(
    input_tokens: int, output_tokens: int, cached: int = 0, total: tuple[int, int, int] | None = None
) -> dict[str, Any]:
    """Codex's report of one model call (`last`) and of the thread so far (`total`, by default the call's)."""
    last = {"inputTokens": input_tokens, "outputTokens": output_tokens, "cachedInputTokens": cached}
    so_far = total or (input_tokens, output_tokens, cached)
    running = {"inputTokens": so_far[0], "outputTokens": so_far[1], "cachedInputTokens": so_far[2]}
    return {"threadId": "th", "tokenUsage": {"last": last, "total": running}}


def failed_turn(info: Any) -> dict[str, Any]:
    error = {"message": "boom", "codexErrorInfo": info}
    return {"threadId": "th", "turn": {"id": "tu", "status": "failed", "error": error}}


def claude_assistant(message_id: str, *blocks: dict[str, Any], usage: dict[str, int]) -> dict[str, Any]:
    return {"type": "assistant", "message": {"id": message_id, "content": list(blocks), "usage": usage}}


def task(call_id: str, prompt: str, subagent_type: str) -> dict[str, Any]:
    tool_input = {"prompt": prompt, "subagent_type": subagent_type, "description": "d"}
    return {"type": "tool_use", "id": call_id, "name": "Task", "input": tool_input}


def task_result(call_id: str) -> dict[str, Any]:
    block = {"type": "tool_result", "tool_use_id": call_id, "content": "done"}
    return {"type": "user", "message": {"role": "user", "content": [block]}}


def subagent_prompt(content: Any) -> dict[str, Any]:
    return {"type": "user", "isSidechain": True, "message": {"role": "user", "content": content}}


# -- the root span and the turns --------------------------------------------------------------


def test_root_span(start: Start, runs_dir: Path) -> None:
    driver = start()
    spans = driver.finish()
    root = only(spans, ROOT)
    assert root.kind is SpanKind.INTERNAL
    assert root.parent is None
    assert root.status.status_code is StatusCode.UNSET
    assert dict(root.attributes or {}) == {
        "gen_ai.operation.name": "invoke_agent",
        "gen_ai.agent.name": "review",
        "gen_ai.conversation.id": "s1",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": MODEL,
        "transcript.adapter": "codex_app_server",
        "transcript.run_id": driver.run.emitter.run_id,
    }
    # The run wrote through the default pipeline the test installed.
    jsonl_path = driver.run.emitter.jsonl_path
    assert jsonl_path is not None
    assert Path(jsonl_path).parent == runs_dir


def test_user_messages_open_numbered_chat_turns(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("first"))
    driver.notify("item/completed", {"item": {"type": "agentMessage", "id": "m1", "text": "hi"}})
    driver.feed(driver.codex.user_message("not a new turn while one is open"))
    driver.run.end_turn()
    driver.feed(driver.codex.user_message("second"))
    spans = driver.finish()

    root = only(spans, ROOT)
    first, second = sorted(spans[CHAT], key=lambda span: span.start_time or 0)
    for number, turn in enumerate((first, second), start=1):
        assert turn.kind is SpanKind.CLIENT
        assert parent_id(turn) == span_id(root)
        assert turn.attributes is not None
        assert turn.attributes["transcript.turn"] == number
        assert turn.attributes["gen_ai.operation.name"] == "chat"
        assert turn.attributes["gen_ai.request.model"] == MODEL
    assert (first.end_time or 0) <= (second.start_time or 0)
    assert entry_events(first) == ["user_message", "assistant_message", "user_message"]
    assert entry_events(second) == ["user_message"]
    assert [c["span_id"] for c in driver.records()] == [hex_id(first)] * 3 + [hex_id(second)]


def test_without_turns_from_user_messages_entries_stay_on_the_root(start: Start) -> None:
    driver = start()
    driver.feed(driver.codex.user_message("hello"))
    spans = driver.finish()
    assert set(spans) == {ROOT}
    assert entry_events(only(spans, ROOT)) == ["user_message"]


def test_begin_turn_opens_one_turn_and_the_prompt_joins_it(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.run.begin_turn()
    driver.run.begin_turn()
    driver.feed(driver.codex.user_message("prompt"))
    spans = driver.finish()
    assert entry_events(only(spans, CHAT)) == ["user_message"]


def test_a_model_less_turn_is_named_chat(start: Start) -> None:
    driver = start(model=None)
    driver.run.begin_turn()
    spans = driver.finish()
    assert "gen_ai.request.model" not in (only(spans, "chat").attributes or {})


# -- tools ----------------------------------------------------------------------------------


def test_codex_tool_span_runs_from_tool_use_to_its_result(start: Start, otel: OTelHarness) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("run ls"))
    driver.notify("item/started", command("call_1", command="ls", status="inProgress"))
    driver.notify("item/completed", command("call_1", command="ls", status="completed", exitCode=0))
    driver.notify("item/completed", {"item": {"type": "agentMessage", "id": "m1", "text": "done"}})
    spans = driver.finish()

    turn, tool = only(spans, CHAT), only(spans, COMMAND)
    assert parent_id(tool) == span_id(turn)
    assert tool.status.status_code is StatusCode.UNSET
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.operation.name"] == "execute_tool"
    assert tool.attributes["gen_ai.tool.name"] == "codex:command"
    assert tool.attributes["gen_ai.tool.call.id"] == "call_1"
    assert tool.attributes["gen_ai.tool.type"] == "extension"
    assert "transcript.tool.result_missing" not in tool.attributes
    assert entry_events(tool) == ["tool_use", "tool_result"]
    assert entry_events(turn) == ["user_message", "assistant_message"]

    assert tool.context is not None
    contexts = {c["entry_type"]: c for c in driver.records() if c["entry_type"].startswith("tool_")}
    for context in contexts.values():
        assert context["span_id"] == hex_id(tool)
        assert context["trace_id"] == format(tool.context.trace_id, "032x")
    tool_logs = [
        r.log_record
        for r in otel.finished_logs()
        if (r.log_record.attributes or {}).get("transcript.entry_type") in ("tool_use", "tool_result")
    ]
    assert len(tool_logs) == 2
    assert {(log.trace_id, log.span_id) for log in tool_logs} == {(tool.context.trace_id, span_id(tool))}


@pytest.mark.parametrize(
    "fields",
    [
        pytest.param({"status": "completed", "exitCode": 1}, id="exit-code-1"),
        pytest.param({"status": "failed", "exitCode": 2}, id="failed"),
        pytest.param({"status": "declined"}, id="declined"),
    ],
)
def test_a_failed_command_is_an_error(start: Start, fields: dict[str, Any]) -> None:
    driver = start()
    driver.notify("item/started", command("call_1"))
    driver.notify("item/completed", command("call_1", **fields))
    tool = only(driver.finish(), COMMAND)
    assert tool.status.status_code is StatusCode.ERROR
    assert (tool.attributes or {})["error.type"] == "tool_error"


@pytest.mark.parametrize(("success", "status"), [(False, StatusCode.ERROR), (True, StatusCode.UNSET)])
def test_bridged_tool_span_and_its_outcome(start: Start, success: bool, status: StatusCode) -> None:
    driver = start()
    driver.run.begin_turn()
    params = {"threadId": "th", "turnId": "tu", "callId": "b1", "tool": "search", "arguments": {"q": "x"}}
    driver.feed(driver.codex.tool_call(params))
    driver.feed(driver.codex.tool_result(params, {"success": success, "contentItems": []}))
    spans = driver.finish()
    tool = only(spans, "execute_tool search")
    assert parent_id(tool) == span_id(only(spans, CHAT))
    assert tool.attributes is not None
    assert tool.attributes["gen_ai.tool.type"] == "function"
    assert tool.attributes["gen_ai.tool.call.id"] == "b1"
    assert tool.status.status_code is status
    assert tool.attributes.get("error.type") == (None if success else "tool_error")
    assert entry_events(tool) == ["tool_use", "tool_result"]


def test_tools_without_a_result_end_at_finish_marked_missing(start: Start) -> None:
    driver = start()
    driver.notify("item/started", command("call_1"))
    driver.notify("item/completed", command("call_2", exitCode=0))  # another call's result
    spans = driver.finish()
    tool = only(spans, COMMAND)
    assert (tool.attributes or {})["transcript.tool.result_missing"] is True
    assert entry_events(tool) == ["tool_use"]
    assert entry_events(only(spans, ROOT)) == ["tool_result"]


def test_end_turn_ends_the_tools_still_open_in_it(start: Start) -> None:
    driver = start()
    driver.run.begin_turn()
    driver.notify("item/started", command("call_1"))
    driver.run.end_turn()
    driver.notify("item/completed", command("call_1", exitCode=0))
    spans = driver.finish()
    tool, turn = only(spans, COMMAND), only(spans, CHAT)
    assert (tool.attributes or {})["transcript.tool.result_missing"] is True
    assert (tool.end_time or 0) <= (turn.end_time or 0)


def test_a_tool_use_without_an_id_opens_no_span(start: Start) -> None:
    driver = start()
    driver.run.record("tool_use", detail={"sdk_entry": {"type": "tool_use", "name": "Read"}})
    assert set(driver.finish()) == {ROOT}


# -- errors ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("info", "error_type"),
    [
        ("internalServerError", "internalServerError"),
        ({"httpConnectionFailed": {"httpStatusCode": 502}}, "httpConnectionFailed"),
        (None, "_OTHER"),
    ],
)
def test_a_codex_error_entry_fails_the_turn(start: Start, info: Any, error_type: str) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("go"))
    driver.notify("turn/completed", failed_turn(info))
    driver.run.end_turn(RuntimeError("the adapter raised too"))  # the error entry's type wins
    spans = driver.finish()
    turn = only(spans, CHAT)
    assert turn.status.status_code is StatusCode.ERROR
    assert (turn.attributes or {})["error.type"] == error_type
    assert entry_events(turn) == ["user_message", "error"]
    assert only(spans, ROOT).status.status_code is StatusCode.UNSET


class AdapterFailure(Exception):
    pass


@pytest.mark.parametrize(
    ("error", "error_type"),
    [(ValueError("bad"), "ValueError"), (AdapterFailure(), f"{__name__}.AdapterFailure")],
)
def test_end_turn_with_an_exception_fails_the_turn(
    start: Start, error: BaseException, error_type: str
) -> None:
    driver = start()
    driver.run.begin_turn()
    driver.run.end_turn(error)
    turn = only(driver.finish(), CHAT)
    assert turn.status.status_code is StatusCode.ERROR
    assert (turn.attributes or {})["error.type"] == error_type


def test_finish_with_an_exception_records_it_on_the_root(start: Start) -> None:
    driver = start()
    driver.run.begin_turn()
    error = RuntimeError("evaluate failed")
    spans = driver.finish(error)
    root, turn = only(spans, ROOT), only(spans, CHAT)
    assert root.status.status_code is StatusCode.ERROR
    assert (root.attributes or {})["error.type"] == "RuntimeError"
    (event,) = [e for e in root.events if e.name == "exception"]
    assert event.attributes is not None
    assert event.attributes["exception.type"] == "RuntimeError"
    assert event.attributes["exception.message"] == "evaluate failed"
    assert turn.status.status_code is StatusCode.ERROR  # the open turn failed with it
    driver.run.finish(ValueError("again"))  # a second finish does nothing
    assert len(driver.otel.finished_spans()) == 2


def test_a_secret_in_the_exception_reaches_neither_the_span_nor_the_mirror(
    start: Start, runs_dir: Path
) -> None:
    """A failing request's message often quotes its headers: the `exception` event is
    redacted like the entries, in the backend and in the mirror's span record."""
    secret = "sk-proj-" + "A1b2C3d4E5f6G7h8I9j0" * 2
    driver = start()

    def call_provider() -> None:
        raise PermissionError(f"401 for Authorization: Bearer {secret}")

    try:
        call_provider()
    except PermissionError as error:
        spans = driver.finish(error)
    (event,) = [e for e in only(spans, ROOT).events if e.name == "exception"]
    attributes = {key: str(value) for key, value in (event.attributes or {}).items()}
    assert attributes["exception.type"] == "PermissionError"
    assert attributes["exception.message"].startswith("401 for Authorization: Bearer [REDACTED:")
    assert "call_provider" in attributes["exception.stacktrace"]
    assert "[REDACTED:" in attributes["exception.stacktrace"]
    mirror = Path(driver.run.emitter.jsonl_path or "").read_text()
    assert "[REDACTED:" in mirror
    for value in (*attributes.values(), mirror):
        assert secret not in str(value)


def test_with_metadata_only_the_exception_event_keeps_no_message(
    start: Start, default_pipeline: TranscriptPipeline
) -> None:
    default_pipeline.content_policy = ContentPolicy("metadata")
    driver = start()
    prompt = "summarise the record of Jane Doe"
    try:
        try:
            raise KeyError(prompt)
        except KeyError as cause:
            raise ValueError(f"model refused: {prompt}") from cause
    except ValueError as error:
        spans = driver.finish(error)
    (event,) = [e for e in only(spans, ROOT).events if e.name == "exception"]
    attributes = {key: str(value) for key, value in (event.attributes or {}).items()}
    assert attributes["exception.message"].startswith("[text: ")
    assert "test_agent_run.py" in attributes["exception.stacktrace"]  # the frames stay
    mirror = Path(driver.run.emitter.jsonl_path or "").read_text()
    for value in (*attributes.values(), mirror):
        assert "Jane Doe" not in value


def test_a_failure_is_an_error_entry_naming_what_caused_it(start: Start) -> None:
    driver = start()
    driver.run.begin_turn()
    try:
        try:
            raise ModuleNotFoundError("No module named 'mcp'")
        except ModuleNotFoundError as cause:
            raise RuntimeError("request failed") from cause
    except RuntimeError as error:
        driver.run.record_failure(error)
        driver.run.end_turn(error)
    turn = only(driver.finish(), CHAT)
    (entry,) = driver.records()
    assert entry["entry_type"] == "error"
    assert entry["detail"] == {
        "exception": {
            "type": "RuntimeError",
            "message": "request failed",
            "causes": [{"type": "ModuleNotFoundError", "message": "No module named 'mcp'"}],
        }
    }
    assert entry["span_id"] == format(turn.context.span_id, "016x")
    assert (turn.attributes or {})["error.type"] == "RuntimeError"


def test_a_failure_whose_causes_loop_is_recorded_with_a_bounded_chain(start: Start) -> None:
    driver = start()
    first, second = ValueError("a"), ValueError("b")
    first.__cause__, second.__cause__ = second, first
    driver.run.record_failure(first)
    driver.finish()
    (entry,) = driver.records()
    assert len(entry["detail"]["exception"]["causes"]) == 8


# -- token usage ----------------------------------------------------------------------------


def test_codex_token_usage_follows_the_running_total_into_turn_and_root(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("one"))
    driver.notify("thread/tokenUsage/updated", token_usage(100, 10, cached=40))
    driver.notify("thread/tokenUsage/updated", token_usage(50, 5, total=(150, 15, 40)))
    driver.notify(
        "thread/tokenUsage/updated", token_usage(50, 5, total=(150, 15, 40))
    )  # repeated after a retry
    driver.run.end_turn()
    driver.feed(driver.codex.user_message("two"))
    driver.notify("thread/tokenUsage/updated", token_usage(7, 3, total=(157, 18, 40)))
    spans = driver.finish()

    first, second = sorted(spans[CHAT], key=lambda span: span.start_time or 0)
    root = only(spans, ROOT)

    def usage(span: ReadableSpan, prefix: str = "gen_ai.usage.") -> tuple[Any, ...]:
        attributes = span.attributes or {}
        return tuple(
            attributes.get(f"{prefix}{key}")
            for key in ("input_tokens", "output_tokens", "cache_read.input_tokens")
        )

    assert usage(first) == (150, 15, 40)
    assert usage(second) == (7, 3, 0)
    # The root says the run's totals under its own names: a trace counts each token once.
    assert usage(root, "transcript.usage.") == (157, 18, 40)
    assert usage(root) == (None, None, None)


def test_claude_message_usage_counts_once_per_message_id(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", provider="anthropic")
    driver.run.begin_turn()
    usage_1 = {"input_tokens": 10, "output_tokens": 5, "cache_read_input_tokens": 100}
    # Claude Code writes one line per content block, each repeating its message's usage.
    driver.line(claude_assistant("msg_1", {"type": "thinking", "thinking": "t"}, usage=usage_1))
    driver.line(claude_assistant("msg_1", {"type": "text", "text": "a"}, usage=usage_1))
    driver.line(claude_assistant("msg_2", {"type": "text", "text": "b"}, usage={"input_tokens": 3}))
    driver.line(claude_assistant("msg_3", {"type": "text", "text": "c"}, usage={}))
    spans = driver.finish()
    # The chat span counts them; the root says the same totals under its own names.
    for span, prefix in ((only(spans, CHAT), "gen_ai.usage."), (only(spans, ROOT), "transcript.usage.")):
        assert span.attributes is not None
        assert span.attributes[f"{prefix}input_tokens"] == 113  # msg_1's 10 + 100 cached, msg_2's 3
        assert span.attributes[f"{prefix}output_tokens"] == 5
        assert span.attributes[f"{prefix}cache_read.input_tokens"] == 100


def test_subagent_span_nests_under_its_task_call(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", provider="anthropic", model=None)
    driver.run.begin_turn()
    driver.line(claude_assistant("msg_1", task("task_1", "P", "Explore"), usage={}))
    driver.line(subagent_prompt("P"), "subagent:a1")
    driver.line(claude_assistant("msg_s", {"type": "text", "text": "found"}, usage={}), "subagent:a1")
    driver.line(task_result("task_1"))
    spans = driver.finish()

    tool, subagent = only(spans, "execute_tool Task"), only(spans, "invoke_agent Explore")
    assert parent_id(tool) == span_id(turn_span(spans))
    assert parent_id(subagent) == span_id(tool)
    # Its model calls: a chat span of its own, under it.
    (subagent_chat,) = [span for span in spans["chat"] if parent_id(span) == span_id(subagent)]
    assert (subagent_chat.attributes or {})["gen_ai.operation.name"] == "chat"
    assert subagent.attributes is not None
    assert subagent.attributes["gen_ai.agent.id"] == "a1"
    assert subagent.attributes["gen_ai.agent.name"] == "Explore"
    assert subagent.attributes["gen_ai.operation.name"] == "invoke_agent"
    assert "transcript.tool.result_missing" not in (tool.attributes or {})
    assert (subagent.end_time or 0) <= (tool.end_time or 0)
    assert entry_events(subagent) == ["user_message", "assistant_message"]
    assert entry_events(tool) == ["tool_use", "tool_result"]
    sub_records = [c for c in driver.records() if c["source"] == "subagent:a1"]
    assert [c["span_id"] for c in sub_records] == [hex_id(subagent)] * 2


def test_parallel_subagents_nest_under_the_task_with_their_prompt(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", provider="anthropic")
    driver.run.begin_turn()
    driver.line(
        claude_assistant("msg_1", task("task_1", "P1", "Explore"), task("task_2", "P2", "Plan"), usage={})
    )
    driver.line(subagent_prompt([{"type": "text", "text": "P2"}]), "subagent:a1")
    driver.line(subagent_prompt("P1"), "subagent:a2")
    driver.line(task_result("task_2"))
    driver.line(task_result("task_1"))
    spans = driver.finish()

    tools = {(t.attributes or {})["gen_ai.tool.call.id"]: t for t in spans["execute_tool Task"]}
    agents = {(a.attributes or {})["gen_ai.agent.id"]: a for a in spans["invoke_agent Plan"]}
    agents |= {(a.attributes or {})["gen_ai.agent.id"]: a for a in spans["invoke_agent Explore"]}
    assert parent_id(agents["a1"]) == span_id(tools["task_2"])
    assert parent_id(agents["a2"]) == span_id(tools["task_1"])
    assert (agents["a1"].attributes or {})["gen_ai.agent.name"] == "Plan"
    for agent_id, call_id in (("a1", "task_2"), ("a2", "task_1")):
        assert (agents[agent_id].end_time or 0) <= (tools[call_id].end_time or 0)


def test_subagents_named_by_their_call_id_find_it_even_after_its_result(start: Start) -> None:
    """Claude's stream-json: `subagent:{call id}`. Same prompts, results read first (background
    agents), the second call's subagent speaking first: only the id can tell, and it does."""
    driver = start(adapter="claude_agent_sdk", policy=TurnPolicy(subagents_named_by_call_id=True))
    driver.run.begin_turn()
    driver.line(
        claude_assistant("msg_1", task("task_1", "P", "Explore"), task("task_2", "P", "Plan"), usage={})
    )
    driver.line(task_result("task_1"))
    driver.line(subagent_prompt("P"), "subagent:task_2")
    driver.line(subagent_prompt("P"), "subagent:task_1")
    driver.line(task_result("task_2"))
    driver.line(subagent_prompt("P"), "subagent:unknown_call")  # never guessed: the turn
    spans = driver.finish()

    tools = {(t.attributes or {})["gen_ai.tool.call.id"]: t for t in spans["execute_tool Task"]}
    assert parent_id(only(spans, "invoke_agent Plan")) == span_id(tools["task_2"])
    assert parent_id(only(spans, "invoke_agent Explore")) == span_id(tools["task_1"])
    assert parent_id(only(spans, "invoke_agent subagent")) == span_id(only(spans, CHAT))


def test_subagent_without_a_task_call_nests_under_the_turn(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", model=None)
    driver.run.begin_turn()
    driver.line(subagent_prompt("orphan"), "subagent:zz")
    spans = driver.finish()
    subagent = only(spans, "invoke_agent subagent")
    assert parent_id(subagent) == span_id(turn_span(spans))
    assert (subagent.attributes or {})["gen_ai.agent.name"] == "zz"


def test_subagent_and_task_without_a_result_end_at_finish(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", model=None)
    driver.line(claude_assistant("msg_1", task("task_1", "P", "Explore"), usage={}))
    driver.line(subagent_prompt("P"), "subagent:a1")
    spans = driver.finish()
    tool, subagent = only(spans, "execute_tool Task"), only(spans, "invoke_agent Explore")
    assert parent_id(subagent) == span_id(tool)
    assert (tool.attributes or {})["transcript.tool.result_missing"] is True
    assert (subagent.end_time or 0) <= (tool.end_time or 0) <= (only(spans, ROOT).end_time or 0)


# -- span events and the whole tree -----------------------------------------------------------


def test_activated_run_puts_its_lifecycle_records_on_the_root(start: Start) -> None:
    driver = start()
    with driver.run.activate():
        driver.run.record("system_event", detail={"subtype": "x"})
        spans = driver.finish()
    root = only(spans, ROOT)
    assert [e.name for e in root.events][-2:] == ["transcript.entry", "transcript.stop"]
    assert entry_events(root) == ["system_event"]


def test_full_codex_run_ends_every_span(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    for turn in range(3):
        driver.feed(driver.codex.user_message(f"turn {turn}"))
        driver.notify("turn/started", {"turn": {"id": f"tu{turn}"}})
        for call in range(2):
            driver.notify("item/started", command(f"c{turn}-{call}"))
            driver.notify("item/agentMessage/delta", {"itemId": "m", "delta": "x"})
            driver.notify("item/completed", command(f"c{turn}-{call}", exitCode=call))
        driver.notify("thread/tokenUsage/updated", token_usage(1, 1, total=(turn + 1, turn + 1, 0)))
        driver.notify("item/completed", {"item": {"type": "agentMessage", "id": "m"}})
        driver.run.end_turn()
    spans = driver.finish()
    assert {name: len(group) for name, group in spans.items()} == {ROOT: 1, CHAT: 3, COMMAND: 6}
    assert [t.status.status_code for t in spans[COMMAND]].count(StatusCode.ERROR) == 3
    assert (only(spans, ROOT).attributes or {})["transcript.usage.input_tokens"] == 3
    records = driver.records()
    assert len(records) == 3 * 8
    assert all("span_id" in context for context in records)


# -- the agent's thread makes the root span only ----------------------------------------------


class _StartedOn(SpanProcessor):
    """A span processor noting the thread each span was started on."""

    def __init__(self) -> None:
        self.threads: dict[str, str] = {}

    def on_start(self, span: Any, parent_context: Any = None) -> None:
        self.threads[span.name] = threading.current_thread().name


def test_spans_are_made_on_the_writer_at_the_agents_times(start: Start, otel: OTelHarness) -> None:
    """Only the root span starts on the agent's thread; the others start and end on the writer,
    in queue order, at the times of the entries (and calls) that opened and ended them."""
    started_on = _StartedOn()
    otel.tracer_provider.add_span_processor(started_on)
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    base = time.time_ns() - 60 * 10**9  # a minute ago: no span may take the writer's own time
    prompt, call, result = driver.codex.user_message("run ls"), None, None
    call = driver.codex.notification("item/started", command("call_1", command="ls"))
    result = driver.codex.notification("item/completed", command("call_1", command="ls", exitCode=0))
    for offset, entry in enumerate([prompt, call, result]):
        assert entry is not None
        driver.run.record(entry.entry_type, detail=entry.detail, raw=entry.raw, timestamp_ns=base + offset)
    before_end = time.time_ns()
    driver.run.end_turn()
    spans = driver.finish()

    turn, tool = only(spans, CHAT), only(spans, COMMAND)
    assert (turn.start_time, tool.start_time, tool.end_time) == (base, base + 1, base + 2)
    assert turn.end_time is not None
    assert before_end <= turn.end_time <= time.time_ns()
    assert started_on.threads[ROOT] == threading.current_thread().name
    assert started_on.threads[CHAT] == started_on.threads[COMMAND] == "transcript-otel-writer"
    assert entry_events(tool) == ["tool_use", "tool_result"]
    # The turn's and the root's records come before the run's last, in the order they ended.
    events = [r["event"] for r in run_records(driver.run.emitter)]
    assert events[-4:] == ["transcript.span", "transcript.span", "transcript.span", "transcript.stop"]
    records = run_records(driver.run.emitter)
    spans_in_order = [r["context"]["name"] for r in records if r["event"] == "transcript.span"]
    assert spans_in_order == [COMMAND, CHAT, ROOT]


def test_with_emission_off_spans_are_made_all_the_same(
    start: Start, monkeypatch: pytest.MonkeyPatch, runs_dir: Path
) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_EMISSION", "false")
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("run ls"))
    driver.notify("item/started", command("call_1", command="ls"))
    driver.notify("item/completed", command("call_1", command="ls", exitCode=3))
    spans = driver.finish()
    assert parent_id(only(spans, COMMAND)) == span_id(only(spans, CHAT))
    assert only(spans, COMMAND).status.status_code is StatusCode.ERROR
    assert entry_events(only(spans, COMMAND)) == []
    assert not runs_dir.exists()


# -- hostile input ----------------------------------------------------------------------------


HOSTILE_DETAILS: list[Any] = [
    {1: "a", None: 2, (1, 2): 3},
    {"text": "x" * 5_000_000},
    {"notification": {"item": {"id": "\ud800", "type": [], "exitCode": 10**30}}},
    {"notification": {"callId": 5, "tool": ReprRaises()}, "result": {"success": "no"}},
    {"sdk_entry": {"type": "tool_use", "id": "t\udfff", "name": {"x": 1}, "input": ["not a dict"]}},
    {"sdk_entry": {"message": {"id": [], "usage": {"input_tokens": 2**80}}}},
    {"sdk_entry": {"message": "not a message"}},
    {"notification": {"turn": {"error": {"codexErrorInfo": {1: 2}}}}},
    {"notification": {"tokenUsage": {"last": {"inputTokens": -1, "outputTokens": True}}}},
    {"usage": {"input_tokens": float("nan")}},
    {"notification": ReprRaises()},
    "not a dict",
    ["a", "list"],
    None,
]


def test_record_never_raises(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    entry_types = ["user_message", "assistant_message", "tool_use", "tool_result", "token_usage", "error"]
    for source in ["main", "subagent:x", "subagent:", "\ud800"]:
        for entry_type in [*entry_types, "not-canonical"]:
            for detail in HOSTILE_DETAILS:
                driver.run.record(entry_type, source=source, detail=detail, raw="\ud800")
    not_a_source: Any = 5
    driver.run.record("tool_use", source=not_a_source, detail={"tool_use_id": "t"})
    driver.run.end_turn(ValueError())
    driver.finish()
    records = [r for r in run_records(driver.run.emitter) if r["event"] == "transcript.entry"]
    # 28 entries of 5 MB pass the 64 MiB backlog bound when the writer falls behind (a busy
    # machine): those are dropped and counted, never lost silently.
    dropped = driver.run.emitter.dropped_entries
    assert len(records) + dropped == 4 * 7 * len(HOSTILE_DETAILS) + 1


# -- models, responses, the tools' agents and the subagents' ids (from the entries) ------------

LINE_STREAMS = Path(__file__).parent / "fixtures" / "line_streams"
CLAUDE_MODEL = "claude-opus-5-5"  # the init message's, and every message's, in the fixture
RESPONSE_KEYS = (
    "gen_ai.request.model",
    "gen_ai.response.model",
    "gen_ai.response.id",
    "gen_ai.response.finish_reasons",
    "gen_ai.usage.cost",
    "transcript.usage.cost_usd",
)


def replay(
    start: Start, fmt: str, fixture: str | Path, resumed_totals: Callable[[str], Any] | None = None
) -> dict[str, list[ReadableSpan]]:
    """A recorded output read as `transcript-otel run` reads it (the run it makes), into spans;
    `resumed_totals`: the run resumes the session the output names, which had those totals."""
    driver = start(
        adapter="run",
        session_id=None,
        provider=None,
        model=None,
        policy=TurnPolicy.STREAM_JSON,
    )
    recorder = LineRecorder(driver.run, select_adapter(fmt))
    if resumed_totals is not None:
        recorder.go_on_from(resumed_totals)
    for line in (LINE_STREAMS / fixture).read_bytes().splitlines():
        recorder.feed(line)
    recorder.end(None)
    return driver.finish()


def picked(span: ReadableSpan, keys: Sequence[str] = RESPONSE_KEYS) -> dict[str, Any]:
    attributes = span.attributes or {}
    return {key: attributes[key] for key in keys if key in attributes}


def test_claude_stream_json_chats_get_the_model_and_their_responses(start: Start) -> None:
    spans = replay(start, "claude-stream-json", "claude-stream-json.jsonl")
    turns = [s for s in spans[f"chat {CLAUDE_MODEL}"] if "transcript.turn" in (s.attributes or {})]
    first, second = sorted(turns, key=lambda s: str((s.attributes or {})["transcript.turn"]))
    assert "chat" not in spans  # renamed once the init message told the model
    cost = 0.01878
    assert picked(first) == {
        "gen_ai.request.model": CLAUDE_MODEL,  # the init message's
        "gen_ai.response.model": CLAUDE_MODEL,
        "gen_ai.response.id": "msg_scripted_0002",  # the turn's last message
        "gen_ai.response.finish_reasons": ("stop",),  # the result's `end_turn`
        "gen_ai.usage.cost": pytest.approx(cost),
        "transcript.usage.cost_usd": pytest.approx(cost),
    }
    assert picked(second) == {
        "gen_ai.request.model": CLAUDE_MODEL,
        "gen_ai.response.model": CLAUDE_MODEL,
        "gen_ai.response.id": "msg_scripted_0005",
        "gen_ai.response.finish_reasons": ("stop",),
    }
    # The root gets the request model only; the subagent keeps its own and no response facts.
    assert picked(only(spans, ROOT)) == {
        "gen_ai.request.model": CLAUDE_MODEL,
        "transcript.usage.cost_usd": pytest.approx(cost),
    }
    assert picked(only(spans, "invoke_agent general-purpose")) == {}


def test_a_turns_result_names_its_model_only_where_no_response_did(start: Start) -> None:
    """weakincentives' fallback when the CLI's session file was never read: the answer's text
    alone, then the SDK's `result`, whose `modelUsage` names the one model: the chat span's
    request and response model. Where a message named the model, the result does not change it."""
    driver = start(adapter="claude_agent_sdk", model=None)

    def result(model_usage: dict[str, Any]) -> dict[str, Any]:
        return {"sdk_entry": {"type": "result", "stop_reason": "end_turn", "modelUsage": model_usage}}

    driver.run.begin_turn()
    driver.run.record("assistant_message", detail={"text": "OK."})
    driver.run.record("token_usage", detail=result({"claude-opus-5-5": {"inputTokens": 3}}))
    driver.run.end_turn()
    driver.run.begin_turn()
    answer = {"sdk_entry": {"type": "assistant", "message": {"model": "claude-opus-5-5", "id": "msg_1"}}}
    driver.run.record("assistant_message", detail=answer)
    driver.run.record("token_usage", detail=result({"claude-sonnet-5": {"inputTokens": 3}}))
    driver.run.end_turn()
    spans = driver.finish()
    first, second = sorted(
        spans["chat claude-opus-5-5"], key=lambda s: str((s.attributes or {})["transcript.turn"])
    )
    assert picked(first) == {
        "gen_ai.request.model": "claude-opus-5-5",
        "gen_ai.response.model": "claude-opus-5-5",
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert picked(second)["gen_ai.response.model"] == "claude-opus-5-5"  # the message's


def test_claude_stream_json_tools_name_their_agent_and_the_launcher_its_transfer(start: Start) -> None:
    spans = replay(start, "claude-stream-json", "claude-stream-json.jsonl")
    session = "dc1b2197-f9d0-47e4-9d02-2c424b9929d4"
    keys = (
        "gen_ai.conversation.id",
        "gen_ai.agent.name",
        "gen_ai.agent.id",
        "gen_ai.transfer.mode",
        "gen_ai.transfer.target.name",
        "gen_ai.transfer.target.type",
        "transcript.subagent.call_id",
    )
    assert picked(only(spans, "execute_tool Agent"), keys) == {
        "gen_ai.conversation.id": session,
        "gen_ai.agent.name": "review",  # the root's: the main thread called it
        "gen_ai.transfer.mode": "return_to_caller",
        "gen_ai.transfer.target.name": "general-purpose",
    }
    assert picked(only(spans, "execute_tool Bash"), keys) == {
        "gen_ai.conversation.id": session,
        "gen_ai.agent.name": "general-purpose",  # the subagent called it
    }
    assert picked(only(spans, "invoke_agent general-purpose"), keys) == {
        "gen_ai.conversation.id": session,
        "gen_ai.agent.name": "general-purpose",
        "gen_ai.agent.id": "a4531e32b9a28a619",  # `task_started`'s task id, not the call id
        "transcript.subagent.call_id": "toolu_agent_bg",
    }


def test_codex_json_chat_says_only_what_codex_tells(start: Start) -> None:
    spans = replay(start, "codex-json", "codex-json.jsonl")
    # `codex exec --json` names no model: the chat stays `chat`, its finish reason is derived.
    assert picked(only(spans, "chat")) == {"gen_ai.response.finish_reasons": ("stop",)}
    tools = [span for name, group in spans.items() if name.startswith("execute_tool") for span in group]
    assert len(tools) == 5
    for tool in tools:
        assert picked(tool, ("gen_ai.conversation.id", "gen_ai.agent.name")) == {
            "gen_ai.conversation.id": "01a219cd-3b13-7f91-bd4b-7dd823fa3e95",  # `thread.started`, later
            "gen_ai.agent.name": "review",
        }


RESUMED = Path(__file__).parent / "fixtures" / "sessions" / "codex" / "resumed"
# The thread the resumed run's `thread.started` names.
RESUMED_THREAD = json.loads((RESUMED / "stdout-2.jsonl").read_text().splitlines()[0])["thread_id"]


@pytest.mark.parametrize("fmt", ["codex-json", "auto"])
def test_a_resumed_codex_thread_counts_from_the_totals_of_the_thread_its_output_names(
    start: Start, fmt: str
) -> None:
    """`codex exec resume --last`: only the output's first line names the thread, whose totals
    before the run then set where its count begins (the second run of the recorded thread:
    Codex printed 4000 input tokens, the thread's, for a turn of 2000)."""
    asked: list[str] = []

    def totals_of(thread: str) -> dict[str, int]:
        asked.append(thread)
        return {"input_tokens": 2000, "cached_input_tokens": 0, "output_tokens": 10}

    spans = replay(start, fmt, RESUMED / "stdout-2.jsonl", totals_of)
    assert asked == [RESUMED_THREAD]  # once, the thread `thread.started` named
    attributes = only(spans, "chat").attributes or {}
    assert (attributes["gen_ai.usage.input_tokens"], attributes["gen_ai.usage.output_tokens"]) == (2000, 10)


def test_a_resumed_session_whose_totals_cannot_be_read_is_recorded_with_what_it_printed(
    start: Start, runs_dir: Path
) -> None:
    def unreadable(thread: str) -> None:
        raise PermissionError(f"cannot read the rollout of {thread}")

    spans = replay(start, "codex-json", RESUMED / "stdout-2.jsonl", unreadable)
    assert (only(spans, "chat").attributes or {})["gen_ai.usage.input_tokens"] == 4000
    (run,) = runs_dir.glob("*.jsonl")
    errors = [json.loads(line) for line in run.read_text().splitlines() if '"transcript.error"' in line]
    assert [error["context"]["error"] for error in errors] == [
        "could not read the resumed session's totals: PermissionError: cannot read the rollout of "
        + RESUMED_THREAD
    ]


def test_rtf1_chat_requested_the_model_that_answered(start: Start) -> None:
    spans = replay(start, "rtf1", "rtf1.txt")
    assert picked(only(spans, "chat gpt-4.1-mini")) == {
        "gen_ai.request.model": "gpt-4.1-mini",  # the run has none: the first response's
        "gen_ai.response.model": "gpt-4.1-mini",
        "gen_ai.response.finish_reasons": ("stop",),
    }
    assert "gen_ai.request.model" not in (only(spans, ROOT).attributes or {})


def claude_message(message_id: str, model: str, stop_reason: str | None) -> dict[str, Any]:
    message: dict[str, Any] = {"id": message_id, "model": model, "stop_reason": stop_reason, "usage": {}}
    return {"type": "assistant", "message": {**message, "content": [{"type": "text", "text": "a"}]}}


def test_without_a_turn_report_the_last_message_tells_the_finish_reason(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", provider="anthropic", model=None)
    driver.run.begin_turn()
    driver.line(claude_message("msg_1", "claude-a", "tool_use"))
    driver.line(claude_message("msg_2", "claude-b", "max_tokens"))
    spans = driver.finish()
    assert picked(only(spans, "chat claude-a")) == {
        "gen_ai.request.model": "claude-a",  # what was asked first
        "gen_ai.response.model": "claude-b",  # the last to answer
        "gen_ai.response.id": "msg_2",
        "gen_ai.response.finish_reasons": ("length",),
    }


def test_a_turn_whose_last_output_is_a_tool_call_finishes_with_it(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("go"))
    driver.notify("item/started", command("c1"))
    driver.notify("item/completed", command("c1", exitCode=0))
    driver.run.end_turn()
    spans = driver.finish()
    assert picked(only(spans, CHAT)) == {
        "gen_ai.request.model": MODEL,
        "gen_ai.response.finish_reasons": ("tool_call",),
    }


def test_a_failed_turn_finishes_with_an_error(start: Start) -> None:
    driver = start(policy=TurnPolicy.PROMPT_OPENS_TURN)
    driver.feed(driver.codex.user_message("go"))
    driver.notify("turn/completed", failed_turn("usageLimitExceeded"))
    driver.run.end_turn()
    spans = driver.finish()
    assert (only(spans, CHAT).attributes or {})["gen_ai.response.finish_reasons"] == ("error",)


def test_a_late_session_id_reaches_open_tools_and_subagents(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", provider="anthropic", model=None, session_id=None)
    driver.run.begin_turn()
    driver.line(claude_assistant("msg_1", task("task_1", "P", "Explore"), usage={}))
    driver.line(subagent_prompt("P"), "subagent:a1")
    driver.run.set_session_id("s9")
    driver.line(task_result("task_1"))
    spans = driver.finish()
    for span in (only(spans, "execute_tool Task"), only(spans, "invoke_agent Explore"), *spans["chat"]):
        assert (span.attributes or {})["gen_ai.conversation.id"] == "s9", span.name


def test_a_subagent_named_by_its_call_learns_its_agent_id_from_its_messages(start: Start) -> None:
    driver = start(adapter="claude_agent_sdk", policy=TurnPolicy(subagents_named_by_call_id=True))
    driver.run.begin_turn()
    driver.line(claude_assistant("msg_1", task("task_1", "P", "Explore"), usage={}))
    driver.line(subagent_prompt("P"), "subagent:task_1")  # opens the span: only the call id is known
    message = {"type": "assistant", "parent_tool_use_id": "task_1", "agent_id": "agent_7", "message": {}}
    driver.run.record("assistant_message", source="subagent:task_1", detail={"sdk_entry": message})
    driver.line(task_result("task_1"))
    spans = driver.finish()
    attributes = only(spans, "invoke_agent Explore").attributes or {}
    assert attributes["gen_ai.agent.id"] == "agent_7"
    assert attributes["transcript.subagent.call_id"] == "task_1"
