"""Checks of the weakincentives instrumentor's lifecycle, run inside a weakincentives venv.

Prints one JSON object with what it observed; `tests/test_wink_instrumentor.py` asserts on it:
the entry point loads, a module imported after `instrument()` is patched,
`instrument → uninstrument → instrument` leaves exactly one wrapper and uninstrument
restores the originals, and `suppress_instrumentation()` turns capture off.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))


def _wrapper_depth(function: Any) -> int:
    """How many wrapt wrappers sit on `function`."""
    depth = 0
    while hasattr(function, "__wrapped__") and type(function).__name__.endswith("FunctionWrapper"):
        depth += 1
        function = function.__wrapped__
    return depth


def _run_files(directory: Path) -> list[str]:
    return sorted(path.name for path in directory.glob("*.jsonl"))


def main() -> None:
    report: dict[str, Any] = {}
    (entry_point,) = importlib.metadata.entry_points(
        group="opentelemetry_instrumentor", name="weakincentives"
    )
    instrumentor_cls = entry_point.load()
    report["entry_point"] = f"{instrumentor_cls.__module__}.{instrumentor_cls.__name__}"
    assert "weakincentives.adapters" not in sys.modules  # nothing imported it yet

    runs = Path(tempfile.mkdtemp())
    transcript_otel = importlib.import_module("transcript_otel")
    transcript_otel.configure(jsonl_dir=runs, instrument=False)
    instrumentor = instrumentor_cls()
    instrumentor.instrument()

    # Imported after instrument(): the post-import hook patches it.
    adapter_class = importlib.import_module(
        "weakincentives.adapters.claude_agent_sdk.adapter"
    ).ClaudeAgentSDKAdapter
    evaluate = adapter_class.__dict__["evaluate"]
    report["late_import_depth"] = _wrapper_depth(evaluate)
    original = evaluate.__wrapped__
    report["applied"] = instrumentor.applied_patches

    instrumentor.uninstrument()
    report["restored_original"] = adapter_class.__dict__["evaluate"] is original
    report["applied_after_uninstrument"] = instrumentor.applied_patches
    instrumentor.instrument()
    instrumentor.instrument()  # a second call is a no-op (BaseInstrumentor warns)
    report["reinstrument_depth"] = _wrapper_depth(adapter_class.__dict__["evaluate"])

    import wink_driver
    from opentelemetry.instrumentation.utils import suppress_instrumentation

    work = Path(tempfile.mkdtemp())
    with suppress_instrumentation():
        suppressed = wink_driver.run_one("claude", "plain", work, "")
    transcript_otel.flush()
    report["suppressed_ok"] = suppressed["ok"]
    report["files_when_suppressed"] = _run_files(runs)
    captured = wink_driver.run_one("claude", "plain", work, "")
    transcript_otel.flush()
    report["captured_ok"] = captured["ok"]
    report["files_when_captured"] = _run_files(runs)
    instrumentor.uninstrument()
    after = wink_driver.run_one("claude", "plain", work, "")
    transcript_otel.flush()
    report["uninstrumented_ok"] = after["ok"]
    report["files_after_uninstrument"] = _run_files(runs)
    print(json.dumps(report))


if __name__ == "__main__":
    main()
