"""collector-config/: the Collector, compose stack, Grafana provisioning and rotel.env.

What a user of `cd collector-config && docker compose up` relies on: every pipeline is
wired to components that exist, data reaches Jaeger, Tempo and Loki at the host names
and ports those services listen on, images are pinned, mounted files exist, ports stay
on loopback, the dashboard and the trace <-> log links name data sources that are
provisioned, and the dashboard's LogQL asks for attribute names that our OTel log sink
really emits (as Loki stores them). The metrics pipeline (Prometheus) and the dashboard's
PromQL: tests/test_collector_metrics.py. rotel.env is started with the real rotel binary and
must route a real span and log record.

Schema validation runs where a validator is installed: the compose file against the
compose-spec schema vendored by check-jsonschema (the `test` extra), and, when they are
on PATH, `docker compose config`, `otelcol-contrib validate` and `dclint`.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.model.entries import CANONICAL_ENTRY_TYPES
from transcript_otel.otel import attributes
from transcript_otel.sinks import OTelLogSink

from conftest import OTelHarness
from loopback import LOOPBACK, free_port
from receivers import LokiShapedReceiver
from requirements_switch import missing, require
from rotel_collector import ROTEL_MISSING, Rotel, read_env_file, rotel_binary, rotel_environment
from rotel_output import parse_rotel_output

CONFIG_DIR = Path(__file__).resolve().parents[1] / "collector-config"
COLLECTOR_CONFIG = CONFIG_DIR / "otelcol-config.yaml"
COMPOSE_FILE = CONFIG_DIR / "docker-compose.yaml"
TEMPO_CONFIG = CONFIG_DIR / "tempo.yaml"
LOKI_CONFIG = CONFIG_DIR / "loki.yaml"
ROTEL_ENV = CONFIG_DIR / "rotel.env"
DATASOURCES = CONFIG_DIR / "grafana" / "provisioning" / "datasources" / "datasources.yaml"
DASHBOARD_PROVIDERS = CONFIG_DIR / "grafana" / "provisioning" / "dashboards" / "dashboards.yaml"
DASHBOARD = CONFIG_DIR / "grafana" / "dashboards" / "agent-transcripts.json"

PIPELINE_SECTIONS = ("receivers", "processors", "exporters")
# An exact release: 1.2.3, v1.2.3, 3.13.5-slim-bookworm. Not `latest`, not `3` or `3.13`.
EXACT_VERSION_TAG = re.compile(r"v?\d+\.\d+\.\d+(?:[-.][0-9A-Za-z.-]+)?")
# Fields Loki adds to every OTLP log record itself (not attributes we send): the record's
# trace and span ids, and LogQL's own error label.
LOKI_RECORD_FIELDS = frozenset(("trace_id", "span_id", "__error__"))


def load_yaml(path: Path) -> Any:
    return yaml.safe_load(path.read_text(encoding="utf-8"))


def load_json(path: Path) -> Any:
    import json

    return json.loads(path.read_text(encoding="utf-8"))


def loki_name(attribute: str) -> str:
    """The name Loki's OTLP ingestion stores an attribute under: dots (and anything else
    outside [A-Za-z0-9_]) become underscores."""
    return re.sub(r"[^A-Za-z0-9_]", "_", attribute)


def host_and_port(endpoint: str) -> tuple[str, int]:
    """`jaeger:4317` or `http://loki:3100/otlp` -> (host, port)."""
    parts = urlsplit(endpoint if "://" in endpoint else f"//{endpoint}")
    assert parts.hostname is not None, endpoint
    assert parts.port is not None, endpoint
    return parts.hostname, parts.port


def listen_port(endpoint: str) -> int:
    return int(endpoint.rsplit(":", 1)[1])


# -- the collector configuration ---------------------------------------------------------------


@pytest.fixture(scope="module")
def collector() -> Any:
    return load_yaml(COLLECTOR_CONFIG)


@pytest.fixture(scope="module")
def compose() -> Any:
    return load_yaml(COMPOSE_FILE)


def component_type(name: str) -> str:
    """`otlp/jaeger` -> `otlp`: the collector names components `type[/name]`."""
    return name.split("/", 1)[0]


def test_pipelines_use_only_defined_components_and_every_component_is_used(collector: Any) -> None:
    service = collector["service"]
    used: dict[str, set[str]] = {section: set() for section in PIPELINE_SECTIONS}
    for name, pipeline in service["pipelines"].items():
        for section in PIPELINE_SECTIONS:
            assert pipeline.get(section), f"pipeline {name} has no {section}"
            for component in pipeline[section]:
                assert component in collector[section], f"{name} uses undefined {section[:-1]} {component}"
                used[section].add(component)
    for section in PIPELINE_SECTIONS:
        assert set(collector[section]) == used[section], f"{section} defined but never used"
    assert set(service.get("extensions", [])) == set(collector.get("extensions", {}))


def test_memory_limiter_runs_first_and_batch_last_in_every_pipeline(collector: Any) -> None:
    for name, pipeline in collector["service"]["pipelines"].items():
        processors = [component_type(p) for p in pipeline["processors"]]
        assert processors[0] == "memory_limiter", name
        assert processors[-1] == "batch", name


def exporter_hosts(collector: Any, signal: str) -> dict[str, tuple[str, tuple[str, int]]]:
    """{exporter: (type, (host, port))} of the pipeline of `signal`."""
    exporters = collector["service"]["pipelines"][signal]["exporters"]
    return {
        name: (component_type(name), host_and_port(collector["exporters"][name]["endpoint"]))
        for name in exporters
    }


def test_traces_go_to_jaeger_and_tempo_over_otlp_and_logs_to_loki_native_otlp(collector: Any) -> None:
    traces = exporter_hosts(collector, "traces")
    assert sorted(host for _, (host, _) in traces.values()) == ["jaeger", "tempo"]
    assert {kind for kind, _ in traces.values()} == {"otlp"}
    (logs_exporter,) = collector["service"]["pipelines"]["logs"]["exporters"]
    assert component_type(logs_exporter) == "otlphttp"  # the `loki` exporter was removed from contrib
    endpoint = collector["exporters"][logs_exporter]["endpoint"]
    assert host_and_port(endpoint)[0] == "loki"
    assert urlsplit(endpoint).path == "/otlp"  # otlphttp appends /v1/logs: Loki's /otlp/v1/logs


def test_agents_reach_the_collector_over_grpc_and_http_from_the_host(collector: Any, compose: Any) -> None:
    protocols = collector["receivers"]["otlp"]["protocols"]
    # 0.0.0.0 inside the container, or the published port could not reach the receiver.
    assert protocols["grpc"]["endpoint"] == "0.0.0.0:4317"
    assert protocols["http"]["endpoint"] == "0.0.0.0:4318"
    published = compose["services"]["collector"]["ports"]
    assert "127.0.0.1:4317:4317" in published
    assert "127.0.0.1:4318:4318" in published


# -- the compose file ------------------------------------------------------------------------


def test_every_image_is_pinned_to_an_exact_version(compose: Any) -> None:
    for name, service in compose["services"].items():
        image: str = service["image"]
        repository, _, tag = image.rpartition(":")
        assert repository, f"{name}: {image} has no tag"
        assert "/" not in tag, f"{name}: {image} has no tag"
        assert EXACT_VERSION_TAG.fullmatch(tag), f"{name}: {image} is not an exact version"


def bind_mounts(service: dict[str, Any]) -> list[tuple[str, str, list[str]]]:
    """(source, target, options) of the service's mounts of files from this directory."""
    mounts = []
    for volume in service.get("volumes", []):
        source, target, *options = volume.split(":")
        if source.startswith("."):
            mounts.append((source, target, options))
    return mounts


