"""Section 7: what `import transcript_otel` costs a fresh process (issue 30's target).

Every agent process that captures its transcript pays this import once, before its first
`emit()`. The baseline is what any OTel-instrumented process pays anyway: importing the
OTel trace and logs APIs (`import opentelemetry.trace, opentelemetry._logs`). Each
statement runs as `python -c` in a fresh interpreter; the variants take turns, one
process at a time, in an order that rotates every round (this machine's speed drifts over
seconds), after one untimed warm-up round that fills the page cache and the bytecode cache.
The bytecode is cached in a scratch `PYTHONPYCACHEPREFIX`, for every module alike, as an
installed wheel has it: this machine sets `PYTHONDONTWRITEBYTECODE`, under which an
editable install compiles the package's sources again in every process.

* *Import*: the statement alone, timed inside the child with `perf_counter_ns` (the
  interpreter's own start-up left out).
* *Process*: from starting the child to its exit, as `time python -c ...` measures it.
* The ratios are the medians of the ratios within each round (target: <= 1.3x), with the
  ratio of the best runs beside them.
* *Heavy modules*: which of `HEAVY_MODULES` the child holds after the statement.
* The last variant also loads `configure`, which `import transcript_otel` leaves to first
  use: what a process that sets up the SDK pays for the module before calling it.
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

ROUNDS: Final = 21
HEAVY_MODULES: Final = ("asyncio", "ssl", "email", "zipfile", "wrapt", "opentelemetry.instrumentation.utils")
VARIANTS: Final = (  # key, label, statement
    ("python", "python alone (`pass`)", "pass"),
    ("otel_api", "OTel trace + logs APIs", "import opentelemetry.trace, opentelemetry._logs"),
    ("transcript_otel", "import transcript_otel", "import transcript_otel"),
    (
        "with_configure",
        "import transcript_otel, then its `configure`",
        "import transcript_otel; transcript_otel.configure",
    ),
)
# Timed around the statement only; prints the import's ns, the module count and the heavy
# modules loaded.
_CHILD: Final = (
    "import time\n"
    "_started = time.perf_counter_ns()\n"
    "{statement}\n"
    "_elapsed = time.perf_counter_ns() - _started\n"
    "import sys\n"
    "_heavy = [name for name in {heavy!r} if name in sys.modules]\n"
    "print(_elapsed, len(sys.modules), ','.join(_heavy))\n"
)


def _environment(pycache: Path) -> dict[str, str]:
    """The caller's environment without settings that could make an import do more, the
    bytecode cached under `pycache`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    return env


def _run_once(statement: str, env: dict[str, str]) -> dict[str, Any]:
    program = _CHILD.format(statement=statement, heavy=HEAVY_MODULES)
    started = time.perf_counter_ns()
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, env=env, check=True
    )
    process_ns = time.perf_counter_ns() - started
    import_ns, modules, *heavy = completed.stdout.split()
    return {
        "import_s": int(import_ns) / 1e9,
        "process_s": process_ns / 1e9,
        "modules": int(modules),
        "heavy": heavy[0].split(",") if heavy else [],
    }


def _summary(label: str, runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "label": label,
        "import_median_s": statistics.median(run["import_s"] for run in runs),
        "import_best_s": min(run["import_s"] for run in runs),
        "process_median_s": statistics.median(run["process_s"] for run in runs),
        "process_best_s": min(run["process_s"] for run in runs),
        "modules": statistics.median(run["modules"] for run in runs),
        "heavy": sorted({name for run in runs for name in run["heavy"]}),
    }


def _ratios(ours: list[dict[str, Any]], base: list[dict[str, Any]], key: str) -> dict[str, float]:
    return {
        "median_of_pairs": statistics.median(
            mine[key] / theirs[key] for mine, theirs in zip(ours, base, strict=True)
        ),
        "of_best": min(run[key] for run in ours) / min(run[key] for run in base),
    }


def main(rounds: int = ROUNDS) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {key: [] for key, _, _ in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="bench-import-pycache-") as pycache:
        env = _environment(Path(pycache))
        for round_index in range(1 + rounds):  # round 0 is the warm-up
            shift = round_index % len(VARIANTS)
            for key, _, statement in VARIANTS[shift:] + VARIANTS[:shift]:
                result = _run_once(statement, env)
                if round_index:
                    runs[key].append(result)
    ours, base = runs["transcript_otel"], runs["otel_api"]
    return {
        "import": {
            "rounds": rounds,
            "variants": [_summary(label, runs[key]) for key, label, _ in VARIANTS],
            "ratio_import": _ratios(ours, base, "import_s"),
            "ratio_process": _ratios(ours, base, "process_s"),
        }
    }
