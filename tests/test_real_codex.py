"""The real Codex CLI (npm, pinned in the Makefile) against the scripted Responses API.

The model is scripted (`examples/model_servers/`); the agent is the real `codex` binary:
`codex exec --json` under `transcript-otel run`, and `codex app-server` under
weakincentives 0.25 (whose transcript we build) and 0.27 (whose own bridge we mirror and
complete), with `configure()` and under `opentelemetry-instrument`. The tests compare what
the transcript and its spans recorded with what the model served and what Codex itself
reported (its `turn.completed` usage, its exit status).

Without the CLI (`make agents`) these tests skip, or fail where the Makefile requires
them (`TRANSCRIPT_OTEL_REQUIRE_REAL`, tests/requirements_switch.py).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any, Final

import pytest

pytest.importorskip("opentelemetry.sdk")

from live_watch import live_watch
from transcript_otel import read_records
from transcript_otel.model.invariants import check_invariants
from transcript_otel.reading.digest import RunDigest

from requirements_switch import require
from terminal_session import TerminalSession

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import codex_cli  # noqa: E402
from captured_run import CapturedRun  # noqa: E402
from codex_cli import record, served_usage  # noqa: E402
from codex_offline import model_server, offline_environment, write_codex_home  # noqa: E402
from codex_scenarios import APP_SERVER_SCENARIOS, EXEC_SCENARIOS, FAILING, SCENARIOS, prompt_for  # noqa: E402

PROMPT_NAME = "codex-exec"
WRAPPER = (sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", PROMPT_NAME, "--")
# Codex's usage names → the spans' attributes.
SPAN_USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "reasoning_output_tokens": "gen_ai.usage.reasoning.output_tokens",
}
DIGEST_USAGE = {
    "input_tokens": "input",
    "cached_input_tokens": "cached_input",
    "output_tokens": "output",
    "reasoning_output_tokens": "reasoning_output",
}


def require_cli() -> Path:
    reason = f"the real Codex CLI is not installed (`make agents`, or {codex_cli.CLI_VARIABLE})"
    return require(codex_cli.cli_path(), reason)


def span_usage(span: dict[str, Any]) -> dict[str, int]:
    """A chat span's `gen_ai.usage.*`, or an `invoke_agent` span's totals (`transcript.usage.*`:
    tokens are counted once in a trace, on the chat spans)."""
    attributes = span["attributes"]
    if attributes.get("gen_ai.operation.name") == "chat":
        return {name: attributes.get(key, 0) for name, key in SPAN_USAGE.items()}
    assert not [key for key in attributes if key.startswith("gen_ai.usage.")]
    return {
        name: attributes.get(key.replace("gen_ai.usage.", "transcript.usage."), 0)
        for name, key in SPAN_USAGE.items()
    }


def has_reasoning(scenario: str) -> bool:
    return any(
        item["type"] == "reasoning"
        for steps in SCENARIOS[scenario].values()
        for s in steps
        for item in s.items
    )


@pytest.fixture(scope="module")
def exec_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, CapturedRun]:
    """Each scenario once as `codex exec --json` under `transcript-otel run`, run on first use."""
    require_cli()

    class Runs(dict[str, CapturedRun]):
        def __missing__(self, scenario: str) -> CapturedRun:
            scratch = tmp_path_factory.mktemp(scenario)
            mirror = scratch / "runs"
            recorded = record(scenario, scratch, WRAPPER, {"TRANSCRIPT_OTEL_JSONL_DIR": str(mirror)})
            (path,) = mirror.glob("*.jsonl")
            run = CapturedRun(
                scenario,
                list(read_records(path)),
                recorded.served,
                recorded.stdout,
                recorded.stderr,
                recorded.exit_code,
                PROMPT_NAME,
            )
            self[scenario] = run
            return run

    return Runs()


# -- codex exec --json under transcript-otel run ---------------------------------------------------


@pytest.mark.parametrize("scenario", EXEC_SCENARIOS)
def test_exec_under_run_keeps_codex_exit_status_and_a_valid_transcript(
    exec_runs: dict[str, CapturedRun], scenario: str
) -> None:
    run = exec_runs[scenario]
    assert run.exit_code == (1 if scenario in FAILING else 0), run.stderr[-2000:]
    assert check_invariants(run.records) == []
    assert run.messages[0]["type"] == "thread.started"
    assert "unknown" not in {e["entry_type"] for e in run.entries}
    # The prompt is not in the stream: the command line gives it, and the model (config.toml).
    first = run.entries[0]
    assert (first["entry_type"], first["detail"]["text"]) == ("user_message", prompt_for(scenario))
    assert run.root["attributes"]["gen_ai.request.model"] == codex_cli.model_slug(scenario)
    assert run.root["attributes"]["gen_ai.provider.name"] == "openai"
    assert run.root["attributes"]["gen_ai.conversation.id"] == run.messages[0]["thread_id"]


@pytest.mark.parametrize("scenario", EXEC_SCENARIOS)
def test_exec_tokens_are_codex_totals_and_what_the_model_served(
    exec_runs: dict[str, CapturedRun], scenario: str
) -> None:
    run = exec_runs[scenario]
    served = served_usage(run.served)
    reported = [m["usage"] for m in run.messages if m["type"] == "turn.completed"]
    if scenario in FAILING:
        # `codex exec --json` reports no usage for a failed turn, even for the calls the
        # model answered before it failed (the app-server does): the run has none either.
        assert reported == []
        served = dict.fromkeys(served, 0)
    else:
        assert {key: reported[0][key] for key in served} == served
    assert span_usage(run.root) == served
    assert sum((Counter(span_usage(s)) for s in run.chat_spans()), Counter()) == Counter(
        {k: v for k, v in served.items() if v}
    )
    digest = RunDigest.of(run.records).tokens
    assert {name: digest.get(DIGEST_USAGE[name], 0) for name in served} == served


@pytest.mark.parametrize("scenario", EXEC_SCENARIOS)
def test_exec_run_status_follows_codex_outcome(exec_runs: dict[str, CapturedRun], scenario: str) -> None:
    """Warnings and retries Codex recovers from are system events; only a failed turn fails the run."""
    run = exec_runs[scenario]
    (chat,) = run.chat_spans()  # one turn, also when it failed before any item
    assert chat["attributes"]["gen_ai.provider.name"] == "openai"
    assert chat["attributes"]["transcript.turn"] == 1
    errors = [e for e in run.entries if e["entry_type"] == "error"]
    if scenario in FAILING:
        (failed,) = [m for m in run.messages if m["type"] == "turn.failed"]
        assert chat["attributes"]["error.type"] == "turn_failed"
        assert run.root["status"] == "ERROR"
        # The turn's failure, once, then the exit status that `transcript-otel run` saw.
        assert [e["detail"].get("event") for e in errors] == [failed, None]
        assert errors[1]["detail"]["exception"] == {
            "type": "CommandFailed",
            "message": "exited with status 1",
        }
        digest = RunDigest.of(run.records)
        assert failed["error"]["message"] in digest.errors
    else:
        assert errors == []
        assert "error.type" not in chat["attributes"]
        assert run.root["status"] != "ERROR"


def system_subtypes(run: CapturedRun) -> list[str]:
    return [e["detail"]["subtype"] for e in run.entries if e["entry_type"] == "system_event"]


def test_exec_shell_commands_with_reasoning(exec_runs: dict[str, CapturedRun]) -> None:
    run = exec_runs["shell"]
    assert [e["entry_type"] for e in run.entries if e["entry_type"] == "thinking"] == ["thinking"]
    tools = run.named("execute_tool")
    assert [t["attributes"]["gen_ai.tool.name"] for t in tools] == ["codex:command", "codex:command"]
    assert [t["status"] for t in tools] == ["UNSET", "ERROR"]  # `ls /no/such/dir` exits 2
    assert all(run.parent(t)["name"] == "chat gpt-5.5" for t in tools)


def test_exec_apply_patch_and_mcp_and_web_search_tools(exec_runs: dict[str, CapturedRun]) -> None:
    names = {
        scenario: [t["attributes"]["gen_ai.tool.name"] for t in exec_runs[scenario].named("execute_tool")]
        for scenario in ("apply_patch", "mcp_tool", "web_search")
    }
    assert names == {
        "apply_patch": ["codex:file_change"],
        "mcp_tool": ["docs:lookup"],
        "web_search": ["codex:web_search"],
    }


@pytest.mark.parametrize(
    ("scenario", "subtypes"),
    [
        ("retry_500", ["thread_started", "turn_started"]),  # a request retry codex does not print
        ("stream_cut", ["thread_started", "turn_started", "retry"]),
        ("stream_cut_late", ["thread_started", "turn_started", "retry"]),
        ("rate_limited", ["thread_started", "turn_started", "retry"]),  # a 429 saying retry-after
        ("stream_error", ["thread_started", "turn_started", "retry"]),  # an `error` event ends the stream
        ("unknown_model", ["thread_started", "warning", "turn_started"]),
        ("fatal_500", ["thread_started", "turn_started", "retry", "api_error"]),
        ("response_failed", ["thread_started", "turn_started", "retry", "api_error"]),
    ],
)
def test_exec_warnings_and_retries_are_system_events(
    exec_runs: dict[str, CapturedRun], scenario: str, subtypes: list[str]
) -> None:
    assert system_subtypes(exec_runs[scenario]) == subtypes


def test_exec_errors_read_as_codex_said_them(exec_runs: dict[str, CapturedRun], tmp_path: Path) -> None:
    run = exec_runs["fatal_500"]
    path = tmp_path / "run.jsonl"
    path.write_text("".join(json.dumps(record) + "\n" for record in run.records))
    shown = subprocess.run(
        [sys.executable, "-m", "transcript_otel.cli", "show", str(path), "--color", "never"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    busy = "We\N{RIGHT SINGLE QUOTATION MARK}re currently experiencing high demand"
    assert f"retry: Reconnecting... 1/1 ({busy}" in shown
    assert f"ERROR\n{busy}" in shown
    assert '{"type"' not in shown  # no raw JSON where Codex said it in words


# -- codex app-server under weakincentives 0.25 (our transcript) and 0.27 (its own, completed) -----

WINK_VERSIONS = ("0.25.0", "0.27.0")


@pytest.fixture(scope="module")
def app_server_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], Any]:
    """Every app-server scenario through `CodexAppServerAdapter.evaluate()`, per (weakincentives
    version, under `opentelemetry-instrument`), run on first use."""
    from wink_driver import REAL_CODEX_CLI

    from wink_harness import run_driver

    cli = require_cli()

    class Runs(dict[tuple[str, bool], Any]):
        def __missing__(self, key: tuple[str, bool]) -> Any:
            version, zero_code = key
            scenarios = ("wink_tool", "shell") if zero_code else (*APP_SERVER_SCENARIOS, "subagent")
            run = run_driver(
                version,
                tmp_path_factory.mktemp(f"wink-{version}"),
                ("--configure", "--adapter", "codex", "--scenarios", ",".join(scenarios)),
                zero_code=zero_code,
                extra_env={REAL_CODEX_CLI: str(cli)},
            )
            self[key] = run
            return run

    return Runs()


def entry_shape(entry: dict[str, Any]) -> tuple[Any, ...]:
    """What an entry is, whoever built it: type, source, subtype, and the Codex item it is about."""
    detail = entry["detail"] if isinstance(entry["detail"], dict) else {}
    notification = detail.get("notification")
    item = notification.get("item") if isinstance(notification, dict) else None
    return (
        entry["entry_type"],
        entry["source"],
        detail.get("subtype"),
        item.get("type") if isinstance(item, dict) else None,
        item.get("id") if isinstance(item, dict) else None,
    )


def entry_shapes(entries: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
    """`entry_shape` of each entry, an item id named by the order it first appears in: the model
    gives each response an id of its own, so the items it made differ in id from run to run."""
    numbers: dict[Any, int] = {}
    shapes = []
    for entry in entries:
        *shape, item_id = entry_shape(entry)
        shapes.append((*shape, None if item_id is None else numbers.setdefault(item_id, len(numbers))))
    return shapes


def root_usage(run: Any, prompt_name: str) -> dict[str, int]:
    (root,) = [
        r["context"]
        for r in run.mirror[prompt_name]
        if r["event"] == "transcript.span" and r["context"]["name"] == f"invoke_agent {prompt_name}"
    ]
    return span_usage(root)


def chat_usage(run: Any, prompt_name: str) -> dict[str, int]:
    """The token counts of the run's chat spans, added up (tokens are counted on them only)."""
    chats = [
        r["context"]
        for r in run.mirror[prompt_name]
        if r["event"] == "transcript.span"
        and r["context"]["attributes"].get("gen_ai.operation.name") == "chat"
    ]
    assert chats
    counted = sum((Counter(span_usage(chat)) for chat in chats), Counter())
    return {name: counted[name] for name in SPAN_USAGE}


