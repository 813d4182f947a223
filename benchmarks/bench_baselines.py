"""Section 2: the baselines our `emit()` is compared with, measured in the same run.

* weakincentives 0.27.0 `TranscriptEmitter.emit()` (`weakincentives.runtime.transcript`)
  - logging off: the root logger at WARNING, so its DEBUG record is discarded
    (the envelope is still built: lock, counter, `isoformat()`, context dict);
  - with its debug-bundle JSONL handler: `weakincentives.debug.bundle.collect_all_logs()`
    (the `_LogCollectorHandler` that `BundleWriter.capture_logs()` installs:
    `json.dumps(ensure_ascii=False)`, write and flush per record) and the root
    logger at DEBUG, as a debug bundle capture needs.
* a bare OTel SDK `logger.emit()` on the calling thread: `LoggerProvider` +
  `BatchLogRecordProcessor` + a discarding exporter, 8 envelope attributes plus
  `detail` as a nested map and `raw` (attributes built in the loop, as an
  instrumentation would).

Each in a hot loop (ns/entry) and paced with a 2 ms sleep between entries (p50, p99).
weakincentives is imported by name so this module type-checks without it.
"""

from __future__ import annotations

import importlib
import json
import logging
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from opentelemetry._logs import LogRecord, SeverityNumber
from opentelemetry.context import get_current

from entries import Entry, all_entries
from harness import THREADED_RUNS, TIMED_RUNS, RunPercentiles, Stat, loop_ns_per_call, perf_ns, repeat
from otel_setup import sdk_logs
from results import Row

SECTION = "2. baselines, same run"
WINK_VERSION = "0.27.0"
PACED_GAP_S = 0.002
PACED_COUNT = 120

Emit = Callable[[Entry], None]


def hot_loop(emit: Emit, entry: Entry) -> Stat:
    count = loop_ns_per_call(lambda: emit(entry), 0.1)

    def run() -> float:
        start = perf_ns()
        for _ in range(count):
            emit(entry)
        return (perf_ns() - start) / count

    return Stat(repeat(run, TIMED_RUNS), {"per_run": count})


def paced(emit: Emit, entry: Entry) -> tuple[Stat, Stat]:
    runs = RunPercentiles()

    def run() -> float:
        samples: list[int] = []
        for _ in range(PACED_COUNT):
            time.sleep(PACED_GAP_S)
            start = perf_ns()
            emit(entry)
            samples.append(perf_ns() - start)
        return runs.add(samples)

    repeat(run, THREADED_RUNS)
    timed = runs.timed()
    return Stat(timed.p50, {"per_run": PACED_COUNT}), Stat(timed.p99, {"per_run": PACED_COUNT})


# -- weakincentives ---------------------------------------------------------------------------


def _record_to_json(record: logging.LogRecord) -> str:
    """weakincentives' `_LogCollectorHandler._record_to_json` (weakincentives.md §2.1)."""
    context = getattr(record, "context", {})
    event = getattr(record, "event", "")
    data = {
        "timestamp": datetime.fromtimestamp(record.created, tz=UTC).isoformat(),
        "level": record.levelname,
        "logger": record.name,
        "event": event if isinstance(event, str) else "",
        "message": record.getMessage(),
        "context": dict(context) if isinstance(context, dict) else {},
    }
    return json.dumps(data, ensure_ascii=False)


class _JsonlHandler(logging.Handler):
    """Fallback equivalent of the bundle handler, if `collect_all_logs` is unavailable."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.DEBUG)
        self._file = path.open("a", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        self._file.write(_record_to_json(record) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()
        super().close()


@contextmanager
def _fallback_capture(path: Path) -> Iterator[Path]:
    handler = _JsonlHandler(path)
    root = logging.getLogger()
    root.addHandler(handler)
    try:
        yield path
    finally:
        root.removeHandler(handler)
        handler.close()


def wink_capture(path: Path) -> tuple[AbstractContextManager[Any], str]:
    """weakincentives' own debug-bundle JSONL capture, or the equivalent handler."""
    try:
        bundle = importlib.import_module("weakincentives.debug.bundle")
        capture: AbstractContextManager[Any] = bundle.collect_all_logs(path)
        return capture, "weakincentives.debug.bundle.collect_all_logs"
    except (ImportError, AttributeError):
        return _fallback_capture(path), "logging handler equivalent to _record_to_json"


