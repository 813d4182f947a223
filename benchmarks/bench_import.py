"""Section 7: what `import transcript_otel` costs a fresh process (issue 30's target), and what
the first emitter and our `opentelemetry-instrument` entry points cost on top.

Every agent process that captures its transcript pays the import once, and its first emitter
once, before its first entry is queued. The baseline is what any OTel-instrumented process pays
anyway: importing the OTel trace and logs APIs (`import opentelemetry.trace, opentelemetry._logs`).
Each statement runs as `python -c` in a fresh interpreter; the variants take turns, one process
at a time, in an order that rotates every round (this machine's speed drifts over seconds),
after one untimed warm-up round that fills the page cache and the bytecode cache. The bytecode
is cached in a scratch `PYTHONPYCACHEPREFIX`, for every module alike, as an installed wheel has
it: this machine sets `PYTHONDONTWRITEBYTECODE`, under which an editable install compiles the
package's sources again in every process.

* *Import*: the statement alone, timed inside the child with `perf_counter_ns` (the
  interpreter's own start-up left out). The import alone loads next to nothing since the
  names load on first use, so the row that matters to an agent is the next one: the import,
  a first `TranscriptEmitter(...)` (which builds the default pipeline: JSONL mirror, OTel log
  records, span events) and one `emit()`.
* *Process*: from starting the child to its exit, as `time python -c ...` measures it (for the
  first emit, the writer's work and the flush at exit included).
* Our instrumentor entry points, loaded and instrumented as `opentelemetry-instrument` does,
  in a process that has imported what it imports first (timed inside, the statement alone).
* `opentelemetry-instrument python -c pass`, which loads every installed configurator and
  instrumentor entry point into the process, whether it ever imports an agent harness or not:
  with our instrumentors, without them (`OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`), and with
  nothing of ours (our configurator off too: `OTEL_PYTHON_CONFIGURATOR` names none). Process
  time only (two interpreters start: the wrapper, which `exec`s the command).
* The ratios are the medians of the ratios within each round (target for the import: <= 1.3x
  the OTel APIs), with the ratio of the best runs beside them.
* *Ours*: how many `transcript_otel` modules the child holds; *heavy modules*: which of
  `HEAVY_MODULES`.
* The `configure` row loads `configure`, which the import leaves to first use too: what a
  process that sets up the SDK pays for the module before calling it.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any, Final

ROUNDS: Final = 21
HEAVY_MODULES: Final = (
    "asyncio",
    "ssl",
    "email",
    "zipfile",
    "wrapt",
    "opentelemetry.instrumentation.utils",
    "hashlib",
    "opentelemetry.metrics",
    "opentelemetry.sdk",
)
_FIRST_EMIT: Final = (
    "import transcript_otel\n"
    "_emitter = transcript_otel.TranscriptEmitter(prompt_name='bench', adapter='bench')\n"
    "_emitter.emit('user_message', detail={'text': 'hello'})"
)
# A configurator name no package registers: `opentelemetry-instrument` then loads none.
_NO_CONFIGURATOR: Final = "bench-import-none"
# What `opentelemetry-instrument` has loaded before it loads the instrumentors, and our entry points.
_BEFORE_INSTRUMENTORS: Final = (
    "import opentelemetry.instrumentation.auto_instrumentation._load, wrapt\n"
    "from opentelemetry.util._importlib_metadata import entry_points\n"
    "_ours = [entry_point for entry_point in entry_points(group='opentelemetry_instrumentor')\n"
    "         if entry_point.value.startswith('transcript_otel.')]"
)
# What `opentelemetry-instrument` does with each (its dependency check, left out here, reads the
# distribution's metadata: the same for any instrumentor's package).
_LOAD_INSTRUMENTORS: Final = (
    "for _entry_point in _ours:\n    _entry_point.load()().instrument(skip_dep_check=True)"
)


@dataclass(frozen=True, slots=True)
class Variant:
    key: str
    label: str
    statement: str
    under_instrument: bool = False  # run as `opentelemetry-instrument python -c ...`
    environment: Mapping[str, str] = field(default_factory=dict)
    setup: str = "pass"  # run before the statement, untimed


# Timed around the statement only; prints the statement's ns, the module count, ours, and the
# heavy modules loaded.
_CHILD: Final = (
    "{setup}\n"
    "import time\n"
    "_started = time.perf_counter_ns()\n"
    "{statement}\n"
    "_elapsed = time.perf_counter_ns() - _started\n"
    "import sys\n"
    "_ours = sum(1 for name in sys.modules if name.split('.')[0] == 'transcript_otel')\n"
    "_heavy = [name for name in {heavy!r} if name in sys.modules]\n"
    "print(_elapsed, len(sys.modules), _ours, ','.join(_heavy))\n"
)


def _our_instrumentors() -> list[str]:
    """The names of our `opentelemetry_instrumentor` entry points (pyproject.toml)."""
    return sorted(
        entry_point.name
        for entry_point in metadata.entry_points(group="opentelemetry_instrumentor")
        if entry_point.value.startswith("transcript_otel.")
    )


def variants(instrument: str | None) -> tuple[Variant, ...]:
    """The statements measured; the `opentelemetry-instrument` ones when it is installed."""
    plain = (
        Variant("python", "python alone (`pass`)", "pass"),
        Variant("otel_api", "OTel trace + logs APIs", "import opentelemetry.trace, opentelemetry._logs"),
        Variant("transcript_otel", "import transcript_otel", "import transcript_otel"),
        Variant(
            "first_emit",
            "import transcript_otel, a first `TranscriptEmitter(...)`, one `emit()`",
            _FIRST_EMIT,
        ),
        Variant(
            "with_configure",
            "import transcript_otel, then its `configure`",
            "import transcript_otel; transcript_otel.configure",
        ),
        Variant(
            "instrumentors",
            "our instrumentor entry points: load, `instrument()` (after what `opentelemetry-instrument` "
            "loads first; no harness imported)",
            _LOAD_INSTRUMENTORS,
            setup=_BEFORE_INSTRUMENTORS,
        ),
    )
    if instrument is None:
        return plain
    ours_off = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": ",".join(_our_instrumentors())}
    return (
        *plain,
        Variant(
            "instrument_bare",
            "`opentelemetry-instrument`, nothing of ours (configurator and instrumentors off)",
            "pass",
            under_instrument=True,
            environment={**ours_off, "OTEL_PYTHON_CONFIGURATOR": _NO_CONFIGURATOR},
        ),
        Variant(
            "instrument_without_ours",
            "`opentelemetry-instrument`, our configurator, our instrumentors off",
            "pass",
            under_instrument=True,
            environment=ours_off,
        ),
        Variant(
            "instrument_with_ours",
            "`opentelemetry-instrument`, our configurator and instrumentors (the default)",
            "pass",
            under_instrument=True,
        ),
    )


# (label, ours, baseline, which time): each a ratio of medians of pairs within a round.
RATIOS: Final = (
    ("import transcript_otel / OTel APIs, import", "transcript_otel", "otel_api", "import_s"),
    ("import transcript_otel / OTel APIs, process", "transcript_otel", "otel_api", "process_s"),
    ("import + first emitter + emit / OTel APIs, import", "first_emit", "otel_api", "import_s"),
    ("import + first emitter + emit / OTel APIs, process", "first_emit", "otel_api", "process_s"),
    (
        "`opentelemetry-instrument`: with / without our instrumentors, process",
        "instrument_with_ours",
        "instrument_without_ours",
        "process_s",
    ),
    (
        "`opentelemetry-instrument`: our configurator / nothing of ours, process",
        "instrument_without_ours",
        "instrument_bare",
        "process_s",
    ),
)


def _environment(scratch: Path) -> dict[str, str]:
    """The caller's environment without settings that could make an import do more, the
    bytecode cached and the transcripts written under `scratch`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))}
    env.pop("PYTHONDONTWRITEBYTECODE", None)
    env["PYTHONPYCACHEPREFIX"] = str(scratch / "pycache")
    env["TRANSCRIPT_OTEL_JSONL_DIR"] = str(scratch / "runs")
    return env


