"""What `import transcript_otel` loads (issue 30), and that our own OTel calls stay hidden from
other instrumentations without `opentelemetry.instrumentation.utils` on the import path.

Structure, not time: each check runs in a fresh interpreter and looks at `sys.modules`.
benchmarks/bench_import.py has the times.
"""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from opentelemetry import context
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.instrumentation.utils import suppress_instrumentation as upstream_suppress_instrumentation

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel._records import PreparedRecord
from transcript_otel._suppression import suppress_instrumentation
from transcript_otel.sinks import Sink

# Each adds milliseconds to every agent process: wrapt (through
# opentelemetry.instrumentation.utils) brings asyncio and ssl, importlib.metadata brings
# zipfile and email.
HEAVY_MODULES = (
    "asyncio",
    "ssl",
    "email",
    "zipfile",
    "wrapt",
    "opentelemetry.instrumentation.utils",
    "importlib.metadata",
)


def _modules_after(statement: str) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    program = f"{statement}\nimport sys\nprint('\\n'.join(sys.modules))"
    completed = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=60
    )
    return set(completed.stdout.split())


def test_import_loads_no_heavy_module() -> None:
    loaded = _modules_after("import transcript_otel")
    assert "transcript_otel.emitter" in loaded  # the probe saw the package
    assert sorted(loaded.intersection(HEAVY_MODULES)) == []


def test_names_left_to_first_use_still_import() -> None:
    statement = (
        "import transcript_otel\n"
        "from transcript_otel import *\n"
        "assert transcript_otel.configure is configure\n"
        "assert all(getattr(transcript_otel, name) is not None for name in transcript_otel.__all__)"
    )
    assert "transcript_otel.setup" in _modules_after(statement)


def test_unknown_attribute_is_an_attribute_error() -> None:
    import transcript_otel

    with pytest.raises(AttributeError, match="no_such_name"):
        _ = transcript_otel.no_such_name  # type: ignore[attr-defined]


def test_suppression_sets_what_opentelemetry_instrumentation_sets() -> None:
    with upstream_suppress_instrumentation():
        expected = dict(context.get_current())
    assert is_instrumentation_enabled()
    with suppress_instrumentation():
        assert not is_instrumentation_enabled()
        assert dict(context.get_current()) == expected
    assert is_instrumentation_enabled()


class _InstrumentationProbe(Sink):
    """Records, on the writer thread, whether other instrumentations may trace the sink's calls."""

    name = "probe"

    def __init__(self) -> None:
        self.enabled_during_write: list[bool] = []
        self.written = threading.Event()

    def write(self, record: PreparedRecord) -> None:
        self.enabled_during_write.append(is_instrumentation_enabled())
        self.written.set()


def test_writer_thread_runs_with_instrumentation_suppressed() -> None:
    probe = _InstrumentationProbe()
    pipeline = TranscriptPipeline([probe])
    try:
        with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
            emitter.emit("user_message", detail={"text": "hello"})
        assert pipeline.flush(5.0)
        assert probe.written.is_set()
        assert probe.enabled_during_write
        assert not any(probe.enabled_during_write)
        assert is_instrumentation_enabled()  # the caller's thread is left as it was
    finally:
        pipeline.shutdown(5.0)
