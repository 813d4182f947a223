"""GenAI metrics (`transcript_otel.genai.metrics`) recorded as an `AgentRun`'s spans end.

Recorded line streams (`tests/fixtures/line_streams/`) are replayed through `LineRecorder` and
`AgentRun`, as `transcript-otel run` does, with a real SDK tracer provider and a real SDK
MeterProvider read by an `InMemoryMetricReader`; the metrics are compared with the spans the run
ended. The API lets a process set its MeterProvider once, so the tests put theirs in the API's
global and take it out again (`monkeypatch`).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from opentelemetry.metrics import NoOpMeterProvider
from opentelemetry.metrics import _internal as metrics_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import HistogramDataPoint, InMemoryMetricReader, Metric, Sum
from opentelemetry.sdk.trace import ReadableSpan

from transcript_otel import TranscriptPipeline
from transcript_otel.cli.line_recorder import LineRecorder
from transcript_otel.genai import metrics as genai_metrics
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.mappings.lines import select_adapter

from conftest import OTelHarness
from helpers import run_records

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "line_streams"
FIXTURE_FILES = {
    "claude-stream-json": "claude-stream-json.jsonl",
    "codex-json": "codex-json.jsonl",
    "codex-json-failed": "codex-json-failed.jsonl",
    "rtf1": "rtf1.txt",
}
INPUT_TOKENS = "gen_ai.usage.input_tokens"
OUTPUT_TOKENS = "gen_ai.usage.output_tokens"
# What the root and subagent spans say instead: the totals of the chat spans under them.
TOTAL_INPUT_TOKENS = "transcript.usage.input_tokens"
TOTAL_OUTPUT_TOKENS = "transcript.usage.output_tokens"
OPERATION = "gen_ai.operation.name"
TURN = "transcript.turn"


@pytest.fixture
def meter_reader(monkeypatch: pytest.MonkeyPatch) -> Iterator[InMemoryMetricReader]:
    """An SDK MeterProvider as the process's, read in memory; the API's global is restored after."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", provider)
    yield reader
    provider.shutdown()


@pytest.fixture
def no_meter_provider(monkeypatch: pytest.MonkeyPatch) -> None:
    """No MeterProvider in this process, whatever another test left (and none from the environment)."""
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", None)
    monkeypatch.delenv("OTEL_PYTHON_METER_PROVIDER", raising=False)


Replay = Callable[..., list[ReadableSpan]]


@pytest.fixture
def replay(default_pipeline: TranscriptPipeline, otel: OTelHarness) -> Replay:
    """Feed a recorded line stream to a run set up as `transcript-otel run` sets it up; its spans."""

    def replay_fixture(
        fmt: str, *, provider: str | None = None, model: str | None = None
    ) -> list[ReadableSpan]:
        otel.span_exporter.clear()
        run = AgentRun(
            otel.tracer_provider.get_tracer("test"),
            prompt_name=f"cli-{fmt}",
            adapter="run",
            session_id=None,
            policy=TurnPolicy.STREAM_JSON,
            provider=provider,
            model=model,
        )
        recorder = LineRecorder(run, select_adapter(fmt.removesuffix("-failed")))
        for line in (FIXTURES / FIXTURE_FILES[fmt]).read_bytes().splitlines():
            recorder.feed(line)
        recorder.end(None)
        assert run.emitter.flush(10)
        problems = [r for r in run_records(run.emitter) if r["event"] == "transcript.error"]
        assert problems == []
        return otel.finished_spans()

    return replay_fixture


def our_metrics(reader: InMemoryMetricReader) -> dict[str, Metric]:
    """The metrics of our GenAI meter, by name."""
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, Metric] = {}
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            scope = scope_metrics.scope
            if scope.name == genai_metrics.METER_NAME and scope.schema_url == genai_metrics.SCHEMA_URL:
                found.update((metric.name, metric) for metric in scope_metrics.metrics)
    return found


def points(metric: Metric) -> list[HistogramDataPoint]:
    data_points = list(metric.data.data_points)
    assert all(isinstance(point, HistogramDataPoint) for point in data_points)
    return data_points  # type: ignore[return-value]


def by_attributes(metric: Metric) -> dict[frozenset[tuple[str, Any]], HistogramDataPoint]:
    return {frozenset((point.attributes or {}).items()): point for point in points(metric)}


