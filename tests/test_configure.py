"""`configure()`: one-call setup, each scenario in its own Python process.

Global OTel providers can be set only once per process, so every scenario runs a
small script in a subprocess (environment cleaned of OTEL_*/TRANSCRIPT_OTEL_*
variables) and the test asserts on what it printed, its exit code, the files it
wrote and what real receivers (oteltap, rotel) got over loopback.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from transcript_otel import read_records, reconstruct_transcript, records_from_otlp

from loopback import free_port, subprocess_env
from receivers import TapCollector, require_oteltap, run_to_completion
from rotel_collector import Rotel

TIMEOUT_S = 30

PREAMBLE = """
import json, os, sys, time
from opentelemetry import _logs, trace

def result(**values):
    print("RESULT " + json.dumps(values), flush=True)
"""

# An application that configured OTel itself: SDK providers with in-memory exporters.
APP_PROVIDERS = """
from opentelemetry.sdk._logs import LoggerProvider
from opentelemetry.sdk._logs.export import InMemoryLogRecordExporter, SimpleLogRecordProcessor
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

app_spans = InMemorySpanExporter()
app_logs = InMemoryLogRecordExporter()
app_tracer_provider = TracerProvider()
app_tracer_provider.add_span_processor(SimpleSpanProcessor(app_spans))
app_logger_provider = LoggerProvider()
app_logger_provider.add_log_record_processor(SimpleLogRecordProcessor(app_logs))
"""

# The agent: a run of two entries inside a span.
AGENT_RUN = """
import transcript_otel

def agent_run(prompt, span_name="agent-run"):
    with trace.get_tracer("agent").start_as_current_span(span_name) as span:
        with transcript_otel.TranscriptEmitter(
            prompt_name=prompt, adapter="scripted", session_id=prompt + "-session"
        ) as emitter:
            emitter.emit("user_message", detail={"text": "hi ☃", "n": [1, 2.5, None]})
            emitter.emit("assistant_message", detail={"text": "hello"}, raw='{"native": true}')
    context = span.get_span_context()
    return emitter, format(context.trace_id, "032x"), format(context.span_id, "016x")
