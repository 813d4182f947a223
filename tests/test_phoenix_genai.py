"""Arize Phoenix shows every adapter's real run as GenAI: priced LLM calls, agents and tools with
their inputs and outputs, and the run as a session.

One real run per adapter, all at once: the weakincentives Codex adapter on the real Codex CLI
(`examples/codex_agent.py`, weakincentives 0.27), the weakincentives Claude adapter on the real
Claude Code CLI (`tests/agents/wink_driver.py`, 0.27), claude-agent-sdk's `query()` on the real
Claude Code CLI with two parallel subagents (`examples/claude_sdk_agent.py`), and `transcript-otel
run` around `claude -p --output-format stream-json`, around `codex exec --json`, around `gemini -p
--output-format stream-json` (whose router call is in the run's totals only: no output names its
time) and around `opencode run --format json` (whose model Phoenix's price table does not know: the
test prices it in Phoenix at OpenCode's own prices, and Phoenix's cost must equal OpenCode's). Only
the models are scripted (`examples/model_servers/`). Each run exports its spans to a Phoenix
project of its own (traces only: Phoenix takes no OTLP logs) with the `phoenix` backend profile,
which adds OpenInference's `input.value`/`output.value`, and keeps its JSONL mirror. The tests read
each trace back over Phoenix's REST API, its cost and sessions over GraphQL, and compare them with
the mirror.
"""

from __future__ import annotations

import importlib.util
import json
import math
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from transcript_otel import read_records

from loopback import subprocess_env
from phoenix_server import Phoenix
from requirements_switch import missing
from wink_harness import DRIVER, REPO, wink_python

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import claude_code  # noqa: E402
import claude_offline  # noqa: E402
import codex_cli  # noqa: E402
import gemini_cli  # noqa: E402
import opencode_cli  # noqa: E402
import opencode_offline  # noqa: E402

pytestmark = [pytest.mark.receiver, pytest.mark.otlp]

WINK_VERSION = "0.27.0"
RUN_TIMEOUT_S = 240.0
EXAMPLES = REPO / "examples"
# The weakincentives driver's variable naming the real Claude Code CLI (tests/agents/wink_driver.py).
REAL_CLAUDE_CLI = "WINK_DRIVER_CLAUDE_CLI"
# What the root span's input and output, and Phoenix's session, are compared with.
TEXT_KEYS = ("input.value", "output.value")
GENAI_NAMES = ("invoke_agent ", "chat", "execute_tool ")  # the names of the spans transcript-otel makes