@pytest.mark.wink
@pytest.mark.parametrize("version", WINK_VERSIONS)
def test_app_server_runs_follow_codex(app_server_runs: dict[tuple[str, bool], Any], version: str) -> None:
    """Each scenario: the outcome Codex gave, a valid transcript with nothing unknown, its
    reasoning as `thinking`, and the tokens the model served (Codex's own totals)."""
    run = app_server_runs[(version, False)]
    for scenario in APP_SERVER_SCENARIOS:
        name = f"codex-{scenario}"
        result = run.results[name]
        assert result["ok"] is (scenario not in FAILING), (scenario, result, run.stderr[-2000:])
        assert check_invariants(run.mirror[name]) == [], scenario
        types = run.entry_types(name)
        assert "unknown" not in types, scenario
        assert ("thinking" in types) is has_reasoning(scenario), scenario
        assert root_usage(run, name) == served_usage(result["served"]), scenario
        assert chat_usage(run, name) == root_usage(run, name), scenario
        # The OTLP export holds the spans the mirror holds.
        exported = sorted(span.name for span in run.tree(name))
        mirrored = sorted(r["context"]["name"] for r in run.mirror[name] if r["event"] == "transcript.span")
        assert exported == mirrored, scenario


@pytest.mark.wink
@pytest.mark.parametrize("version", WINK_VERSIONS)
def test_a_usage_report_repeated_after_a_stream_retry_counts_once(
    app_server_runs: dict[tuple[str, bool], Any], version: str
) -> None:
    """A stream cut after the answer, before `response.completed`: Codex retries and sends the
    previous call's usage report again. The run's tokens are Codex's total, not the sum."""
    run = app_server_runs[(version, False)]
    name = "codex-stream_cut_late"
    reports = [
        e["detail"]["notification"]["tokenUsage"]
        for e in run.entries(name)
        if e["entry_type"] == "token_usage"
    ]
    assert [r["total"]["inputTokens"] for r in reports] == [2100, 2100, 4400]  # the first one twice
    assert sum(r["last"]["inputTokens"] for r in reports) == 6500  # what adding up every report gave
    assert (
        root_usage(run, name)["input_tokens"]
        == chat_usage(run, name)["input_tokens"]
        == 4400
        == served_usage(run.results[name]["served"])["input_tokens"]
    )


