"""GenAI metrics of a real `transcript-otel run` at a real collector (rotel).

`transcript-otel run -- python tests/agents/line_agent.py FORMAT` (a scripted agent printing a
recorded line stream) with `OTEL_METRICS_EXPORTER=otlp` exports over OTLP/HTTP protobuf to a
rotel started with `--debug-log metrics`; what rotel printed is compared with the run's spans as
its JSONL mirror keeps them (`transcript.span` records): names, units, bucket boundaries, token
types, one point per chat span and sums equal to the chat spans' `gen_ai.usage.*`.
"""

from __future__ import annotations

import math
import subprocess
import sys
import uuid
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from transcript_otel import read_records
from transcript_otel.genai import metrics as genai_metrics
from transcript_otel.version import __version__

from loopback import subprocess_env
from requirements_switch import require
from rotel_collector import RECORDS, ROTEL_MISSING, Rotel, rotel_binary
from rotel_output import RotelMetricPoint

pytestmark = [pytest.mark.receiver, pytest.mark.otlp]

TESTS = Path(__file__).resolve().parent
AGENT = TESTS / "agents" / "line_agent.py"
WRAPPER = [sys.executable, "-m", "transcript_otel.cli", "run"]
CUMULATIVE = "AGGREGATION_TEMPORALITY_CUMULATIVE"
OPERATION = "gen_ai.operation.name"
# The provider `run` learns from the line adapter that reads the output.
PROVIDERS = {"claude-stream-json": "anthropic", "codex-json": "openai"}


@pytest.fixture(scope="module")
def rotel_with_metrics(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rotel]:
    binary = require(rotel_binary(), ROTEL_MISSING)
    collector = Rotel(
        binary, tmp_path_factory.mktemp("rotel-metrics"), debug_log=(*RECORDS, "metrics")
    ).start()
    try:
        yield collector
    finally:
        collector.stop()


def span_records(runs: Path) -> list[dict[str, Any]]:
    """The run's spans as its mirror keeps them."""
    (path,) = runs.glob("*.jsonl")
    return [record["context"] for record in read_records(path) if record["event"] == "transcript.span"]


def operation_of(span: dict[str, Any]) -> Any:
    return span["attributes"].get(OPERATION)


def duration_s(span: dict[str, Any]) -> float:
    return float(span["end_time_unix_nano"] - span["start_time_unix_nano"]) / 1e9


def by_name(points: list[RotelMetricPoint]) -> dict[str, list[RotelMetricPoint]]:
    found: dict[str, list[RotelMetricPoint]] = defaultdict(list)
    for point in points:
        found[point.name].append(point)
    return found


def assert_histogram(point: RotelMetricPoint, unit: str, bounds: Any) -> None:
    assert (point.data_type, point.unit, point.temporality) == ("Histogram", unit, CUMULATIVE)
    assert (point.scope_name, point.scope_version) == (genai_metrics.METER_NAME, __version__)
    assert point.scope_schema_url == genai_metrics.SCHEMA_URL
    assert point.explicit_bounds == [float(bound) for bound in bounds]
    assert point.count is not None
    assert sum(point.bucket_counts) == point.count


