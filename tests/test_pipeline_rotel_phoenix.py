"""The collector pipeline with real processes: agent → rotel → Arize Phoenix.

The README's main job (`examples/codex_agent.py`: the real weakincentives Codex
adapter on the real Codex CLI, whose model is scripted) exports over OTLP, gRPC in one run and
HTTP in the other, to a real `rotel` collector configured by
`collector-config/rotel.env`. Its Jaeger route goes to Phoenix, a real trace
store, and the trace is read back through Phoenix's REST API; its Tempo and Loki
routes go to an OTLP/HTTP receiver in this process (oteltap speaks HTTP only, so
those two routes' protocol is overridden), and rotel's debug log shows what
arrived at the collector. Only the endpoints of `rotel.env` are replaced.
"""

from __future__ import annotations

import json
import subprocess
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.reading.otlp_records import record_from_otlp

from loopback import subprocess_env
from phoenix_server import Phoenix
from receivers import LokiShapedReceiver
from rotel_collector import Rotel, read_env_file, rotel_binary
from rotel_output import RotelLogRecord
from wink_harness import REPO, wink_python

pytestmark = [pytest.mark.wink, pytest.mark.receiver, pytest.mark.otlp]

ROTEL_ENV = REPO / "collector-config" / "rotel.env"
AGENT = REPO / "examples" / "codex_agent.py"
WINK_VERSION = "0.27.0"
# The agent's OTLP protocol → a name for its Phoenix project and work directory.
PROTOCOLS = {"grpc": "grpc", "http/protobuf": "http"}


@dataclass
class PipelineRun:
    """What each stage saw of one instrumented agent run."""

    protocol: str
    project: str
    mirror: list[dict[str, Any]]  # the run's JSONL mirror records
    collector_logs: list[RotelLogRecord]  # log records as they arrived at rotel
    phoenix_spans: list[dict[str, Any]]  # the trace as Phoenix stores it
    loki_route_logs: list[dict[str, Any]]  # log records forwarded on the Loki route
    loki_route_paths: list[str]  # where the collector posted them
    agent_output: str

    @property
    def trace_id(self) -> str:
        return str(self.mirror[0]["context"]["trace_id"])

    def entries(self) -> list[dict[str, Any]]:
        return [r for r in self.mirror if r["event"] == "transcript.entry"]

    def mirrored_spans(self) -> dict[str, dict[str, Any]]:
        """span id → the `transcript.span` record the run kept of it."""
        return {r["context"]["span_id"]: r for r in self.mirror if r["event"] == "transcript.span"}


def _routing(phoenix: Phoenix, loki: LokiShapedReceiver) -> dict[str, str]:
    """rotel.env with its two endpoints pointed here: traces → Phoenix, logs → `loki`."""
    routing = read_env_file(ROTEL_ENV)
    routing["ROTEL_EXPORTER_TEMPO_ENDPOINT"] = phoenix.grpc_endpoint
    routing["ROTEL_EXPORTER_LOKI_ENDPOINT"] = loki.endpoint
    return routing


def _run_pipeline(protocol: str, phoenix: Phoenix, workdir: Path) -> PipelineRun:
    binary = rotel_binary()
    assert binary is not None, "the rotel wheel is part of the test extra"
    project = f"pipeline-{PROTOCOLS[protocol]}"
    mirror_dir = workdir / "runs"
    with LokiShapedReceiver() as loki:
        collector = Rotel(binary, workdir / "rotel", routing=_routing(phoenix, loki)).start()
        try:
            endpoint = collector.grpc_endpoint if protocol == "grpc" else collector.http_endpoint
            environment = subprocess_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
                OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
                # Phoenix files spans under the project this resource attribute names.
                OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={project}",
                XDG_STATE_HOME=str(workdir / "state"),
            )
            agent = subprocess.run(
                [str(wink_python(WINK_VERSION)), str(AGENT), "--jsonl-dir", str(mirror_dir)],
                env=environment,
                capture_output=True,
                text=True,
                errors="replace",
                timeout=240,
                check=False,
            )
            assert agent.returncode == 0, agent.stdout + agent.stderr
            (mirror_path,) = mirror_dir.glob("*.jsonl")
            mirror = [json.loads(line) for line in mirror_path.read_text().splitlines() if line.strip()]
            trace_id = mirror[0]["context"]["trace_id"]
            span_count = sum(1 for r in mirror if r["event"] == "transcript.span")
            log_count = len(mirror) - span_count
            collector_logs, _ = collector.wait_for(
                lambda logs, _spans: sum(1 for log in logs if log.trace_id == trace_id) >= log_count,
                timeout_s=20,
            )
            phoenix_spans = phoenix.wait_for_spans(project, trace_id, span_count)
            loki.wait_for(lambda: len(loki.logs) >= log_count, timeout_s=20)
        finally:
            collector.stop()
    return PipelineRun(
        protocol=protocol,
        project=project,
        mirror=mirror,
        collector_logs=[log for log in collector_logs if log.trace_id == trace_id],
        phoenix_spans=phoenix_spans,
        loki_route_logs=[record_from_otlp(log) for log in loki.logs],
        loki_route_paths=sorted(set(loki.paths)),
        agent_output=agent.stdout + agent.stderr,
    )


