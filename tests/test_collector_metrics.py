"""collector-config/'s metrics: the collector's pipeline, Prometheus, and the dashboard's PromQL.

What a user of the stack relies on for the GenAI metrics (docs/data-model.md#genai-metrics):
the collector's metrics pipeline ends in its `prometheus` exporter, Prometheus scrapes the port
that exporter listens on and keeps the labels it writes, and every series and label the
dashboard's PromQL reads is one our meters emit, named as Prometheus names OTLP metrics (the
metrics here are made by the real recorders on a real SDK MeterProvider). The dashboard counts
each agent process from zero: most agents export their metrics once, at exit, as a series of
their own (service.instance.id), and `increase()` counts nothing of a series' first value.

With promtool (Debian's `prometheus`; `make promtool` installs it): prometheus.yaml is valid,
every PromQL query of the dashboard parses, and the sums give what was spent, evaluated by
Prometheus' own engine on series shaped like an agent's.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("opentelemetry.sdk")

import yaml
from opentelemetry.metrics import _internal as metrics_api
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import Histogram, InMemoryMetricReader, Metric, Sum
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider

from test_collector_config import (
    CONFIG_DIR,
    bind_mounts,
    component_type,
    container_ports,
    listen_port,
    load_json,
    load_yaml,
    queries_of,
)
from transcript_otel.genai import metrics as genai_metrics
from transcript_otel.otel import metrics as otel_metrics

from requirements_switch import require

PROMETHEUS_CONFIG = CONFIG_DIR / "prometheus.yaml"
COLLECTOR_CONFIG = CONFIG_DIR / "otelcol-config.yaml"
COMPOSE_FILE = CONFIG_DIR / "docker-compose.yaml"
DASHBOARD = CONFIG_DIR / "grafana" / "dashboards" / "agent-transcripts.json"

# Labels the collector's `prometheus` exporter writes on every series besides the data point's
# attributes: service.name, service.instance.id, the meter's name, version and schema URL.
EXPORTER_LABELS = frozenset(
    ("job", "instance", "otel_scope_name", "otel_scope_version", "otel_scope_schema_url")
)
# Units Prometheus spells out as a name suffix (ours use only these; a `{...}` unit is an
# annotation, left out of the name).
UNIT_SUFFIXES = {"s": "seconds"}
# A selector `name{matchers}` (PromQL functions are followed by `(`), its `label op "value"`
# matchers, and `by (...)` groupings.
_SELECTOR = re.compile(r"\b([A-Za-z_:][A-Za-z0-9_:]*)\{([^}]*)\}")
_MATCHER = re.compile(r'([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)\s*"([^"]*)"')
_GROUPING = re.compile(r"\bby\s*\(([^)]*)\)")
# Grafana's variables, as the tests evaluate the queries: every service, windows of an hour.
GRAFANA_VARIABLES = {"$service": ".+", "$__range": "1h", "$__interval": "1h"}


def prometheus_label(attribute: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", attribute)


def prometheus_series(metric: Metric) -> list[str]:
    """The series names Prometheus gives an OTLP metric (`add_metric_suffixes`, the default)."""
    name = prometheus_label(metric.name)
    unit = metric.unit or ""
    if not unit.startswith("{"):
        suffix = UNIT_SUFFIXES[unit]  # a unit of ours this table lacks: say how Prometheus names it
        name = name if name.endswith(f"_{suffix}") else f"{name}_{suffix}"
    if isinstance(metric.data, Histogram):
        return [f"{name}_bucket", f"{name}_sum", f"{name}_count"]
    assert isinstance(metric.data, Sum)
    assert metric.data.is_monotonic
    return [f"{name}_total"]


@pytest.fixture
def emitted(monkeypatch: pytest.MonkeyPatch) -> Iterator[dict[str, tuple[str, set[str]]]]:
    """{series: (meter, labels)} of every metric we emit, as Prometheus names them: each recorded
    by its real recorder, with every attribute it can carry, on an SDK MeterProvider."""
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader], shutdown_on_exit=False)
    monkeypatch.setattr(metrics_api, "_METER_PROVIDER", provider)
    otel_metrics._dropped_counter.cache_clear()  # made on first use, from the provider set then
    tracer = TracerProvider(shutdown_on_exit=False).get_tracer("test")
    model = {"gen_ai.provider.name": "anthropic", "gen_ai.request.model": "m", "gen_ai.response.model": "m"}
    spans: list[tuple[dict[str, str | float], str]] = [
        ({"gen_ai.operation.name": "chat", **model, "gen_ai.usage.cost": 0.01}, "api_error"),
        ({"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": "review", **model}, "api_error"),
        (
            {
                "gen_ai.operation.name": "execute_tool",
                "gen_ai.tool.name": "Bash",
                "gen_ai.tool.type": "extension",
                "gen_ai.agent.name": "review",
            },
            "tool_error",
        ),
    ]
    usage = {"gen_ai.usage.input_tokens": 10, "gen_ai.usage.output_tokens": 5}
    for attributes, error_type in spans:
        span = tracer.start_span("span", attributes=attributes)
        assert isinstance(span, ReadableSpan)
        assert span.start_time is not None
        genai_metrics.record_span_end(span, span.start_time + 10**9, usage, error_type)
        span.end()
    otel_metrics.count_dropped(1, otel_metrics.BACKLOG)
    data = reader.get_metrics_data()
    assert data is not None
    found: dict[str, tuple[str, set[str]]] = {}
    for resource_metrics in data.resource_metrics:
        for scope_metrics in resource_metrics.scope_metrics:
            for metric in scope_metrics.metrics:
                keys = {key for point in metric.data.data_points for key in point.attributes or {}}
                labels = {prometheus_label(key) for key in keys} | EXPORTER_LABELS
                for series in prometheus_series(metric):
                    found[series] = (
                        scope_metrics.scope.name,
                        labels | ({"le"} if series.endswith("_bucket") else set()),
                    )
    yield found
    provider.shutdown()
    otel_metrics._dropped_counter.cache_clear()


@pytest.fixture(scope="module")
def promql() -> list[str]:
    queries = queries_of(load_json(DASHBOARD), "prometheus")
    assert queries
    return queries


def selectors(query: str) -> list[tuple[str, dict[str, str]]]:
    return [(name, dict(_MATCHER.findall(matchers))) for name, matchers in _SELECTOR.findall(query)]


# -- the collector and Prometheus -------------------------------------------------------------


def test_metrics_go_to_the_prometheus_exporter_that_prometheus_scrapes() -> None:
    collector, compose = load_yaml(COLLECTOR_CONFIG), load_yaml(COMPOSE_FILE)
    (exporter,) = collector["service"]["pipelines"]["metrics"]["exporters"]
    assert component_type(exporter) == "prometheus"
    endpoint = collector["exporters"][exporter]["endpoint"]
    assert endpoint.startswith("0.0.0.0:")  # inside the container: reachable from Prometheus'
    port = listen_port(endpoint)
    services = compose["services"]
    assert port in container_ports(services["collector"])
    assert not [p for p in services["collector"]["ports"] if p.endswith(f":{port}")]  # not on the host
    (scrape,) = load_yaml(PROMETHEUS_CONFIG)["scrape_configs"]
    (targets,) = [group["targets"] for group in scrape["static_configs"]]
    assert targets == [f"collector:{port}"]
    # Else Prometheus renames the exporter's job (the service name) to exported_job.
    assert scrape["honor_labels"] is True
    # The file it reads is this one, and its data survives a restart.
    prometheus = services["prometheus"]
    mounts = {source: target for source, target, _ in bind_mounts(prometheus)}
    assert f"--config.file={mounts['./prometheus.yaml']}" in prometheus["command"]
    assert any(volume.startswith("prometheus-data:") for volume in prometheus["volumes"])
    assert "collector" in prometheus["depends_on"]


# -- the dashboard's PromQL ---------------------------------------------------------------------


def test_the_dashboards_promql_reads_series_and_labels_our_meters_emit(
    promql: list[str], emitted: dict[str, tuple[str, set[str]]]
) -> None:
    for query in promql:
        read = selectors(query)
        assert read, query
        labels: set[str] = set()
        for series, matchers in read:
            assert series in emitted, f"{query}\n reads {series}, which we do not emit: {sorted(emitted)}"
            meter, known = emitted[series]
            # Only our meter's points: others record the same GenAI metric names (docs/coexistence.md).
            assert matchers.get("otel_scope_name") == meter, query
            assert set(matchers) <= known, query
            labels |= known
        for grouping in _GROUPING.findall(query):
            grouped = {name.strip() for name in grouping.split(",")}
            assert grouped <= labels, f"{query}\n groups by {grouped - labels}"


def test_the_metrics_panels_show_tokens_cost_and_turn_tool_and_agent_durations(promql: list[str]) -> None:
    read = {series for query in promql for series, _ in selectors(query)}
    for metric, series in (
        (genai_metrics.TOKEN_USAGE, "gen_ai_client_token_usage_sum"),
        (genai_metrics.COST, "transcript_otel_usage_cost_total"),
        (genai_metrics.OPERATION_DURATION, "gen_ai_client_operation_duration_seconds_bucket"),
        (genai_metrics.TOOL_DURATION, "gen_ai_execute_tool_duration_seconds_bucket"),
        (genai_metrics.AGENT_DURATION, "gen_ai_invoke_agent_duration_seconds_bucket"),
    ):
        assert series in read, metric


def test_no_query_counts_with_increase_or_rate(promql: list[str]) -> None:
    """They start from a series' first sample: an agent that exported once would count nothing."""
    for query in promql:
        assert not re.search(r"\b(?:increase|rate|irate|delta)\(", query), query


