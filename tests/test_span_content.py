"""GenAI content on a run's spans: which span says what, under which settings.

Recorded outputs go through `transcript-otel run`'s reader (`LineRecorder`) into an
`AgentRun` on a real SDK tracer and logger provider; the spans are read back as a
backend gets them. What `_genai_content` builds from each adapter's entries is tested
in test_genai_content.py; here: where it lands, when it is left out, and the
operation-details event.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.sdk.trace import ReadableSpan

from transcript_otel import TranscriptPipeline
from transcript_otel.capture import defaults
from transcript_otel.capture.defaults import set_pipeline
from transcript_otel.cli.line_recorder import LineRecorder
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.mappings.lines import select_adapter
from transcript_otel.records.content import ContentPolicy, GenAiContent
from transcript_otel.sinks.jsonl import JsonlMirror
from transcript_otel.sinks.otel_logs import OTelLogSink
from transcript_otel.sinks.span_events import SpanEventSink

from conftest import OTelHarness

LINE_STREAMS = Path(__file__).parent / "fixtures" / "line_streams"
CONTENT_KEYS = (
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.definitions",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "input.value",
    "output.value",
)
DETAILS_EVENT = "gen_ai.client.inference.operation.details"

Replay = Callable[..., list[ReadableSpan]]


@pytest.fixture
def replay(
    make_pipeline: Callable[..., TranscriptPipeline],
    otel: OTelHarness,
    runs_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Iterator[Replay]:
    """`replay(fixture, fmt, policy=..., genai=..., before=...)`: the recorded output read as
    `run` reads it, under those settings; the run's finished spans."""
    runs: list[AgentRun] = []
    monkeypatch.setattr(defaults, "_pipeline", defaults._pipeline)  # undone by monkeypatch

    def run(
        fixture: str | Path,
        fmt: str,
        *,
        policy: ContentPolicy | None = None,
        genai: GenAiContent | None = None,
        before: Callable[[AgentRun], None] | None = None,
    ) -> list[ReadableSpan]:
        pipeline = make_pipeline(
            [JsonlMirror(runs_dir), OTelLogSink(otel.logger_provider), SpanEventSink()],
            content_policy=policy,
            genai_content=genai,
        )
        set_pipeline(pipeline)
        agent_run = AgentRun(
            otel.tracer_provider.get_tracer("test"),
            prompt_name="replayed",
            adapter="run",
            session_id=None,
            policy=TurnPolicy.STREAM_JSON,
        )
        runs.append(agent_run)
        if before is not None:
            before(agent_run)
        recorder = LineRecorder(agent_run, select_adapter(fmt))
        for line in (LINE_STREAMS / fixture).read_bytes().splitlines():  # a Path stays itself
            recorder.feed(line)
        recorder.end(None)
        agent_run.finish()
        assert agent_run.emitter.flush()
        return list(otel.finished_spans())

    yield run
    for agent_run in runs:
        agent_run.finish()


def recorded_lines(fixture: str) -> list[str]:
    """The JSON lines of a recorded output (the fixtures also hold lines the CLI never prints)."""
    return [line for line in (LINE_STREAMS / fixture).read_text().splitlines() if line.startswith("{")]


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def named(spans: list[ReadableSpan], prefix: str) -> list[ReadableSpan]:
    return [span for span in spans if span.name.startswith(prefix)]


def root_of(spans: list[ReadableSpan]) -> ReadableSpan:
    (root,) = [span for span in spans if span.parent is None]
    return root


