"""A terminal for tests: a shell command run on a pseudo-terminal by util-linux `script`.

`TerminalSession` starts `script -qfec COMMAND /dev/null` with pipes for its stdin and
stdout: what the test writes is typed on the terminal (`send_keys`, `\\x03` is Ctrl-C), what
the programs on it print is collected (`expect` waits for a text), and `resize` changes
the terminal's size as a terminal window does (the kernel then sends SIGWINCH to its
foreground job). The command prints the terminal's device first (`tty`), so the session
knows which one to resize.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import threading
import time
from collections.abc import Mapping
from types import TracebackType

from requirements_switch import require

DEVICE_MARK = "TERMINAL-DEVICE "
_DEVICE = re.compile(DEVICE_MARK + r"(/dev/\S+)")


def require_script() -> str:
    return require(shutil.which("script"), "util-linux `script` is not installed")


class TerminalSession:
    """`command` (a shell command line) on a terminal of `columns` x `rows`."""

    def __init__(self, command: str, env: Mapping[str, str], *, columns: int = 97, rows: int = 31) -> None:
        shell_line = f"echo {DEVICE_MARK}$(tty); stty cols {columns} rows {rows}; {command}"
        self.process = subprocess.Popen(
            [require_script(), "-qfec", shell_line, "/dev/null"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=dict(env),
            start_new_session=True,
        )
        self._output = bytearray()
        self._changed = threading.Condition()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.device = _DEVICE.search(self.expect(DEVICE_MARK + r"/dev/\S+\r?\n")).group(1)  # type: ignore[union-attr]

    def _read(self) -> None:
        assert self.process.stdout is not None
        while chunk := os.read(self.process.stdout.fileno(), 1 << 16):
            with self._changed:
                self._output += chunk
                self._changed.notify_all()
        with self._changed:
            self._changed.notify_all()

    @property
    def output(self) -> str:
        with self._changed:
            return self._output.decode("utf-8", "replace")

    def expect(self, pattern: str, timeout_s: float = 30.0) -> str:
        """The output so far, once `pattern` (a regular expression) is in it."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while True:
                text = self._output.decode("utf-8", "replace")
                if re.search(pattern, text):
                    return text
                left = deadline - time.monotonic()
                if left <= 0 or (not self._reader.is_alive() and self.process.poll() is not None):
                    raise AssertionError(f"{pattern!r} never appeared on the terminal:\n{text}")
                self._changed.wait(min(left, 0.5))

    def wait_quiet(self, quiet_s: float, timeout_s: float = 30.0) -> None:
        """Until nothing has been printed for `quiet_s` (a full-screen program has drawn its
        screen and waits for keys), or `timeout_s`."""
        deadline = time.monotonic() + timeout_s
        with self._changed:
            while time.monotonic() < deadline:
                seen = len(self._output)
                self._changed.wait(quiet_s)
                if len(self._output) == seen:
                    return

    def send_keys(self, keys: bytes) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(keys)
        self.process.stdin.flush()

    def resize(self, columns: int, rows: int) -> None:
        subprocess.run(["stty", "-F", self.device, "cols", str(columns), "rows", str(rows)], check=True)

    def close(self) -> int:
        """Wait for the command to end (closing the terminal's input); its exit status."""
        if self.process.stdin is not None and not self.process.stdin.closed:
            self.process.stdin.close()
        try:
            return self.process.wait(timeout=30)
        finally:
            self._reader.join(timeout=5)

    def __enter__(self) -> TerminalSession:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        if self.process.poll() is None:
            os.killpg(self.process.pid, 9)
            self.process.wait(timeout=10)
        self._reader.join(timeout=5)
