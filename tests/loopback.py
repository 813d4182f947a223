"""Local servers on loopback ports: what the tests and the benchmarks both need to run one.

A free port (the kernel's pick for port 0), whether something answers on it and
whether that listener belongs to the process just started (someone else may
have taken the port meanwhile), a child's environment without the caller's OTel
settings, stopping a child, and `with server:` for a server that starts and stops.
The benchmarks import this module from here (`benchmarks/run.py` puts tests/ on
their path).
"""

from __future__ import annotations

import os
import socket
import subprocess
from pathlib import Path
from types import TracebackType
from typing import Self

LOOPBACK = "127.0.0.1"


def free_port() -> int:
    """A loopback TCP port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((LOOPBACK, 0))
        port: int = sock.getsockname()[1]
        return port


def free_port_pair() -> tuple[int, int]:
    """Two different free loopback ports (a server's gRPC and HTTP listeners)."""
    first, second = free_port(), free_port()
    while second == first:
        second = free_port()
    return first, second


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


class StartStop:
    """`with server:` starts it and stops it again, also when the block raises."""

    def start(self) -> object:
        raise NotImplementedError

    def stop(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()
