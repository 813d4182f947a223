"""Loopback OTLP endpoints: a live receiver (`rotel`) and one that never answers.

`Rotel`: `rotel` from the `rotel` wheel, blackhole exporter.

As in shared/reference/backends.md Recipe 3: the agent binary runs in the
foreground on free loopback ports and is stopped (SIGTERM) afterwards. The
binary links the `libpython` of the interpreter the wheel was built for, so
`LD_LIBRARY_PATH` gets this interpreter's `LIBDIR` (pyenv builds are not on the
loader's path).
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import socket
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path
from types import TracebackType

from harness import free_port, wait_for_port


def rotel_binary() -> Path:
    spec = importlib.util.find_spec("rotel")
    if spec is None or spec.origin is None:
        raise RuntimeError("the rotel package is not installed (pip install rotel==0.0.1a15)")
    binary = Path(spec.origin).parent / "rotel-agent"
    if not binary.exists():
        raise RuntimeError(f"rotel-agent not found at {binary}")
    return binary


class Rotel:
    """`with Rotel() as receiver:` -> `receiver.http_endpoint` takes OTLP/HTTP."""

    def __init__(self) -> None:
        self.http_port = free_port()
        self.grpc_port = free_port()
        while self.grpc_port == self.http_port:
            self.grpc_port = free_port()
        self._scratch = tempfile.TemporaryDirectory(prefix="bench-rotel-")
        self.log_path = Path(self._scratch.name) / "rotel.out"
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def http_endpoint(self) -> str:
        return f"http://127.0.0.1:{self.http_port}"

    def start(self) -> None:
        scratch = Path(self._scratch.name)
        command = [
            str(rotel_binary()),
            "start",
            "--otlp-grpc-endpoint",
            f"127.0.0.1:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"127.0.0.1:{self.http_port}",
            "--exporter",
            "blackhole",
            "--pid-file",
            str(scratch / "rotel.pid"),
            "--log-file",
            str(scratch / "rotel.log"),
        ]
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "ROTEL_", "TRANSCRIPT_OTEL_"))
        }
        env["NO_COLOR"] = "1"
        libdir = sysconfig.get_config_var("LIBDIR")
        if libdir:
            env["LD_LIBRARY_PATH"] = os.pathsep.join(filter(None, [str(libdir), env.get("LD_LIBRARY_PATH")]))
        with self.log_path.open("wb") as out:
            self._process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
        if not wait_for_port(self.http_port):
            self.stop()
            raise RuntimeError(f"rotel did not listen on {self.http_port}: {self.output()[-2000:]}")

    def output(self) -> str:
        try:
            return self.log_path.read_text(errors="replace")
        except OSError:
            return ""

    def stop(self) -> None:
        process, self._process = self._process, None
        if process is not None and process.poll() is None:
            process.terminate()
            try:
                process.wait(10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(5)

    def __enter__(self) -> Rotel:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
        self._scratch.cleanup()


class SilentReceiver:
    """A backend that hangs: accepts TCP connections on loopback, reads everything, never answers.

    Unlike a closed port (connection refused at once, the exporter backs off), every
    export request here runs into the exporter's full timeout. `with SilentReceiver()
    as receiver:` -> `receiver.endpoint`.
    """

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self.connections = 0
        self.bytes_read = 0
        self._lock = threading.Lock()
        self._open: list[socket.socket] = []

    @property
    def endpoint(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                connection, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            with self._lock:
                self.connections += 1
                self._open.append(connection)
            threading.Thread(target=self._drain, args=(connection,), daemon=True).start()

    def _drain(self, connection: socket.socket) -> None:
        with connection:
            while True:
                try:
                    chunk = connection.recv(1 << 16)
                except OSError:
                    return
                if not chunk:
                    return
                with self._lock:
                    self.bytes_read += len(chunk)

    def __enter__(self) -> SilentReceiver:
        threading.Thread(target=self._accept, name="silent-receiver", daemon=True).start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        with contextlib.suppress(OSError):
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the accept() (close alone may not)
        self._listener.close()
        with self._lock:
            for connection in self._open:
                with contextlib.suppress(OSError):
                    connection.shutdown(socket.SHUT_RDWR)