@pytest.mark.wink
def test_weakincentives_025_and_027_give_the_same_entries(
    app_server_runs: dict[tuple[str, bool], Any],
) -> None:
    """0.25's transcript is ours; 0.27's is weakincentives' own bridge, which drops Codex 0.171's
    reasoning, warnings and errors and calls diffs `unknown`: what we add makes them equal."""
    old, new = app_server_runs[("0.25.0", False)], app_server_runs[("0.27.0", False)]
    for scenario in APP_SERVER_SCENARIOS:
        name = f"codex-{scenario}"
        assert entry_shapes(old.entries(name)) == entry_shapes(new.entries(name)), scenario
    # What 0.27's bridge emitted itself is mirrored once, never duplicated.
    native = Counter(e["entry_type"] for e in new.native["codex-apply_patch"])
    mirrored = Counter(e["entry_type"] for e in new.entries("codex-apply_patch"))
    assert native["unknown"] == 2  # its two `turn/diff/updated`, recorded as `turn_diff` system events
    assert mirrored["unknown"] == 0
    assert mirrored["system_event"] == native["system_event"] + native["unknown"]


@pytest.mark.wink
@pytest.mark.parametrize("version", WINK_VERSIONS)
def test_a_codex_subagents_thread_is_counted_in_the_run(
    app_server_runs: dict[tuple[str, bool], Any], version: str
) -> None:
    """`multi_agent_v2` (`[features]` in the app-server's config): the subagent's thread speaks on
    the run's connection, its entries the run's (source `main`, as the specification has it
    for Codex). The `spawn_agent` and `wait` calls that reach the run are tool calls, and every
    token the run was told of is counted, each thread from its own running total.
    (weakincentives ends the turn at the subagent thread's `turn/completed` and stops reading:
    what the main thread's model answered after that is never reported to it.)"""
    run = app_server_runs[(version, False)]
    name = "codex-subagent"
    assert check_invariants(run.mirror[name]) == []
    entries = run.entries(name)
    assert "unknown" not in {e["entry_type"] for e in entries}
    assert {e["source"] for e in entries} == {"main"}
    spans = [r["context"]["name"] for r in run.mirror[name] if r["event"] == "transcript.span"]
    assert "execute_tool spawn_agent" in spans
    # The main thread's `wait` reaches the run only when its model called it before the
    # subagent's turn ended (weakincentives reads no further), which depends on the machine's
    # pace: when it does, it is a call of its own.
    waits = [
        e
        for e in entries
        if e["entry_type"] == "tool_use" and "collabAgentToolCall" in json.dumps(e["detail"])
    ]
    assert spans.count("execute_tool codex:wait") == len(waits)
    # The run ends at Codex's own totals, thread by thread: the last each thread reported.
    last_totals: dict[str, dict[str, int]] = {}
    for entry in entries:
        if entry["entry_type"] == "token_usage":
            notification = entry["detail"]["notification"]
            last_totals[notification["threadId"]] = notification["tokenUsage"]["total"]
    assert len(last_totals) == 2  # the run's thread and the subagent's
    assert root_usage(run, name)["input_tokens"] == sum(t["inputTokens"] for t in last_totals.values())
    (child_call,) = [c for c in run.results[name]["served"] if c["conversation"] == "SUBAGENT-CHILD-TASK"]
    assert child_call["usage"]["input_tokens"] in [t["inputTokens"] for t in last_totals.values()]
    assert chat_usage(run, name) == root_usage(run, name)


