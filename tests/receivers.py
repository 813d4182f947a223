"""Real OTLP receivers for the tests: rotel (a collector binary), oteltap, free loopback ports.

rotel is the Rust collector shipped as a binary inside the `rotel` wheel. It is
started in the foreground on two free loopback ports with the debug exporter, so
everything it receives is printed to its stdout (redirected to a file that the
tests parse). The binary links the `libpython` of the interpreter the wheel was
built for, so `LD_LIBRARY_PATH` gets that interpreter's `LIBDIR`.

oteltap is an in-process OTLP/HTTP-protobuf receiver; `TapCollector` keeps every
span and log record it receives (oteltap itself only hands messages to waiters
that exist when they arrive).
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import os
import re
import socket
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import TracebackType
from typing import Any

LOOPBACK = "127.0.0.1"
_ANSI = re.compile(r"\x1b\[[0-9;]*m")


def free_port() -> int:
    """A loopback TCP port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def port_accepts(port: int, timeout_s: float = 0.2) -> bool:
    try:
        with socket.create_connection((LOOPBACK, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def subprocess_env(**overrides: str) -> dict[str, str]:
    """The current environment without any OTEL_*/TRANSCRIPT_OTEL_*/ROTEL_* variable, plus `overrides`."""
    env = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("OTEL_", "TRANSCRIPT_OTEL_", "ROTEL_"))
    }
    env.update(overrides)
    return env


# -- rotel ---------------------------------------------------------------------------------


def rotel_binary() -> Path | None:
    """`rotel-agent` inside the installed `rotel` wheel, or None without it."""
    spec = importlib.util.find_spec("rotel")
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        candidate = Path(location) / "rotel-agent"
        if candidate.is_file():
            return candidate
    return None


def stop_process(process: subprocess.Popen[bytes], grace_s: float) -> None:
    """SIGTERM, then SIGKILL if it is still there after `grace_s`; reaped either way."""
    if process.poll() is not None:
        return
    process.terminate()
    try:
        process.wait(grace_s)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(5)


def answer_otlp_export(handler: BaseHTTPRequestHandler) -> None:
    """200 with an empty OTLP/HTTP protobuf export response (the same bytes for logs and traces)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    answer = ExportLogsServiceResponse().SerializeToString()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/x-protobuf")
    handler.send_header("Content-Length", str(len(answer)))
    handler.end_headers()
    handler.wfile.write(answer)


def rotel_environment(**variables: str) -> dict[str, str]:
    """What `rotel-agent` runs with: no colours, and the libpython of the wheel's interpreter."""
    env = subprocess_env(NO_COLOR="1", **variables)
    libdir = sysconfig.get_config_var("LIBDIR") or os.path.dirname(sys.executable)
    env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH")) if p)
    return env


def read_env_file(path: Path) -> dict[str, str]:
    """`KEY=VALUE` lines (collector-config/rotel.env) as `docker compose` env_file and
    `set -a; . file` both read them: no quotes, no expansion, no key set twice."""
    variables: dict[str, str] = {}
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        assert re.fullmatch(r"[A-Z][A-Z0-9_]*=[^\s'\"$`\\]*", line), f"{path.name}:{number}: {line!r}"
        key, value = line.split("=", 1)
        assert key not in variables, f"{key} set twice"
        variables[key] = value
    return variables


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
    for raw_line in _ANSI.sub("", text).splitlines():
        if _METRIC_BLOCK.match(raw_line):  # printed with `Rotel(metrics=True)`: not a record's lines
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
    for raw_line in _ANSI.sub("", text).splitlines():
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