def run_wrapper(prompt_name: str) -> tuple[str, ...]:
    return (sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", prompt_name, "--")


def run_process(command: list[str], environment: dict[str, str], cwd: Path) -> str:
    """Run an agent program to its end; its stdout and stderr, or an AssertionError with them."""
    completed = subprocess.run(
        command,
        env=environment,
        cwd=cwd,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        errors="replace",
        timeout=RUN_TIMEOUT_S,
        check=False,
    )
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, f"{command} exited {completed.returncode}:\n{output[-4000:]}"
    return output


# -- how each adapter's real run is made -------------------------------------------------------------
# Each producer runs the agent in `workdir` with `environment` (the export settings and the JSONL
# mirror's directory) added to a clean one, and returns what it printed.


@dataclass(frozen=True)
class Produced:
    """What a run printed, and the prompt its command line gave (`run`: `claude -p` prints no
    user message, so the mirror has the prompt only where the wrapper records it)."""

    output: str
    command_prompt: str | None = None


def produce_wink_codex(workdir: Path, environment: dict[str, str]) -> Produced:
    """The README's demo: `CodexAppServerAdapter.evaluate()` on the real `codex app-server`."""
    command = [str(wink_python(WINK_VERSION)), str(EXAMPLES / "codex_agent.py")]
    output = run_process(
        [*command, "--jsonl-dir", environment["TRANSCRIPT_OTEL_JSONL_DIR"]],
        subprocess_env(**environment),
        workdir,
    )
    assert ": answer: " in output, output[-4000:]
    return Produced(output)


def produce_wink_claude(workdir: Path, environment: dict[str, str]) -> Produced:
    """`ClaudeAgentSDKAdapter.evaluate()` below which claude-agent-sdk runs the real CLI; the
    scripted model gives its default answer (as `test_real_claude_code.py` runs it)."""
    cli = claude_code.cli_path()
    assert cli is not None
    results = workdir / "results.jsonl"
    with claude_offline.model_server("tools", workdir) as model:
        offline = claude_offline.offline_environment(model, workdir / "home")
        # HOME is weakincentives' own: only the model's and the CLI's settings.
        kept = {k: v for k, v in offline.items() if k.startswith(("ANTHROPIC_", "CLAUDE", "DISABLE", "IS_"))}
        command = [str(wink_python(WINK_VERSION)), str(DRIVER), "--out", str(results), "--configure"]
        output = run_process(
            [*command, "--adapter", "claude", "--scenarios", "plain"],
            subprocess_env(**environment, **kept, **{REAL_CLAUDE_CLI: str(cli)}),
            workdir,
        )
    (result,) = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    assert result["ok"], (result, output[-4000:])
    return Produced(output)


def produce_claude_sdk(workdir: Path, environment: dict[str, str]) -> Produced:
    """claude-agent-sdk's `query()` on the real CLI, whose model launches two subagents at once."""
    cli = claude_code.cli_path()
    assert cli is not None
    command = [sys.executable, str(EXAMPLES / "claude_sdk_agent.py"), "--scenario", "parallel_subagents"]
    output = run_process(
        [*command, "--cli", str(cli), "--jsonl-dir", environment["TRANSCRIPT_OTEL_JSONL_DIR"]],
        subprocess_env(**environment),
        workdir,
    )
    assert "the last a ResultMessage" in output, output[-4000:]
    return Produced(output)


def produce_run_claude_code(workdir: Path, environment: dict[str, str]) -> Produced:
    """`transcript-otel run -- claude -p --output-format stream-json` (a Bash call, thinking)."""
    recorded = claude_code.record("tools", workdir, run_wrapper("claude-code"), environment)
    output = recorded.stdout + recorded.stderr
    assert recorded.exit_code == 0, output[-4000:]
    return Produced(output, recorded.prompt)


def produce_run_codex_exec(workdir: Path, environment: dict[str, str]) -> Produced:
    """`transcript-otel run -- codex exec --json` (reasoning, two shell commands, one failing)."""
    recorded = codex_cli.record("shell", workdir, run_wrapper("codex-exec"), environment)
    output = recorded.stdout + recorded.stderr
    assert recorded.exit_code == 0, output[-4000:]
    return Produced(output, recorded.prompt)


def produce_run_opencode(workdir: Path, environment: dict[str, str]) -> Produced:
    """`transcript-otel run -- opencode run --format json --thinking` (a bash call), which prices
    each step itself from its configuration's prices."""
    recorded = opencode_cli.record("shell", workdir, run_wrapper("opencode"), environment)
    output = recorded.stdout + recorded.stderr
    assert recorded.exit_code == 0, output[-4000:]
    return Produced(output, recorded.prompt)


def produce_run_gemini(workdir: Path, environment: dict[str, str]) -> Produced:
    """`transcript-otel run -- gemini -p --output-format stream-json` (a shell command; the CLI's
    router model picks the main model first)."""
    recorded = gemini_cli.record("shell", workdir, run_wrapper("gemini"), environment)
    output = recorded.stdout + recorded.stderr
    assert recorded.exit_code == 0, output[-4000:]
    return Produced(output, recorded.prompt)


@dataclass(frozen=True)
class Adapter:
    """One adapter's real run: how it is made, and what it needs."""

    produce: Callable[[Path, dict[str, str]], Produced]
    needs: Callable[[], str | None]  # why it cannot run here, or None
    wink: bool = False
    has_tools: bool = True
    # A model Phoenix's price table does not know, priced in Phoenix as the harness priced it
    # (model name, dollars per million tokens by type): Phoenix's cost must equal the harness's.
    priced_as: tuple[str, dict[str, float]] | None = None


def cli_missing(cli: ModuleType, name: str) -> Callable[[], str | None]:
    """Why the real CLI of a tests/agents module (`cli_path`, `CLI_VARIABLE`) cannot run here."""

    def needs() -> str | None:
        if cli.cli_path() is None:
            return f"the real {name} CLI is not installed (`make agents`, or {cli.CLI_VARIABLE})"
        return None

    return needs


claude_missing = cli_missing(claude_code, "Claude Code")
codex_missing = cli_missing(codex_cli, "Codex")
gemini_missing = cli_missing(gemini_cli, "Gemini")
opencode_missing = cli_missing(opencode_cli, "OpenCode")


def claude_sdk_missing() -> str | None:
    if importlib.util.find_spec("claude_agent_sdk") is None:
        return "claude-agent-sdk is not installed (the test dependency group)"
    return claude_missing()


# The adapter's name is its Phoenix project.
ADAPTERS: dict[str, Adapter] = {
    "wink-codex": Adapter(produce_wink_codex, codex_missing, wink=True),
    "wink-claude": Adapter(produce_wink_claude, claude_missing, wink=True, has_tools=False),
    "claude-agent-sdk": Adapter(produce_claude_sdk, claude_sdk_missing),
    "run-claude-code": Adapter(produce_run_claude_code, claude_missing),
    "run-codex-exec": Adapter(produce_run_codex_exec, codex_missing),
    "run-gemini": Adapter(produce_run_gemini, gemini_missing),
    "run-opencode": Adapter(
        produce_run_opencode, opencode_missing, priced_as=(opencode_offline.MODEL, opencode_offline.COST)
    ),
}
PER_ADAPTER = pytest.mark.parametrize(
    "adapter",
    [pytest.param(name, marks=[pytest.mark.wink] if a.wink else [], id=name) for name, a in ADAPTERS.items()],
)


def export_environment(phoenix: Phoenix, project: str, workdir: Path) -> dict[str, str]:
    """Traces to Phoenix's OTLP/HTTP endpoint into `project`, no logs, the JSONL mirror in
    `workdir/runs`, OpenInference values on."""
    return {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": f"{phoenix.base_url}/v1/traces",
        "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf",
        # Phoenix answers OTLP logs with 405: no logs endpoint, and no logs exporter.
        "OTEL_LOGS_EXPORTER": "none",
        "OTEL_METRICS_EXPORTER": "none",
        # Phoenix files spans under the project this resource attribute names.
        "OTEL_RESOURCE_ATTRIBUTES": f"openinference.project.name={project}",
        "TRANSCRIPT_OTEL_BACKEND_PROFILE": "phoenix",
        "TRANSCRIPT_OTEL_OPENINFERENCE": "true",
        "TRANSCRIPT_OTEL_JSONL_DIR": str(workdir / "runs"),
        "XDG_STATE_HOME": str(workdir / "state"),
    }


# -- one run as the mirror and Phoenix hold it --------------------------------------------------------


@dataclass
class AdapterRun:
    """One adapter's run: its JSONL mirror and its trace as Phoenix stores it."""

    adapter: str
    project: str
    mirror: list[dict[str, Any]]
    spans: list[dict[str, Any]]  # Phoenix's REST shape: flat `attributes`, `span_kind`, `id`
    output: str  # what the agent printed
    seconds: float
    command_prompt: str | None = None  # the prompt on the agent's command line, if it had one

    @property
    def trace_id(self) -> str:
        return str(self.mirror_root["trace_id"])

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.mirror if r["event"] == "transcript.entry"]

    @property
    def mirrored_spans(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.mirror if r["event"] == "transcript.span"]

    @property
    def mirror_root(self) -> dict[str, Any]:
        (root,) = [span for span in self.mirrored_spans if span.get("parent_span_id") is None]
        return root

    @property
    def root(self) -> dict[str, Any]:
        (root,) = [span for span in self.spans if span["parent_id"] is None]
        return root

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"].startswith(prefix)]

    def main_entries(self, entry_type: str) -> list[dict[str, Any]]:
        return [e for e in self.entries if e["entry_type"] == entry_type and e["source"] == "main"]

    def prompt(self) -> str | None:
        """The run's prompt: the text of its first user message on the main thread, else (`claude
        -p` under `run` prints none) the prompt of its command line."""
        texts = [entry_text(e) for e in self.main_entries("user_message")]
        return next((text for text in texts if text), self.command_prompt)

    def answer(self) -> str | None:
        """The run's final answer: the text of its last assistant message on the main thread."""
        texts = [entry_text(e) for e in self.main_entries("assistant_message")]
        return next((text for text in reversed(texts) if text), None)