# The model each recorded output names (Claude's init and messages, RTF1's usage line; `codex exec
# --json` names none): requested and answering, on each chat span and so on its metrics.
OUTPUT_MODELS: dict[str, dict[str, str]] = {
    "claude-stream-json": {
        "gen_ai.request.model": "claude-opus-5-5",
        "gen_ai.response.model": "claude-opus-5-5",
    },
    "rtf1": {"gen_ai.request.model": "gpt-4.1-mini", "gen_ai.response.model": "gpt-4.1-mini"},
    "codex-json": {},
}
# The provider `run` learns from the line adapter that reads the output (none for RTF1).
RUN_PROVIDERS: dict[str, dict[str, str]] = {
    "claude-stream-json": {"gen_ai.provider.name": "anthropic"},
    "codex-json": {"gen_ai.provider.name": "openai"},
    "rtf1": {},
}


def spans_of(spans: list[ReadableSpan], operation: str) -> list[ReadableSpan]:
    return [span for span in spans if (span.attributes or {}).get(OPERATION) == operation]


def main_turns(spans: list[ReadableSpan]) -> list[ReadableSpan]:
    """The main agent's turns: the chat spans numbered `transcript.turn` (a subagent's are not)."""
    return [span for span in spans_of(spans, "chat") if TURN in (span.attributes or {})]


def usage_of(span: ReadableSpan, key: str) -> int:
    count = (span.attributes or {})[key]
    assert isinstance(count, int)
    return count


def duration_s(span: ReadableSpan) -> float:
    assert span.start_time is not None
    assert span.end_time is not None
    return (span.end_time - span.start_time) / 1e9


# -- token usage and chat duration ---------------------------------------------------------------


@pytest.mark.parametrize("fmt", ["claude-stream-json", "codex-json", "rtf1"])
def test_token_usage_counts_each_chat_span_once(
    meter_reader: InMemoryMetricReader, replay: Replay, fmt: str
) -> None:
    spans = replay(fmt)
    chats = spans_of(spans, "chat")
    assert chats
    # Tokens are counted once, on chat spans: the root and subagent spans carry none of them.
    for span in spans_of(spans, "invoke_agent"):
        assert not [key for key in span.attributes or {} if key.startswith("gen_ai.usage.")]
    token_usage = our_metrics(meter_reader)[genai_metrics.TOKEN_USAGE]
    assert token_usage.unit == "{token}"
    token_points = points(token_usage)
    by_type = {(point.attributes or {})["gen_ai.token.type"]: point for point in token_points}
    assert len(token_points) == len(by_type) == 2
    assert set(by_type) == {"input", "output"}
    for token_type, usage_key in (("input", INPUT_TOKENS), ("output", OUTPUT_TOKENS)):
        point = by_type[token_type]
        counted = [usage_of(span, usage_key) for span in chats]
        # One point per chat span (a subagent's own included); the root and subagent spans add none.
        assert point.count == len(chats)
        assert point.sum == sum(counted)
        assert (point.min, point.max) == (min(counted), max(counted))
        assert list(point.explicit_bounds) == list(genai_metrics.TOKEN_USAGE_BUCKETS)
        # The provider is the line adapter's (RTF1 names none: nothing is made up); the model the output's.
        expected = {
            OPERATION: "chat",
            "gen_ai.token.type": token_type,
            **RUN_PROVIDERS[fmt],
            **OUTPUT_MODELS[fmt],
        }
        assert dict(point.attributes or {}) == expected
    (root,) = [span for span in spans_of(spans, "invoke_agent") if span.parent is None]
    if fmt == "claude-stream-json":
        # Two turns and the subagent's own chat span (its 950 is on it, not on a turn); the root's
        # input total is the session's (`modelUsage`), which the three add up to.
        assert [usage_of(span, INPUT_TOKENS) for span in main_turns(spans)] == [2100, 1200]
        (subagent,) = [span for span in spans_of(spans, "invoke_agent") if span.parent is not None]
        (subagent_chat,) = [span for span in chats if span.parent == subagent.context]
        assert usage_of(subagent_chat, INPUT_TOKENS) == usage_of(subagent, TOTAL_INPUT_TOKENS) == 950
        assert usage_of(subagent_chat, OUTPUT_TOKENS) == usage_of(subagent, TOTAL_OUTPUT_TOKENS) == 2
        assert by_type["input"].sum == 2100 + 1200 + 950 == usage_of(root, TOTAL_INPUT_TOKENS)
        # The session's output total (`modelUsage`) counts more than the turns' results report.
        assert usage_of(root, TOTAL_OUTPUT_TOKENS) == 108
        assert by_type["output"].sum == 52 + 14 + 2
    else:  # one agent, no session totals: the root's totals are its chat spans' sums
        assert by_type["input"].sum == usage_of(root, TOTAL_INPUT_TOKENS)
        assert by_type["output"].sum == usage_of(root, TOTAL_OUTPUT_TOKENS)