"""


def script_command(tmp_path: Path, body: str, *, app_providers: bool = False) -> list[str]:
    script = tmp_path / "scenario.py"
    prelude = PREAMBLE + AGENT_RUN + (APP_PROVIDERS if app_providers else "")
    script.write_text(prelude + textwrap.dedent(body))
    return [sys.executable, str(script)]


def parse_result(stdout: str) -> dict[str, Any]:
    lines = [line for line in stdout.splitlines() if line.startswith("RESULT ")]
    assert lines, f"no RESULT line in output:\n{stdout}"
    value: dict[str, Any] = json.loads(lines[-1][len("RESULT ") :])
    return value


def run_scenario(
    tmp_path: Path, body: str, env: dict[str, str] | None = None, *, app_providers: bool = False
) -> tuple[subprocess.CompletedProcess[str], dict[str, Any]]:
    environment = subprocess_env(XDG_STATE_HOME=str(tmp_path / "state"), **(env or {}))
    process = subprocess.run(
        script_command(tmp_path, body, app_providers=app_providers),
        env=environment,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,
        cwd=tmp_path,
        check=False,
    )
    assert process.returncode == 0, f"exit {process.returncode}\n{process.stdout}\n{process.stderr}"
    return process, parse_result(process.stdout)


# -- (a) nothing configured + OTEL_EXPORTER_OTLP_ENDPOINT -> our providers export there ------


@pytest.mark.receiver
def test_unconfigured_process_exports_to_the_otlp_endpoint(tmp_path: Path) -> None:
    require_oteltap()
    runs = tmp_path / "runs"
    body = """
    cfg = transcript_otel.configure(service_name="cfg-a")
    emitter, trace_id, span_id = agent_run("cfg-a")
    result(
        created=cfg.created_providers,
        endpoint=cfg.otlp_endpoint,
        protocol=cfg.otlp_protocol,
        jsonl_directory=cfg.jsonl_directory,
        jsonl=emitter.jsonl_path,
        run_id=emitter.run_id,
        trace_id=trace_id,
        span_id=span_id,
        tracer_provider=type(trace.get_tracer_provider()).__module__,
        logger_provider=type(_logs.get_logger_provider()).__module__,
    )
    """

    async def scenario() -> tuple[dict[str, Any], list[Any], list[Any]]:
        async with TapCollector() as tap:
            environment = subprocess_env(
                XDG_STATE_HOME=str(tmp_path / "state"),
                OTEL_EXPORTER_OTLP_ENDPOINT=tap.endpoint,
                TRANSCRIPT_OTEL_JSONL_DIR=str(runs),
            )
            returncode, stdout, stderr = await run_to_completion(
                script_command(tmp_path, body), TIMEOUT_S, env=environment, cwd=tmp_path
            )
            assert returncode == 0, stderr.decode()
            outcome = parse_result(stdout.decode())

            def mine() -> list[Any]:
                return [
                    log
                    for log in tap.logs
                    if any(kv.value.string_value == outcome["run_id"] for kv in log.attributes)
                ]

            # The records are exported at interpreter exit: they are already here.
            await tap.wait_for(lambda: len(mine()) >= 4 and bool(tap.spans), timeout_s=5)
            return outcome, mine(), list(tap.spans)

    outcome, logs, spans = asyncio.run(scenario())
    assert outcome["created"] is True
    assert outcome["endpoint"].startswith("http://127.0.0.1:")
    assert outcome["protocol"] == "http/protobuf"
    assert outcome["tracer_provider"].startswith("opentelemetry.sdk")
    assert outcome["logger_provider"].startswith("opentelemetry.sdk")
    assert [log.event_name for log in logs] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ]
    (span,) = [s for s in spans if s.name == "agent-run"]
    assert span.trace_id.hex() == outcome["trace_id"]
    assert {(log.trace_id.hex(), log.span_id.hex()) for log in logs} == {
        (outcome["trace_id"], outcome["span_id"])
    }
    assert [event.name for event in span.events].count("transcript.entry") == 2
    # The JSONL mirror holds the run, in a private file under the configured directory.
    jsonl = Path(outcome["jsonl"])
    assert outcome["jsonl_directory"] == str(runs)
    assert jsonl.parent == runs
    assert stat.S_IMODE(jsonl.stat().st_mode) == 0o600
    assert stat.S_IMODE(runs.stat().st_mode) == 0o700
    records = list(read_records(jsonl))
    assert [r["event"] for r in records] == [log.event_name for log in logs]
    assert reconstruct_transcript(records_from_otlp(logs)) == reconstruct_transcript(records)


# -- (b) the application configured OTel itself -> configure reuses its providers -----------


def test_app_configured_providers_are_reused(tmp_path: Path) -> None:
    body = """
    trace.set_tracer_provider(app_tracer_provider)
    _logs.set_logger_provider(app_logger_provider)
    cfg = transcript_otel.configure()
    emitter, trace_id, span_id = agent_run("cfg-b")
    cfg.shutdown()
    # The application's providers still work after transcript-otel shut down.
    with trace.get_tracer("app").start_as_current_span("after-shutdown"):
        pass
    app_logger_provider.get_logger("app").emit(body="app log after shutdown")
    spans = app_spans.get_finished_spans()
    result(
        created=cfg.created_providers,
        same_tracer_provider=cfg.tracer_provider is app_tracer_provider,
        same_logger_provider=cfg.logger_provider is app_logger_provider,
        endpoint=cfg.otlp_endpoint,
        protocol=cfg.otlp_protocol,
        events=[r.log_record.event_name for r in app_logs.get_finished_logs()],
        bodies=[r.log_record.body for r in app_logs.get_finished_logs()],
        log_ids=sorted({(format(r.log_record.trace_id, "032x"), format(r.log_record.span_id, "016x"))
                        for r in app_logs.get_finished_logs() if r.log_record.event_name}),
        trace_id=trace_id,
        span_id=span_id,
        spans=[s.name for s in spans],
        span_events=[e.name for s in spans if s.name == "agent-run" for e in s.events],
        jsonl=emitter.jsonl_path,
    )
    """
    # An endpoint is set, but the application's own providers win: nothing is exported there.
    _, outcome = run_scenario(
        tmp_path,
        body,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{free_port()}",
            "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs"),
        },
        app_providers=True,
    )
    assert outcome["created"] is False
    assert outcome["same_tracer_provider"] is True
    assert outcome["same_logger_provider"] is True
    assert outcome["endpoint"] is None
    assert outcome["protocol"] is None
    assert outcome["events"] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
        None,
    ]
    assert outcome["bodies"][-1] == "app log after shutdown"
    assert outcome["log_ids"] == [[outcome["trace_id"], outcome["span_id"]]]
    assert outcome["spans"] == ["agent-run", "after-shutdown"]
    assert outcome["span_events"] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ]
    assert len(list(read_records(outcome["jsonl"]))) == 4


def test_a_reused_tracer_provider_is_not_shut_down_by_configure(tmp_path: Path) -> None:
    """The app configured tracing only: configure adds a LoggerProvider, and must leave the
    app's TracerProvider running when transcript-otel shuts down."""
    body = """
    trace.set_tracer_provider(app_tracer_provider)
    cfg = transcript_otel.configure(jsonl=False)
    emitter, trace_id, span_id = agent_run("cfg-b2")
    cfg.shutdown()
    with trace.get_tracer("app").start_as_current_span("after-shutdown"):
        pass
    result(
        created=cfg.created_providers,
        same_tracer_provider=cfg.tracer_provider is app_tracer_provider,
        new_logger_provider=cfg.logger_provider is not app_logger_provider,
        spans=[s.name for s in app_spans.get_finished_spans()],
    )
    """
    _, outcome = run_scenario(tmp_path, body, app_providers=True)
    assert outcome["same_tracer_provider"] is True
    assert outcome["new_logger_provider"] is True
    assert outcome["spans"] == ["agent-run", "after-shutdown"]