def test_every_file_a_service_mounts_or_reads_exists_and_is_mounted_read_only(compose: Any) -> None:
    mounted = 0
    for name, service in compose["services"].items():
        for source, target, options in bind_mounts(service):
            assert (CONFIG_DIR / source).exists(), f"{name} mounts missing {source}"
            assert "ro" in options, f"{name} mounts {source} at {target} writable"
            mounted += 1
        for env_file in service.get("env_file", []):
            assert (CONFIG_DIR / env_file).is_file(), f"{name} reads missing {env_file}"
    assert mounted >= 5  # collector, tempo, loki, grafana's provisioning and dashboards


def test_every_config_file_a_service_is_told_to_read_is_mounted(compose: Any) -> None:
    for name, service in compose["services"].items():
        targets = {target for _, target, _ in bind_mounts(service)}
        for argument in service.get("command", []):
            if "config" in argument and "=" in argument:
                path = argument.split("=", 1)[1]
                assert path in targets, f"{name} reads {path}, which is not mounted"


def test_published_ports_bind_loopback_only(compose: Any) -> None:
    for name, service in compose["services"].items():
        for port in service.get("ports", []):
            assert isinstance(port, str), f"{name}: {port} (a number publishes on every interface)"
            assert port.startswith("127.0.0.1:"), f"{name}: {port}"


