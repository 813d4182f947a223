"""What `import transcript_otel` and our `opentelemetry-instrument` entry points load (issue 30),
and that our own OTel calls stay hidden from other instrumentations without
`opentelemetry.instrumentation.utils` on the import path.

Structure, not time: each check runs in a fresh interpreter and looks at `sys.modules`.
benchmarks/bench_import.py has the times.
"""

from __future__ import annotations

import importlib
import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
from opentelemetry import context, trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled
from opentelemetry.instrumentation.utils import suppress_instrumentation as upstream_suppress_instrumentation

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.instrumentation._instrumentor import PatchingInstrumentor
from transcript_otel.instrumentation._patching import Patch, PatchSet
from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor
from transcript_otel.instrumentation.weakincentives import WeakincentivesInstrumentor
from transcript_otel.otel.suppression import suppress_instrumentation
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.redaction import _hidden_literals, _literal_targets
from transcript_otel.records.redaction_rules import BUILTIN_RULES
from transcript_otel.sinks import Sink

# Each adds milliseconds to every agent process: wrapt (through
# opentelemetry.instrumentation.utils) brings asyncio and ssl, importlib.metadata brings
# zipfile and email, hashlib OpenSSL; the metrics API is only for counting drops.
HEAVY_MODULES = (
    "asyncio",
    "ssl",
    "email",
    "zipfile",
    "wrapt",
    "opentelemetry.instrumentation.utils",
    "importlib.metadata",
    "hashlib",
    "opentelemetry.metrics",
)
# What emitting loads, which neither the import nor an idle instrumentor may.
EMITTING_MODULES = (
    "transcript_otel.capture.emitter",
    "transcript_otel.capture.pipeline",
    "transcript_otel.capture.defaults",
    "transcript_otel.sinks",
    "transcript_otel.sinks.jsonl",
    "transcript_otel.records.redaction",
    "transcript_otel.model.entries",
    "transcript_otel.mappings",
)
# All `opentelemetry-instrument` loads of ours until a harness is imported: the entry points.
INSTRUMENTOR_MODULES = {
    "transcript_otel.instrumentation",
    "transcript_otel.instrumentation._instrumentor",
    "transcript_otel.instrumentation.claude_agent_sdk",
    "transcript_otel.instrumentation.claude_agent_sdk.package",
    "transcript_otel.instrumentation.weakincentives",
    "transcript_otel.instrumentation.weakincentives.package",
}
_OPENTELEMETRY_INSTRUMENT = Path(sys.executable).parent / "opentelemetry-instrument"
_OUR_INSTRUMENTORS = "weakincentives,transcript_claude_agent_sdk"  # pyproject.toml's entry points
# Other packages' instrumentors that the `test` group installs: OpenInference's imports
# claude_agent_sdk when it instruments, which would load our wrappers too.
_OTHER_INSTRUMENTORS = "claude_agent_sdk"
_NO_CONFIGURATOR = "no-such-configurator"  # `opentelemetry-instrument` then runs none
# Printed by a child as its last line: the modules it holds.
_PRINT_MODULES = "import json, sys\nprint(json.dumps(sorted(sys.modules)))"


