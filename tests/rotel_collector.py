"""rotel, a real OTLP collector, started on free loopback ports: the one launcher of the
tests and the benchmarks.

rotel is the Rust collector shipped as a binary inside the `rotel` wheel. It is
started in the foreground on two free loopback ports; its stdout and stderr go to
`<workdir>/rotel.out`. With `--debug-log` it prints everything it receives
there (the tests parse it: `rotel_output`); the benchmarks start it without, as a
plain blackhole. The binary links the `libpython` of the interpreter the wheel was
built for, so `LD_LIBRARY_PATH` gets that interpreter's `LIBDIR` (pyenv builds are
not on the loader's path).
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
import sysconfig
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from loopback import (
    LOOPBACK,
    StartStop,
    free_port_pair,
    owns_listening_port,
    port_accepts,
    stop_process,
    subprocess_env,
)
from rotel_output import (
    ANSI_ESCAPE,
    RotelLogRecord,
    RotelMetricPoint,
    RotelSpan,
    latest_points,
    parse_rotel_metrics,
    parse_rotel_output,
)

ROTEL_MISSING = "the rotel wheel (`rotel` in the `test` group) is not installed"


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


# What the tests have rotel print: every log record and span it receives (`received()`).
RECORDS = ("logs", "traces")


class Rotel(StartStop):
    """A rotel collector on two free loopback ports: `Rotel(...).start()`, or `with Rotel(...) as rotel:`."""

    def __init__(
        self,
        binary: Path,
        workdir: Path,
        routing: Mapping[str, str] | None = None,
        *,
        debug_log: Sequence[str] = RECORDS,
    ) -> None:
        self.binary = binary
        self.workdir = workdir
        # `ROTEL_*` variables naming its exporters (collector-config/rotel.env); None: a blackhole.
        self.routing = dict(routing) if routing is not None else None
        # The signals it prints in detail as they arrive (`--debug-log`): RECORDS for `received()`,
        # "metrics" too for `received_metrics()`; none where printing would cost (the benchmarks).
        self.debug_log = tuple(debug_log)
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
        self.grpc_port, self.http_port = free_port_pair()
        env = rotel_environment(**(self.routing or {}))
        command = [
            str(self.binary),
            "start",
            "--otlp-grpc-endpoint",
            f"{LOOPBACK}:{self.grpc_port}",
            "--otlp-http-endpoint",
            f"{LOOPBACK}:{self.http_port}",
            *(("--exporter", "blackhole") if self.routing is None else ()),
            *(option for signal in self.debug_log for option in ("--debug-log", signal)),
            *(("--debug-log-verbosity", "detailed") if self.debug_log else ()),
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
            return ANSI_ESCAPE.sub("", self.output_path.read_text(errors="replace"))
        except FileNotFoundError:
            return ""

    def received(self) -> tuple[list[RotelLogRecord], list[RotelSpan]]:
        return parse_rotel_output(self.output())

    def received_metrics(self) -> list[RotelMetricPoint]:
        """The latest point of each metric series received (started with "metrics" in `debug_log`)."""
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