# -- with promtool ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def promtool() -> str:
    return require(shutil.which("promtool"), "promtool is not installed (`make promtool`)")


def as_evaluated(query: str) -> str:
    for variable, value in GRAFANA_VARIABLES.items():
        query = query.replace(variable, value)
    return query


def run_promtool(promtool: str, *arguments: str) -> None:
    result = subprocess.run([promtool, *arguments], capture_output=True, text=True, timeout=60, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_promtool_accepts_the_prometheus_config(promtool: str) -> None:
    run_promtool(promtool, "check", "config", str(PROMETHEUS_CONFIG))


def test_promtool_parses_every_promql_query_of_the_dashboard(
    promtool: str, promql: list[str], tmp_path: Path
) -> None:
    rules = [
        {"record": f"dashboard:query_{index}", "expr": as_evaluated(query)}
        for index, query in enumerate(promql)
    ]
    path = tmp_path / "rules.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}), encoding="utf-8")
    run_promtool(promtool, "check", "rules", str(path))


def reading(promql: list[str], series: str, window: str) -> str:
    (query,) = [q for q in promql if f"{series}{{" in q and f"[{window}]" in q]
    return as_evaluated(query)


def test_the_sums_count_each_agent_process_from_zero(
    promtool: str, promql: list[str], tmp_path: Path
) -> None:
    """At 120m, over the last hour: a long-running agent (`watch`) that spent 1 a minute since 0m
    (60 in the hour), one that started at 90m and exported 5 once, and one that ended at 30m
    (none of it in the hour). The hour's total is 65; `increase()` would say 60."""
    scope = 'otel_scope_name="transcript_otel", job="agent"'

    def series(name: str, instance: str, values: str, **labels: str) -> dict[str, str]:
        more = "".join(f', {key}="{value}"' for key, value in labels.items())
        return {"series": f'{name}{{{scope}, instance="{instance}"{more}}}', "values": values}

    cost, tokens = "transcript_otel_usage_cost_total", "gen_ai_client_token_usage_sum"
    agents = [("watch", "1+1x120"), ("late", "_x90 5x30"), ("gone", "7x30")]
    test = {
        "tests": [
            {
                "interval": "1m",
                "input_series": [
                    *(
                        series(cost, instance, values, gen_ai_request_model="m")
                        for instance, values in agents
                    ),
                    *(
                        series(tokens, instance, values, gen_ai_token_type="input")
                        for instance, values in agents
                    ),
                ],
                "promql_expr_test": [
                    {
                        "expr": reading(promql, cost, "$__range"),
                        "eval_time": "120m",
                        "exp_samples": [{"labels": "{}", "value": 65}],
                    },
                    {
                        "expr": reading(promql, tokens, "$__interval"),
                        "eval_time": "120m",
                        "exp_samples": [{"labels": '{gen_ai_token_type="input"}', "value": 65}],
                    },
                ],
            }
        ]
    }
    path = tmp_path / "test.yaml"
    path.write_text(json.dumps(test), encoding="utf-8")  # JSON is YAML
    run_promtool(promtool, "test", "rules", str(path))