@pytest.mark.wink
@pytest.mark.parametrize("version", WINK_VERSIONS)
def test_a_failed_turn_reads_codex_reason(app_server_runs: dict[tuple[str, bool], Any], version: str) -> None:
    """weakincentives reads `turn.codexErrorInfo`, which Codex 0.171 does not send ("Turn failed:
    unknown"); the transcript and the chat span carry `turn.error.{message, codexErrorInfo}`."""
    run = app_server_runs[(version, False)]
    name = "codex-fatal_500"
    assert "Turn failed: unknown" in run.results[name]["error"]
    digest = RunDigest.of(run.mirror[name])
    busy = "We\N{RIGHT SINGLE QUOTATION MARK}re currently experiencing high demand"
    assert any(error.startswith(busy) for error in digest.errors)
    (chat,) = [
        r["context"]
        for r in run.mirror[name]
        if r["event"] == "transcript.span" and r["context"]["name"].startswith("chat")
    ]
    assert chat["attributes"]["error.type"] == "internalServerError"
    subtypes = [e["detail"].get("subtype") for e in run.entries(name) if e["entry_type"] == "system_event"]
    assert subtypes == ["turn_started", "retry", "api_error"]


@pytest.mark.wink
def test_opentelemetry_instrument_gives_the_same_entries(
    app_server_runs: dict[tuple[str, bool], Any],
) -> None:
    """Under `opentelemetry-instrument`, with no code of ours in the program, the same transcript."""
    configured, zero_code = app_server_runs[("0.27.0", False)], app_server_runs[("0.27.0", True)]
    for name in ("codex-wink_tool", "codex-shell"):
        assert entry_shapes(zero_code.entries(name)) == entry_shapes(configured.entries(name))
        assert root_usage(zero_code, name) == served_usage(zero_code.results[name]["served"])
        assert chat_usage(zero_code, name) == root_usage(zero_code, name)


