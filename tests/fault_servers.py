"""Misbehaving OTLP backends on loopback ports, for the fault tests (`test_faults.py`,
`test_backend_down.py`) and the benchmarks' outage section (`benchmarks/bench_outage.py`).

Each server is a context manager: it listens from `__enter__` and is stopped,
with every thread it started, by `__exit__` (also when a test fails). The
port is the kernel's pick for port 0 at bind time, so no other process can take
it between choosing and listening.

* `HttpFaultServer`: OTLP/HTTP (stdlib `http.server`) that answers slowly,
  answers 500, or answers 200 to its first request and then stops listening.
* `GrpcFaultServer`: OTLP/gRPC logs and traces services (`grpcio`) that answer
  slowly, fail with UNAVAILABLE or INTERNAL, or stop after their first call.
* `ResetServer`: plain TCP that resets every connection (SO_LINGER 0, then
  close), at once or after reading what the client sends; the same bytes on
  the wire for either protocol.
* `SilentServer`: plain TCP that reads everything and never answers (a hung
  backend: every export runs into the exporter's full timeout).

Every server counts the OTLP log records it accepted, so a test can tell that
a backend which went down mid-run did receive the first batch.
"""

from __future__ import annotations

import contextlib
import enum
import select
import socket
import struct
import threading
from concurrent import futures
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from loopback import LOOPBACK, StartStop
from receivers import answer_otlp_export

# Longer than the exporters' 5 s export timeout, so every request times out client-side.
SLOW_ANSWER_S = 6.0


class Fault(enum.Enum):
    SLOW = "slow"  # answers (200 / OK) only after SLOW_ANSWER_S
    ERROR = "error"  # HTTP 500; gRPC UNAVAILABLE (retried by the exporter) or INTERNAL (not retried)
    # accepts exports until the first of log records, then stops listening (spans may go first:
    # which exporter fires first is not the test's to choose)
    STOPS_MIDRUN = "stops-midrun"


