"""Section 6: `transcript-otel run -- CMD` against CMD alone (issue 29's targets).

Every figure comes from fresh processes, the wrapped and the direct command alternating
one by one (this machine's speed drifts over seconds); cells are medians. The wrapper
runs as a user would run it: `python -m transcript_otel.cli run -- CMD` with the JSONL
mirror on and the OTel SDK set up by `configure()` (no OTLP endpoint: what the backend
costs is section 3b's), the line adapter chosen automatically.

* **Printing at full speed.** CMD prints N lines of 100 bytes (`yes | head -n N`) into a
  pipe the benchmark reads in 1 MiB reads. *Command time*: from the command's start (it
  prints `date +%s%N` to stderr first) to the end of its output at the reader; the
  ratio is the median of the ratios of each pair (target: <= 1.1x). *Wrapper, to exit*:
  from starting the wrapper to its exit, which includes its own start-up (measured
  alone as `run -- true`) and the time capture takes to record what it holds once the
  output is over (at most `CAPTURE_GRACE_S`). *Lines recorded*: entries in the mirror /
  N; the rest are in the run's one `transcript.error` (checked: recorded + reported = N).
  *Lines/s captured* (issue 46, printed for the 200,000-line case): lines recorded / the time
  from the command's start to the wrapper's exit, when the transcript is whole; median of the
  runs. With `BENCH_RUN_BEFORE=<a src/ directory>` (another revision's, e.g. a worktree's),
  that revision's wrapper takes turns with this one for the 200,000-line case.
  `BENCH_RUN_BUSY=1` runs the section beside a busy loop (one process spinning in Python).
* **Random bytes.** 20 MB of `/dev/urandom`: the command time, and whether the reader got
  exactly the bytes.
* **A slow reader.** `seq 1 200000` (1.29 MB) read 4 KiB at a time with a 5 ms pause:
  bytes received / printed (the wrapper used to stop waiting 1 s after the command exited).
"""

from __future__ import annotations

import hashlib
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

LINE: Final = "x" * 99
RATE_LINES: Final = 200_000  # the printer whose lines/s is printed (issue 46: >= 30,000)
WRAPPER: Final = [sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", "bench", "--"]
PRINTERS: Final = (  # label, lines, pairs of runs
    ("50,000 lines (5 MB)", 50_000, 7),
    ("20 MB (200,000 lines)", 200_000, 9),
    ("200 MB (2,000,000 lines)", 2_000_000, 5),
)
RANDOM_BYTES: Final = 20_000_000
SLOW_READ_BYTES: Final = 4096
SLOW_READ_PAUSE_S: Final = 0.005
_ENTRY: Final = b'"event":"transcript.entry"'


def _environment(runs: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))}
    env["TRANSCRIPT_OTEL_JSONL_DIR"] = str(runs)
    return env


def _timed(command: list[str], env: dict[str, str]) -> dict[str, Any]:
    """Run `command`, reading its stdout to the end: when its output began and ended, its exit."""
    started = time.time_ns()
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert process.stdout is not None
    assert process.stderr is not None
    digest = hashlib.sha256()
    received = 0
    while chunk := os.read(process.stdout.fileno(), 1 << 20):
        digest.update(chunk)
        received += len(chunk)
    output_ended = time.time_ns()
    stderr = process.stderr.read()
    process.wait()
    exited = time.time_ns()
    first = stderr.split(b"\n", 1)[0]
    command_started = int(first) if first.isdigit() else started
    return {
        "command_s": (output_ended - command_started) / 1e9,
        "exit_s": (exited - started) / 1e9,
        "transcript_s": (exited - command_started) / 1e9,  # until the transcript is whole
        "bytes": received,
        "sha256": digest.hexdigest(),
        "status": process.returncode,
        "stderr": stderr.decode("utf-8", "replace"),
    }


def _mirror_counts(runs: Path) -> tuple[int, int]:
    """Entries in the one run file of `runs`, and the lines its report says were not recorded."""
    (path,) = runs.glob("*.jsonl")
    data = path.read_bytes()
    entries = data.count(_ENTRY)
    unrecorded = 0
    for line in data.splitlines():
        if b'"unrecorded_lines"' in line:
            unrecorded += json.loads(line)["context"]["unrecorded_lines"]
    path.unlink()
    return entries, unrecorded