# -- (c) OTEL_EXPORTER_OTLP_PROTOCOL: grpc vs http/protobuf ----------------------------------


@pytest.mark.receiver
@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_protocol_is_chosen_by_the_environment(rotel: Rotel, tmp_path: Path, protocol: str) -> None:
    if protocol == "grpc":
        pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    name = "cfg-c-" + protocol.replace("/", "-")
    endpoint = rotel.grpc_endpoint if protocol == "grpc" else rotel.http_endpoint
    body = f"""
    cfg = transcript_otel.configure()
    emitter, trace_id, span_id = agent_run({name!r}, span_name={name!r})
    result(protocol=cfg.otlp_protocol, endpoint=cfg.otlp_endpoint, run_id=emitter.run_id,
           trace_id=trace_id, span_id=span_id)
    """
    _, outcome = run_scenario(
        tmp_path,
        body,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": endpoint,
            "OTEL_EXPORTER_OTLP_PROTOCOL": protocol,
            "OTEL_SERVICE_NAME": f"svc-{name}",
            "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs"),
        },
    )
    assert outcome["protocol"] == protocol
    assert outcome["endpoint"] == endpoint
    logs, spans = rotel.wait_for(
        lambda logs, spans: (
            sum(log.attributes.get("transcript.run_id") == outcome["run_id"] for log in logs) >= 4
            and any(span.name == name for span in spans)
        ),
        timeout_s=5,
    )
    received = [log for log in logs if log.attributes.get("transcript.run_id") == outcome["run_id"]]
    # Only this protocol's port speaks it, so arriving at all proves the protocol.
    assert [log.event_name for log in received] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ]
    assert {(log.trace_id, log.span_id) for log in received} == {(outcome["trace_id"], outcome["span_id"])}
    assert [span.trace_id for span in spans if span.name == name] == [outcome["trace_id"]]
    assert f"service.name: Str(svc-{name})" in rotel.output()


@pytest.mark.receiver
def test_signal_specific_endpoint_variables_are_honoured(rotel: Rotel, tmp_path: Path) -> None:
    """OTEL_EXPORTER_OTLP_{TRACES,LOGS}_ENDPOINT are standard OTEL_EXPORTER_OTLP_* variables."""
    body = """
    cfg = transcript_otel.configure(jsonl=False)
    emitter, trace_id, span_id = agent_run("cfg-c-signal")
    result(run_id=emitter.run_id, endpoint=cfg.otlp_endpoint)
    """
    _, outcome = run_scenario(
        tmp_path,
        body,
        {
            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf",
            "OTEL_EXPORTER_OTLP_LOGS_ENDPOINT": f"{rotel.http_endpoint}/v1/logs",
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{rotel.http_endpoint}/v1/traces",
        },
    )
    logs, _ = rotel.wait_for(
        lambda logs, spans: (
            sum(log.attributes.get("transcript.run_id") == outcome["run_id"] for log in logs) >= 4
        ),
        timeout_s=3,
    )
    received = [log for log in logs if log.attributes.get("transcript.run_id") == outcome["run_id"]]
    assert len(received) == 4, "no log records reached OTEL_EXPORTER_OTLP_LOGS_ENDPOINT"


# -- (d) an unsupported protocol: an argument is an error, a variable falls back ------------


def test_unsupported_protocol_argument_is_a_clear_configuration_error(tmp_path: Path) -> None:
    body = """
    try:
        transcript_otel.configure(endpoint="http://127.0.0.1:9", protocol="kafka")
    except transcript_otel.ConfigurationError as exc:
        result(error=str(exc), is_value_error=isinstance(exc, ValueError),
               tracer_provider=type(trace.get_tracer_provider()).__name__,
               logger_provider=type(_logs.get_logger_provider()).__name__)
    else:
        result(error=None)
    """
    _, outcome = run_scenario(tmp_path, body, {"TRANSCRIPT_OTEL_JSONL": "false"})
    assert outcome["error"] is not None, "configure() accepted an unsupported protocol"
    assert "'kafka'" in outcome["error"]
    assert "grpc" in outcome["error"]
    assert "http/protobuf" in outcome["error"]
    assert outcome["is_value_error"] is True
    # Nothing was left half-configured.
    assert outcome["tracer_provider"] == "ProxyTracerProvider"
    assert outcome["logger_provider"] == "ProxyLoggerProvider"