def owns_listening_port(pid: int, port: int) -> bool:
    """Whether process `pid` holds the socket listening on loopback `port` (Linux /proc).

    Guards against declaring ready a server that someone else started on the
    same port. Where /proc is unavailable, a successful connect is trusted.
    """
    try:
        # IPv6 too: a server that binds `[::]` (Phoenix's gRPC) also accepts on 127.0.0.1.
        table = "".join(
            Path(name).read_text().split("\n", 1)[1]
            for name in ("/proc/net/tcp", "/proc/net/tcp6")
            if Path(name).exists()
        )
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:
        return True
    inodes = set()
    for line in table.splitlines():
        columns = line.split()
        local, state, inode = columns[1], columns[3], columns[9]
        if state == "0A" and int(local.split(":")[1], 16) == port:
            inodes.add(inode)
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:[") and target[8:-1] in inodes:
            return True
    return False


class Rotel:
    """A rotel collector on two free loopback ports, printing everything it receives."""

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        routing: Mapping[str, str] | None = None,
        *,
        metrics: bool = False,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        # `ROTEL_*` variables naming its exporters (collector-config/rotel.env); None: a blackhole.
        self.routing = dict(routing) if routing is not None else None
        # Print the metrics it receives too (`received_metrics()`); logs and traces always.
        self.metrics = metrics
        self.grpc_port = 0
        self.http_port = 0
        self.output_path = workdir / "rotel.out"
        self.process: subprocess.Popen[bytes] | None = None
        self.ready_after_s = 0.0

    @property
    def grpc_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.grpc_port}"

    @property
    def http_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    def start(self, *, attempts: int = 3, ready_timeout_s: float = 15.0) -> Rotel:
        """Start in the foreground; retry on fresh ports if a port was taken meanwhile."""
        self.workdir.mkdir(parents=True, exist_ok=True)
        failures: list[str] = []
        for _ in range(attempts):
            if self._start_once(ready_timeout_s, failures):
                return self
        raise RuntimeError("rotel did not start:\n" + "\n".join(failures))

    def _start_once(self, ready_timeout_s: float, failures: list[str]) -> bool:
        self.grpc_port, self.http_port = free_port(), free_port()
        while self.http_port == self.grpc_port:
            self.http_port = free_port()
        env = rotel_environment(**(self.routing or {}))
        command = [
            str(self.binary),
            "start",
            "--otlp-grpc-endpoint",
            f"{LOOPBACK}:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"{LOOPBACK}:{self.http_port}",
            *(("--exporter", "blackhole") if self.routing is None else ()),
            "--debug-log",
            "logs",
            "--debug-log",
            "traces",
            *(("--debug-log", "metrics") if self.metrics else ()),
            "--debug-log-verbosity",
            "detailed",
            "--pid-file",
            str(self.workdir / "rotel.pid"),
            "--log-file",
            str(self.workdir / "rotel.log"),
        ]
        started = time.monotonic()
        with open(self.output_path, "wb") as output:
            process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT, env=env)
        self.process = process
        deadline = started + ready_timeout_s
        while time.monotonic() < deadline:
            if process.poll() is not None:
                failures.append(f"rotel exited with {process.returncode}: {self.output()[-2000:]}")
                self.process = None
                return False
            if all(
                port_accepts(port) and owns_listening_port(process.pid, port)
                for port in (self.grpc_port, self.http_port)
            ):
                self.ready_after_s = time.monotonic() - started
                return True
            time.sleep(0.02)
        failures.append(f"rotel not ready after {ready_timeout_s} s: {self.output()[-2000:]}")
        self.stop()
        return False

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_process(process, grace_s=5)

    def output(self) -> str:
        try:
            return _ANSI.sub("", self.output_path.read_text(errors="replace"))
        except FileNotFoundError:
            return ""

    def received(self) -> tuple[list[RotelLogRecord], list[RotelSpan]]:
        return parse_rotel_output(self.output())

    def received_metrics(self) -> list[RotelMetricPoint]:
        """The latest point of each metric series received (started with `metrics=True`)."""
        return latest_points(parse_rotel_metrics(self.output()))

    def wait_for_metrics(
        self, condition: Callable[[list[RotelMetricPoint]], bool], timeout_s: float = 10.0
    ) -> list[RotelMetricPoint]:
        """Poll the output until `condition(latest points)` holds."""
        deadline = time.monotonic() + timeout_s
        while True:
            points = self.received_metrics()
            if condition(points) or time.monotonic() > deadline:
                return points
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"rotel died: {self.output()[-2000:]}")
            time.sleep(0.05)

    def wait_for(
        self,
        condition: Callable[[list[RotelLogRecord], list[RotelSpan]], bool],
        timeout_s: float = 10.0,
    ) -> tuple[list[RotelLogRecord], list[RotelSpan]]:
        """Poll the output until `condition(logs, spans)` holds (rotel batches for 200 ms)."""
        deadline = time.monotonic() + timeout_s
        while True:
            logs, spans = self.received()
            if condition(logs, spans) or time.monotonic() > deadline:
                return logs, spans
            if self.process is None or self.process.poll() is not None:
                raise RuntimeError(f"rotel died: {self.output()[-2000:]}")
            time.sleep(0.05)