def _printer(label: str, lines: int, pairs: int, scratch: Path) -> dict[str, Any]:
    printer = ["sh", "-c", f"date +%s%N >&2; yes {LINE} | head -n {lines}"]
    runs = scratch / "runs"
    env = _environment(runs)
    before = os.environ.get("BENCH_RUN_BEFORE") if lines == RATE_LINES else None
    variants = {"wrapped": env} | ({} if before is None else {"before": {**env, "PYTHONPATH": before}})
    direct: list[dict[str, Any]] = []
    wrapped: dict[str, list[dict[str, Any]]] = {name: [] for name in variants}
    recorded: dict[str, list[int]] = {name: [] for name in variants}
    reported_ok = dict.fromkeys(variants, True)
    for _ in range(pairs):
        direct.append(_timed(printer, env))
        for name, variant_env in variants.items():
            wrapped[name].append(_timed([*WRAPPER, *printer], variant_env))
            entries, unrecorded = _mirror_counts(runs)
            recorded[name].append(entries)
            reported_ok[name] &= entries + unrecorded == lines
    ours = wrapped["wrapped"]
    exact = all(run["sha256"] == direct[0]["sha256"] and run["status"] == 0 for run in ours)
    result = {
        "label": label,
        "lines": lines,
        "direct_s": statistics.median(run["command_s"] for run in direct),
        "command_s": statistics.median(run["command_s"] for run in ours),
        "ratio": statistics.median(
            w["command_s"] / d["command_s"] for d, w in zip(direct, ours, strict=True)
        ),
        "exit_s": statistics.median(run["exit_s"] for run in ours),
        "recorded": statistics.median(count / lines for count in recorded["wrapped"]),
        "recorded_min": min(recorded["wrapped"]) / lines,
        "reported_ok": reported_ok["wrapped"],
        "exact": exact,
        "pairs": pairs,
    }
    for name in variants:
        rates = [
            count / run["transcript_s"] for count, run in zip(recorded[name], wrapped[name], strict=True)
        ]
        prefix = "" if name == "wrapped" else "before_"
        result[f"{prefix}lines_per_s"] = statistics.median(rates)
        result[f"{prefix}lines_per_s_all"] = rates
        if prefix:
            result["before_recorded"] = statistics.median(count / lines for count in recorded[name])
            result["before_reported_ok"] = reported_ok[name]
            result["before_exit_statuses"] = sorted({run["status"] for run in wrapped[name]})
    return result


def _say_rate(printer: dict[str, Any], busy: bool) -> None:
    """The 200,000-line case's capture rate and accounting, on stderr (`run.py` shows it)."""
    rates = ", ".join(f"{rate:,.0f}" for rate in printer["lines_per_s_all"])
    line = (
        f"[bench] run: {printer['label']}{' beside a busy loop' if busy else ''}: "
        f"{printer['lines_per_s']:,.0f} lines/s captured (median; runs: {rates}), "
        f"{printer['recorded']:.1%} recorded, recorded + reported = printed: "
        f"{'yes' if printer['reported_ok'] else 'NO'}"
    )
    if "before_lines_per_s" in printer:
        before = ", ".join(f"{rate:,.0f}" for rate in printer["before_lines_per_s_all"])
        line += (
            f"; before: {printer['before_lines_per_s']:,.0f} lines/s (runs: {before}), "
            f"{printer['before_recorded']:.1%} recorded, recorded + reported = printed: "
            f"{'yes' if printer['before_reported_ok'] else 'NO'}, "
            f"exit statuses {printer['before_exit_statuses']}"
        )
    print(line, file=sys.stderr, flush=True)


def _random_bytes(scratch: Path) -> dict[str, Any]:
    printer = ["sh", "-c", f"date +%s%N >&2; head -c {RANDOM_BYTES} /dev/urandom"]
    env = _environment(scratch / "runs")
    direct, wrapped = [], []
    for _ in range(5):
        direct.append(_timed(printer, env))
        wrapped.append(_timed([*WRAPPER, *printer], env))
        _mirror_counts(scratch / "runs")
    return {
        "direct_s": statistics.median(run["command_s"] for run in direct),
        "command_s": statistics.median(run["command_s"] for run in wrapped),
        "ratio": statistics.median(
            w["command_s"] / d["command_s"] for d, w in zip(direct, wrapped, strict=True)
        ),
        "exit_s": statistics.median(run["exit_s"] for run in wrapped),
        "exact": all(run["bytes"] == RANDOM_BYTES and run["status"] == 0 for run in wrapped),
    }


def _slow_reader(scratch: Path) -> dict[str, Any]:
    expected = len(subprocess.run(["seq", "1", "200000"], capture_output=True, check=True).stdout)
    process = subprocess.Popen(
        [*WRAPPER, "seq", "1", "200000"], stdout=subprocess.PIPE, env=_environment(scratch / "runs")
    )
    assert process.stdout is not None
    received = 0
    started = time.monotonic()
    while chunk := os.read(process.stdout.fileno(), SLOW_READ_BYTES):
        received += len(chunk)
        time.sleep(SLOW_READ_PAUSE_S)
    process.wait()
    _mirror_counts(scratch / "runs")
    read_s = time.monotonic() - started
    return {"delivered": received / expected, "read_s": read_s, "status": process.returncode}


def _startup(scratch: Path) -> float:
    env = _environment(scratch / "runs")
    times: list[float] = []
    for _ in range(5):
        times.append(_timed([*WRAPPER, "true"], env)["exit_s"])
        _mirror_counts(scratch / "runs")
    return statistics.median(times)


def main() -> dict[str, Any]:
    busy = os.environ.get("BENCH_RUN_BUSY") == "1"
    spinner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if busy else None
    try:
        with tempfile.TemporaryDirectory(prefix="bench-run-") as directory:
            scratch = Path(directory)
            startup_s = _startup(scratch)
            printers = []
            for label, lines, pairs in PRINTERS:
                printers.append(_printer(label, lines, pairs, scratch))
                if lines == RATE_LINES:
                    _say_rate(printers[-1], busy)
            return {
                "run": {
                    "startup_s": startup_s,
                    "printers": printers,
                    "random": _random_bytes(scratch),
                    "slow_reader": _slow_reader(scratch),
                    "busy_loop": busy,
                }
            }
    finally:
        if spinner is not None:
            spinner.kill()
            spinner.wait()
