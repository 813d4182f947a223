"""Timing, statistics and process helpers shared by the benchmark sections.

Method (as in `shared/reference/perf.md` section 0): one untimed warm-up run, then
at least five timed runs; GC stays on, `gc.collect()` runs before each run; the
figure reported is the median over the runs, with the smallest run beside it.
"""

from __future__ import annotations

import gc
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any

WARMUP_RUNS = 1
TIMED_RUNS = 7  # single-thread rows
THREADED_RUNS = 5  # rows that involve the writer or exporter threads

perf_ns = time.perf_counter_ns


@dataclass
class Stat:
    """The per-run values of one measurement (ns per entry, entries/s, bytes...)."""

    values: list[float]
    notes: dict[str, Any] = field(default_factory=dict)

    @property
    def median(self) -> float:
        return statistics.median(self.values)

    @property
    def best(self) -> float:
        return min(self.values)

    @property
    def worst(self) -> float:
        return max(self.values)

    def to_json(self) -> dict[str, Any]:
        return {"values": self.values, "median": self.median, "notes": self.notes}


def repeat(run: Callable[[], float], runs: int = TIMED_RUNS, warmup: int = WARMUP_RUNS) -> list[float]:
    """Call `run` warm-up + `runs` times (GC collected before each); the timed results."""
    results: list[float] = []
    for index in range(warmup + runs):
        gc.collect()
        value = run()
        if index >= warmup:
            results.append(value)
    return results


WAKE_IO_S = 0.001  # the (simulated) I/O the wake-up rows sleep through


def sleep_overshoots(going: Callable[[], bool]) -> list[int]:
    """ns past `WAKE_IO_S` that each `time.sleep(WAKE_IO_S)` took, while `going()`.

    Another thread holding the GIL delays the return from the sleep until it lets go,
    or for up to the interpreter's switch interval (5 ms).
    """
    samples: list[int] = []
    sleep = time.sleep
    asked = int(WAKE_IO_S * 1e9)
    while going():
        start = perf_ns()
        sleep(WAKE_IO_S)
        samples.append(perf_ns() - start - asked)
    return samples or [0]


def percentile(sorted_values: list[int] | list[float], fraction: float) -> float:
    """Nearest-rank percentile of already sorted values."""
    if not sorted_values:
        return math.nan
    rank = max(1, math.ceil(fraction * len(sorted_values)))
    return float(sorted_values[min(rank, len(sorted_values)) - 1])


@dataclass
class RunPercentiles:
    """p50, p99 and max of each run's samples (ns). `repeat()` runs a warm-up first:
    `timed()` leaves it out."""

    p50: list[float] = field(default_factory=list)
    p99: list[float] = field(default_factory=list)
    maximum: list[float] = field(default_factory=list)

    def add(self, samples: list[int]) -> float:
        """Keep one run's figures (`samples` is sorted here); its p50, for `repeat()`."""
        samples.sort()
        self.p50.append(percentile(samples, 0.50))
        self.p99.append(percentile(samples, 0.99))
        self.maximum.append(float(samples[-1]))
        return self.p50[-1]

    def timed(self) -> RunPercentiles:
        return RunPercentiles(self.p50[WARMUP_RUNS:], self.p99[WARMUP_RUNS:], self.maximum[WARMUP_RUNS:])


def loop_ns_per_call(call: Callable[[], object], seconds: float = 0.1) -> int:
    """How many iterations of `call` fill about `seconds` (at least 100)."""
    count = 100
    while True:
        start = perf_ns()
        for _ in range(count):
            call()
        elapsed = perf_ns() - start
        if elapsed >= seconds * 1e9 / 4 or count >= 10_000_000:
            per_call = elapsed / count
            return max(100, int(seconds * 1e9 / max(per_call, 1.0)))
        count *= 4


# -- formatting -----------------------------------------------------------------------


