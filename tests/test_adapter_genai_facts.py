"""What the weakincentives adapters tell the run about the model, its tools and its prompt.

Each supported version runs, in its own venv, the real adapters' `evaluate()` against the
scripted fake agents (`tests/agents/wink_driver.py`), and where it is installed the real
Codex CLI against the scripted model, with `configure()` and an in-memory span exporter.
`AgentRun.describe_agent()` and `note_model()` are watched as they are called (their
content reaches spans only where the content settings let it); the spans are what a user's
backend receives.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from loopback import subprocess_env
from requirements_switch import missing
from wink_harness import wink_python

pytestmark = pytest.mark.wink

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import codex_cli  # noqa: E402

# Runs the scenarios named on its command line (`adapter:scenario`, `real` for the real Codex
# CLI) and prints, per prompt name, the driver's result, the watched calls and the spans.
SCRIPT = """
import json, os, sys, tempfile
from pathlib import Path

agents, cli = sys.argv[1], sys.argv[2]
sys.path.insert(0, agents)
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)

import transcript_otel
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun

calls = []


def watch(name):
    original = getattr(AgentRun, name)

    def watched(self, *args, **kwargs):
        calls.append({"method": name, "args": list(args), "kwargs": kwargs})
        return original(self, *args, **kwargs)

    setattr(AgentRun, name, watched)


for name in ("describe_agent", "note_model", "set_provider"):
    watch(name)
transcript_otel.configure()

import importlib.metadata
import wink_driver

version = importlib.metadata.version("weakincentives")
work = Path(tempfile.mkdtemp())
report = {}
for wanted in sys.argv[3:]:
    adapter, scenario, where = (wanted.split(":") + ["fake"])[:3]
    if where == "real":
        os.environ[wink_driver.REAL_CODEX_CLI] = cli
    first = len(calls)
    result = wink_driver.run_one(adapter, scenario, work, version)
    os.environ.pop(wink_driver.REAL_CODEX_CLI, None)
    transcript_otel.flush()
    report[result["prompt_name"]] = {"result": result, "calls": calls[first:]}
transcript_otel.flush()
provider.force_flush()
spans = exporter.get_finished_spans()
names = {span.context.span_id: span.name for span in spans}
roots = {s.context.trace_id: s.name.removeprefix("invoke_agent ") for s in spans if s.parent is None}
for span in spans:
    entry = report.get(roots.get(span.context.trace_id))
    if entry is not None:
        entry.setdefault("spans", []).append(
            {
                "name": span.name,
                "parent": names.get(span.parent.span_id) if span.parent else None,
                "attributes": dict(span.attributes or {}),
            }
        )
print(json.dumps(report, default=list))
"""

# The fake agents' scenarios each version runs (Codex from 0.25), and the real Codex CLI's.
FAKE_RUNS = {
    "0.24.0": ["claude:plain"],
    "0.25.0": ["codex:plain", "codex:rich", "claude:plain"],
    "0.26.0": ["codex:plain", "claude:plain"],
    "0.27.0": ["codex:plain", "codex:rich", "claude:plain"],
}
REAL_CODEX_VERSIONS = ("0.25.0", "0.27.0")
REAL_CODEX = "codex-wink_tool"
# The WINK tool every driver prompt offers.
ECHO_DESCRIPTION = "Echo the given text back."


def run_versions(version: str, workdir: Path) -> dict[str, Any]:
    wanted = list(FAKE_RUNS[version])
    cli = codex_cli.cli_path()
    if cli is not None and version in REAL_CODEX_VERSIONS:
        wanted.append("codex:wink_tool:real")
    completed = subprocess.run(
        [str(wink_python(version)), "-c", SCRIPT, str(TESTS / "agents"), str(cli or ""), *wanted],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=workdir,
        env=subprocess_env(
            XDG_STATE_HOME=str(workdir / "state"), TRANSCRIPT_OTEL_JSONL_DIR=str(workdir / "runs")
        ),
        check=False,
    )
    assert completed.returncode == 0, completed.stderr[-4000:]
    report: dict[str, Any] = json.loads(completed.stdout.strip().splitlines()[-1])
    for name, run in report.items():
        assert run["result"]["ok"], (name, run["result"])
    return report


@pytest.fixture(scope="module", params=sorted(FAKE_RUNS))
def report(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    version: str = request.param
    found = run_versions(version, tmp_path_factory.mktemp(f"facts-{version}"))
    found["version"] = version
    return found


def calls_of(run: dict[str, Any], method: str) -> list[dict[str, Any]]:
    return [call for call in run["calls"] if call["method"] == method]


def tool_definitions(run: dict[str, Any]) -> list[list[dict[str, Any]]]:
    return [
        call["kwargs"]["tool_definitions"]
        for call in calls_of(run, "describe_agent")
        if call["kwargs"].get("tool_definitions") is not None
    ]


def span(run: dict[str, Any], prefix: str) -> list[dict[str, Any]]:
    return [found for found in run["spans"] if found["name"].startswith(prefix)]


def defined_tools(found: dict[str, Any]) -> list[str]:
    """The tool names of a span's `gen_ai.tool.definitions` (content is on: the policy is `full`)."""
    return [definition["name"] for definition in json.loads(found["attributes"]["gen_ai.tool.definitions"])]