@pytest.mark.parametrize("fmt", ["claude-stream-json", "codex-json"])
def test_operation_duration_is_each_chat_spans_duration(
    meter_reader: InMemoryMetricReader, replay: Replay, fmt: str
) -> None:
    chats = spans_of(replay(fmt), "chat")
    duration = our_metrics(meter_reader)[genai_metrics.OPERATION_DURATION]
    assert duration.unit == "s"
    (point,) = points(duration)
    assert dict(point.attributes or {}) == {OPERATION: "chat", **RUN_PROVIDERS[fmt], **OUTPUT_MODELS[fmt]}
    assert point.count == len(chats)
    assert math.isclose(point.sum, sum(duration_s(span) for span in chats), rel_tol=1e-9, abs_tol=1e-9)
    assert list(point.explicit_bounds) == list(genai_metrics.OPERATION_DURATION_BUCKETS)


@pytest.mark.parametrize("fmt", ["claude-stream-json", "codex-json"])
def test_cost_adds_what_each_chat_span_cost_where_the_harness_said(
    meter_reader: InMemoryMetricReader, replay: Replay, fmt: str
) -> None:
    """Claude's results say what a turn cost (`gen_ai.usage.cost` on its chat span); Codex's do not."""
    chats = spans_of(replay(fmt), "chat")
    costs = [(span.attributes or {}).get("gen_ai.usage.cost") for span in chats]
    spent = [value for value in costs if isinstance(value, float)]
    metric = our_metrics(meter_reader).get(genai_metrics.COST)
    if fmt == "codex-json":
        assert spent == []
        assert metric is None
        return
    assert spent
    assert metric is not None
    assert metric.unit == "{USD}"
    assert isinstance(metric.data, Sum)
    assert metric.data.is_monotonic
    (point,) = metric.data.data_points
    assert dict(point.attributes or {}) == {OPERATION: "chat", **RUN_PROVIDERS[fmt], **OUTPUT_MODELS[fmt]}
    assert math.isclose(point.value, sum(spent), rel_tol=1e-9)


def test_provider_and_model_are_attributes(meter_reader: InMemoryMetricReader, replay: Replay) -> None:
    """`codex exec` with a model on its command line: `run` knows the provider and the model."""
    (chat,) = spans_of(replay("codex-json", provider="openai", model="gpt-5.5"), "chat")
    found = our_metrics(meter_reader)
    model = {OPERATION: "chat", "gen_ai.provider.name": "openai", "gen_ai.request.model": "gpt-5.5"}
    (duration,) = points(found[genai_metrics.OPERATION_DURATION])
    assert dict(duration.attributes or {}) == model
    tokens = {
        (point.attributes or {})["gen_ai.token.type"]: (dict(point.attributes or {}), point.sum)
        for point in points(found[genai_metrics.TOKEN_USAGE])
    }
    usage = chat.attributes or {}
    assert tokens == {
        "input": ({**model, "gen_ai.token.type": "input"}, usage[INPUT_TOKENS]),
        "output": ({**model, "gen_ai.token.type": "output"}, usage[OUTPUT_TOKENS]),
    }


def test_a_failed_turn_has_its_error_type_and_no_made_up_tokens(
    meter_reader: InMemoryMetricReader, replay: Replay
) -> None:
    """The turn failed before any usage was reported: its duration carries the turn's `error.type`;
    no token counts are recorded (the conventions forbid reporting counts one does not have)."""
    (chat,) = spans_of(replay("codex-json-failed"), "chat")
    assert (chat.attributes or {})["error.type"] == "turn_failed"
    assert INPUT_TOKENS not in (chat.attributes or {})
    found = our_metrics(meter_reader)
    (duration,) = points(found[genai_metrics.OPERATION_DURATION])
    assert dict(duration.attributes or {}) == {
        OPERATION: "chat",
        "gen_ai.provider.name": "openai",
        "error.type": "turn_failed",
    }
    assert genai_metrics.TOKEN_USAGE not in found