def container_ports(service: dict[str, Any]) -> set[int]:
    return {int(port) for port in service.get("expose", [])} | {
        int(str(port).rsplit(":", 1)[1]) for port in service.get("ports", [])
    }


# Exporters that the backend pulls from: their endpoint is where they listen, not a backend
# (tests/test_collector_metrics.py checks that Prometheus scrapes it).
PULLED_EXPORTERS = frozenset(("prometheus",))


def test_the_collector_exports_to_services_and_ports_the_stack_has(collector: Any, compose: Any) -> None:
    services = compose["services"]
    for name, exporter in collector["exporters"].items():
        if component_type(name) in PULLED_EXPORTERS:
            continue
        host, port = host_and_port(exporter["endpoint"])
        assert host in services, f"no service {host}"
        assert port in container_ports(services[host]), f"{host} does not listen on {port}"
        assert "collector" not in services[host].get("depends_on", {}), "a backend waits for the collector"
        assert host in services["collector"]["depends_on"]
    # The ports the backends' own configuration files listen on.
    tempo_grpc = load_yaml(TEMPO_CONFIG)["distributor"]["receivers"]["otlp"]["protocols"]["grpc"]["endpoint"]
    assert host_and_port(collector["exporters"]["otlp/tempo"]["endpoint"])[1] == listen_port(tempo_grpc)
    loki_http = load_yaml(LOKI_CONFIG)["server"]["http_listen_port"]
    assert host_and_port(collector["exporters"]["otlphttp/loki"]["endpoint"])[1] == loki_http


def test_loki_accepts_otlp_logs_with_their_attributes() -> None:
    loki = load_yaml(LOKI_CONFIG)
    limits = loki["limits_config"]
    assert limits["allow_structured_metadata"] is True  # else Loki refuses OTLP logs
    schemas = loki["schema_config"]["configs"]
    # tsdb and v13: the schema that stores structured metadata.
    assert schemas[-1]["store"] == "tsdb"
    assert schemas[-1]["schema"] == "v13"
    # The `grafana` profile cuts values at 16 K characters: detail and raw together, at up to
    # 4 bytes a character, must fit Loki's structured-metadata limit per line.
    size = limits["max_structured_metadata_size"]
    assert size.endswith("KB")
    assert int(size[:-2]) * 1024 >= 2 * 16 * 1024 * 4
    for rule in limits["otlp_config"]["log_attributes"]:
        assert rule["action"] != "index_label"  # per-record values would explode the streams


def test_tempo_keeps_span_event_values_of_every_backend_profile_whole() -> None:
    from transcript_otel.capture.defaults import BACKEND_PROFILES

    longest_characters = max(p.span_event_value_length for p in BACKEND_PROFILES.values())
    limit = load_yaml(TEMPO_CONFIG)["distributor"]["max_attribute_bytes"]
    assert limit >= longest_characters * 4  # UTF-8: up to 4 bytes a character


# -- Grafana provisioning and the dashboard --------------------------------------------------


@pytest.fixture(scope="module")
def datasources() -> dict[str, dict[str, Any]]:
    return {source["uid"]: source for source in load_yaml(DATASOURCES)["datasources"]}