def entry_text(entry: dict[str, Any]) -> str | None:
    """A message entry's text, whatever harness recorded it: `detail.text` (Codex prompts),
    a Codex item's `text` (app-server `notification.item`, `codex exec` `event.item`), a
    Claude message's `content` (a string, or its text blocks)."""
    detail = entry["detail"]
    if not isinstance(detail, dict):
        return None
    if isinstance(detail.get("text"), str):
        return str(detail["text"])
    for holder in (detail.get("notification"), detail.get("event")):
        item = holder.get("item") if isinstance(holder, dict) else None
        if isinstance(item, dict) and isinstance(item.get("text"), str):
            return str(item["text"])
    sdk_entry = detail.get("sdk_entry")
    message = sdk_entry.get("message") if isinstance(sdk_entry, dict) else None
    content = message.get("content") if isinstance(message, dict) else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = [b["text"] for b in content if isinstance(b, dict) and b.get("type") == "text"]
        return "\n".join(texts) if texts else None
    return None


@dataclass(frozen=True)
class Failed:
    """A run that did not happen: why (a traceback), or a requirement that is missing."""

    reason: str
    missing: bool = False


def _produce(name: str, phoenix: Phoenix, workdir: Path) -> AdapterRun:
    started = time.monotonic()
    produced = ADAPTERS[name].produce(workdir, export_environment(phoenix, name, workdir))
    output = produced.output
    seconds = time.monotonic() - started
    mirror = [record for path in sorted((workdir / "runs").glob("*.jsonl")) for record in read_records(path)]
    span_records = [r["context"] for r in mirror if r["event"] == "transcript.span"]
    assert span_records, f"no spans in the mirror:\n{output[-4000:]}"
    trace_id = span_records[0]["trace_id"]
    spans = phoenix.wait_for_spans(name, trace_id, len(span_records))
    return AdapterRun(name, name, mirror, spans, output, seconds, produced.command_prompt)


