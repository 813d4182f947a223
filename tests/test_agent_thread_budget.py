"""The agent pays nothing: a guard that counts our work on the agent's thread, never its time.

For each way users run an agent (weakincentives' Codex and Claude adapters at both ends of
their range, its OpenCode ACP adapter on the real `opencode acp`, claude-agent-sdk's `query()`
and `ClaudeSDKClient` on the real Claude Code CLI), `tests/agents/agent_calls.py` runs one
instrumented evaluation and counts the Python calls transcript-otel makes on the agent's
thread per native event (a line of the Codex app-server, a message of the CLI, an ACP session
update). A count more than 10 % over the budget in `agent_call_budget.json`
fails, naming the path, the count, the budget and our busiest functions: more work per event
on the agent's thread must be a decision (a new budget), never an accident.

After a change that is meant to cost more, or less: `TRANSCRIPT_OTEL_UPDATE_CALL_BUDGET=1
pytest tests/test_agent_thread_budget.py` writes the new counts; the diff shows them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

from agent_calls import CallCounter  # noqa: E402

BUDGET_FILE = TESTS / "agent_call_budget.json"
TOLERANCE = 0.10
UPDATE = "TRANSCRIPT_OTEL_UPDATE_CALL_BUDGET"
# (path, weakincentives version whose environment runs it). claude-agent-sdk's paths run in
# 0.27's environment, which has it too, so every count is taken on Python 3.13.
CASES = (
    ("wink-codex", "0.25.0"),
    ("wink-codex", "0.27.0"),
    ("wink-claude", "0.25.0"),
    ("wink-claude", "0.27.0"),
    ("wink-acp", "0.27.0"),
    ("sdk-query", "0.27.0"),
    ("sdk-client", "0.27.0"),
)


def _count(path: str, version: str, tmp_path: Path) -> dict[str, Any]:
    from wink_harness import wink_python

    if path.startswith("sdk-"):
        from claude_code import cli_path

        from requirements_switch import require

        require(cli_path(), "the real Claude Code CLI is not installed (`make agents`)")
    if path == "wink-acp":
        from agent_calls import INSTALLED_OPENCODE_CLI

        from requirements_switch import require

        opencode = INSTALLED_OPENCODE_CLI if INSTALLED_OPENCODE_CLI.exists() else None
        require(opencode, "the real OpenCode CLI is not installed (`make agents`)")
    out = tmp_path / "calls.json"
    finished = subprocess.run(
        [str(wink_python(version)), str(TESTS / "agents" / "agent_calls.py"), path, "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=tmp_path,
        env={key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "TRANSCRIPT_"))},
        check=False,
    )
    assert finished.returncode == 0, finished.stderr[-3000:]
    counted: dict[str, Any] = json.loads(out.read_text())
    return counted


@pytest.mark.wink
@pytest.mark.parametrize(("path", "version"), CASES, ids=[f"{path}-{version}" for path, version in CASES])
def test_calls_on_the_agents_thread_per_native_event_stay_within_budget(
    path: str, version: str, tmp_path: Path
) -> None:
    counted = _count(path, version, tmp_path)
    key = f"{path} {version}"
    assert counted["events"] > 0, f"{key}: no native event was counted: {counted}"
    assert counted["entries"] > 0, f"{key}: the counted run mirrored no entry: {counted}"
    per_event = counted["calls"] / counted["events"]
    budgets: dict[str, Any] = json.loads(BUDGET_FILE.read_text())
    if os.environ.get(UPDATE):
        budgets[key] = {
            "calls_per_event": round(per_event, 2),
            "calls": counted["calls"],
            "events": counted["events"],
            "entries": counted["entries"],
        }
        BUDGET_FILE.write_text(json.dumps(dict(sorted(budgets.items())), indent=2) + "\n")
        return
    assert key in budgets, f"{key}: no budget in {BUDGET_FILE.name}; {UPDATE}=1 writes one ({counted})"
    budget = budgets[key]["calls_per_event"]
    limit = budget * (1 + TOLERANCE)
    assert per_event <= limit, (
        f"{key}: {counted['calls']} calls on the agent's thread for {counted['events']} native events "
        f"= {per_event:.2f} per event, over the budget of {budget:.2f} (+{TOLERANCE:.0%}: {limit:.2f}); "
        f"busiest: {json.dumps(counted['busiest'], indent=1)}"
    )


# -- the counter itself, on this interpreter (sys.monitoring on 3.12+, sys.setprofile before) --


def _package(tmp_path: Path) -> Path:
    """A package of ours (`counted_pkg`) whose `step` makes two calls, and a native event source."""
    package = tmp_path / "counted_pkg"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "work.py").write_text(
        "import json\n\n\ndef step(value):\n    return json.dumps(value) + json.dumps([value])\n"
    )
    (tmp_path / "native_source.py").write_text("class Source:\n    def line(self):\n        return 1\n")
    return package


def test_the_counter_counts_our_functions_and_the_calls_they_make_on_this_thread_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    package = _package(tmp_path)
    monkeypatch.syspath_prepend(str(tmp_path))
    from counted_pkg.work import step  # type: ignore[import-not-found]
    from native_source import Source  # type: ignore[import-not-found]

    counter = CallCounter(str(package) + os.sep, "Source.line")
    source = Source()
    with counter.counting():
        for value in range(10):
            step(value)  # 1 start of ours + 2 calls it makes
            source.line()  # an event, not ours
        other = threading.Thread(target=lambda: [step(0), source.line()])
        other.start()
        other.join()
    assert counter.calls == 30  # the other thread's step is not the agent's
    assert counter.events == 11  # events are counted on any thread
    assert counter.busiest(1) == {"work:step": 30}
