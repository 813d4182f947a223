"""rotel's debug output read back: the log records, spans and metric points it printed.

A `Rotel` started with `--debug-log ... --debug-log-verbosity detailed` prints
everything it receives to its stdout (`Rotel.output()`); the tests check what
arrived at the collector by parsing that text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

# Colour codes, in case rotel prints any despite NO_COLOR.
ANSI_ESCAPE = re.compile(r"\x1b\[[0-9;]*m")


@dataclass
class RotelLogRecord:
    """One `LogRecord #n` block of rotel's detailed debug output."""

    event_name: str | None = None
    severity_text: str | None = None
    severity_number: str | None = None
    timestamp: int | None = None
    observed_timestamp: int | None = None
    body: str | None = None
    attributes: dict[str, Any] = field(default_factory=dict)
    trace_id: str | None = None
    span_id: str | None = None


@dataclass
class RotelSpan:
    """One `Span #n` block of rotel's detailed debug output."""

    name: str | None = None
    trace_id: str | None = None
    span_id: str | None = None
    event_names: list[str] = field(default_factory=list)


_TOP_LEVEL = re.compile(r"^(ResourceLog|ResourceSpans|ScopeLogs|ScopeSpans|LogRecord|Span|SpanEvent) #\d+")
_METRIC_BLOCK = re.compile(r"^(ResourceMetrics|ScopeMetrics|Metric|\w*DataPoints) #\d+")
_ATTRIBUTE = re.compile(r"^\s+-> ([^:]+): (\w+)\((.*)$")
_FIELD = re.compile(r"^\s*([A-Za-z][A-Za-z ]*?)\s*: ?(.*)$")
_EVENT_NAME = re.compile(r"^\s+-> Name: (.*)$")
_LOG_FIELDS = frozenset(
    (
        "ObservedTimestamp",
        "Timestamp",
        "SeverityText",
        "SeverityNumber",
        "EventName",
        "Body",
        "Attributes",
        "Trace ID",
        "Span ID",
        "Flags",
    )
)


def _typed(kind: str, text: str) -> Any:
    if kind == "Int":
        return int(text)
    if kind == "Double":
        return float(text)
    if kind == "Bool":
        return text == "true"
    return text


def parse_rotel_output(text: str) -> tuple[list[RotelLogRecord], list[RotelSpan]]:
    """The log records and spans in rotel's `--debug-log-verbosity detailed` output.

    Attribute values keep rotel's typing (`Str`, `Int`, `Double`, `Bool`); a string
    value that holds newlines continues on the following lines and is rejoined.
    """
    logs: list[RotelLogRecord] = []
    spans: list[RotelSpan] = []
    current: RotelLogRecord | RotelSpan | None = None
    in_span_event = False
    last_attribute: tuple[dict[str, Any], str, str] | None = None  # (attributes, key, rotel type)
    for raw_line in ANSI_ESCAPE.sub("", text).splitlines():
        if _METRIC_BLOCK.match(raw_line):  # printed with "metrics" in `debug_log`: not a record's lines
            current, last_attribute = None, None
            continue
        top = _TOP_LEVEL.match(raw_line)
        if top:
            last_attribute = None
            kind = top.group(1)
            if kind == "LogRecord":
                current = RotelLogRecord()
                logs.append(current)
                in_span_event = False
            elif kind == "Span":
                current = RotelSpan()
                spans.append(current)
                in_span_event = False
            elif kind == "SpanEvent":
                in_span_event = True
            else:
                current = None
            continue
        if current is None:
            continue
        attribute = _ATTRIBUTE.match(raw_line)
        if isinstance(current, RotelSpan):
            if in_span_event:
                name = _EVENT_NAME.match(raw_line)
                if name:
                    current.event_names.append(name.group(1))
                continue
            found = _FIELD.match(raw_line)
            if found:
                key, value = found.group(1), found.group(2).strip()
                if key == "Name":
                    current.name = value
                elif key == "Trace ID":
                    current.trace_id = value
                elif key == "ID":
                    current.span_id = value
            continue
        if attribute:
            key, kind, rest = attribute.groups()
            value = rest[:-1] if rest.endswith(")") else rest
            current.attributes[key] = _typed(kind, value)
            last_attribute = (current.attributes, key, kind)
            continue
        found = _FIELD.match(raw_line)
        if found and found.group(1) in _LOG_FIELDS:
            last_attribute = None
            key, value = found.group(1), found.group(2).strip()
            if key == "ObservedTimestamp":
                current.observed_timestamp = int(value)
            elif key == "Timestamp":
                current.timestamp = int(value)
            elif key == "SeverityText":
                current.severity_text = value
            elif key == "SeverityNumber":
                current.severity_number = value
            elif key == "EventName":
                current.event_name = value
            elif key == "Body":
                current.body = value[4:-1] if value.startswith("Str(") else value
            elif key == "Trace ID":
                current.trace_id = value
            elif key == "Span ID":
                current.span_id = value
            continue
        if last_attribute is not None and last_attribute[2] == "Str":
            # A string attribute whose value holds a newline continues here.
            attributes, key, _ = last_attribute
            previous = attributes[key]
            line = raw_line[:-1] if raw_line.endswith(")") else raw_line
            attributes[key] = f"{previous}\n{line}"
    return logs, spans