# -- the interactive TUI, under `run`, at a terminal ---------------------------------------------

_CSI = re.compile(r"\x1b\[[0-9;?<>=]*[a-zA-Z]")


def screen_text(terminal: TerminalSession) -> str:
    """What the terminal shows, roughly: the output without its control sequences."""
    return _CSI.sub(" ", terminal.output)


def test_the_interactive_tui_under_run_answers_as_without_it(tmp_path: Path) -> None:
    """`transcript-otel run -- codex PROMPT` at a terminal: Codex's full-screen TUI starts (it
    needs a terminal), sends the prompt to the model, shows the answer and quits on Ctrl-C."""
    cli = require_cli()
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    with model_server("plain", tmp_path) as model:
        codex_home = write_codex_home(tmp_path / "codex-home", model)
        with (codex_home / "config.toml").open("a") as config:  # no "trust this folder?" screen
            config.write(f'\n[projects."{work}"]\ntrust_level = "trusted"\n')
        env = offline_environment(codex_home, home) | {
            "TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "runs"),
            "TERM": "xterm-256color",
        }
        wrapper = " ".join(shlex.quote(part) for part in WRAPPER)
        prompt = shlex.quote(prompt_for("plain"))
        command = (
            f"cd {shlex.quote(str(work))} && {wrapper} {cli} --no-daemon {prompt}; echo WRAPPER-STATUS=$?"
        )
        with TerminalSession(command, env, columns=120, rows=40) as terminal:
            answered = False
            dismissed: list[float] = []  # when the announcement was answered
            for _ in range(900):
                screen = screen_text(terminal)
                if "Hello" in screen and "scripted" in screen:
                    answered = True
                    break
                # An announcement of a newer model: keep ours ("2", then Enter), once it is drawn
                # and waits for keys; again if it is still there long after (keys sent too early).
                if "Try new model" in screen and (not dismissed or time.monotonic() - dismissed[-1] > 20):
                    terminal.wait_quiet(0.5)
                    terminal.send_keys(b"2")
                    time.sleep(0.5)
                    terminal.send_keys(b"\r")
                    dismissed.append(time.monotonic())
                time.sleep(0.1)
            assert answered, screen_text(terminal)[-2000:]
            for _ in range(2):  # Codex asks for a second Ctrl-C while a turn may still run
                if "WRAPPER-STATUS=" in terminal.output:
                    break
                terminal.send_keys(b"\x03")
                with contextlib.suppress(AssertionError):
                    terminal.expect("WRAPPER-STATUS=", timeout_s=5)
            terminal.expect("WRAPPER-STATUS=0")
    assert "isatty" not in terminal.output  # no complaint about a missing terminal
    (mirror_path,) = (tmp_path / "runs").glob("*.jsonl")
    records = list(read_records(mirror_path))
    assert check_invariants(records) == []
    texts = [r["context"]["detail"].get("text", "") for r in records if r["event"] == "transcript.entry"]
    assert "To continue this session, run:" in texts  # what Codex prints once the TUI is closed