@pytest.fixture(scope="module", params=list(PROTOCOLS))
def pipeline_run(
    request: pytest.FixtureRequest, phoenix: Phoenix, tmp_path_factory: pytest.TempPathFactory
) -> PipelineRun:
    protocol: str = request.param
    return _run_pipeline(protocol, phoenix, tmp_path_factory.mktemp(f"pipeline-{PROTOCOLS[protocol]}"))


def test_phoenix_is_the_pinned_version(phoenix: Phoenix) -> None:
    assert phoenix.version() == "20.26.1"


def test_phoenix_holds_the_span_tree_the_agent_recorded(pipeline_run: PipelineRun) -> None:
    stored = {span["context"]["span_id"]: span for span in pipeline_run.phoenix_spans}
    recorded = pipeline_run.mirrored_spans()
    assert set(stored) == set(recorded), pipeline_run.agent_output
    for span_id, span in stored.items():
        fields = recorded[span_id]["context"]
        assert span["name"] == fields["name"]
        assert span["parent_id"] == fields["parent_span_id"]
        assert span["context"]["trace_id"] == pipeline_run.trace_id

    (root,) = (span for span in stored.values() if span["parent_id"] is None)
    assert root["name"] == "invoke_agent codex-demo"
    under_root = [span["name"] for span in stored.values() if span["parent_id"] == root["context"]["span_id"]]
    assert [name.split(" ")[0] for name in under_root] == ["chat"]
    (turn,) = (span for span in stored.values() if span["name"].startswith("chat"))
    tools = {span["name"] for span in stored.values() if span["parent_id"] == turn["context"]["span_id"]}
    assert {"execute_tool echo", "execute_tool codex:command", "execute_tool docs:lookup"} <= tools
    assert root["attributes"]["gen_ai.operation.name"] == "invoke_agent"
    assert turn["attributes"]["gen_ai.usage.input_tokens"] > 0


def test_phoenix_span_events_are_the_transcript_entries_of_each_span(pipeline_run: PipelineRun) -> None:
    expected: dict[str, list[tuple[str, int]]] = {}
    for record in pipeline_run.entries():
        context = record["context"]
        expected.setdefault(context["span_id"], []).append(
            (context["entry_type"], context["sequence_number"])
        )
    stored: dict[str, list[tuple[str, int]]] = {}
    for span in pipeline_run.phoenix_spans:
        for event in span["events"]:
            if event["name"] == "transcript.entry":
                attributes = event["attributes"]
                stored.setdefault(span["context"]["span_id"], []).append(
                    (attributes["transcript.entry_type"], attributes["transcript.sequence_number"])
                )
    assert stored == expected
    assert sum(len(events) for events in stored.values()) == len(pipeline_run.entries())


def test_log_records_arrive_at_the_collector_with_the_trace_and_span_ids(pipeline_run: PipelineRun) -> None:
    expected = Counter(
        (r["event"], r["context"].get("entry_type"), r["context"]["span_id"])
        for r in pipeline_run.mirror
        if r["event"] != "transcript.span"
    )
    arrived = Counter(
        (log.event_name, log.attributes.get("transcript.entry_type"), log.span_id)
        for log in pipeline_run.collector_logs
    )
    assert arrived == expected
    stored_span_ids = {span["context"]["span_id"] for span in pipeline_run.phoenix_spans}
    assert {log.span_id for log in pipeline_run.collector_logs} <= stored_span_ids


def test_the_loki_route_forwards_every_log_record_to_lokis_otlp_path(pipeline_run: PipelineRun) -> None:
    assert pipeline_run.loki_route_paths == [LokiShapedReceiver.PATH]
    forwarded = Counter(
        (record["event"], record["context"].get("sequence_number"), record["context"].get("span_id"))
        for record in pipeline_run.loki_route_logs
        if record["context"].get("trace_id") == pipeline_run.trace_id
    )
    mirrored = Counter(
        (record["event"], record["context"].get("sequence_number"), record["context"].get("span_id"))
        for record in pipeline_run.mirror
        if record["event"] != "transcript.span"
    )
    assert forwarded == mirrored