class _Counted:
    """What a server accepted, shared with its handler threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests = 0
        self.accepted_log_records = 0

    def arrived(self) -> None:
        with self._lock:
            self.requests += 1

    def accepted(self, log_records: int) -> None:
        with self._lock:
            self.accepted_log_records += log_records


def _count_log_records(request: Any) -> int:
    return sum(len(scope.log_records) for resource in request.resource_logs for scope in resource.scope_logs)


# -- OTLP/HTTP ------------------------------------------------------------------------------


class _QuietThreadingHTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request: Any, client_address: Any) -> None:
        pass  # a client that gave up on a slow answer is expected; no traceback on the test's stderr


class HttpFaultServer(StartStop):
    """An OTLP/HTTP endpoint misbehaving as `fault` says."""

    def __init__(self, fault: Fault) -> None:
        self.fault = fault
        self.counted = _Counted()
        self.stopping = threading.Event()
        self._server: _QuietThreadingHTTPServer | None = None
        self._serve_thread: threading.Thread | None = None
        self._stop_lock = threading.Lock()
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        from opentelemetry.proto.collector.logs.v1.logs_service_pb2 import ExportLogsServiceRequest

        owner = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                owner.counted.arrived()
                if owner.fault is Fault.SLOW:
                    owner.stopping.wait(SLOW_ANSWER_S)
                if owner.fault is Fault.ERROR:
                    self.send_error(500, "backend failure (test)")
                    return
                log_records = 0
                if self.path.endswith("/v1/logs"):
                    log_records = _count_log_records(ExportLogsServiceRequest.FromString(body))
                    owner.counted.accepted(log_records)
                answer_otlp_export(self)
                if owner.fault is Fault.STOPS_MIDRUN and log_records:
                    # Not from this thread: shutdown() waits for serve_forever, which waits for us.
                    threading.Thread(target=owner.stop, name="fault-http-stop", daemon=True).start()

            def log_message(self, *args: Any) -> None:
                pass  # no access log on the test's stderr

        self._server = _QuietThreadingHTTPServer((LOOPBACK, 0), Handler)
        self.port = self._server.server_address[1]
        self._serve_thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._serve_thread.start()

    def stop(self) -> None:
        """Stop listening (idempotent): later connections are refused."""
        self.stopping.set()  # wakes slow handlers at once
        with self._stop_lock:
            server, self._server = self._server, None
        if server is None:
            return
        server.shutdown()
        server.server_close()
        if self._serve_thread is not None and self._serve_thread is not threading.current_thread():
            self._serve_thread.join(5)


# -- OTLP/gRPC ------------------------------------------------------------------------------


class GrpcFaultServer(StartStop):
    """OTLP/gRPC logs and traces services misbehaving as `fault` says.

    `Fault.ERROR` fails with `error_code` (a `grpc.StatusCode`), UNAVAILABLE by
    default (the exporter retries it with backoff until its timeout).
    """

    def __init__(self, fault: Fault, error_code: Any = None) -> None:
        import grpc  # type: ignore[import-untyped]

        self.fault = fault
        self.error_code = grpc.StatusCode.UNAVAILABLE if error_code is None else error_code
        self.counted = _Counted()
        self.stopping = threading.Event()
        self._server: Any = None
        self._stop_lock = threading.Lock()
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def _answer(self, context: Any, response: Any, log_records: int) -> Any:
        self.counted.arrived()
        if self.fault is Fault.SLOW:
            self.stopping.wait(SLOW_ANSWER_S)
        if self.fault is Fault.ERROR:
            context.abort(self.error_code, "backend failure (test)")
        self.counted.accepted(log_records)
        if self.fault is Fault.STOPS_MIDRUN and log_records:
            threading.Thread(target=self.stop, name="fault-grpc-stop", daemon=True).start()
        return response

    def start(self) -> None:
        import grpc
        from opentelemetry.proto.collector.logs.v1 import logs_service_pb2, logs_service_pb2_grpc
        from opentelemetry.proto.collector.trace.v1 import trace_service_pb2, trace_service_pb2_grpc

        owner = self

        class Logs(logs_service_pb2_grpc.LogsServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                response = logs_service_pb2.ExportLogsServiceResponse()
                return owner._answer(context, response, _count_log_records(request))

        class Traces(trace_service_pb2_grpc.TraceServiceServicer):
            def Export(self, request: Any, context: Any) -> Any:
                return owner._answer(context, trace_service_pb2.ExportTraceServiceResponse(), 0)

        server = grpc.server(futures.ThreadPoolExecutor(max_workers=8, thread_name_prefix="fault-grpc"))
        logs_service_pb2_grpc.add_LogsServiceServicer_to_server(Logs(), server)  # type: ignore[no-untyped-call]
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(Traces(), server)  # type: ignore[no-untyped-call]
        self.port = server.add_insecure_port(f"{LOOPBACK}:0")
        server.start()
        self._server = server

    def stop(self) -> None:
        """Stop listening and cancel calls in progress (idempotent)."""
        self.stopping.set()
        with self._stop_lock:
            server, self._server = self._server, None
        if server is not None:
            server.stop(grace=None).wait(5)


# -- raw TCP resets -------------------------------------------------------------------------


class ResetServer(StartStop):
    """Accepts connections and resets them: at once, or after reading what the client sent."""

    def __init__(self, *, read_first: bool) -> None:
        self.read_first = read_first
        self.connections = 0
        self._listener: socket.socket | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()
        self.port = 0

    @property
    def endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.port}"

    def start(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind((LOOPBACK, 0))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._thread = threading.Thread(target=self._serve, name="fault-reset", daemon=True)
        self._thread.start()

    def _serve(self) -> None:
        listener = self._listener
        assert listener is not None
        while not self._stopping.is_set():
            ready, _, _ = select.select([listener], [], [], 0.05)
            if not ready:
                continue
            try:
                connection, _ = listener.accept()
            except OSError:
                continue
            self.connections += 1
            self._handle(connection)

    def _handle(self, connection: socket.socket) -> None:
        if self.read_first:
            self._read_until_quiet(connection)
        # SO_LINGER on, 0 s: close() sends RST instead of FIN.
        connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        connection.close()

    @staticmethod
    def _read_until_quiet(connection: socket.socket) -> None:
        """Read until the client has sent its request and waits for an answer (0.2 s quiet)."""
        connection.settimeout(0.2)
        try:
            while connection.recv(65536):
                pass
        except OSError:
            pass  # quiet (timeout) or the client went away

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(5)
            self._thread = None
        if self._listener is not None:
            self._listener.close()
            self._listener = None


class SilentServer(ResetServer):
    """Accepts connections and reads what the client sends, but never answers (a hung backend)."""

    def __init__(self) -> None:
        super().__init__(read_first=True)
        self._open: list[socket.socket] = []
        self._lock = threading.Lock()  # one reader thread per connection adds to bytes_read
        self.bytes_read = 0

    def _handle(self, connection: socket.socket) -> None:
        self._open.append(connection)
        threading.Thread(target=self._swallow, args=(connection,), daemon=True).start()

    def _swallow(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError):
            while chunk := connection.recv(65536):
                with self._lock:
                    self.bytes_read += len(chunk)

    def stop(self) -> None:
        super().stop()
        for connection in self._open:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)  # wakes its reader thread (close alone may not)
            connection.close()
        self._open.clear()