# How a run resumes the first thread (made in `work`), and what else is there before it.
_RESUMES: Final = {
    "by-id": (("resume", "{thread}"), "work", False),
    "last": (("resume", "--last"), "work", False),
    # Codex takes the working folder's latest thread, not the latest of all (0.171.0).
    "last-with-a-newer-thread-elsewhere": (("resume", "--last"), "work", True),
    # No thread of this folder: Codex starts one, all of whose tokens are the run's.
    "last-in-a-folder-without-threads": (("resume", "--last"), "elsewhere", False),
    "last-of-all-folders": (("resume", "--last", "--all"), "elsewhere", False),
}


@pytest.mark.parametrize("case", list(_RESUMES))
def test_a_run_that_resumes_a_thread_records_its_own_tokens(case: str, tmp_path: Path) -> None:
    """`transcript-otel run -- codex exec resume <thread>|--last PROMPT`: the CLI's
    `turn.completed` usage is the thread's running totals, the first run's included (the real
    CLI printed 4000 input tokens for a run of 2000); the run records its own, counted from the
    totals the thread its output names had before the run started (Codex chooses the thread
    `--last` means: the working folder's latest, or a new one)."""
    from captured_run import run_cli, scratch_dirs

    resume, folder, newer_thread_elsewhere = _RESUMES[case]
    cli = require_cli()
    home, work = scratch_dirs(tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    runs = tmp_path / "runs"
    with model_server("plain", tmp_path) as model:
        codex_home = write_codex_home(tmp_path / "codex-home", model, codex_cli.model_slug("plain"))
        environment = offline_environment(codex_home, home)
        first = run_cli([str(cli), *codex_cli.exec_arguments("plain")], model, environment, work)
        thread = _thread_of(first.stdout)
        if newer_thread_elsewhere:  # of other totals than the first's: two runs
            other = _thread_of(
                run_cli([str(cli), *codex_cli.exec_arguments("plain")], model, environment, elsewhere).stdout
            )
            again = ["exec", "--json", "--skip-git-repo-check", "resume", other, "Go on."]
            run_cli([str(cli), *again], model, environment, elsewhere)
        before = len(model.served())
        arguments = [
            "exec",
            "--json",
            "--skip-git-repo-check",
            *(word.format(thread=thread) for word in resume),
        ]
        command = [*WRAPPER, str(cli), *arguments, "And now?"]
        cwd = work if folder == "work" else elsewhere
        second = run_cli(command, model, {**environment, "TRANSCRIPT_OTEL_JSONL_DIR": str(runs)}, cwd)
        served = model.served()[before:]
    assert second.exit_code == 0, second.stderr
    (completed,) = [
        line for line in map(json.loads, second.stdout.splitlines()) if line["type"] == "turn.completed"
    ]
    resumed = _thread_of(second.stdout) == thread
    assert resumed == (case != "last-in-a-folder-without-threads")
    if resumed:
        assert completed["usage"]["input_tokens"] == 4000  # the thread's, the first run's included
    (run,) = runs.glob("*.jsonl")
    digest = RunDigest.of(list(read_records(run)))
    assert {key: digest.tokens.get(name, 0) for key, name in DIGEST_USAGE.items()} == {
        key: value for key, value in served_usage(served).items() if key in DIGEST_USAGE
    }


def _thread_of(stdout: str) -> str:
    (thread,) = [line["thread_id"] for line in map(json.loads, stdout.splitlines()) if "thread_id" in line]
    return str(thread)


def _ended_chats(records: list[dict[str, Any]]) -> list[str]:
    return [
        r["context"]["name"]
        for r in records
        if r["event"] == "transcript.span" and r["context"]["name"].startswith("chat")
    ]


def test_watch_follows_a_session_a_person_runs_in_the_terminal_ui(tmp_path: Path) -> None:
    """The real terminal UI (`codex PROMPT` on a pseudo-terminal, two prompts) while
    `transcript-otel watch` follows its sessions folder: each turn is in the mirror, its `chat`
    span ended, while the UI is still open; the tokens are what the model served (but the
    title the UI asks for, which Codex logs nowhere)."""
    from terminal_ui import CODEX_UI, run_ui

    from terminal_session import require_script

    cli, _ = require_cli(), require_script()
    home, work, runs = tmp_path / "home", tmp_path / "work", tmp_path / "runs"
    for folder in (home, work):
        folder.mkdir()
    with model_server("plain", tmp_path) as model:
        codex_home = write_codex_home(tmp_path / "codex-home", model, codex_cli.model_slug("plain"))
        sessions = codex_home / "sessions"
        sessions.mkdir()
        environment = offline_environment(codex_home, home)
        with live_watch(sessions, tmp_path / "watch.json", runs, environment) as watch:
            while_open: list[list[str]] = []

            def both_turns_exported() -> None:
                while_open.append(watch.wait_for(_ended_chats, lambda chats: len(chats) == 2))

            ui = [str(cli), "--no-daemon", prompt_for("plain")]
            run_ui(CODEX_UI, ui, environment, work, sessions, ("And now?",), both_turns_exported)
            served = [call for call in model.served() if call.get("conversation") != "title"]
    assert while_open == [["chat gpt-5.5", "chat gpt-5.5"]]
    (run,) = runs.glob("*.jsonl")
    records = list(read_records(run))
    assert check_invariants(records) == []
    digest = RunDigest.of(records)
    assert {key: digest.tokens.get(name, 0) for key, name in DIGEST_USAGE.items()} == served_usage(served)