def _collected_adapters(request: pytest.FixtureRequest) -> list[str]:
    """The adapters that this module's selected tests ask for (`-m "not wink"` leaves out two)."""
    wanted: set[str] = set()
    for item in request.session.items:
        callspec = getattr(item, "callspec", None)
        if item.path == request.path and callspec is not None and "adapter" in callspec.params:
            wanted.add(str(callspec.params["adapter"]))
    return [name for name in ADAPTERS if name in wanted or not wanted]


@pytest.fixture(scope="module")
def runs(
    request: pytest.FixtureRequest, phoenix: Phoenix, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, AdapterRun | Failed]:
    """Every wanted adapter's real run, all at once, each in its own Phoenix project."""
    outcomes: dict[str, AdapterRun | Failed] = {}
    ready: list[str] = []
    for name in _collected_adapters(request):
        reason = ADAPTERS[name].needs()
        if reason is None:
            ready.append(name)
        else:
            outcomes[name] = Failed(reason, missing=True)
    if any(ADAPTERS[name].wink for name in ready):
        wink_python(WINK_VERSION)  # built (or renewed) once, before the runs share it
    for name in ready:
        priced_as = ADAPTERS[name].priced_as
        if priced_as is not None:
            phoenix.price_model(*priced_as)
    if not ready:
        return outcomes
    with ThreadPoolExecutor(len(ready)) as pool:
        futures = {
            name: pool.submit(_produce, name, phoenix, tmp_path_factory.mktemp(name)) for name in ready
        }
    for name, future in futures.items():
        error = future.exception()
        if error is None:
            outcomes[name] = future.result()
        else:
            outcomes[name] = Failed("".join(traceback.format_exception(error)))
    return outcomes