# -- agent and tool durations --------------------------------------------------------------------


def test_agent_duration_for_the_root_and_each_subagent(
    meter_reader: InMemoryMetricReader, replay: Replay
) -> None:
    agents = spans_of(replay("claude-stream-json"), "invoke_agent")
    assert {span.name for span in agents} == {
        "invoke_agent cli-claude-stream-json",
        "invoke_agent general-purpose",
    }
    duration = our_metrics(meter_reader)[genai_metrics.AGENT_DURATION]
    assert duration.unit == "s"
    found = by_attributes(duration)
    for span in agents:
        attributes = span.attributes or {}
        # The root requested the model the init message names; the subagent's is not told.
        series = {
            (key, attributes[key])
            for key in ("gen_ai.agent.name", "gen_ai.request.model")
            if key in attributes
        }
        point = found[frozenset(series)]
        assert point.count == 1
        assert math.isclose(point.sum, duration_s(span), abs_tol=1e-9)
        assert list(point.explicit_bounds) == list(genai_metrics.AGENT_DURATION_BUCKETS)
    assert len(found) == len(agents)


def test_tool_duration_for_each_tool_that_returned(
    meter_reader: InMemoryMetricReader, replay: Replay
) -> None:
    tools = spans_of(replay("codex-json"), "execute_tool")
    duration = our_metrics(meter_reader)[genai_metrics.TOOL_DURATION]
    assert duration.unit == "s"
    expected: dict[frozenset[tuple[str, Any]], list[float]] = {}
    for span in tools:
        attributes = span.attributes or {}
        key = {
            ("gen_ai.tool.name", attributes["gen_ai.tool.name"]),
            ("gen_ai.tool.type", "extension"),
            ("gen_ai.agent.name", "cli-codex-json"),  # the run's agent called every tool
        }
        if "error.type" in attributes:
            key.add(("error.type", attributes["error.type"]))
        expected.setdefault(frozenset(key), []).append(duration_s(span))
    assert (
        frozenset(
            {
                ("gen_ai.tool.name", "codex:command"),
                ("gen_ai.tool.type", "extension"),
                ("gen_ai.agent.name", "cli-codex-json"),
                ("error.type", "tool_error"),
            }
        )
        in expected
    )
    found = by_attributes(duration)
    assert set(found) == set(expected)
    for series, durations in expected.items():
        assert found[series].count == len(durations)
        assert math.isclose(found[series].sum, sum(durations), abs_tol=1e-9)
        assert list(found[series].explicit_bounds) == list(genai_metrics.TOOL_DURATION_BUCKETS)


def test_unbounded_tools_and_agent_ids_stay_out(
    meter_reader: InMemoryMetricReader, default_pipeline: TranscriptPipeline, otel: OTelHarness
) -> None:
    """A tool whose result never came ends with the run: that is not its duration. A subagent
    known only by its id is recorded without a name (ids never go on metrics)."""
    run = AgentRun(
        otel.tracer_provider.get_tracer("test"), prompt_name="review", adapter="test", session_id="s1"
    )
    run.record("tool_use", detail={"tool_use_id": "call_1", "tool_name": "Read", "input": {}})
    run.record("assistant_message", source="subagent:a4531e32", detail={"text": "working"})
    run.finish()
    assert run.emitter.flush(10)
    spans = {span.name: span for span in otel.finished_spans()}
    assert (spans["execute_tool Read"].attributes or {})["transcript.tool.result_missing"] is True
    assert (spans["invoke_agent subagent"].attributes or {})["gen_ai.agent.name"] == "a4531e32"
    found = our_metrics(meter_reader)
    assert genai_metrics.TOOL_DURATION not in found
    assert set(by_attributes(found[genai_metrics.AGENT_DURATION])) == {
        frozenset(),
        frozenset({("gen_ai.agent.name", "review")}),
    }


# -- the recorders called directly ---------------------------------------------------------------