@pytest.fixture(scope="module")
def dashboard() -> Any:
    return load_json(DASHBOARD)


def unescape_provisioning(text: str) -> str:
    """What Grafana makes of `$$` in a provisioning file: a literal `$`."""
    return text.replace("$$", "$")


def test_datasources_point_at_the_compose_services(datasources: dict[str, Any], compose: Any) -> None:
    assert {source["type"] for source in datasources.values()} == {"loki", "tempo", "jaeger", "prometheus"}
    services = compose["services"]
    for source in datasources.values():
        host, port = host_and_port(source["url"])
        assert host in services, source["url"]
        assert port in container_ports(services[host]), source["url"]
        assert "grafana" in services[host].get("depends_on", {}) or host in services["grafana"]["depends_on"]


def test_trace_to_log_links_filter_the_loki_records_by_trace_id(datasources: dict[str, Any]) -> None:
    for source in datasources.values():
        if source["type"] not in ("tempo", "jaeger"):
            continue
        link = source["jsonData"]["tracesToLogsV2"]
        assert datasources[link["datasourceUid"]]["type"] == "loki"
        # Loki keeps the trace id as structured metadata, not in the line: filter on the field.
        query = unescape_provisioning(link["query"])
        assert link["customQuery"] is True
        assert '| trace_id="${__span.traceId}"' in query
        assert {tag["value"] for tag in link["tags"]} == {loki_name("service.name")}


def test_log_to_trace_links_read_the_trace_id_field_and_open_both_trace_stores(
    datasources: dict[str, Any],
) -> None:
    fields = datasources["loki"]["jsonData"]["derivedFields"]
    targets = set()
    for field in fields:
        assert field["matcherType"] == "label"
        assert field["matcherRegex"] == "trace_id"
        assert unescape_provisioning(field["url"]) == "${__value.raw}"
        targets.add(datasources[field["datasourceUid"]]["type"])
    assert targets == {"tempo", "jaeger"}


def test_grafana_loads_the_dashboard_directory_it_mounts(compose: Any) -> None:
    (provider,) = load_yaml(DASHBOARD_PROVIDERS)["providers"]
    mounts = {target: source for source, target, _ in bind_mounts(compose["services"]["grafana"])}
    source = mounts[provider["options"]["path"]]
    assert (CONFIG_DIR / source / DASHBOARD.name).is_file()


def panel_targets(dashboard: Any) -> Iterator[tuple[dict[str, Any], dict[str, Any]]]:
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield panel, target


def test_the_dashboard_uses_only_provisioned_datasources(dashboard: Any, datasources: dict[str, Any]) -> None:
    references = [panel["datasource"] for panel in dashboard["panels"]]
    references += [target["datasource"] for _, target in panel_targets(dashboard)]
    references += [v["datasource"] for v in dashboard["templating"]["list"] if "datasource" in v]
    for reference in references:
        assert reference["uid"] in datasources, reference
        assert datasources[reference["uid"]]["type"] == reference["type"], reference


def test_the_dashboard_has_unique_panels_on_the_grid(dashboard: Any) -> None:
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids))
    for panel in dashboard["panels"]:
        grid = panel["gridPos"]
        assert grid["x"] >= 0, panel["title"]
        assert grid["x"] + grid["w"] <= 24, panel["title"]
    kinds = {panel["type"] for panel in dashboard["panels"]}
    assert "logs" in kinds  # the transcript itself


def queries_of(dashboard: Any, datasource_type: str) -> list[str]:
    """The queries (`expr`) of the dashboard's targets on data sources of this type."""
    return [
        target["expr"]
        for _, target in panel_targets(dashboard)
        if "expr" in target and target["datasource"]["type"] == datasource_type
    ]


def logql_queries(dashboard: Any) -> list[str]:
    return queries_of(dashboard, "loki")