@pytest.fixture
def run(runs: dict[str, AdapterRun | Failed], adapter: str) -> AdapterRun:
    outcome = runs[adapter]
    if isinstance(outcome, Failed):
        if outcome.missing:
            missing(outcome.reason)
        pytest.fail(f"the {adapter} run failed:\n{outcome.reason}")
    return outcome


# -- failure messages ------------------------------------------------------------------------------


def describe(span: dict[str, Any], limit: int = 300) -> str:
    """A span as Phoenix stores it: name, kind, and its attributes (long values cut)."""
    lines = [f"{span['name']!r} span_kind={span.get('span_kind')} id={span.get('id')}"]
    for key, value in sorted(span["attributes"].items()):
        shown = json.dumps(value, default=str)
        lines.append(f"  {key} = {shown if len(shown) <= limit else shown[:limit] + '…'}")
    return "\n".join(lines)


def report(problems: dict[str, list[dict[str, Any]]], run: AdapterRun) -> str:
    """What failed: each check, the spans that failed it, and the first one's attributes."""
    parts = [f"{run.adapter} (project {run.project!r}, trace {run.trace_id}):"]
    for check, spans in problems.items():
        names = ", ".join(f"{span['name']!r} ({span['id']})" for span in spans)
        parts.append(f"- {check} fails for {len(spans)}: {names}; the first:\n{describe(spans[0])}")
    return "\n".join(parts)


def check_spans(
    spans: list[dict[str, Any]], checks: dict[str, Callable[[dict[str, Any]], bool]]
) -> dict[str, list[dict[str, Any]]]:
    """Each check that some span fails, with the spans that fail it."""
    problems: dict[str, list[dict[str, Any]]] = {}
    for name, check in checks.items():
        failing = [span for span in spans if not check(span)]
        if failing:
            problems[name] = failing
    return problems


def has_key(prefix: str) -> Callable[[dict[str, Any]], bool]:
    return lambda span: any(key == prefix or key.startswith(prefix + ".") for key in span["attributes"])