def _run_once(variant: Variant, env: dict[str, str], instrument: str | None) -> dict[str, Any]:
    program = _CHILD.format(setup=variant.setup, statement=variant.statement, heavy=HEAVY_MODULES)
    command = [sys.executable, "-c", program]
    if variant.under_instrument:
        assert instrument is not None
        command.insert(0, instrument)
    started = time.perf_counter_ns()
    completed = subprocess.run(
        command, capture_output=True, text=True, env={**env, **variant.environment}, check=True
    )
    process_ns = time.perf_counter_ns() - started
    statement_ns, modules, ours, *heavy = completed.stdout.split()
    return {
        "import_s": int(statement_ns) / 1e9,
        "process_s": process_ns / 1e9,
        "modules": int(modules),
        "ours": int(ours),
        "heavy": heavy[0].split(",") if heavy else [],
    }


def _summary(variant: Variant, runs: list[dict[str, Any]]) -> dict[str, Any]:
    timed_inside = not variant.under_instrument  # under the wrapper the statement is `pass`
    return {
        "key": variant.key,
        "label": variant.label,
        "import_median_s": statistics.median(run["import_s"] for run in runs) if timed_inside else None,
        "import_best_s": min(run["import_s"] for run in runs) if timed_inside else None,
        "process_median_s": statistics.median(run["process_s"] for run in runs),
        "process_best_s": min(run["process_s"] for run in runs),
        "modules": statistics.median(run["modules"] for run in runs),
        "ours": statistics.median(run["ours"] for run in runs),
        "heavy": sorted({name for run in runs for name in run["heavy"]}),
    }


def _ratio(ours: list[dict[str, Any]], base: list[dict[str, Any]], key: str) -> dict[str, float]:
    return {
        "median_of_pairs": statistics.median(
            mine[key] / theirs[key] for mine, theirs in zip(ours, base, strict=True)
        ),
        "of_best": min(run[key] for run in ours) / min(run[key] for run in base),
    }


def main(rounds: int = ROUNDS) -> dict[str, Any]:
    instrument = shutil.which("opentelemetry-instrument", path=str(Path(sys.executable).parent))
    measured = variants(instrument)
    runs: dict[str, list[dict[str, Any]]] = {variant.key: [] for variant in measured}
    with tempfile.TemporaryDirectory(prefix="bench-import-") as scratch:
        env = _environment(Path(scratch))
        for round_index in range(1 + rounds):  # round 0 is the warm-up
            shift = round_index % len(measured)
            for variant in measured[shift:] + measured[:shift]:
                result = _run_once(variant, env, instrument)
                if round_index:
                    runs[variant.key].append(result)
    ratios = [
        {"label": label, **_ratio(runs[ours], runs[base], key)}
        for label, ours, base, key in RATIOS
        if ours in runs and base in runs
    ]
    return {
        "import": {
            "rounds": rounds,
            "instrument": instrument,
            "variants": [_summary(variant, runs[variant.key]) for variant in measured],
            "ratios": ratios,
        }
    }