# Names a LogQL query reads: label filters (`| name op`), `by (...)`, `unwrap name`, and
# `.name` inside a line_format template.
_LABEL_FILTER = re.compile(r"\|\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|>=|<=|==|=|>|<)")
_GROUPING = re.compile(r"\b(?:by|without)\s*\(([^)]*)\)")
_UNWRAP = re.compile(r"\bunwrap\s+([A-Za-z_][A-Za-z0-9_]*)")
_TEMPLATE_FIELD = re.compile(r"\{\{[^}]*?\.([A-Za-z_][A-Za-z0-9_]*)")
_STREAM_SELECTOR = re.compile(r"\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_LINE_CONTAINS = re.compile(r'\|=\s*"([^"]*)"')
_LINE_MATCHES = re.compile(r"\|~\s*`([^`]*)`")


def names_read_by(query: str) -> set[str]:
    names = set(_LABEL_FILTER.findall(query)) | set(_UNWRAP.findall(query))
    names |= set(_TEMPLATE_FIELD.findall(query)) | set(_STREAM_SELECTOR.findall(query))
    for group in _GROUPING.findall(query):
        names |= {name.strip() for name in group.split(",") if name.strip()}
    return names


@pytest.fixture
def emitted_records(make_pipeline: Callable[..., TranscriptPipeline], otel: OTelHarness) -> list[Any]:
    """Real log records from our OTel log sink: a run with every entry the dashboard counts."""
    pipeline = make_pipeline([OTelLogSink(otel.logger_provider)])
    emitter = TranscriptEmitter(
        prompt_name="dashboard", adapter="claude_agent_sdk", session_id="session-1", pipeline=pipeline
    )
    with otel.tracer.start_as_current_span("invoke_agent dashboard"):
        emitter.start()
        emitter.emit("user_message", detail={"text": "list the files"})
        emitter.emit("tool_use", detail={"tool_use_id": "call-1", "name": "Bash", "input": {"cmd": "ls"}})
        emitter.emit("tool_result", detail={"tool_use_id": "call-1", "name": "Bash", "content": "a b"})
        usage = {
            "input_tokens": 10,
            "output_tokens": 5,
            "cache_read_input_tokens": 3,
            "cache_creation_input_tokens": 2,
            "reasoning_output_tokens": 1,
        }
        emitter.emit("token_usage", detail={"usage": usage})
        emitter.emit("error", detail={"message": "boom"})
        emitter.stop()
    assert pipeline.flush()
    return otel.finished_logs()


def loki_fields_of(records: list[Any]) -> set[str]:
    """Every field name Loki would give these records: their attributes and resource
    attributes, renamed as Loki's OTLP ingestion renames them, plus Loki's own fields."""
    names = set(LOKI_RECORD_FIELDS)
    for record in records:
        names |= {loki_name(key) for key in record.log_record.attributes or {}}
        names |= {loki_name(key) for key in record.resource.attributes}
    return names


def test_the_dashboards_logql_reads_attributes_our_log_sink_emits(
    dashboard: Any, emitted_records: list[Any]
) -> None:
    available = loki_fields_of(emitted_records)
    for query in logql_queries(dashboard):
        unknown = names_read_by(query) - available
        assert not unknown, f"{query}\n reads {unknown}, which no transcript record carries"
    # And the attributes the panels are about are the ones attributes.py names.
    read = set().union(*(names_read_by(query) for query in logql_queries(dashboard)))
    for attribute in (
        f"{attributes.NAMESPACE}.entry_type",
        attributes.RUN_ID,
        attributes.DETAIL,
        attributes.GEN_AI_TOOL_NAME,
        attributes.GEN_AI_CONVERSATION_ID,
        attributes.GEN_AI_USAGE_INPUT_TOKENS,
        attributes.GEN_AI_USAGE_OUTPUT_TOKENS,
        attributes.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        attributes.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
        attributes.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
    ):
        assert loki_name(attribute) in read, attribute


def test_the_dashboards_line_filters_match_the_bodies_of_our_records(
    dashboard: Any, emitted_records: list[Any]
) -> None:
    bodies: dict[str, set[str]] = {str(record.log_record.event_name): set() for record in emitted_records}
    for record in emitted_records:
        bodies[str(record.log_record.event_name)].add(str(record.log_record.body))
    for query in logql_queries(dashboard):
        for text in _LINE_CONTAINS.findall(query):
            # Selects exactly the transcript.entry records.
            assert all(text in body for body in bodies["transcript.entry"]), text
            assert not any(
                text in body
                for event, found in bodies.items()
                if event != "transcript.entry"
                for body in found
            ), text
        for pattern in _LINE_MATCHES.findall(query):
            matched = {event for event, found in bodies.items() for body in found if re.search(pattern, body)}
            assert matched == {"transcript.start"}, pattern


def test_the_dashboards_traceql_reads_attributes_our_spans_carry(dashboard: Any) -> None:
    span_attributes = {
        attributes.GEN_AI_OPERATION_NAME,
        attributes.RUN_ID,
        attributes.GEN_AI_TOOL_NAME,
        attributes.GEN_AI_CONVERSATION_ID,
    }
    operations = {"invoke_agent", "execute_tool", "chat"}
    traceql = [
        target["query"] for _, target in panel_targets(dashboard) if target.get("queryType") == "traceql"
    ]
    assert traceql
    for query in traceql:
        for name in re.findall(r"\bspan\.([A-Za-z_][A-Za-z0-9_.]*)", query):
            assert name in span_attributes, query
        for operation in re.findall(r'gen_ai\.operation\.name\s*=\s*"([^"]+)"', query):
            assert operation in operations, query


def test_the_entry_type_filter_offers_the_canonical_entry_types(dashboard: Any) -> None:
    (variable,) = [v for v in dashboard["templating"]["list"] if v["name"] == "entry_type"]
    assert set(variable["query"].split(",")) == CANONICAL_ENTRY_TYPES
    assert {option["value"] for option in variable["options"]} == CANONICAL_ENTRY_TYPES


def test_every_dashboard_variable_a_query_uses_is_defined(dashboard: Any) -> None:
    defined = {variable["name"] for variable in dashboard["templating"]["list"]}
    builtin = {"__range", "__auto", "__interval", "__all"}
    for _, target in panel_targets(dashboard):
        text = target.get("expr") or target.get("query") or ""
        used = set(re.findall(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)", text))
        assert used <= defined | builtin, text


# -- rotel.env -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rotel_env() -> dict[str, str]:
    return read_env_file(ROTEL_ENV)


def named_exporters(variables: dict[str, str]) -> dict[str, str]:
    return dict(entry.split(":", 1) for entry in variables["ROTEL_EXPORTERS"].split(","))


def test_rotel_env_routes_traces_to_tempo_and_logs_to_loki_like_the_collector(
    rotel_env: dict[str, str], collector: Any
) -> None:
    exporters = named_exporters(rotel_env)
    assert exporters == {"jaeger": "otlp", "tempo": "otlp", "loki": "otlp"}
    assert rotel_env["ROTEL_EXPORTERS_TRACES"] == "tempo"
    assert rotel_env["ROTEL_EXPORTERS_LOGS"] == "loki"
    # The same destinations as the collector's exporters, over the same protocols.
    assert rotel_env["ROTEL_EXPORTER_LOKI_PROTOCOL"] == "http"
    assert rotel_env["ROTEL_EXPORTER_LOKI_ENDPOINT"] == collector["exporters"]["otlphttp/loki"]["endpoint"]
    for name in ("jaeger", "tempo"):
        assert rotel_env[f"ROTEL_EXPORTER_{name.upper()}_PROTOCOL"] == "grpc"
        endpoint = rotel_env[f"ROTEL_EXPORTER_{name.upper()}_ENDPOINT"]
        assert host_and_port(endpoint) == host_and_port(collector["exporters"][f"otlp/{name}"]["endpoint"])
    assert rotel_env["ROTEL_OTLP_GRPC_ENDPOINT"].endswith(":4317")
    assert rotel_env["ROTEL_OTLP_HTTP_ENDPOINT"].endswith(":4318")


@pytest.fixture(scope="module")
def rotel_agent() -> Path:
    return require(rotel_binary(), ROTEL_MISSING)


def test_rotel_env_names_only_settings_rotel_knows(rotel_env: dict[str, str], rotel_agent: Path) -> None:
    help_text = subprocess.run(
        [str(rotel_agent), "start", "--help"],
        env=rotel_environment(),
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    known = set(re.findall(r"\[env: (ROTEL_[A-Z0-9_]+)=", help_text))
    # A named exporter takes the generic OTLP exporter's settings as ROTEL_EXPORTER_<NAME>_<SETTING>.
    settings = {
        name.removeprefix("ROTEL_OTLP_EXPORTER_") for name in known if name.startswith("ROTEL_OTLP_EXPORTER_")
    }
    for name in named_exporters(rotel_env):
        known |= {f"ROTEL_EXPORTER_{name.upper()}_{setting}" for setting in settings}
    assert set(rotel_env) <= known, set(rotel_env) - known


@pytest.fixture
def loki_stand_in() -> Iterator[LokiShapedReceiver]:
    with LokiShapedReceiver() as receiver:
        yield receiver


@pytest.fixture
def trace_store_stand_in(rotel_agent: Path, tmp_path: Path) -> Iterator[Rotel]:
    """A second rotel that prints the spans it receives: Tempo's (or Jaeger's) place."""
    store = Rotel(rotel_agent, tmp_path / "trace-store").start()
    yield store
    store.stop()


def wait_for(condition: Callable[[], bool], timeout_s: float, rotel: Rotel) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert rotel.process is not None, "rotel was stopped"
        assert rotel.process.poll() is None, f"rotel exited: {rotel.output()[-2000:]}"
        assert time.monotonic() < deadline, f"timed out; rotel said: {rotel.output()[-2000:]}"
        time.sleep(0.05)


def send_span_and_log(http_endpoint: str) -> None:
    """One span and one log record inside it, over OTLP/HTTP, as an instrumented agent sends them."""
    from opentelemetry._logs import SeverityNumber
    from opentelemetry.exporter.otlp.proto.http._log_exporter import OTLPLogExporter
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk._logs import LoggerProvider
    from opentelemetry.sdk._logs.export import SimpleLogRecordProcessor
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    resource = Resource.create({"service.name": "collector-config-test"})
    tracer_provider = TracerProvider(resource=resource, shutdown_on_exit=False)
    tracer_provider.add_span_processor(SimpleSpanProcessor(OTLPSpanExporter(f"{http_endpoint}/v1/traces")))
    logger_provider = LoggerProvider(resource=resource, shutdown_on_exit=False)
    logger_provider.add_log_record_processor(
        SimpleLogRecordProcessor(OTLPLogExporter(f"{http_endpoint}/v1/logs"))
    )
    try:
        with tracer_provider.get_tracer("test").start_as_current_span("invoke_agent routing"):
            logger_provider.get_logger("test").emit(
                timestamp=time.time_ns(),
                severity_number=SeverityNumber.DEBUG,
                body="transcript entry: user_message",
                attributes={"transcript.entry_type": "user_message"},
                event_name="transcript.entry",
            )
    finally:
        tracer_provider.shutdown()
        logger_provider.shutdown()


@pytest.mark.receiver
@pytest.mark.otlp
@pytest.mark.parametrize("traces_exporter", ["as in the file", "jaeger"])
def test_rotel_started_with_the_file_routes_spans_and_logs(
    traces_exporter: str,
    rotel_env: dict[str, str],
    rotel_agent: Path,
    loki_stand_in: LokiShapedReceiver,
    trace_store_stand_in: Rotel,
    tmp_path: Path,
) -> None:
    pytest.importorskip("opentelemetry.exporter.otlp.proto.http")
    # Every key of the file; only the endpoints point at loopback stand-ins instead of the
    # compose services (and, in the second case, traces go to the file's `jaeger` exporter).
    # Rotel listens on free loopback ports (its command line wins over the file's two).
    variables = dict(rotel_env)
    variables.update(
        ROTEL_EXPORTER_JAEGER_ENDPOINT=trace_store_stand_in.grpc_endpoint,
        ROTEL_EXPORTER_TEMPO_ENDPOINT=trace_store_stand_in.grpc_endpoint,
        ROTEL_EXPORTER_LOKI_ENDPOINT=loki_stand_in.endpoint,
    )
    if traces_exporter == "jaeger":
        variables["ROTEL_EXPORTERS_TRACES"] = "jaeger"
    with Rotel(rotel_agent, tmp_path / "rotel", routing=variables, debug_log=()) as rotel:
        send_span_and_log(rotel.http_endpoint)

        def span_arrived() -> bool:
            _, spans = parse_rotel_output(trace_store_stand_in.output())
            return any(span.name == "invoke_agent routing" for span in spans)

        # The file batches for up to 2 s.
        wait_for(lambda: bool(loki_stand_in.logs) and span_arrived(), 20, rotel)
        assert set(loki_stand_in.paths) == {LokiShapedReceiver.PATH}  # Loki's native OTLP path
        assert [log.event_name for log in loki_stand_in.logs] == ["transcript.entry"]


@pytest.mark.receiver
def test_rotel_sends_each_signal_to_one_exporter_only(rotel_env: dict[str, str], rotel_agent: Path) -> None:
    """Why rotel.env sends traces to Tempo only: this rotel refuses two trace exporters. If a
    newer rotel accepts them, rotel.env can fan traces out to Jaeger and Tempo as well."""
    variables = dict(rotel_env)
    variables.update(
        ROTEL_OTLP_GRPC_ENDPOINT=f"{LOOPBACK}:{free_port()}",
        ROTEL_OTLP_HTTP_ENDPOINT=f"{LOOPBACK}:{free_port()}",
        ROTEL_EXPORTERS_TRACES="jaeger,tempo",
    )
    refused = subprocess.run(
        [str(rotel_agent), "start"],
        env=rotel_environment(**variables),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        errors="replace",
        timeout=15,
    )
    assert refused.returncode != 0
    assert "Only one exporter supported" in refused.stdout


# -- schema validation, where a validator is installed -----------------------------------------


def check_jsonschema_command() -> list[str]:
    if subprocess.run([sys.executable, "-c", "import check_jsonschema"], capture_output=True).returncode:
        missing("check-jsonschema (the `test` group) is not installed: no compose-spec validation")
    return [sys.executable, "-m", "check_jsonschema", "--builtin-schema", "vendor.compose-spec"]


def test_the_compose_file_is_valid_against_the_compose_spec_schema() -> None:
    result = subprocess.run(
        [*check_jsonschema_command(), str(COMPOSE_FILE)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_compose_spec_validation_rejects_a_misspelled_key(tmp_path: Path) -> None:
    """The validator really reads the file: a typo that YAML accepts must fail it."""
    broken = tmp_path / "docker-compose.yaml"
    broken.write_text(
        COMPOSE_FILE.read_text(encoding="utf-8").replace(
            "    image: grafana/tempo:", "    imagee: grafana/tempo:"
        ),
        encoding="utf-8",
    )
    result = subprocess.run(
        [*check_jsonschema_command(), str(broken)], capture_output=True, text=True, timeout=120
    )
    assert result.returncode != 0
    assert "imagee" in result.stdout + result.stderr


def test_docker_compose_config_accepts_the_stack() -> None:
    docker = shutil.which("docker")
    if docker is None or subprocess.run([docker, "compose", "version"], capture_output=True).returncode:
        pytest.skip("`docker compose` (the Compose plugin) is not installed here")
    result = subprocess.run(
        [docker, "compose", "--profile", "rotel", "config", "--quiet"],
        cwd=CONFIG_DIR,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr


def test_otelcol_contrib_validates_the_collector_config() -> None:
    otelcol = shutil.which("otelcol-contrib")
    if otelcol is None:
        pytest.skip("otelcol-contrib is not on PATH (no registry ships it): no collector schema check")
    result = subprocess.run(
        [otelcol, "validate", f"--config={COLLECTOR_CONFIG}"], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_dclint_finds_no_error_in_the_compose_file() -> None:
    dclint = shutil.which("dclint")
    if dclint is None:
        pytest.skip(
            "dclint is not installed (npm install --no-save dclint@3.1.0, then put node_modules/.bin on PATH)"
        )
    result = subprocess.run([dclint, str(COMPOSE_FILE)], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stdout + result.stderr