@pytest.mark.parametrize("fmt", ["claude-stream-json", "codex-json"])
def test_run_exports_genai_metrics_that_match_its_spans(
    rotel_with_metrics: Rotel, tmp_path: Path, fmt: str
) -> None:
    service = f"genai-metrics-{fmt}-{uuid.uuid4().hex[:8]}"  # this run's points, among the module's
    env = subprocess_env(
        OTEL_SERVICE_NAME=service,
        OTEL_METRICS_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_ENDPOINT=rotel_with_metrics.http_endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"),
    )
    command = [*WRAPPER, "--prompt-name", f"cli-{fmt}", "--", sys.executable, str(AGENT), fmt]
    completed = subprocess.run(command, capture_output=True, env=env, timeout=120, check=False)
    assert completed.returncode == 0, completed.stderr.decode(errors="replace")

    spans = span_records(tmp_path / "runs")
    chats = [span for span in spans if operation_of(span) == "chat"]
    agents = [span for span in spans if operation_of(span) == "invoke_agent"]
    assert chats
    assert agents
    # Tokens are counted once, on chat spans: the agents' spans say their totals under names of ours.
    for agent in agents:
        assert not [key for key in agent["attributes"] if key.startswith("gen_ai.usage.")]
    (root,) = [span for span in agents if span["attributes"]["gen_ai.agent.name"] == f"cli-{fmt}"]
    # The run's input total is what its chat spans count (Claude's session total says the same).
    chat_input = sum(span["attributes"]["gen_ai.usage.input_tokens"] for span in chats)
    assert root["attributes"]["transcript.usage.input_tokens"] == chat_input > 0

    def mine(points: list[RotelMetricPoint]) -> list[RotelMetricPoint]:
        return [point for point in points if point.resource.get("service.name") == service]

    def arrived(points: list[RotelMetricPoint]) -> bool:
        names = {point.name for point in mine(points)}
        return {genai_metrics.TOKEN_USAGE, genai_metrics.AGENT_DURATION} <= names

    # The wrapper exports at exit (the MeterProvider's shutdown); rotel prints it within ~200 ms.
    metrics = by_name(mine(rotel_with_metrics.wait_for_metrics(arrived, timeout_s=15)))

    # The provider the line adapter tells, and the models the output names (Claude's, none for
    # `codex exec --json`): the same on every chat (a subagent's own included).
    models = {
        key: chats[0]["attributes"][key]
        for key in ("gen_ai.request.model", "gen_ai.response.model")
        if key in chats[0]["attributes"]
    }
    assert (fmt == "codex-json") == (not models)
    models["gen_ai.provider.name"] = PROVIDERS[fmt]
    assert all({key: chat["attributes"].get(key) for key in models} == models for chat in chats)
    # gen_ai.client.token.usage: one point per chat span and token type, summing their usage.
    tokens = {point.attributes["gen_ai.token.type"]: point for point in metrics[genai_metrics.TOKEN_USAGE]}
    assert set(tokens) == {"input", "output"}
    for token_type, usage_key in (
        ("input", "gen_ai.usage.input_tokens"),
        ("output", "gen_ai.usage.output_tokens"),
    ):
        point = tokens[token_type]
        assert_histogram(point, "{token}", genai_metrics.TOKEN_USAGE_BUCKETS)
        counted = [span["attributes"][usage_key] for span in chats]
        assert point.attributes == {OPERATION: "chat", "gen_ai.token.type": token_type, **models}
        assert (point.count, point.sum, point.min, point.max) == (
            len(chats),
            sum(counted),
            min(counted),
            max(counted),
        )

    # gen_ai.client.operation.duration: each chat span's duration.
    (duration,) = metrics[genai_metrics.OPERATION_DURATION]
    assert_histogram(duration, "s", genai_metrics.OPERATION_DURATION_BUCKETS)
    assert duration.attributes == {OPERATION: "chat", **models}
    assert duration.count == len(chats)
    assert duration.sum is not None
    assert math.isclose(duration.sum, sum(duration_s(span) for span in chats), rel_tol=1e-6)

    # gen_ai.invoke_agent.duration: the root and each subagent, by agent name.
    agent_points = {
        point.attributes.get("gen_ai.agent.name"): point for point in metrics[genai_metrics.AGENT_DURATION]
    }
    expected_agents: dict[str, list[float]] = defaultdict(list)
    for span in agents:
        expected_agents[span["attributes"]["gen_ai.agent.name"]].append(duration_s(span))
    assert set(agent_points) == set(expected_agents)
    assert f"cli-{fmt}" in agent_points
    for name, durations in expected_agents.items():
        assert_histogram(agent_points[name], "s", genai_metrics.AGENT_DURATION_BUCKETS)
        assert agent_points[name].count == len(durations)
        assert math.isclose(agent_points[name].sum or 0.0, sum(durations), rel_tol=1e-6)

    # gen_ai.execute_tool.duration: each tool whose result came, by name, type and failure.
    expected_tools: dict[frozenset[tuple[str, Any]], list[float]] = defaultdict(list)
    for span in spans:
        attributes = span["attributes"]
        if operation_of(span) != "execute_tool" or attributes.get("transcript.tool.result_missing"):
            continue
        series = frozenset(
            (k, attributes[k])
            for k in ("gen_ai.tool.name", "gen_ai.tool.type", "gen_ai.agent.name", "error.type")
            if k in attributes
        )
        expected_tools[series].append(duration_s(span))
    tool_points = {
        frozenset(point.attributes.items()): point for point in metrics[genai_metrics.TOOL_DURATION]
    }
    assert expected_tools
    assert set(tool_points) == set(expected_tools)
    for series, durations in expected_tools.items():
        assert_histogram(tool_points[series], "s", genai_metrics.TOOL_DURATION_BUCKETS)
        assert tool_points[series].count == len(durations)
        assert math.isclose(tool_points[series].sum or 0.0, sum(durations), rel_tol=1e-6)
