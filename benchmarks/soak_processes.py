"""The `transcript-otel watch` processes of the soak (`soak_watch.py`): started as a user or
systemd starts it, stopped with SIGTERM or killed with SIGKILL, each one's peak RSS and CPU
seconds taken from the kernel as it is reaped (`wait4`), its memory sampled while it runs."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

_READY: Final = "transcript-otel watch: following"
_PAGE_KB: Final = os.sysconf("SC_PAGE_SIZE") // 1024


@dataclass
class Stopped:
    """One watch process, from its start to its end."""

    number: int
    how: str  # "SIGTERM", "SIGKILL", or "SIGTERM (the end)"
    ready_s: float  # from its start to its first "following" line (its first look at every file)
    ran_s: float  # from its start to its end
    stop_s: float  # from the signal to its exit
    exit_status: int
    cpu_s: float  # user + system, from wait4
    peak_rss_mib: float  # ru_maxrss, from wait4
    rss_samples_mib: list[float] = field(default_factory=list)  # VmRSS every second
    warnings: list[str] = field(default_factory=list)  # its stderr's warning lines


class WatchProcess:
    """`transcript-otel watch --claude-code --codex` over `home`, its mirror `runs`, its state
    `state`; its stdout and stderr in files beside the state (`logs`)."""

    def __init__(
        self,
        home: Path,
        runs: Path,
        state: Path,
        logs: Path,
        idle_s: float,
        number: int,
        backlog_bytes: int | None = None,
        pause_s: float = 0.0,
    ) -> None:
        """`backlog_bytes`: the pipeline's bound (`TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES`), where not
        the default: a smaller one makes a few thousand sessions press on it as 10,000 do.
        `pause_s`: every 5 to 10 s the process is stopped (SIGSTOP) this long, as a loaded machine
        leaves it unscheduled: its round then lasts while the sessions go on being written."""
        self.number = number
        self._logs = logs
        env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "TRANSCRIPT_OTEL_", "ROTEL_"))
            and key not in ("CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_STATE_HOME")
        }
        env["HOME"] = str(home)
        if backlog_bytes is not None:
            env["TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES"] = str(backlog_bytes)
        command = [sys.executable, "-m", "transcript_otel.cli", "watch", "--claude-code", "--codex"]
        command += ["--jsonl-dir", str(runs), "--state", str(state), "--idle", f"{idle_s:g}"]
        logs.mkdir(parents=True, exist_ok=True)
        self._stdout = logs / f"watch-{number}.out"
        self._stderr = logs / f"watch-{number}.err"
        self.started = time.monotonic()
        with self._stdout.open("wb") as out, self._stderr.open("wb") as err:
            self._process = subprocess.Popen(command, env=env, stdout=out, stderr=err)
        self.pid = self._process.pid
        self.ready_s = self._wait_ready()
        self._samples: list[float] = []
        self._sampling = threading.Event()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()
        self._pausing = threading.Event()
        self._pauser: threading.Thread | None = None
        if pause_s > 0:
            self._pauser = threading.Thread(target=self._pause, args=(pause_s,), daemon=True)
            self._pauser.start()

    def _pause(self, pause_s: float) -> None:
        rng = random.Random(self.pid)
        while not self._pausing.wait(rng.uniform(5.0, 10.0)):
            self._process.send_signal(signal.SIGSTOP)
            self._pausing.wait(pause_s)
            self._process.send_signal(signal.SIGCONT)

    def _wait_ready(self) -> float:
        while _READY not in self._stdout.read_text(errors="replace"):
            if self._process.poll() is not None:
                raise RuntimeError(f"watch {self.number} exited: {self._stderr.read_text()[-2000:]}")
            time.sleep(0.05)
        return time.monotonic() - self.started

    def _sample(self) -> None:
        while not self._sampling.wait(1.0):
            try:
                statm = Path(f"/proc/{self.pid}/statm").read_text().split()
            except OSError:
                return
            self._samples.append(int(statm[1]) * _PAGE_KB / 1024)

    def stop(self, kill: bool, how: str) -> Stopped:
        """Sends SIGKILL or SIGTERM and reaps the process: its rusage is its own."""
        self._pausing.set()
        if self._pauser is not None:
            self._pauser.join()  # (continued: a stopped process takes no SIGTERM)
        signalled = time.monotonic()
        self._process.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
        _, status, usage = os.wait4(self.pid, 0)
        ended = time.monotonic()
        self._process.returncode = os.waitstatus_to_exitcode(status)
        self._sampling.set()
        self._sampler.join()
        said = self._stderr.read_text(errors="replace").splitlines()
        return Stopped(
            number=self.number,
            how=how,
            ready_s=self.ready_s,
            ran_s=ended - self.started,
            stop_s=ended - signalled,
            exit_status=self._process.returncode,
            cpu_s=usage.ru_utime + usage.ru_stime,
            peak_rss_mib=usage.ru_maxrss / 1024,
            rss_samples_mib=self._samples,
            warnings=[line for line in said if ": warning: " in line],
        )