def turns(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The main turns, in order (a subagent's chat span has no turn number)."""
    found = [span for span in named(spans, "chat") if "transcript.turn" in attributes(span)]
    return sorted(found, key=lambda span: int(attributes(span)["transcript.turn"]))


def messages(span: ReadableSpan, key: str) -> list[dict[str, Any]]:
    value = attributes(span)[key]
    assert isinstance(value, str)
    parsed = json.loads(value)
    assert isinstance(parsed, list)
    return parsed


def texts(message: dict[str, Any], kind: str = "text") -> list[str]:
    return [part["content"] for part in message["parts"] if part["type"] == kind]


def test_each_span_says_its_part_of_the_conversation(replay: Replay) -> None:
    spans = replay("codex-json.jsonl", "codex-json")
    (turn,) = turns(spans)
    output = messages(turn, "gen_ai.output.messages")
    assert [m["role"] for m in output] == ["assistant"]
    assert output[0]["finish_reason"] == "stop"
    answer = texts(output[0])
    assert answer
    assert answer[-1]
    # The model read the command's output before it answered: a tool message in the input.
    inputs = messages(turn, "gen_ai.input.messages")
    assert "tool" in [m["role"] for m in inputs]
    command = named(spans, "execute_tool codex:command")[0]
    arguments = json.loads(attributes(command)["gen_ai.tool.call.arguments"])
    assert arguments["command"] == "/bin/bash -lc 'seq 2 > data.txt && wc -l data.txt'"
    assert attributes(command)["gen_ai.tool.call.result"] == "2 data.txt\n"
    root = root_of(spans)
    assert texts(messages(root, "gen_ai.output.messages")[0]) == [answer[-1]]
    # No OpenInference values unless asked for.
    assert not [key for span in spans for key in attributes(span) if key in ("input.value", "output.value")]


def test_openinference_values_give_the_prompt_and_answer(replay: Replay) -> None:
    spans = replay("claude-stream-json.jsonl", "claude-stream-json", genai=GenAiContent(openinference=True))
    root = attributes(root_of(spans))
    last_turn = turns(spans)[-1]
    assert root["output.value"] == texts(messages(last_turn, "gen_ai.output.messages")[0])[-1]
    for tool in named(spans, "execute_tool"):
        assert attributes(tool)["input.value"] == attributes(tool)["gen_ai.tool.call.arguments"]
        assert attributes(tool)["input.mime_type"] == "application/json"


@pytest.mark.parametrize(
    ("policy", "genai"),
    [
        (ContentPolicy("metadata"), GenAiContent()),
        (ContentPolicy("none"), GenAiContent()),
        (ContentPolicy(), GenAiContent(on_spans=False, in_events=False)),  # NO_CONTENT
        (ContentPolicy(), GenAiContent(on_spans=False, in_events=True)),  # EVENT_ONLY
    ],
    ids=["metadata", "none", "no-content", "event-only"],
)
def test_no_content_on_spans_where_the_settings_keep_it_off(
    replay: Replay, policy: ContentPolicy, genai: GenAiContent
) -> None:
    spans = replay("claude-stream-json.jsonl", "claude-stream-json", policy=policy, genai=genai)
    assert named(spans, "chat")
    found = {key for span in spans for key in attributes(span) if key in CONTENT_KEYS}
    assert found == set()


def details_events(otel: OTelHarness) -> list[Any]:
    return [log for log in otel.finished_logs() if log.log_record.event_name == DETAILS_EVENT]


@pytest.mark.parametrize(
    ("genai", "on_spans", "events"),
    [(GenAiContent(), True, False), (GenAiContent(in_events=True), True, True)],
    ids=["span-only", "span-and-event"],
)
def test_the_operation_details_event_only_when_asked_for(
    replay: Replay, otel: OTelHarness, genai: GenAiContent, on_spans: bool, events: bool
) -> None:
    spans = replay("codex-json.jsonl", "codex-json", genai=genai)
    (turn,) = turns(spans)
    assert ("gen_ai.input.messages" in attributes(turn)) is on_spans
    found = details_events(otel)
    assert len(found) == (1 if events else 0)
    if events:
        (event,) = found
        record = event.log_record
        assert turn.context is not None
        assert (record.trace_id, record.span_id) == (turn.context.trace_id, turn.context.span_id)
        assert record.timestamp == turn.end_time
        details = dict(record.attributes or {})
        assert details["gen_ai.operation.name"] == "chat"
        assert details["gen_ai.usage.input_tokens"] == attributes(turn)["gen_ai.usage.input_tokens"]
        # The messages as structures, the same the span carries as JSON.
        output = [dict(message) for message in details["gen_ai.output.messages"]]
        assert output[0]["role"] == "assistant"
        assert output[0]["finish_reason"] == messages(turn, "gen_ai.output.messages")[0]["finish_reason"]


def test_event_only_puts_the_content_in_the_event(replay: Replay, otel: OTelHarness) -> None:
    replay("codex-json.jsonl", "codex-json", genai=GenAiContent(on_spans=False, in_events=True))
    (event,) = details_events(otel)
    details = dict(event.log_record.attributes or {})
    assert details["gen_ai.input.messages"]
    assert "input.value" not in details


def test_the_system_prompt_and_tools_go_on_the_root_and_the_main_turns(replay: Replay) -> None:
    def describe(run: AgentRun) -> None:
        run.describe_agent(
            system_instructions="Be brief.",
            tool_definitions=[{"name": "Bash", "description": "Runs a command"}],
        )

    spans = replay("claude-stream-json.jsonl", "claude-stream-json", before=describe)
    described = [root_of(spans), *turns(spans)]
    for span in described:
        assert messages(span, "gen_ai.system_instructions") == [{"type": "text", "content": "Be brief."}]
        (tool,) = messages(span, "gen_ai.tool.definitions")
        assert (tool["name"], tool["description"]) == ("Bash", "Runs a command")
    others = [span for span in spans if span not in described]
    assert others
    assert not [span.name for span in others if "gen_ai.system_instructions" in attributes(span)]


def test_a_subagent_says_its_prompt_and_answer_and_its_chat_counts_its_tokens(replay: Replay) -> None:
    spans = replay("claude-stream-json.jsonl", "claude-stream-json", genai=GenAiContent(openinference=True))
    root = root_of(spans)
    (subagent,) = [span for span in named(spans, "invoke_agent") if span is not root]
    assert subagent.parent is not None
    parent_id = subagent.parent.span_id
    (launcher,) = [span for span in spans if span.context is not None and span.context.span_id == parent_id]
    prompt = json.loads(attributes(launcher)["gen_ai.tool.call.arguments"])["prompt"]
    assert attributes(subagent)["input.value"] == prompt
    (subagent_chat,) = [span for span in named(spans, "chat") if span.parent == subagent.context]
    assert texts(messages(subagent_chat, "gen_ai.input.messages")[0]) == [prompt]
    assert attributes(subagent_chat)["gen_ai.usage.input_tokens"] > 0
    # Tokens are counted once, on the chat spans: together they are the root's totals.
    counted = Counter[str]()
    for chat in named(spans, "chat"):
        counted.update({k: v for k, v in attributes(chat).items() if k.startswith("gen_ai.usage.")})
    assert counted["gen_ai.usage.input_tokens"] == attributes(root)["transcript.usage.input_tokens"]
    assert not [
        span.name
        for span in spans
        if span.name.startswith(("invoke_agent", "execute_tool"))
        and any(key.startswith("gen_ai.usage.") for key in attributes(span))
    ]


def test_a_background_task_notification_is_input_of_the_turn_it_starts(replay: Replay) -> None:
    spans = replay("claude-stream-json.jsonl", "claude-stream-json")
    notified = [
        line["summary"]
        for line in map(json.loads, recorded_lines("claude-stream-json.jsonl"))
        if line.get("subtype") == "task_notification" and line.get("summary")
    ]
    assert notified
    inputs = [texts(m) for turn in turns(spans) for m in messages(turn, "gen_ai.input.messages")]
    assert [notified[0]] in inputs


def test_secrets_in_content_are_redacted(replay: Replay, tmp_path: Path) -> None:
    secret = "sk-ant-api03-" + "A1b2C3d4" * 12
    stream = (LINE_STREAMS / "codex-json.jsonl").read_text().replace("I added", f"I added {secret} to")
    assert secret in stream
    recorded = tmp_path / "codex-json-secret.jsonl"
    recorded.write_text(stream)
    spans = replay(recorded, "codex-json")
    values = [str(value) for span in spans for key, value in attributes(span).items() if key in CONTENT_KEYS]
    assert values
    assert not [value for value in values if secret in value]


def stream_json_run(lines: list[dict[str, Any]]) -> Callable[[AgentRun], None]:
    """Feed stream-json messages (the real CLI's shapes) as `run` reads them, before the fixture."""

    def feed(agent_run: AgentRun) -> None:
        recorder = LineRecorder(agent_run, select_adapter("claude-stream-json"))
        for line in lines:
            recorder.feed(json.dumps(line).encode())

    return feed


def init() -> dict[str, Any]:
    return {"type": "system", "subtype": "init", "model": "claude-opus-5-5", "session_id": "s"}


def answer(message_id: str, text: str) -> dict[str, Any]:
    message = {"id": message_id, "model": "claude-opus-5-5", "content": [{"type": "text", "text": text}]}
    return {"type": "assistant", "message": {**message, "usage": {"input_tokens": 5, "output_tokens": 1}}}


def result(text: str, num_turns: int) -> dict[str, Any]:
    usage = {"input_tokens": 5 * num_turns, "output_tokens": num_turns}
    return {"type": "result", "subtype": "success", "result": text, "num_turns": num_turns, "usage": usage}


def notification(call_id: str, summary: str) -> dict[str, Any]:
    return {"type": "system", "subtype": "task_notification", "tool_use_id": call_id, "summary": summary}


def test_a_notification_waits_for_the_turn_that_calls_the_model(replay: Replay, tmp_path: Path) -> None:
    # A turn that makes no model call (`num_turns: 0`) passes its notification to the next one;
    # a foreground task's notification, followed by its call's result, is no turn's input.
    call: dict[str, Any] = {"type": "tool_use", "id": "toolu_fg", "name": "Agent", "input": {"prompt": "p"}}
    message: dict[str, Any] = {"id": "m0", "model": "claude-opus-5-5", "content": [call]}
    tool_use = {"type": "assistant", "message": message}
    tool_result = {"type": "tool_result", "tool_use_id": "toolu_fg", "content": "done"}
    background = {**call, "id": "toolu_bg", "input": {"prompt": "q", "run_in_background": True}}
    launched = {"type": "tool_result", "tool_use_id": "toolu_bg", "content": "launched"}
    lines = [
        init(),
        tool_use,
        notification("toolu_fg", "foreground done"),
        {"type": "user", "message": {"role": "user", "content": [tool_result]}},
        {"type": "assistant", "message": {**message, "id": "m0b", "content": [background]}},
        {
            "type": "user",
            "message": {"role": "user", "content": [launched]},
            "tool_use_result": {"status": "async_launched"},
        },
        answer("m1", "started"),
        notification("toolu_bg", "background done"),
        result("started", 1),
        init(),
        result("", 0),
        init(),
        answer("m2", "all done"),
        result("all done", 1),
    ]
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    spans = replay(empty, "claude-stream-json", before=stream_json_run(lines))
    first, idle, third = turns(spans)
    assert texts(messages(first, "gen_ai.output.messages")[0]) == ["started"]
    assert "gen_ai.output.messages" not in attributes(idle)
    third_input = [texts(m) for m in messages(third, "gen_ai.input.messages")]
    assert third_input == [["background done"]]
    all_inputs = [str(attributes(turn).get("gen_ai.input.messages")) for turn in turns(spans)]
    assert not [text for text in all_inputs if "foreground done" in text]


def test_where_each_step_is_a_turn_the_next_step_reads_the_tool_results(replay: Replay) -> None:
    # OpenCode prints each model call as a step: the call after a tool's is the one that reads
    # its result, so that call's chat span has the result as its input; the first call's has not.
    first, second = turns(replay("opencode/shell.json.jsonl", "opencode-json"))
    (read,) = messages(second, "gen_ai.input.messages")
    assert read["role"] == "tool"
    (response,) = read["parts"]
    assert (response["type"], response["id"], response["response"]) == (
        "tool_call_response",
        "call_shell_1",
        "2 data.txt\n",
    )
    assert texts(messages(second, "gen_ai.output.messages")[0]) == ["data.txt has 2 lines: one and two."]
    first_input = attributes(first).get("gen_ai.input.messages")
    assert "tool_call_response" not in str(first_input)