def positive(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda span: isinstance(span["attributes"].get(key), int | float) and span["attributes"][key] > 0


def filled(key: str) -> Callable[[dict[str, Any]], bool]:
    return lambda span: isinstance(span["attributes"].get(key), str) and bool(span["attributes"][key])


# -- the tests -------------------------------------------------------------------------------------


@PER_ADAPTER
def test_phoenix_stores_the_trace_the_run_mirrored(run: AdapterRun) -> None:
    stored = {span["context"]["span_id"]: span for span in run.spans}
    mirrored = {span["span_id"]: span for span in run.mirrored_spans}
    only_mirrored = [mirrored[span_id]["name"] for span_id in set(mirrored) - set(stored)]
    assert not only_mirrored, f"Phoenix lacks {only_mirrored}; the agent printed:\n{run.output[-4000:]}"
    # Others' spans may share the trace (the `mcp` package traces the in-process MCP server that
    # carries weakincentives' tools to Claude Code): none of them looks like one of ours.
    foreign = [stored[span_id] for span_id in set(stored) - set(mirrored)]
    ours = [describe(span) for span in foreign if span["name"].startswith(GENAI_NAMES)]
    assert not ours, "Phoenix holds spans of ours the run did not mirror:\n" + "\n".join(ours)
    for span_id, span in mirrored.items():
        assert stored[span_id]["name"] == span["name"]
        assert stored[span_id]["parent_id"] == span.get("parent_span_id")
    assert run.root["name"].startswith("invoke_agent ")
    assert run.named("chat"), [span["name"] for span in run.spans]
    if ADAPTERS[run.adapter].has_tools:
        assert run.named("execute_tool"), [span["name"] for span in run.spans]
    # Traces only: nothing refused (Phoenix takes no OTLP logs), nothing dropped.
    assert "Failed to export" not in run.output, run.output[-4000:]


def entries_in(run: AdapterRun, span: dict[str, Any], entry_type: str) -> list[dict[str, Any]]:
    """The run's entries of `entry_type` that the mirror placed in `span`."""
    span_id = span["context"]["span_id"]
    return [e for e in run.entries if e["entry_type"] == entry_type and e.get("span_id") == span_id]


@PER_ADAPTER
def test_chat_spans_are_priced_llm_calls(run: AdapterRun, phoenix: Phoenix) -> None:
    chats = run.named("chat")
    assert chats
    # Claude Code sometimes reports a turn in which it called no model (its `result` says
    # `num_turns: 0`, no tokens): an honest LLM span of nothing, which Phoenix cannot price.
    # (A subagent's chat span is the one of its model calls: its entries are its agent span's.)
    turns = [span for span in chats if "transcript.turn" in span["attributes"]]
    idle = [span for span in turns if not entries_in(run, span, "assistant_message")]
    for span in idle:
        reports = entries_in(run, span, "token_usage")
        assert [r["detail"]["sdk_entry"].get("num_turns") for r in reports] == [0], describe(span)
        assert span["attributes"].get("llm.token_count.prompt", 0) == 0, describe(span)
    chats = [span for span in chats if span not in idle]
    assert chats
    costs = phoenix.span_costs(span["id"] for span in chats)
    checks: dict[str, Callable[[dict[str, Any]], bool]] = {
        'span_kind == "LLM"': lambda span: span["span_kind"] == "LLM",
        "llm.input_messages.0.message.role present": has_key("llm.input_messages.0.message.role"),
        "llm.output_messages.0.message.* present": has_key("llm.output_messages.0.message"),
        "llm.model_name set": filled("llm.model_name"),
        "llm.token_count.prompt > 0": positive("llm.token_count.prompt"),
        "llm.token_count.completion > 0": positive("llm.token_count.completion"),
        "GraphQL costSummary.total.cost > 0": lambda span: (costs.get(span["id"]) or 0.0) > 0,
    }
    problems = check_spans(chats, checks)
    assert not problems, report(problems, run) + f"\ncosts: {costs}"
    if ADAPTERS[run.adapter].priced_as is not None:
        # Priced in Phoenix at the harness's own prices, each call costs what the harness said.
        said = {span["span_id"]: span["attributes"].get("gen_ai.usage.cost") for span in run.mirrored_spans}
        compared = [(span["name"], costs[span["id"]], said[span["context"]["span_id"]]) for span in chats]
        assert all(isinstance(said_cost, float) for _, _, said_cost in compared), compared
        assert all(math.isclose(cost or 0.0, said_cost, rel_tol=1e-9) for _, cost, said_cost in compared), (
            compared
        )


@PER_ADAPTER
def test_agent_spans_show_the_prompt_and_the_answer(run: AdapterRun) -> None:
    agents = run.named("invoke_agent")
    checks: dict[str, Callable[[dict[str, Any]], bool]] = {
        'span_kind == "AGENT"': lambda span: span["span_kind"] == "AGENT",
        "input.value set": filled("input.value"),
        "output.value set": filled("output.value"),
    }
    problems = check_spans(agents, checks)
    assert not problems, report(problems, run)
    root = run.root["attributes"]
    prompt, answer = run.prompt(), run.answer()
    assert prompt, "the mirror has no user message on the main thread"
    assert answer, "the mirror has no assistant message on the main thread"
    assert (root.get("input.value"), root.get("output.value")) == (prompt, answer), describe(run.root)


def reports_no_result(run: AdapterRun, span: dict[str, Any]) -> bool:
    """The harness said the call ended but not what it gave: a Codex web search (`results: null`)."""
    items = [
        e["detail"].get("notification", {}).get("item") or {} for e in entries_in(run, span, "tool_result")
    ]
    return bool(items) and all(i.get("type") == "webSearch" and i.get("results") is None for i in items)


@PER_ADAPTER
def test_tool_spans_show_their_parameters_and_result(run: AdapterRun) -> None:
    tools = run.named("execute_tool")
    assert bool(tools) is ADAPTERS[run.adapter].has_tools, [span["name"] for span in run.spans]
    checks: dict[str, Callable[[dict[str, Any]], bool]] = {
        'span_kind == "TOOL"': lambda span: span["span_kind"] == "TOOL",
        "tool.parameters* present": has_key("tool.parameters"),
        # A result nothing reported is left out, never made up.
        "output.value present": lambda span: (
            ("output.value" in span["attributes"]) is not reports_no_result(run, span)
        ),
    }
    problems = check_spans(tools, checks)
    assert not problems, report(problems, run)


@PER_ADAPTER
def test_the_run_is_a_phoenix_session_with_its_prompt_and_answer(run: AdapterRun, phoenix: Phoenix) -> None:
    root = run.root["attributes"]
    session_id = root.get("gen_ai.conversation.id")
    assert session_id, describe(run.root)
    assert all(root.get(key) for key in TEXT_KEYS), describe(run.root)
    sessions = {session["sessionId"]: session for session in phoenix.sessions(run.project)}
    assert session_id in sessions, (session_id, sessions)
    session = sessions[session_id]
    shown = ((session.get("firstInput") or {}).get("value"), (session.get("lastOutput") or {}).get("value"))
    assert shown == (root["input.value"], root["output.value"]), session


@PER_ADAPTER
def test_prompt_tokens_are_counted_once_on_the_llm_spans(run: AdapterRun) -> None:
    """Phoenix sums the LLM spans of a trace: together they are the run's input, and no other
    span counts tokens again."""
    counting = [span for span in run.spans if "llm.token_count.prompt" in span["attributes"]]
    elsewhere = [span for span in counting if span["span_kind"] != "LLM"]
    assert not elsewhere, "tokens counted outside the LLM spans:\n" + "\n".join(map(describe, elsewhere))
    total = run.mirror_root["attributes"].get("transcript.usage.input_tokens")
    assert isinstance(total, int), run.mirror_root["attributes"]
    assert total > 0, run.mirror_root["attributes"]
    by_span = [(span["name"], span["attributes"]["llm.token_count.prompt"]) for span in counting]
    on_spans = sum(span["attributes"]["llm.token_count.prompt"] for span in counting)
    assert on_spans + reported_apart(run) == total, (by_span, reported_apart(run))


def reported_apart(run: AdapterRun) -> int:
    """Input tokens of the calls to models an output names only in its totals, each apart, with no
    span of their own: Gemini CLI's router (`detail.models` besides the main `detail.model`)."""
    return sum(
        counted["usage"].get("input_tokens", 0)
        for entry in run.main_entries("token_usage")
        for counted in entry["detail"].get("models") or []
        if counted.get("model") != entry["detail"].get("model")
    )
