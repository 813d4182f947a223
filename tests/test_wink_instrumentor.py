"""The weakincentives instrumentor's lifecycle, checked inside real weakincentives environments.

`tests/agents/instrumentor_checks.py` runs in the version's venv and reports what it saw.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from loopback import subprocess_env
from wink_harness import wink_python

pytestmark = pytest.mark.wink

CHECKS = Path(__file__).resolve().parent / "agents" / "instrumentor_checks.py"


@pytest.fixture(scope="module", params=["0.25.0", "0.27.0"])
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    workdir = tmp_path_factory.mktemp("checks")
    completed = subprocess.run(
        [str(wink_python(request.param)), str(CHECKS)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=workdir,
        env=subprocess_env(XDG_STATE_HOME=str(workdir / "state")),
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    result: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    result["version"] = request.param
    return result


def test_the_entry_point_loads_the_instrumentor(report: dict[str, Any]) -> None:
    assert (
        report["entry_point"] == "transcript_otel.instrumentation.weakincentives.WeakincentivesInstrumentor"
    )


def test_a_module_imported_after_instrument_is_patched(report: dict[str, Any]) -> None:
    assert report["late_import_depth"] == 1
    adapter = "weakincentives.adapters.claude_agent_sdk.adapter"
    assert f"{adapter}:ClaudeAgentSDKAdapter.evaluate" in report["applied"]
    native = "weakincentives.runtime.transcript:TranscriptEmitter.emit"
    # 0.25 has no native emitter: that patch is skipped, not an error.
    assert (native in report["applied"]) == (report["version"] != "0.25.0")


def test_uninstrument_restores_and_reinstrument_wraps_once(report: dict[str, Any]) -> None:
    assert report["restored_original"] is True
    assert report["applied_after_uninstrument"] == []
    assert report["reinstrument_depth"] == 1


def test_suppression_and_uninstrument_turn_capture_off(report: dict[str, Any]) -> None:
    assert report["suppressed_ok"]
    assert report["captured_ok"]
    assert report["uninstrumented_ok"]
    assert report["files_when_suppressed"] == []
    (captured,) = report["files_when_captured"]
    assert "_claude-plain_" in captured
    assert report["files_after_uninstrument"] == report["files_when_captured"]


def test_the_newest_tested_version_lacks_exactly_the_targets_said_gone() -> None:
    """What `package.GONE_BY_NEWEST_TESTED` lists: in a newer, untested version, every other
    missing target is a WARNING."""
    from transcript_otel.instrumentation.weakincentives.package import GONE_BY_NEWEST_TESTED, NEWEST_TESTED

    checks = Path(__file__).resolve().parent / "agents" / "missing_targets.py"
    completed = subprocess.run(
        [str(wink_python(NEWEST_TESTED)), str(checks), "weakincentives"],
        capture_output=True,
        text=True,
        timeout=180,
        env=subprocess_env(),
        check=False,
    )
    assert completed.returncode == 0, completed.stderr
    assert json.loads(completed.stdout) == sorted(GONE_BY_NEWEST_TESTED)