@pytest.mark.parametrize(("protocol", "extra"), [("grpc", "otlp-grpc"), ("http/protobuf", "otlp")])
def test_a_missing_exporter_names_the_extra_that_has_it(tmp_path: Path, protocol: str, extra: str) -> None:
    """`[otlp]` has the OTLP/HTTP exporter only: gRPC without `[otlp-grpc]` says so, in one line."""
    package = "grpc" if protocol == "grpc" else "http"
    body = f"""
    sys.modules["opentelemetry.exporter.otlp.proto.{package}"] = None  # as if not installed
    try:
        transcript_otel.configure(endpoint="http://127.0.0.1:9", protocol="{protocol}")
    except transcript_otel.ConfigurationError as exc:
        result(error=str(exc))
    else:
        result(error=None)
    """
    _, outcome = run_scenario(tmp_path, body, {"TRANSCRIPT_OTEL_JSONL": "false"})
    assert outcome["error"] == (
        f"the OTLP {protocol} exporter is missing: pip install 'transcript-otel[{extra}]'"
    )


@pytest.mark.parametrize("variable", ["OTEL_EXPORTER_OTLP_PROTOCOL", "OTEL_EXPORTER_OTLP_LOGS_PROTOCOL"])
def test_unsupported_protocol_variable_warns_once_and_sends_http_protobuf(
    tmp_path: Path, variable: str
) -> None:
    """`http/json` is a valid OTel value we cannot send: capture must not stop because of it
    (under `opentelemetry-instrument` an exception would switch off every sink)."""
    body = """
    cfg = transcript_otel.configure(endpoint="http://127.0.0.1:9")
    result(protocol=cfg.otlp_protocol, tracer_provider=type(trace.get_tracer_provider()).__name__,
           logger_provider=type(_logs.get_logger_provider()).__name__)
    """
    process, outcome = run_scenario(tmp_path, body, {variable: "http/json", "TRANSCRIPT_OTEL_JSONL": "false"})
    assert outcome["protocol"] == "http/protobuf"
    assert outcome["tracer_provider"] == "TracerProvider"
    assert outcome["logger_provider"] == "LoggerProvider"
    warning = f"transcript-otel: {variable}='http/json' is not supported (use one of grpc, http/protobuf)"
    assert process.stderr.count(warning) == 1, process.stderr


@pytest.mark.parametrize(
    ("variable", "value", "message"),
    [
        ("TRANSCRIPT_OTEL_CONTENT", "metdata", "TRANSCRIPT_OTEL_CONTENT must be one of full, metadata, none"),
        ("TRANSCRIPT_OTEL_CONTENT_EXCLUDE", "secrets", "unknown content categories ['secrets']"),
    ],
)
def test_an_unreadable_content_variable_keeps_metadata_and_capture_goes_on(
    tmp_path: Path, variable: str, value: str, message: str
) -> None:
    runs = tmp_path / "runs"
    body = """
    transcript_otel.configure()
    emitter, _, _ = agent_run("cfg-content")
    transcript_otel.flush()
    result(mode=transcript_otel.get_pipeline().content_policy.mode)
    """
    process, outcome = run_scenario(tmp_path, body, {variable: value, "TRANSCRIPT_OTEL_JSONL_DIR": str(runs)})
    assert outcome["mode"] == "metadata"
    assert process.stderr.count(message) == 1, process.stderr
    (mirror,) = runs.glob("*.jsonl")
    entries = [
        r for r in map(json.loads, mirror.read_text().splitlines()) if r["event"] == "transcript.entry"
    ]
    assert [r["context"]["entry_type"] for r in entries] == ["user_message", "assistant_message"]
    assert "hello" not in mirror.read_text()  # metadata only: a digest of the text, not the text


# -- (e) instrumentors registered by the transcript-otel distribution ------------------------

FAKE_HARNESS = """
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor

CALLS = []


class HarnessInstrumentor(BaseInstrumentor):
    def instrumentation_dependencies(self):
        return ()

    def _instrument(self, **kwargs):
        CALLS.append("harness")

    def _uninstrument(self, **kwargs):
        CALLS.append("harness-off")


class ForeignInstrumentor(BaseInstrumentor):
    def instrumentation_dependencies(self):
        return ()

    def _instrument(self, **kwargs):
        CALLS.append("foreign")

    def _uninstrument(self, **kwargs):
        pass
"""


def first_on_path(directory: Path) -> str:
    """PYTHONPATH with `directory` first: its `*.dist-info` shadows an installed transcript-otel."""
    return os.pathsep.join(p for p in (str(directory), os.environ.get("PYTHONPATH")) if p)