def codex_runs(report: dict[str, Any]) -> list[str]:
    return [name for name in report if name.startswith("codex-")]


def test_codex_tells_the_wink_tools_it_offers_as_tool_definitions(report: dict[str, Any]) -> None:
    if not codex_runs(report):
        pytest.skip(f"weakincentives {report['version']} has no Codex adapter")
    for name in codex_runs(report):
        run = report[name]
        (definitions,) = tool_definitions(run)  # one thread, one `thread/start`
        (echo,) = definitions
        assert echo["name"] == "echo"
        assert echo["description"] == ECHO_DESCRIPTION
        assert echo["parameters"]["type"] == "object"
        assert "text" in echo["parameters"]["properties"]
        assert [call["kwargs"] for call in calls_of(run, "describe_agent")] == [
            {"tool_definitions": definitions}
        ]  # no system prompt: the WINK prompt is the user message
        for found in [*span(run, "invoke_agent"), *span(run, "chat")]:
            assert defined_tools(found) == ["echo"], (name, found["name"])


def test_codex_thread_model_is_the_chat_spans_response_model(report: dict[str, Any]) -> None:
    if not codex_runs(report):
        pytest.skip(f"weakincentives {report['version']} has no Codex adapter")
    for name in codex_runs(report):
        run = report[name]
        (model,) = [call["args"][0] for call in calls_of(run, "note_model")]
        (root,) = span(run, f"invoke_agent {name}")
        chats = span(run, "chat")
        assert chats, name
        # The adapter's configured model is what was requested; Codex's entries name no model:
        # the thread's is what answered.
        assert root["attributes"]["gen_ai.request.model"] == model
        for chat in chats:
            assert chat["parent"] == root["name"]
            assert chat["name"] == f"chat {model}"
            assert chat["attributes"]["gen_ai.response.model"] == model
            assert chat["attributes"]["gen_ai.provider.name"] == "openai"
        assert calls_of(run, "set_provider") == []  # known from the start


def test_the_real_codex_threads_model_is_the_one_it_ran(report: dict[str, Any]) -> None:
    """The real app-server's `thread/start` answer names the model in `thread.model`."""
    if report["version"] not in REAL_CODEX_VERSIONS:
        pytest.skip(f"weakincentives {report['version']} is not run with the real Codex CLI")
    if REAL_CODEX not in report:
        missing("the real Codex CLI is not installed (`make agents`)")
    run = report[REAL_CODEX]
    assert [call["args"] for call in calls_of(run, "note_model")] == [[codex_cli.model_slug("wink_tool")]]
    (chat,) = span(run, "chat")
    assert chat["attributes"]["gen_ai.response.model"] == codex_cli.model_slug("wink_tool")
    (definitions,) = tool_definitions(run)
    assert [definition["name"] for definition in definitions] == ["echo"]


def test_claude_tells_the_wink_tools_it_serves_by_the_names_claude_code_gives_them(
    report: dict[str, Any],
) -> None:
    run = report["claude-plain"]
    (definitions,) = tool_definitions(run)
    (echo,) = definitions
    assert echo["name"] == "mcp__wink__echo"  # the adapter's MCP server is `wink`
    assert echo["description"] == ECHO_DESCRIPTION
    assert "text" in echo["parameters"]["properties"]
    # weakincentives sets no system prompt (Claude Code's own is used): none is told.
    assert [call for call in calls_of(run, "describe_agent") if "system_instructions" in call["kwargs"]] == []
    assert calls_of(run, "note_model") == []
    (root,) = span(run, "invoke_agent claude-plain")
    assert root["attributes"]["gen_ai.provider.name"] == "anthropic"
    for found in [root, *span(run, "chat")]:
        assert defined_tools(found) == ["mcp__wink__echo"]
        assert "gen_ai.system_instructions" not in found["attributes"]
