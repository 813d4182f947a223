"""Run every transcript-otel benchmark and print one table.

    python benchmarks/run.py [--only agent,baselines,...] [--json results.json]
    python benchmarks/run.py --against REV [--rounds 3] [--only throughput,e2e,...]

Each section runs in its own Python process (fresh heap, its own logging and
OTel setup) and reports its rows as JSON; this script prints them together
with the ratios of our `emit()` to the baselines measured in the same run. With
`--against REV`, each chosen section runs for the current code and for REV (a git
worktree), alternating fresh processes, and the figures are printed side by side with
their ratio (`ab.py`).
Needs Python 3.13 with `transcript-otel[otlp]`, `weakincentives==0.27.0` and
`rotel==0.0.1a15` (see benchmarks/README.md, or `make bench`).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
# The local servers the tests start too (loopback ports, the rotel launcher, a silent backend).
TESTS = HERE.parent / "tests"
SECTIONS = (
    "agent",
    "baselines",
    "throughput",
    "redaction",
    "otlp",
    "memory",
    "outage",
    "e2e",
    "run",
    "import",
    "sessions",
    "watch",
    "sdk",
)
# Run only when named in --only: `outage10` takes ten minutes and writes 5.9 GB of mirror.
ON_DEMAND = ("outage10",)


def _section_main(name: str) -> Callable[[], Any]:
    if name == "agent":
        import bench_agent

        return bench_agent.main
    if name == "baselines":
        import bench_baselines

        return bench_baselines.main
    if name == "throughput":
        import bench_throughput

        return bench_throughput.main_jsonl
    if name == "redaction":
        import bench_redaction

        return bench_redaction.main
    if name == "otlp":
        import bench_throughput

        return bench_throughput.main_otlp
    if name == "memory":
        import bench_memory

        return bench_memory.main
    if name == "outage":
        import bench_outage

        return bench_outage.main
    if name == "outage10":
        import bench_outage

        return bench_outage.main_long
    if name == "e2e":
        import bench_e2e

        return bench_e2e.main
    if name == "run":
        import bench_run

        return bench_run.main
    if name == "import":
        import bench_import

        return bench_import.main
    if name == "sessions":
        import bench_sessions

        return bench_sessions.main
    if name == "watch":
        import bench_watch

        return bench_watch.main
    if name == "sdk":
        import bench_sdk

        return bench_sdk.main
    raise SystemExit(f"unknown section {name!r}; choose from {', '.join(SECTIONS + ON_DEMAND)}")


def run_section_here(name: str, output: Path) -> None:
    """Child process: run one section and write its rows (or its error) as JSON."""
    from results import Row

    payload: dict[str, Any]
    try:
        produced = _section_main(name)()
        if isinstance(produced, dict):
            payload = produced
        else:
            rows: list[Row] = produced
            payload = {"rows": [row.to_json() for row in rows]}
    except Exception as exc:  # reported in the table, the other sections still run
        import traceback

        payload = {"error": f"{type(exc).__name__}: {exc}", "traceback": traceback.format_exc()}
    output.write_text(json.dumps(payload))


def run_section(name: str, scratch: Path) -> dict[str, Any]:
    output = scratch / f"{name}.json"
    started = time.monotonic()
    completed = subprocess.run(
        [sys.executable, str(HERE / "run.py"), "--section", name, "--output", str(output)],
        check=False,
        cwd=HERE.parent,
    )
    elapsed = time.monotonic() - started
    if not output.exists():
        return {"error": f"section process exited with {completed.returncode} and no result"}
    payload: dict[str, Any] = json.loads(output.read_text())
    payload["elapsed_s"] = elapsed
    print(f"[bench] {name}: {elapsed:.1f} s", file=sys.stderr, flush=True)
    return payload


def describe_code() -> str:
    """The commit measured, and whether src/ had uncommitted changes."""
    try:
        commit = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
            cwd=HERE.parent,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "src"],
            capture_output=True,
            text=True,
            check=True,
            cwd=HERE.parent,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "code: unknown (not a git checkout)"
    return f"code: commit {commit}" + (" with uncommitted changes in src/" if dirty else "")


def describe_machine() -> str:
    import opentelemetry.sdk.version as sdk_version
    import orjson

    cpu = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = "?"
    try:
        kib = int(Path("/proc/meminfo").read_text().split()[1])
        memory = f"{kib / (1 << 20):.0f} GiB"
    except (OSError, ValueError, IndexError):
        pass
    try:
        from importlib import metadata

        wink = metadata.version("weakincentives")
    except Exception:
        wink = "not installed"
    return (
        f"Python {platform.python_version()} ({platform.python_implementation()}), "
        f"{os.cpu_count()} CPUs ({cpu}), {memory} RAM, {platform.system()} {platform.release()}; "
        f"opentelemetry-sdk {sdk_version.__version__}, orjson {orjson.__version__}, "
        f"weakincentives {wink}"
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument(
        "--only",
        help="comma-separated sections: "
        + ", ".join(SECTIONS)
        + " (all of them by default); on demand only: "
        + ", ".join(ON_DEMAND),
    )
    parser.add_argument("--json", type=Path, help="also write every figure to this JSON file")
    parser.add_argument(
        "--against",
        metavar="REV",
        help="also run the chosen sections for REV (a commit, tag or branch; checked out under "
        ".bench-worktrees/), each side's own run.py, alternating; print both and current / REV",
    )
    parser.add_argument(
        "--rounds", type=int, default=3, help="with --against: processes of each side per section (3)"
    )
    parser.add_argument("--section", help=argparse.SUPPRESS)
    parser.add_argument("--output", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)

    sys.path[:0] = [str(HERE), str(TESTS)]
    if args.section:
        run_section_here(args.section, args.output)
        return 0

    from report import render_report

    chosen = tuple(args.only.split(",")) if args.only else SECTIONS
    unknown = [name for name in chosen if name not in SECTIONS + ON_DEMAND]
    if unknown:
        parser.error(f"unknown section(s): {', '.join(unknown)}")
    if args.against:
        from ab import run_against
        from entries import SIZES

        return run_against(
            args.against,
            chosen,
            rounds=args.rounds,
            repo=HERE.parent,
            labels=dict(SIZES),
            machine=describe_machine(),
            current_code=describe_code(),
            json_path=args.json,
        )
    import tempfile

    started = time.monotonic()
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="transcript-otel-bench-") as scratch:
        results = {name: run_section(name, Path(scratch)) for name in chosen}
    total = time.monotonic() - started
    load_after = os.getloadavg()
    machine = describe_machine() + (
        f"; load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after; {describe_code()}"
    )
    print(render_report(results, machine=machine, total_s=total))
    if args.json:
        args.json.write_text(
            json.dumps({"machine": machine, "total_s": total, "sections": results}, indent=1)
        )
    failed = [name for name, payload in results.items() if "error" in payload]
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