def wink_rows(entries: list[Entry], rows: dict[str, Row]) -> str:
    from importlib import metadata

    version = metadata.version("weakincentives")
    if version != WINK_VERSION:
        raise RuntimeError(f"weakincentives {version} is installed; the baseline is {WINK_VERSION}")
    transcript = importlib.import_module("weakincentives.runtime.transcript")
    root = logging.getLogger()
    previous_level = root.level
    mode = ""
    try:
        for entry in entries:
            emitter = transcript.TranscriptEmitter(
                prompt_name="bench:agent",
                adapter="codex_app_server",
                session_id="11111111-2222-3333-4444-555555555555",
            )

            def wink_emit(e: Entry, emit: Any = emitter.emit) -> None:
                emit(e.entry_type, detail=e.detail, raw=e.raw)

            root.setLevel(logging.WARNING)
            rows["wink_off"].cells[entry.key] = hot_loop(wink_emit, entry)
            rows["wink_off_p50"].cells[entry.key], rows["wink_off_p99"].cells[entry.key] = paced(
                wink_emit, entry
            )
            with tempfile.TemporaryDirectory(prefix="bench-wink-") as directory:
                path = Path(directory) / "app.jsonl"
                capture, mode = wink_capture(path)
                with capture:
                    root.setLevel(logging.DEBUG)
                    hot = hot_loop(wink_emit, entry)
                    p50, p99 = paced(wink_emit, entry)
                    root.setLevel(logging.WARNING)
                lines = sum(1 for _ in path.open("rb"))
                hot.notes["lines_written"] = lines
                if lines == 0:
                    raise RuntimeError("the weakincentives JSONL capture wrote nothing")
                rows["wink_jsonl"].cells[entry.key] = hot
                rows["wink_jsonl_p50"].cells[entry.key] = p50
                rows["wink_jsonl_p99"].cells[entry.key] = p99
    finally:
        root.setLevel(previous_level)
    return mode


# -- bare OTel SDK ----------------------------------------------------------------------------


def otel_rows(entries: list[Entry], rows: dict[str, Row]) -> None:
    logs = sdk_logs()
    logger = logs.provider.get_logger("bench.baseline")
    try:
        for entry in entries:
            sequence = iter(range(1, 1 << 62))

            def otel_emit(e: Entry, emit: Any = logger.emit, seq: Iterator[int] = sequence) -> None:
                emit(
                    LogRecord(
                        timestamp=time.time_ns(),
                        context=get_current(),
                        severity_text="DEBUG",
                        severity_number=SeverityNumber.DEBUG,
                        body=f"transcript entry: {e.entry_type}",
                        attributes={
                            "transcript.prompt_name": "bench:agent",
                            "transcript.adapter": "codex_app_server",
                            "transcript.entry_type": e.entry_type,
                            "transcript.sequence_number": next(seq),
                            "transcript.source": "main",
                            "transcript.timestamp": time.time_ns(),
                            "transcript.session_id": "11111111-2222-3333-4444-555555555555",
                            "gen_ai.conversation.id": "11111111-2222-3333-4444-555555555555",
                            "transcript.detail": e.detail,
                            "transcript.raw": e.raw,
                        },
                        event_name="transcript.entry",
                    )
                )

            before = logs.snapshot()
            hot = hot_loop(otel_emit, entry)
            p50, p99 = paced(otel_emit, entry)
            logs.provider.force_flush()
            emitted, exported, _ = (a - b for a, b in zip(logs.snapshot(), before, strict=True))
            hot.notes["sdk_dropped"] = emitted - exported
            rows["otel"].cells[entry.key] = hot
            rows["otel_p50"].cells[entry.key] = p50
            rows["otel_p99"].cells[entry.key] = p99
    finally:
        logs.shutdown()


def main() -> dict[str, Any]:
    entries = all_entries()
    names = {
        "wink_off": f"weakincentives {WINK_VERSION} emit(), logging off: ns/entry",
        "wink_off_p50": "  same, paced 2.0 ms: p50",
        "wink_off_p99": "  same, paced 2.0 ms: p99",
        "wink_jsonl": f"weakincentives {WINK_VERSION} emit(), bundle JSONL handler at DEBUG: ns/entry",
        "wink_jsonl_p50": "  same, paced 2.0 ms: p50",
        "wink_jsonl_p99": "  same, paced 2.0 ms: p99",
        "otel": "bare OTel SDK logger.emit(), nested detail attr: ns/entry",
        "otel_p50": "  same, paced 2.0 ms: p50",
        "otel_p99": "  same, paced 2.0 ms: p99",
    }
    rows = {key: Row(SECTION, name, "ns") for key, name in names.items()}
    info: dict[str, Any] = {}
    try:
        info["wink_capture"] = wink_rows(entries, rows)
    except Exception as exc:
        info["wink_error"] = f"{type(exc).__name__}: {exc}"
    otel_rows(entries, rows)
    produced = [row for row in rows.values() if row.cells]
    return {"rows": [row.to_json() for row in produced], "info": info}