def fmt_ns(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value < 1_000:
        return f"{value:.0f} ns"
    if value < 1_000_000:
        return f"{value / 1_000:.2f} µs" if value < 10_000 else f"{value / 1_000:.1f} µs"
    return f"{value / 1_000_000:.2f} ms"


def fmt_rate(value: float) -> str:
    if math.isnan(value):
        return "n/a"
    if value >= 1_000_000:
        return f"{value / 1_000_000:.2f} M/s"
    if value >= 10_000:
        return f"{value / 1_000:.1f} k/s"
    return f"{value:,.0f} /s"


def fmt_bytes(value: float) -> str:
    if value >= 1 << 30:
        return f"{value / (1 << 30):.2f} GiB"
    if value >= 1 << 20:
        return f"{value / (1 << 20):.1f} MiB"
    if value >= 1 << 10:
        return f"{value / (1 << 10):.1f} KiB"
    return f"{value:.0f} B"


def fmt_ratio(value: float) -> str:
    if math.isnan(value) or value == 0:
        return "n/a"
    if value >= 1:
        return f"{value:.2f}x" if value < 10 else f"{value:.0f}x"
    return f"{value:.3f}x" if value >= 0.01 else f"{value:.4f}x"


# -- process ----------------------------------------------------------------------------


def rss_bytes() -> int:
    """Current resident set size of this process (Linux)."""
    with open("/proc/self/statm", encoding="ascii") as statm:
        resident_pages = int(statm.read().split()[1])
    return resident_pages * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """Peak resident set size of this process so far (Linux reports KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


class RssSampler:
    """`with RssSampler() as rss:` samples the resident set every `interval_s` on a thread.

    A thread rather than samples in the measured loop: it also sees the moments when
    the loop sleeps or waits (shutdown, a full backlog). `rss.peak` is the highest
    sample, `rss.start` the RSS when the block was entered.
    """

    def __init__(self, interval_s: float = 0.01) -> None:
        self.interval_s = interval_s
        self.start = 0
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, name="bench-rss-sampler", daemon=True)

    def _sample(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.peak = max(self.peak, rss_bytes())

    def __enter__(self) -> RssSampler:
        self.start = self.peak = rss_bytes()
        self._thread.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self._stop.set()
        self._thread.join()
        self.peak = max(self.peak, rss_bytes())

    @property
    def growth(self) -> int:
        return self.peak - self.start


def run_child(
    script: str, *args: str, env: Mapping[str, str] | None = None, timeout_s: float = 600.0
) -> dict[str, Any]:
    """Run `python script *args` in a fresh process; the JSON object on its last stdout line.

    A failing child gives `{"error": <the end of its stderr>}` instead.
    """
    try:
        completed = subprocess.run(
            [sys.executable, script, *args],
            capture_output=True,
            text=True,
            check=False,
            env=None if env is None else dict(env),
            timeout=timeout_s,
        )
    except subprocess.TimeoutExpired as exc:
        return {"error": f"timed out after {exc.timeout:.0f} s"}
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        return {"error": f"exit status {completed.returncode}: {completed.stderr.strip()[-2000:]}"}
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@dataclass
class MirrorCounts:
    """What one run's JSONL mirror file holds."""

    events: Counter[str] = field(default_factory=Counter)  # records per event name
    entry_types: Counter[str] = field(default_factory=Counter)  # transcript.entry records per type
    sink_failures: Counter[str] = field(default_factory=Counter)  # transcript.error records per sink
    # Records the OTLP backend did not take, as the transcript.error records about them count them.
    failed_export_reported: int = 0
    pipeline_dropped: int = 0  # the run's transcript.stop: entries the backlog dropped

    @property
    def entries(self) -> int:
        return self.events["transcript.entry"]


def read_mirror(path: str | os.PathLike[str]) -> MirrorCounts:
    counts = MirrorCounts()
    with open(path, "rb") as mirror:
        for line in mirror:
            record = json.loads(line)
            event = record["event"]
            context = record.get("context") or {}
            counts.events[event] += 1
            if event == "transcript.entry":
                counts.entry_types[str(context.get("entry_type"))] += 1
            elif event == "transcript.error" and "failed_export_records" in context:
                counts.failed_export_reported += int(context["failed_export_records"])
            elif event == "transcript.error" and context.get("sink"):
                counts.sink_failures[context["sink"]] += 1
            elif event == "transcript.stop":
                counts.pipeline_dropped = int(context.get("dropped_entries") or 0)
    return counts


class ServingChild:
    """A child process serving a benchmark (`python SCRIPT ARGUMENTS...`): asked one line at a
    time on stdin, it answers one JSON line on stdout; killed if it takes `timeout_s`."""

    def __init__(
        self, script: str, arguments: list[str], environment: dict[str, str], timeout_s: float
    ) -> None:
        self.timeout_s = timeout_s
        self.process = subprocess.Popen(
            [sys.executable, script, *arguments],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=environment,
        )

    def ask(self, command: str | None) -> dict[str, Any]:
        """Send `command` (None: nothing), then read the child's next line."""
        assert self.process.stdin is not None
        assert self.process.stdout is not None
        watchdog = threading.Timer(self.timeout_s, self.process.kill)
        watchdog.start()
        try:
            if command is not None:
                self.process.stdin.write(command + "\n")
                self.process.stdin.flush()
            line = self.process.stdout.readline()
        except OSError:  # the child is gone: its stderr says why
            line = ""
        finally:
            watchdog.cancel()
        if line:
            answer: dict[str, Any] = json.loads(line)
            return answer
        self.process.kill()
        _, stderr = self.process.communicate()
        raise RuntimeError(stderr.strip()[-2000:] or f"exit status {self.process.returncode}")

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.kill()
        self.process.communicate()


def alternating_pair(children: dict[str, ServingChild], rounds: int) -> dict[str, Any]:
    """`rounds` runs of each child, taking turns one run at a time (which goes first alternates),
    after every child is set up (its first line read); then the `finish` answer of the one named
    `instrumented`. `{"runs": {name: [answers]}, **finished}`, or `{"error"}` if a child failed."""
    names = list(children)
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    try:
        for child in children.values():  # all set up before any is timed
            child.ask(None)
        for index in range(rounds):
            for name in names if index % 2 == 0 else reversed(names):
                runs[name].append(children[name].ask("run"))
        finished = children["instrumented"].ask("finish")
    except RuntimeError as exc:
        return {"error": str(exc)}
    finally:
        for child in children.values():
            child.close()
    return {"runs": runs, **finished}
