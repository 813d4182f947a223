"""The instrumented libraries' versions: a minimum only, the newest tested pinned in one place
each, and a newer version instrumented with one warning (issue 48, item 2)."""

from __future__ import annotations

import importlib
import json
import logging
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from transcript_otel.instrumentation import _instrumentor
from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor
from transcript_otel.instrumentation.claude_agent_sdk import package as sdk_package
from transcript_otel.instrumentation.weakincentives import package as wink_package

from loopback import subprocess_env
from wink_harness import VERSIONS

REPO = Path(__file__).resolve().parent.parent
MISSING_TARGETS = REPO / "tests" / "agents" / "missing_targets.py"


def test_the_declared_ranges_have_a_minimum_only_and_match_the_extra() -> None:
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    declared = [*wink_package._instruments, *sdk_package._instruments]
    assert extras["instruments-any"] == declared
    assert not any("<" in requirement for requirement in declared)


def test_the_newest_tested_versions_are_the_ones_the_tests_pin() -> None:
    makefile = (REPO / "Makefile").read_text()
    (pinned,) = re.findall(r"^CLAUDE_SDK_NEWEST := (\S+)$", makefile, re.MULTILINE)
    assert pinned == sdk_package.NEWEST_TESTED
    assert VERSIONS[-1] == wink_package.NEWEST_TESTED


@pytest.mark.parametrize(
    ("installed", "untested"),
    [("0.2.187", None), ("0.2.9", None), ("0.1.0", None), ("0.2.188", "0.2.188"), ("0.3.0rc1", "0.3.0rc1")],
)
def test_a_version_newer_than_the_newest_tested_is_untested(
    installed: str, untested: str | None, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(_instrumentor, "installed_version", lambda _name: installed)
    monkeypatch.setattr(_instrumentor, "_warned_versions", set())
    with caplog.at_level(logging.WARNING, logger="transcript_otel"):
        found = [_instrumentor.untested_version(ClaudeAgentSdkInstrumentor) for _ in range(2)]
    assert found == [None if untested is None else f"claude-agent-sdk {untested}"] * 2
    expected = (
        []
        if untested is None
        else [
            f"transcript-otel: claude-agent-sdk {untested} is newer than the newest version tested "
            "(0.2.187); instrumenting it anyway (a patch target this version lacks is reported)"
        ]
    )
    assert caplog.messages == expected  # once, however often asked


def test_the_newest_tested_sdk_has_every_target() -> None:
    claude_agent_sdk = pytest.importorskip("claude_agent_sdk")
    if claude_agent_sdk.__version__ != sdk_package.NEWEST_TESTED:
        pytest.skip(f"claude-agent-sdk {claude_agent_sdk.__version__} here, not the newest tested")
    completed = subprocess.run(
        [sys.executable, str(MISSING_TARGETS), "claude_agent_sdk"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    assert json.loads(completed.stdout) == sorted(sdk_package.GONE_BY_NEWEST_TESTED)


def test_configure_instruments_a_newer_sdk_than_tested(tmp_path: Path) -> None:
    """`configure()` on an SDK that says it is 0.3.0 (a dist-info first on the path): our
    instrumentor is among `instrumented`, where the old `< 0.3` bound left the list empty."""
    pytest.importorskip("claude_agent_sdk")
    fake = tmp_path / "fake" / "claude_agent_sdk-0.3.0.dist-info"
    fake.mkdir(parents=True)
    (fake / "METADATA").write_text("Metadata-Version: 2.1\nName: claude-agent-sdk\nVersion: 0.3.0\n")
    script = (
        "import json, transcript_otel\n"
        f"configuration = transcript_otel.configure(jsonl_dir={str(tmp_path / 'runs')!r})\n"
        "print(json.dumps(configuration.instrumented))\n"
    )
    completed = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env=subprocess_env(PYTHONPATH=str(fake.parent), XDG_STATE_HOME=str(tmp_path / "state")),
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert "transcript_claude_agent_sdk" in json.loads(completed.stdout.splitlines()[-1])


def test_a_patched_module_an_untested_version_lacks_is_one_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    files = {"claude_agent_sdk/__init__.py", "claude_agent_sdk/_internal/client.py"}  # no client.py, parser
    monkeypatch.setattr(_instrumentor, "installed_files", lambda _name: files)
    monkeypatch.setattr(_instrumentor, "_warned_modules", set())
    with caplog.at_level(logging.WARNING, logger="transcript_otel"):
        for _ in range(2):
            _instrumentor._report_missing_modules(ClaudeAgentSdkInstrumentor, "claude-agent-sdk 0.3.0")
    assert caplog.messages == [
        f"transcript-otel: module {module} not found in claude-agent-sdk 0.3.0 (untested); not patched: "
        "what it captured is missing"
        for module in ("claude_agent_sdk.client", "claude_agent_sdk._internal.message_parser")
    ]


def test_an_entry_module_that_imports_no_patched_module_is_a_warning(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """A version that moved every patched module: nothing is built, and that is said."""
    package = tmp_path / "moved_harness_for_test"
    package.mkdir()
    (package / "__init__.py").write_text("")  # the old modules are gone; it imports none
    monkeypatch.syspath_prepend(str(tmp_path))

    class Moved(_instrumentor.PatchingInstrumentor):
        patched_modules = ("moved_harness_for_test.client",)
        entry_module = "moved_harness_for_test"
        library = "moved-harness-for-test"

        def instrumentation_dependencies(self) -> tuple[str, ...]:
            return ()

    instrumentor = Moved()
    instrumentor.instrument()
    try:
        with caplog.at_level(logging.WARNING, logger="transcript_otel"):
            importlib.import_module("moved_harness_for_test")
    finally:
        instrumentor.uninstrument()
        sys.modules.pop("moved_harness_for_test", None)
    assert caplog.messages == [
        "transcript-otel: moved_harness_for_test (moved-harness-for-test of unknown version) imported none "
        "of the modules Moved patches (moved_harness_for_test.client); nothing of it is captured"
    ]