async def run_to_completion(command: list[str], timeout_s: float, **options: Any) -> tuple[int, bytes, bytes]:
    """Run `command` (stdout and stderr captured); killed and TimeoutError past `timeout_s`."""
    process = await asyncio.create_subprocess_exec(
        *command, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, **options
    )
    try:
        stdout, stderr = await asyncio.wait_for(process.communicate(), timeout_s)
    except TimeoutError:
        process.kill()
        await process.wait()
        raise
    assert process.returncode is not None
    return process.returncode, stdout, stderr


# -- oteltap -------------------------------------------------------------------------------


class TapCollector:
    """An oteltap OTLP/HTTP receiver on a free loopback port that keeps what it receives."""

    def __init__(self, port: int | None = None) -> None:
        self._fixed_port = port is not None
        self.port = port or free_port()
        self.logs: list[Any] = []  # opentelemetry.proto.logs.v1.logs_pb2.LogRecord
        self.spans: list[Any] = []  # opentelemetry.proto.trace.v1.trace_pb2.Span
        self._receiver: Any = None
        self._tasks: list[asyncio.Task[None]] = []

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    async def __aenter__(self) -> TapCollector:
        from oteltap import (
            OtelTapHttpProtobufReceiver,
            OtelTapHttpProtobufReceiverSettings,
            OtelTapInitializationError,
        )

        for attempt in range(3):
            settings = OtelTapHttpProtobufReceiverSettings(
                http_port=self.port, listen_on_all_interfaces=False
            )
            try:
                self._receiver = await OtelTapHttpProtobufReceiver(settings).start()
                break
            except OtelTapInitializationError:
                if self._fixed_port or attempt == 2:
                    raise
                self.port = free_port()  # the free port was taken meanwhile
        self._tasks = [
            asyncio.create_task(self._keep(self._receiver.stream_logs(), self.logs)),
            asyncio.create_task(self._keep(self._receiver.stream_traces(), self.spans)),
        ]
        for _ in range(3):  # let both subscriptions register before anything is sent
            await asyncio.sleep(0)
        return self

    @staticmethod
    async def _keep(stream: Any, into: list[Any]) -> None:
        async for message in stream:
            into.append(message)

    async def wait_for(self, condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return False
            await asyncio.sleep(0.05)
        return True

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        for task in self._tasks:
            task.cancel()
        for task in self._tasks:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._receiver is not None:
            await self._receiver.stop()


# -- an OTLP/HTTP logs endpoint shaped like Loki's ------------------------------------------


class LokiShapedReceiver:
    """OTLP/HTTP protobuf log records at Loki's native path, `<base>/otlp/v1/logs`.

    Stands in for Loki behind a collector: it decodes gzip bodies (rotel always
    compresses; oteltap does not decompress) and keeps each request's path, so a
    test can show that a collector configured with Loki's endpoint posts where
    Loki listens.
    """

    PATH = "/otlp/v1/logs"

    def __init__(self) -> None:
        self.logs: list[Any] = []  # opentelemetry.proto.logs.v1.logs_pb2.LogRecord
        self.paths: list[str] = []
        self._server: Any = None
        self._thread: Any = None

    @property
    def endpoint(self) -> str:
        """What a collector is given as the Loki endpoint (it appends `/v1/logs`)."""
        return f"http://{LOOPBACK}:{self._server.server_address[1]}/otlp"

    def __enter__(self) -> LokiShapedReceiver:
        import gzip
        import threading

        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                receiver.paths.append(self.path)
                if self.path != LokiShapedReceiver.PATH:
                    self.send_error(404)
                    return
                if self.headers.get("Content-Encoding") == "gzip":
                    body = gzip.decompress(body)
                request = ExportLogsServiceRequest.FromString(body)
                receiver.logs.extend(
                    record
                    for resource_logs in request.resource_logs
                    for scope_logs in resource_logs.scope_logs
                    for record in scope_logs.log_records
                )
                answer_otlp_export(self)

            def log_message(self, *args: Any) -> None:
                pass  # no access log on the test's stderr

        self._server = ThreadingHTTPServer((LOOPBACK, 0), Handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def wait_for(self, condition: Callable[[], bool], timeout_s: float = 10.0) -> bool:
        deadline = time.monotonic() + timeout_s
        while not condition():
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True