def _clean_environment(**overrides: str) -> dict[str, str]:
    """This environment without settings that would make the child do more, plus `overrides`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))}
    return {**env, **overrides}


def _run(command: list[str], env: dict[str, str] | None = None) -> list[str]:
    completed = subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=env or _clean_environment(), check=False
    )
    assert completed.returncode == 0, completed.stderr
    return completed.stdout.splitlines()


def _modules_after(statement: str, env: dict[str, str] | None = None) -> set[str]:
    """The modules a fresh interpreter holds after running `statement`."""
    lines = _run([sys.executable, "-c", f"{statement}\n{_PRINT_MODULES}"], env)
    return set(json.loads(lines[-1]))


def _ours(modules: set[str]) -> set[str]:
    return {name for name in modules if name.split(".")[0] == "transcript_otel"}


def test_import_loads_only_the_version() -> None:
    loaded = _modules_after("import transcript_otel")
    assert _ours(loaded) == {"transcript_otel", "transcript_otel.version"}
    assert sorted(loaded.intersection(HEAVY_MODULES)) == []


def test_first_emitter_loads_what_emitting_needs_and_writes(tmp_path: Path) -> None:
    statement = (
        "import sys, transcript_otel\n"
        f"assert not set({EMITTING_MODULES!r}) & set(sys.modules), 'loaded by the import'\n"
        "emitter = transcript_otel.TranscriptEmitter(prompt_name='first', adapter='probe')\n"
        "emitter.emit('user_message', detail={'text': 'hello'})\n"
        "assert transcript_otel.flush(10.0)"
    )
    loaded = _modules_after(statement, _clean_environment(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path)))
    assert set(EMITTING_MODULES) - {"transcript_otel.mappings"} <= loaded
    # Emitting needs neither: hashlib is for redaction markers, the metrics API for drops.
    assert not {"hashlib", "opentelemetry.metrics"} & loaded
    (mirror,) = tmp_path.glob("*.jsonl")
    entries = [json.loads(line)["context"] for line in mirror.read_text().splitlines()]
    assert [(entry["entry_type"], entry["detail"]) for entry in entries] == [
        ("user_message", {"text": "hello"})
    ]


def test_names_left_to_first_use_still_import() -> None:
    statement = (
        "import transcript_otel\n"
        "assert set(transcript_otel.__all__) <= set(dir(transcript_otel))\n"
        "from transcript_otel import *\n"
        "assert transcript_otel.configure is configure\n"
        "assert transcript_otel.TranscriptEmitter is TranscriptEmitter\n"
        "assert all(getattr(transcript_otel, name) is not None for name in transcript_otel.__all__)"
    )
    loaded = _modules_after(statement)
    assert {
        "transcript_otel.otlp.setup",
        "transcript_otel.capture.emitter",
        "transcript_otel.reading.reconstruct",
    } <= loaded


def test_unknown_attribute_is_an_attribute_error() -> None:
    import transcript_otel

    with pytest.raises(AttributeError, match="no_such_name"):
        _ = transcript_otel.no_such_name  # type: ignore[attr-defined]


def test_redaction_tables_are_built_by_the_first_redactor() -> None:
    statement = (
        "import sys\n"
        "import transcript_otel.records.redaction as redaction\n"
        "assert '_LEFTMOST_LITERALS' not in vars(redaction), 'built at import'\n"
        "assert 'hashlib' not in sys.modules\n"
        "redactor = redaction.Redactor()\n"
        "assert '_LEFTMOST_LITERALS' in vars(redaction)\n"
        "assert redactor.text('key sk-ant-' + 'a' * 30).startswith('key [REDACTED:anthropic_key:37:')\n"
        "assert redaction._BUILTIN_PATTERNS[0] is None  # private_key's: no `-----BEGIN ` seen"
    )
    assert "hashlib" in _modules_after(statement)  # the marker's hash, once a secret was found
    # Read from outside before any Redactor, the tables are built then.
    _modules_after(
        "from transcript_otel.records.redaction import _LEFTMOST_LITERALS\nassert _LEFTMOST_LITERALS"
    )


def test_hidden_literals_are_those_of_every_pair() -> None:
    literals = list(_literal_targets())
    every_pair = tuple(
        tuple(
            (offset, index)
            for offset in range(len(literal))
            for index, other in enumerate(literals)
            if (offset or other is not literal)
            and literal[offset : offset + len(other)] == other[: len(literal) - offset]
        )
        for literal in literals
    )
    assert _hidden_literals(literals) == every_pair
    assert any(every_pair)  # `sk-` hides `sk-ant-`, among others
    assert len(BUILTIN_RULES) > 1


def test_metrics_api_is_loaded_by_the_first_count() -> None:
    statement = (
        "import sys\n"
        "from transcript_otel.otel.metrics import count_dropped\n"
        "assert 'opentelemetry.metrics' not in sys.modules, 'loaded at import'\n"
        "count_dropped(1, 'backlog')"
    )
    assert "opentelemetry.metrics" in _modules_after(statement)


@pytest.mark.parametrize("instrumentor", [WeakincentivesInstrumentor, ClaudeAgentSdkInstrumentor])
def test_patched_modules_cover_the_patches(instrumentor: type[PatchingInstrumentor]) -> None:
    # The first of `patched_modules` imported builds the patches: one left out could be missed.
    _, patch_set = instrumentor()._build(trace.get_tracer(__name__))
    assert sorted(instrumentor.patched_modules) == sorted({patch.module for patch in patch_set.patches})


def test_instrumentor_builds_its_patches_when_the_harness_is_imported() -> None:
    statement = (
        "import sys\n"
        "from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor\n"
        "instrumentor = ClaudeAgentSdkInstrumentor()\n"
        "instrumentor.instrument()\n"
        "assert 'transcript_otel.capture.emitter' not in sys.modules, 'loaded by instrument()'\n"
        "assert instrumentor.applied_patches == []\n"
        "import claude_agent_sdk\n"
        "assert 'claude_agent_sdk.client:ClaudeSDKClient.connect' in instrumentor.applied_patches\n"
        "instrumentor.uninstrument()\n"
        "assert instrumentor.applied_patches == []\n"
        "assert not hasattr(claude_agent_sdk.ClaudeSDKClient.connect, '__wrapped__')"
    )
    assert "transcript_otel.capture.emitter" in _modules_after(statement)


def test_uninstrument_before_the_harness_is_imported_builds_nothing() -> None:
    statement = (
        "from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor\n"
        "instrumentor = ClaudeAgentSdkInstrumentor()\n"
        "instrumentor.instrument()\n"
        "instrumentor.uninstrument()\n"
        "import claude_agent_sdk\n"
        "assert instrumentor.applied_patches == []\n"
        "assert not hasattr(claude_agent_sdk.ClaudeSDKClient.connect, '__wrapped__')"
    )
    assert "transcript_otel.capture.emitter" not in _modules_after(statement)


class _Switch:
    active = True


def _tagged(wrapped: Any, instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    return f"patched {wrapped(*args, **kwargs)}"


def _fake_harness(root: Path, package: str) -> None:
    """`package.outer` imports `package.inner`: the inner import completes, and builds the
    patches, while `outer` is in `sys.modules` without its class yet."""
    (root / package).mkdir()
    (root / package / "__init__.py").write_text("")
    (root / package / "inner.py").write_text("class Inner:\n    def run(self):\n        return 'inner'\n")
    (root / package / "outer.py").write_text(
        f"from {package} import inner\n\nclass Outer:\n    def run(self):\n        return 'outer'\n"
    )


def _fake_instrumentor(package: str, fails: bool = False) -> type[PatchingInstrumentor]:
    class FakeInstrumentor(PatchingInstrumentor):
        patched_modules = (f"{package}.outer", f"{package}.inner")

        def instrumentation_dependencies(self) -> tuple[str, ...]:
            return ()

        def _build(self, tracer: trace.Tracer, **kwargs: Any) -> tuple[_Switch, PatchSet]:
            if fails:
                raise RuntimeError("no patches today")
            patches = [
                Patch(f"{package}.outer", "Outer.run", _tagged),
                Patch(f"{package}.inner", "Inner.run", _tagged),
            ]
            return _Switch(), PatchSet(package, patches)

    return FakeInstrumentor


def test_patches_built_inside_an_import_reach_the_module_that_imports(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = f"fake_harness_{tmp_path.name}"  # a new name: nothing imported it before
    _fake_harness(tmp_path, package)
    monkeypatch.syspath_prepend(str(tmp_path))
    instrumentor = _fake_instrumentor(package)()
    instrumentor.instrument()
    try:
        assert instrumentor.applied_patches == []
        outer = importlib.import_module(f"{package}.outer")
        assert outer.Outer().run() == "patched outer"
        assert outer.inner.Inner().run() == "patched inner"
    finally:
        instrumentor.uninstrument()
    assert outer.Outer().run() == "outer"


def test_patches_that_fail_to_build_leave_the_import_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    package = f"fake_harness_{tmp_path.name}"  # a new name: nothing imported it before
    _fake_harness(tmp_path, package)
    monkeypatch.syspath_prepend(str(tmp_path))
    instrumentor = _fake_instrumentor(package, fails=True)()
    instrumentor.instrument()
    try:
        outer = importlib.import_module(f"{package}.outer")
        assert outer.Outer().run() == "outer"
        assert instrumentor.applied_patches == []
    finally:
        instrumentor.uninstrument()
    assert [record.getMessage() for record in caplog.records] == [
        "FakeInstrumentor: could not build the patches"  # once, not once per module
    ]


def _under_opentelemetry_instrument(disabled: str = "", **overrides: str) -> dict[str, Any]:
    """What `opentelemetry-instrument python -c ...` loads of ours, and which of our
    instrumentors it instrumented; `disabled`: ours it must not load (others' never load)."""
    program = (
        "import json, sys\n"
        "ours = sorted(name for name in sys.modules if name.split('.')[0] == 'transcript_otel')\n"
        "from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor\n"
        "from transcript_otel.instrumentation.weakincentives import WeakincentivesInstrumentor\n"
        "instrumented = [cls.__name__ for cls in (ClaudeAgentSdkInstrumentor, WeakincentivesInstrumentor)\n"
        "                if cls().is_instrumented_by_opentelemetry]\n"
        "print(json.dumps({'ours': ours, 'instrumented': instrumented}))"
    )
    disabled = ",".join(filter(None, (_OTHER_INSTRUMENTORS, disabled)))
    environment = _clean_environment(OTEL_PYTHON_DISABLED_INSTRUMENTATIONS=disabled, **overrides)
    lines = _run([str(_OPENTELEMETRY_INSTRUMENT), sys.executable, "-c", program], environment)
    result: dict[str, Any] = json.loads(lines[-1])
    return result


@pytest.mark.skipif(not _OPENTELEMETRY_INSTRUMENT.is_file(), reason="opentelemetry-instrument not installed")
def test_opentelemetry_instrument_loads_only_the_instrumentors() -> None:
    alone = _under_opentelemetry_instrument(OTEL_PYTHON_CONFIGURATOR=_NO_CONFIGURATOR)
    assert alone["instrumented"] == ["ClaudeAgentSdkInstrumentor", "WeakincentivesInstrumentor"]
    assert set(alone["ours"]) == INSTRUMENTOR_MODULES | {"transcript_otel", "transcript_otel.version"}


@pytest.mark.skipif(not _OPENTELEMETRY_INSTRUMENT.is_file(), reason="opentelemetry-instrument not installed")
def test_opentelemetry_instrument_instrumentors_add_only_their_modules(tmp_path: Path) -> None:
    # With our configurator (the default), which builds the pipeline: `configure()` is its job.
    jsonl_dir = str(tmp_path)
    without = _under_opentelemetry_instrument(_OUR_INSTRUMENTORS, TRANSCRIPT_OTEL_JSONL_DIR=jsonl_dir)
    with_ours = _under_opentelemetry_instrument(TRANSCRIPT_OTEL_JSONL_DIR=jsonl_dir)
    assert without["instrumented"] == []
    assert len(with_ours["instrumented"]) == 2
    assert set(with_ours["ours"]) - set(without["ours"]) == INSTRUMENTOR_MODULES


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
