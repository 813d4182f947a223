"""In-process OTLP receivers for the tests: oteltap's, and one shaped like Loki's endpoint.

oteltap is an in-process OTLP/HTTP-protobuf receiver; `TapCollector` keeps every
span and log record it receives (oteltap itself only hands messages to waiters
that exist when they arrive). `LokiShapedReceiver` stands in for Loki behind a
collector. Also here: the empty export answer any stdlib OTLP/HTTP stand-in
sends, and `run_to_completion()` for the tests that run a command against a
receiver. The real collector (rotel) is started by `rotel_collector`.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib.util
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from loopback import LOOPBACK, StartStop, free_port
from requirements_switch import require


def answer_otlp_export(handler: BaseHTTPRequestHandler) -> None:
    """200 with an empty OTLP/HTTP protobuf export response (the same bytes for logs and traces)."""
    from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceResponse

    answer = ExportLogsServiceResponse().SerializeToString()
    handler.send_response(200)
    handler.send_header("Content-Type", "application/x-protobuf")
    handler.send_header("Content-Length", str(len(answer)))
    handler.end_headers()
    handler.wfile.write(answer)


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


def require_oteltap() -> None:
    """oteltap is there, else the test skips (or fails, where real parts are required)."""
    require(importlib.util.find_spec("oteltap"), "oteltap (the `test` group) is not installed")


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


class LokiShapedReceiver(StartStop):
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

    def start(self) -> None:
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

    def stop(self) -> None:
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