@dataclass
class RotelMetricPoint:
    """One data point (`HistogramDataPoints #n`, `NumberDataPoints #n`) of rotel's detailed
    debug output, with its metric's descriptor and scope."""

    name: str
    unit: str
    data_type: str  # `Histogram`, `Sum`, `Gauge`, ...
    description: str = ""
    temporality: str | None = None
    scope_name: str | None = None
    scope_version: str | None = None
    scope_schema_url: str | None = None
    resource: dict[str, Any] = field(default_factory=dict)
    attributes: dict[str, Any] = field(default_factory=dict)
    start_timestamp: int | None = None
    timestamp: int | None = None
    value: float | None = None  # a number point
    count: int | None = None  # the rest: a histogram point
    sum: float | None = None
    min: float | None = None
    max: float | None = None
    explicit_bounds: list[float] = field(default_factory=list)
    bucket_counts: list[int] = field(default_factory=list)

    @property
    def series(self) -> tuple[Any, ...]:
        """What a cumulative export repeats: the same process, scope, metric and attributes."""
        return (
            self.resource.get("service.instance.id"),
            self.scope_name,
            self.name,
            frozenset(self.attributes.items()),
        )


_DESCRIPTOR_FIELD = re.compile(r"^\s+-> (\w+): ?(.*)$")
_INDEXED_FIELD = re.compile(r"^(ExplicitBounds|Buckets) #\d+(?:, Count)?: (.*)$")


def parse_rotel_metrics(text: str) -> list[RotelMetricPoint]:
    """Every metric data point in rotel's `--debug-log metrics --debug-log-verbosity detailed`
    output, in the order printed. A cumulative metric is printed again at each export: see
    `latest_points()`. Log and span blocks printed among them are passed over."""
    points: list[RotelMetricPoint] = []
    resource: dict[str, Any] = {}
    scope: dict[str, str | None] = {}
    descriptor: dict[str, str] = {}
    point: RotelMetricPoint | None = None
    section = None  # `resource`, `descriptor`, `attributes`: where `-> ...` lines belong
    for raw_line in ANSI_ESCAPE.sub("", text).splitlines():
        block = _METRIC_BLOCK.match(raw_line)
        if block:
            kind, section, point = block.group(1), None, None
            if kind == "ResourceMetrics":
                resource, scope = {}, {}
            elif kind == "ScopeMetrics":
                scope = {}
            elif kind == "Metric":
                descriptor = {}
            else:
                point = RotelMetricPoint(
                    name=descriptor.get("Name", ""),
                    unit=descriptor.get("Unit", ""),
                    data_type=descriptor.get("DataType", ""),
                    description=descriptor.get("Description", ""),
                    temporality=descriptor.get("AggregationTemporality"),
                    scope_name=scope.get("name"),
                    scope_version=scope.get("version"),
                    scope_schema_url=scope.get("schema_url"),
                    resource=resource,
                )
                points.append(point)
            continue
        if _TOP_LEVEL.match(raw_line):  # a log or span block: not ours until the next metric block
            section, point, descriptor, resource = "elsewhere", None, {}, {}
            continue
        stripped = raw_line.strip()
        if stripped == "Resource attributes:":
            section = "resource"
        elif stripped == "Descriptor:":
            section = "descriptor"
        elif stripped == "Data point attributes:":
            section = "attributes"
        elif stripped.startswith("ScopeMetrics SchemaURL:"):
            scope["schema_url"] = stripped.partition(":")[2].strip() or None
        elif stripped.startswith("InstrumentationScope "):
            name, _, version = stripped.removeprefix("InstrumentationScope ").partition(" ")
            scope.update(name=name, version=version or None)
        elif section == "descriptor" and (found := _DESCRIPTOR_FIELD.match(raw_line)):
            descriptor[found.group(1)] = found.group(2).strip()
        elif section in ("resource", "attributes") and (attribute := _ATTRIBUTE.match(raw_line)):
            key, kind, rest = attribute.groups()
            into = resource if section == "resource" else point.attributes if point is not None else None
            if into is not None:
                into[key] = _typed(kind, rest[:-1] if rest.endswith(")") else rest)
        elif point is not None:
            section = None
            _point_field(point, stripped)
    return points


def _point_field(point: RotelMetricPoint, line: str) -> None:
    indexed = _INDEXED_FIELD.match(line)
    if indexed:
        if indexed.group(1) == "ExplicitBounds":
            point.explicit_bounds.append(float(indexed.group(2)))
        else:
            point.bucket_counts.append(int(indexed.group(2)))
        return
    key, _, value = line.partition(": ")
    if key == "StartTimestamp":
        point.start_timestamp = int(value)
    elif key == "Timestamp":
        point.timestamp = int(value)
    elif key == "Count":
        point.count = int(value)
    elif key in ("Sum", "Min", "Max", "Value"):
        setattr(point, key.lower(), float(value))


def latest_points(points: list[RotelMetricPoint]) -> list[RotelMetricPoint]:
    """The last printed point of each series (cumulative exports repeat them all), in the order
    each series first appeared."""
    latest: dict[tuple[Any, ...], RotelMetricPoint] = {}
    for point in points:
        latest[point.series] = point
    return list(latest.values())