def make_distribution(site: Path, name: str, version: str, entry_points: str) -> None:
    dist_info = site / f"{name.replace('-', '_')}-{version}.dist-info"
    dist_info.mkdir(parents=True)
    (dist_info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (dist_info / "entry_points.txt").write_text(entry_points)


def test_instrumentors_of_our_distribution_are_instrumented(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "fake_harness.py").write_text(FAKE_HARNESS)
    make_distribution(
        site,
        "transcript-otel",
        "0.1.0",
        "[opentelemetry_instrumentor]\n"
        "fake_harness = fake_harness:HarnessInstrumentor\n"
        "broken = fake_harness:DoesNotExist\n",
    )
    make_distribution(
        site,
        "other-dist",
        "1.0",
        "[opentelemetry_instrumentor]\nforeign = fake_harness:ForeignInstrumentor\n",
    )
    body = """
    from importlib import metadata
    import fake_harness
    from transcript_otel.otlp.setup import instrument_installed

    cfg = transcript_otel.configure(jsonl=False)
    again = instrument_installed()
    group = metadata.entry_points(group="opentelemetry_instrumentor")
    result(
        instrumented=cfg.instrumented,
        again=again,
        calls=fake_harness.CALLS,
        ours_active=fake_harness.HarnessInstrumentor().is_instrumented_by_opentelemetry,
        foreign_active=fake_harness.ForeignInstrumentor().is_instrumented_by_opentelemetry,
        visible={ep.name: ep.dist.name for ep in group if ep.dist is not None},
    )
    """
    process, outcome = run_scenario(tmp_path, body, {"PYTHONPATH": first_on_path(site)})
    # The test set-up is what we think: both distributions are visible in the group.
    assert outcome["visible"]["fake_harness"] == "transcript-otel"
    assert outcome["visible"]["foreign"] == "other-dist"
    assert outcome["instrumented"] == ["fake_harness"]
    assert outcome["again"] == ["fake_harness"]
    assert outcome["calls"] == ["harness"]  # instrumented once, even when asked twice
    assert outcome["ours_active"] is True
    assert outcome["foreign_active"] is False
    assert "could not instrument broken" in process.stderr


def test_instrument_false_skips_instrumentors(tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "fake_harness.py").write_text(FAKE_HARNESS)
    make_distribution(
        site,
        "transcript-otel",
        "0.1.0",
        "[opentelemetry_instrumentor]\nh = fake_harness:HarnessInstrumentor\n",
    )
    body = """
    import fake_harness
    cfg = transcript_otel.configure(jsonl=False, instrument=False)
    result(instrumented=cfg.instrumented, calls=fake_harness.CALLS)
    """
    _, outcome = run_scenario(tmp_path, body, {"PYTHONPATH": first_on_path(site)})
    assert outcome == {"instrumented": [], "calls": []}


# -- (f) sinks switched by environment variables and arguments -------------------------------

SINK_SCENARIO = """
trace.set_tracer_provider(app_tracer_provider)
_logs.set_logger_provider(app_logger_provider)
cfg = transcript_otel.configure(**json.loads(os.environ["SCENARIO_KWARGS"]))
first, _, _ = agent_run("cfg-f")
second, _, _ = agent_run("cfg-f-again")
spans = app_spans.get_finished_spans()
result(
    sinks=[sink.name for sink in cfg.pipeline.sinks],
    jsonl_directory=cfg.jsonl_directory,
    jsonl=[first.jsonl_path, second.jsonl_path],
    log_events=[r.log_record.event_name for r in app_logs.get_finished_logs()],
    span_events=[e.name for s in spans for e in s.events],
)
"""


@pytest.mark.parametrize(
    ("env", "kwargs", "sinks"),
    [
        pytest.param(
            {"TRANSCRIPT_OTEL_LOG_RECORDS": "false", "TRANSCRIPT_OTEL_SPAN_EVENTS": "false"},
            {},
            ["jsonl"],
            id="jsonl-only-by-env",
        ),
        pytest.param({}, {"log_records": False, "span_events": False}, ["jsonl"], id="jsonl-only-by-args"),
        pytest.param({"TRANSCRIPT_OTEL_JSONL": "false"}, {}, ["otel_logs", "span_events"], id="no-jsonl"),
        pytest.param(
            {"TRANSCRIPT_OTEL_LOG_RECORDS": "false", "TRANSCRIPT_OTEL_SPAN_EVENTS": "false"},
            {"log_records": True},
            ["jsonl", "otel_logs"],
            id="arguments-beat-env",
        ),
        pytest.param(
            {"TRANSCRIPT_OTEL_EMISSION": "false"}, {}, ["jsonl", "otel_logs", "span_events"], id="off"
        ),
        pytest.param(
            {"TRANSCRIPT_OTEL_SPAN_EVENTS": "false"},
            {"jsonl_path": "ONE_FILE"},
            ["jsonl", "otel_logs"],
            id="one-file",
        ),
    ],
)
def test_sinks_follow_environment_and_arguments(
    tmp_path: Path, env: dict[str, str], kwargs: dict[str, Any], sinks: list[str]
) -> None:
    runs = tmp_path / "runs"
    one_file = tmp_path / "all-runs.jsonl"
    kwargs = {k: str(one_file) if v == "ONE_FILE" else v for k, v in kwargs.items()}
    _, outcome = run_scenario(
        tmp_path,
        SINK_SCENARIO,
        {**env, "TRANSCRIPT_OTEL_JSONL_DIR": str(runs), "SCENARIO_KWARGS": json.dumps(kwargs)},
        app_providers=True,
    )
    assert outcome["sinks"] == sinks
    emitting = env.get("TRANSCRIPT_OTEL_EMISSION") != "false"
    per_run = ["transcript.start", "transcript.entry", "transcript.entry", "transcript.stop"]
    expected_records = per_run * 2 if emitting else []
    assert outcome["log_events"] == (expected_records if "otel_logs" in sinks else [])
    assert outcome["span_events"] == (expected_records if "span_events" in sinks else [])
    if "jsonl" not in sinks:
        assert outcome["jsonl"] == [None, None]
        assert outcome["jsonl_directory"] is None
        assert not runs.exists()
    elif not emitting:
        assert not runs.exists()
    elif "jsonl_path" in kwargs:
        assert outcome["jsonl"] == [str(one_file)] * 2
        assert [r["event"] for r in read_records(one_file)] == expected_records
    else:
        first, second = (Path(p) for p in outcome["jsonl"])
        assert first != second
        assert first.parent == second.parent == runs
        assert [r["event"] for r in read_records(first)] == per_run
        assert [r["event"] for r in read_records(second)] == per_run


# -- (f2) OTEL_TRACES_EXPORTER / OTEL_LOGS_EXPORTER, and copies no exporter takes ------------

EXPORTER_SCENARIO = """
cfg = transcript_otel.configure(service_name="cfg-x")
emitter, trace_id, span_id = agent_run("cfg-x")
cfg.shutdown()
result(sinks=[sink.name for sink in cfg.pipeline.sinks], jsonl=emitter.jsonl_path, run_id=emitter.run_id,
       trace_id=trace_id)
"""


def test_none_exporters_send_nothing_to_the_endpoint_and_make_no_copies(tmp_path: Path) -> None:
    """`none` for both signals, with an endpoint set: no connection is ever made to it (the
    exports of a configured process happen before it exits), no log records or span events
    are made; the mirror keeps every entry, its trace ids and the span records `replay` uses."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        listener.setblocking(False)
        _, outcome = run_scenario(
            tmp_path,
            EXPORTER_SCENARIO,
            {
                "OTEL_EXPORTER_OTLP_ENDPOINT": f"http://127.0.0.1:{listener.getsockname()[1]}",
                "OTEL_TRACES_EXPORTER": "none",
                "OTEL_LOGS_EXPORTER": "none",
                "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs"),
            },
        )
        with pytest.raises(BlockingIOError):
            listener.accept()
    assert outcome["sinks"] == ["jsonl"]
    records = list(read_records(outcome["jsonl"]))
    assert [r["event"] for r in records] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ]
    assert {r["context"].get("trace_id") for r in records} == {outcome["trace_id"]}


@pytest.mark.receiver
@pytest.mark.parametrize("kept", ["TRACES", "LOGS"])
def test_one_signal_set_to_none_reaches_a_real_collector_alone(
    rotel: Rotel, tmp_path: Path, kept: str
) -> None:
    """`OTEL_LOGS_EXPORTER=none`: spans (with the entries as span events) reach rotel, no log
    record does; `OTEL_TRACES_EXPORTER=none`: the log records do, no span. (What is not sent
    is proven by `test_none_exporters_send_nothing_to_the_endpoint_and_make_no_copies`; here
    the other signal is looked for once what is sent has arrived.)"""
    name = f"cfg-none-{kept.lower()}"
    body = f"""
    cfg = transcript_otel.configure()
    emitter, trace_id, span_id = agent_run({name!r}, span_name={name!r})
    result(run_id=emitter.run_id, sinks=[sink.name for sink in cfg.pipeline.sinks])
    """
    dropped = "LOGS" if kept == "TRACES" else "TRACES"
    _, outcome = run_scenario(
        tmp_path,
        body,
        {
            "OTEL_EXPORTER_OTLP_ENDPOINT": rotel.http_endpoint,
            f"OTEL_{dropped}_EXPORTER": "none",
            "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs"),
        },
    )

    def mine(logs: list[Any]) -> list[Any]:
        return [log for log in logs if log.attributes.get("transcript.run_id") == outcome["run_id"]]

    if kept == "TRACES":
        _, spans = rotel.wait_for(lambda logs, spans: any(span.name == name for span in spans), timeout_s=5)
        logs, _ = rotel.received()
        assert outcome["sinks"] == ["jsonl", "span_events"]
        assert mine(logs) == []
        assert [span.name for span in spans if span.name == name] == [name]
    else:
        logs, spans = rotel.wait_for(lambda logs, spans: len(mine(logs)) >= 4, timeout_s=5)
        assert outcome["sinks"] == ["jsonl", "otel_logs"]
        assert [log.event_name for log in mine(logs)] == [
            "transcript.start",
            "transcript.entry",
            "transcript.entry",
            "transcript.stop",
        ]
        assert [span for span in spans if span.name == name] == []


@pytest.mark.parametrize(
    ("env", "sinks"),
    [
        pytest.param({}, ["jsonl"], id="no-endpoint"),
        pytest.param({"TRANSCRIPT_OTEL_LOG_RECORDS": "true"}, ["jsonl", "otel_logs"], id="asked-for"),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9", "OTEL_LOGS_EXPORTER": "none"},
            ["jsonl", "span_events"],
            id="logs-none",
        ),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:9/v1/traces"},
            ["jsonl", "span_events"],
            id="traces-endpoint-only",
        ),
        pytest.param({"OTEL_SDK_DISABLED": "true"}, ["jsonl"], id="sdk-disabled"),
    ],
)
def test_log_records_and_span_events_are_made_only_where_an_exporter_takes_them(
    tmp_path: Path, env: dict[str, str], sinks: list[str]
) -> None:
    body = """
    cfg = transcript_otel.configure(service_name="cfg-x", shutdown_timeout_s=0.5)
    result(sinks=[sink.name for sink in cfg.pipeline.sinks])
    """
    _, outcome = run_scenario(tmp_path, body, {**env, "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs")})
    assert outcome["sinks"] == sinks


def test_console_exporters_print_the_spans_and_log_records(tmp_path: Path) -> None:
    """`console`, what people type to see their telemetry: spans and log records on stdout."""
    process, outcome = run_scenario(
        tmp_path,
        EXPORTER_SCENARIO,
        {
            "OTEL_TRACES_EXPORTER": "console",
            "OTEL_LOGS_EXPORTER": "console",
            "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs"),
        },
    )
    assert outcome["sinks"] == ["jsonl", "otel_logs", "span_events"]
    printed = process.stdout
    assert '"name": "agent-run"' in printed
    assert printed.count('"event_name": "transcript.entry"') == 2
    assert outcome["run_id"] in printed


def test_an_unknown_exporter_name_warns_and_the_others_are_kept(tmp_path: Path) -> None:
    process, outcome = run_scenario(
        tmp_path,
        EXPORTER_SCENARIO,
        {"OTEL_TRACES_EXPORTER": "zipkin,console", "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs")},
    )
    assert "OTEL_TRACES_EXPORTER names zipkin" in process.stderr
    assert outcome["sinks"] == ["jsonl", "span_events"]
    assert '"name": "agent-run"' in process.stdout


# -- (g) the dropped-records metric ------------------------------------------------------------


def test_dropped_records_are_counted_in_the_applications_meter_provider(tmp_path: Path) -> None:
    """Backlog drops and a failing sink's records reach the metric, by where they were lost."""
    body = """
    import threading
    from opentelemetry import metrics
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader
    from transcript_otel.sinks.base import Sink

    reader = InMemoryMetricReader()
    metrics.set_meter_provider(MeterProvider(metric_readers=[reader]))

    class Stuck(Sink):
        # Blocks until released, then refuses every record.
        name = "stuck"
        def __init__(self):
            self.released = threading.Event()
        def write(self, record):
            self.released.wait(10)
            raise OSError("disk gone")

    sink = Stuck()
    pipeline = transcript_otel.TranscriptPipeline([sink], max_backlog_bytes=100_000)
    emitter = transcript_otel.TranscriptEmitter(
        prompt_name="m", adapter="test", session_id="s", pipeline=pipeline
    )
    for _ in range(2000):
        emitter.emit("tool_result", detail={"output": "x" * 2000})
    dropped_here = emitter.dropped_entries
    sink.released.set()
    emitter.stop()
    pipeline.shutdown(5)
    points = {}
    for resource_metrics in reader.get_metrics_data().resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                if metric.name == "transcript_otel.records.dropped":
                    for point in metric.data.data_points:
                        points[point.attributes["transcript_otel.dropped.where"]] = point.value
    result(points=points, dropped_here=dropped_here, failures=pipeline.sink_failures["stuck"])
    """
    _, outcome = run_scenario(tmp_path, body, {"TRANSCRIPT_OTEL_JSONL": "false"})
    assert outcome["dropped_here"] > 0
    assert outcome["points"]["backlog"] == outcome["dropped_here"]
    assert outcome["points"]["stuck"] == outcome["failures"] > 0


@pytest.mark.parametrize(
    ("variable", "expected"),
    [
        ("otlp", ["MeterProvider", "OTLPMetricExporter"]),
        ("console,otlp", ["MeterProvider", "ConsoleMetricExporter", "OTLPMetricExporter"]),
        ("none", ["_ProxyMeterProvider"]),
        ("", ["_ProxyMeterProvider"]),
    ],
)
def test_configure_sets_up_metrics_only_when_asked(
    tmp_path: Path, variable: str, expected: list[str]
) -> None:
    body = """
    from opentelemetry import metrics
    transcript_otel.configure(endpoint="http://127.0.0.1:9")
    provider = metrics.get_meter_provider()
    readers = getattr(provider, "_all_metric_readers", ())
    result(provider=[type(provider).__name__, *sorted(type(r._exporter).__name__ for r in readers)])
    """
    env = {
        "OTEL_METRICS_EXPORTER": variable,
        "TRANSCRIPT_OTEL_JSONL": "false",
        "TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT": "1",
    }
    _, outcome = run_scenario(tmp_path, body, env)
    assert outcome["provider"] == expected


@pytest.mark.parametrize(
    ("env", "seconds"),
    [
        pytest.param({}, 5.0, id="unset: ours"),
        pytest.param({"OTEL_EXPORTER_OTLP_TIMEOUT": "10"}, 10.0, id="seconds, as the exporter reads it"),
        pytest.param(
            {"OTEL_EXPORTER_OTLP_TIMEOUT": "10", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT": "3"},
            3.0,
            id="per signal",
        ),
    ],
)
def test_the_otlp_timeout_variable_has_the_installed_exporters_meaning(
    monkeypatch: pytest.MonkeyPatch, env: dict[str, str], seconds: float
) -> None:
    """`OTEL_EXPORTER_OTLP_TIMEOUT=10` is 10 s for the Python exporters; it was 10 ms here."""
    from transcript_otel.otlp.exporters import otlp_exporter

    for variable in ("OTEL_EXPORTER_OTLP_TIMEOUT", "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT"):
        monkeypatch.delenv(variable, raising=False)
    for variable, value in env.items():
        monkeypatch.setenv(variable, value)
    exporter = otlp_exporter("TRACES", "http://127.0.0.1:9/v1/traces", "http/protobuf")
    # Where the installed exporter keeps the timeout it resolved (it moved in 1.4x).
    holder = exporter._client if hasattr(exporter, "_client") else exporter
    assert holder._timeout == seconds


# -- (h) GenAI content beside the transcript -------------------------------------------------

GENAI_SCENARIO = """
from dataclasses import asdict
from opentelemetry import context

trace.set_tracer_provider(app_tracer_provider)
_logs.set_logger_provider(app_logger_provider)
cfg = transcript_otel.configure(instrument=False, **json.loads(os.environ["SCENARIO_KWARGS"]))
with trace.get_tracer("agent").start_as_current_span("chat"):
    cfg.pipeline.emit_genai_event(
        "gen_ai.client.inference.operation.details",
        {"gen_ai.operation.name": "chat"},
        context.get_current(),
        time.time_ns(),
    )
result(
    genai=asdict(transcript_otel.get_pipeline().genai_content),
    mode=cfg.pipeline.content_policy.mode,
    events=[r.log_record.event_name for r in app_logs.get_finished_logs()],
)
"""


@pytest.mark.parametrize(
    ("env", "kwargs", "genai", "mode"),
    [
        pytest.param({}, {}, (True, False, False, 16384), "full", id="defaults"),
        pytest.param({}, {"openinference": True}, (True, False, True, 16384), "full", id="openinference"),
        pytest.param({}, {"backend_profile": "phoenix"}, (True, False, True, 65536), "full", id="phoenix"),
        pytest.param(
            {"TRANSCRIPT_OTEL_OPENINFERENCE": "true"},
            {"backend_profile": "phoenix", "openinference": False},
            (True, False, False, 65536),
            "full",
            id="argument-beats-env-and-profile",
        ),
        pytest.param(
            {
                "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "span_and_event",
                "TRANSCRIPT_OTEL_OPENINFERENCE": "1",
                "TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH": "500",
            },
            {"backend_profile": "grafana"},
            (True, True, True, 500),
            "full",
            id="env-beats-profile",
        ),
        pytest.param(
            {"OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "NO_CONTENT"},
            {},
            (False, False, False, 16384),
            "metadata",
            id="no-content",
        ),
    ],
)
def test_genai_content_settings_reach_the_pipeline(
    tmp_path: Path, env: dict[str, str], kwargs: dict[str, Any], genai: tuple[Any, ...], mode: str
) -> None:
    scenario_env = {**env, "TRANSCRIPT_OTEL_JSONL": "false", "SCENARIO_KWARGS": json.dumps(kwargs)}
    _, outcome = run_scenario(tmp_path, GENAI_SCENARIO, scenario_env, app_providers=True)
    on_spans, in_events, openinference, max_length = genai
    assert outcome["genai"] == {
        "on_spans": on_spans,
        "in_events": in_events,
        "openinference": openinference,
        "max_length": max_length,
    }
    assert outcome["mode"] == mode
    # The event hook sends through the application's logger provider (log records are on).
    assert outcome["events"] == ["gen_ai.client.inference.operation.details"]