def test_recorders_leave_out_what_is_unknown(meter_reader: InMemoryMetricReader) -> None:
    genai_metrics.record_chat(
        duration_s=1.5,
        input_tokens=108,
        output_tokens=None,  # not reported: no output point
        provider="anthropic",
        request_model="claude-opus-4-6",
        response_model="claude-opus-4-6-20260101",
        error_type="overloaded_error",
    )
    genai_metrics.record_agent(duration_s=30.0, agent_name="review", request_model="gpt-5", error_type=None)
    genai_metrics.record_tool(duration_s=0.25, tool_name="Bash", tool_type="extension", agent_name="")
    found = our_metrics(meter_reader)
    model = {
        OPERATION: "chat",
        "gen_ai.provider.name": "anthropic",
        "gen_ai.request.model": "claude-opus-4-6",
        "gen_ai.response.model": "claude-opus-4-6-20260101",
    }
    (tokens,) = points(found[genai_metrics.TOKEN_USAGE])
    assert (dict(tokens.attributes or {}), tokens.sum) == ({**model, "gen_ai.token.type": "input"}, 108)
    (duration,) = points(found[genai_metrics.OPERATION_DURATION])
    assert (dict(duration.attributes or {}), duration.sum) == (
        {**model, "error.type": "overloaded_error"},
        1.5,
    )
    (agent,) = points(found[genai_metrics.AGENT_DURATION])
    assert dict(agent.attributes or {}) == {"gen_ai.agent.name": "review", "gen_ai.request.model": "gpt-5"}
    (tool,) = points(found[genai_metrics.TOOL_DURATION])
    assert dict(tool.attributes or {}) == {"gen_ai.tool.name": "Bash", "gen_ai.tool.type": "extension"}


def test_instruments_are_made_once_per_provider(meter_reader: InMemoryMetricReader) -> None:
    genai_metrics.record_tool(duration_s=0.1, tool_name="Read")
    made = genai_metrics._made
    genai_metrics.record_agent(duration_s=0.1, agent_name="review")
    assert genai_metrics._made is made
    assert made is not None
    assert made[0] is metrics_api._METER_PROVIDER


# -- without a MeterProvider, and with a broken one ----------------------------------------------


@pytest.mark.usefixtures("no_meter_provider")
def test_nothing_is_recorded_without_a_meter_provider(
    replay: Replay, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[object] = []
    monkeypatch.setattr(genai_metrics, "_instruments", made.append)
    assert replay("claude-stream-json")
    genai_metrics.record_chat(duration_s=1.0, input_tokens=1, output_tokens=1)
    assert made == []
    assert genai_metrics._meter_provider() is None


def test_a_no_op_meter_provider_records_nothing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", NoOpMeterProvider())
    made: list[object] = []
    monkeypatch.setattr(genai_metrics, "_instruments", made.append)
    genai_metrics.record_tool(duration_s=1.0, tool_name="Read")
    assert made == []


class _BrokenMeterProvider(MeterProvider):
    """Hands out meters whose histograms raise on every recording."""

    def __init__(self, *, meter_fails: bool) -> None:
        super().__init__(shutdown_on_exit=False)
        self.meter_fails = meter_fails

    def get_meter(self, *arguments: Any, **options: Any) -> Any:
        if self.meter_fails:
            raise RuntimeError("no meter today")
        meter = super().get_meter(*arguments, **options)

        class Histogram:
            def record(self, *arguments: Any, **options: Any) -> None:
                raise RuntimeError("no recording today")

        meter.create_histogram = lambda *arguments, **options: Histogram()  # type: ignore[method-assign, assignment]
        return meter


@pytest.mark.parametrize("meter_fails", [True, False], ids=["get_meter-raises", "record-raises"])
def test_a_broken_meter_provider_never_reaches_the_agent(
    replay: Replay, monkeypatch: pytest.MonkeyPatch, meter_fails: bool
) -> None:
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", _BrokenMeterProvider(meter_fails=meter_fails))
    # Every span still ends, with its attributes, and the run reports no error (`replay` checks).
    spans = replay("claude-stream-json")
    assert len(main_turns(spans)) == 2
    assert len(spans_of(spans, "chat")) == 3  # the two turns and the subagent's chat span
    assert all(span.end_time is not None for span in spans)
    genai_metrics.record_chat(duration_s=1.0, input_tokens=1, output_tokens=1)
    genai_metrics.record_agent(duration_s=1.0)
    genai_metrics.record_tool(duration_s=1.0, tool_name="Read")
