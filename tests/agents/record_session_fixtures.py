"""Record the session logs the real Claude Code and Codex CLIs write to disk, as test fixtures.

    python tests/agents/record_session_fixtures.py [SCENARIO...]

(`claude_code/tools`, or a bare name: every CLI that has it; no name: every scenario.) Each
scenario runs one or more times with the real CLI against the scripted model
(`examples/model_servers`), sharing one throwaway `HOME` (and, for Codex, `CODEX_HOME`) and
one model server, and lands in `tests/fixtures/sessions/<cli>/<scenario>/`:

* `stdout-<N>.jsonl`: what run N printed (`claude -p --output-format stream-json --verbose`,
  or `codex exec --json`); for Codex's terminal UI (`interactive`), `terminal-<N>.txt`: what
  it printed as it ended, its escape sequences removed;
* every session file the runs wrote, at its path under the throwaway home:
  `home/.claude/projects/<project>/<session>.jsonl` and `.../<session>/subagents/*` for
  Claude Code, `codex-home/sessions/YYYY/MM/DD/rollout-*.jsonl` for Codex (nothing else the
  CLIs write there: settings, caches, sqlite state, skills);
* `meta.json`: the CLI version, per run its arguments, exit status and stderr, and what the
  scripted model served.

Nothing is trimmed. The only change: the scratch directory's path (random per recording)
becomes `/scratch`, in file contents and in file names, and its Claude Code project slug
(the path with every non-alphanumeric character as `-`) becomes `-scratch`, so the project
folder is always `-scratch-work`. Ids, timestamps and durations are as the CLIs wrote them,
so a new recording differs from the last in those.

Resumed sessions: the `resumed` scenarios run the CLI a second time with the first run's
session id (`claude -p --resume <id>`, `codex exec resume <id>`). `compacted`: Claude Code gets
`/compact` sent to the resumed session, then one more prompt; Codex runs with
`model_auto_compact_token_limit` below the first turn's tokens, so the resumed turn compacts
first. `auto_compacted`: Claude Code's first answer reports a context past the window
`CLAUDE_CODE_AUTO_COMPACT_WINDOW` sets, so the resumed prompt is compacted first, by the CLI
itself. What the files hold: docs/session-logs.md.
"""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import claude_code
import claude_offline  # on the path once claude_code is imported
import claude_scenarios
import codex_cli
import codex_offline
import codex_scenarios
from captured_run import run_cli, scratch_dirs
from recording import record_all
from terminal_ui import CLAUDE_UI, CODEX_UI, COMPACT, INTERRUPT, as_after_first_use, run_ui

FIXTURES = claude_code.ROOT / "tests" / "fixtures" / "sessions"


@dataclass(frozen=True)
class Run:
    """One CLI run of a scenario: its prompt (None: the scenario's own), whether it resumes the
    session of the scenario's first run, and extra CLI arguments."""

    prompt: str | None = None
    resume: bool = False
    arguments: tuple[str, ...] = ()
    resume_latest: bool = False  # resumes the session of the run before it, not the first run's


@dataclass(frozen=True)
class Scenario:
    """A recorded scenario: the scripted model's scenario, the CLI case (Claude Code's
    `claude_code.CASES` key) and its runs."""

    model: str
    runs: tuple[Run, ...] = (Run(),)
    case: str | None = None
    config: tuple[tuple[str, str], ...] = field(default=())  # Codex `-c key=value` overrides
    environment: tuple[tuple[str, str], ...] = field(default=())  # Claude Code: added to the case's
    cli_version: str | None = None  # an older CLI, for its log format (default: the pinned one)
    interactive: bool = False  # the terminal UI (`claude PROMPT`, `codex PROMPT`), as a person runs it
    follow_ups: tuple[str, ...] = ()  # the terminal UI: prompts typed after the first
    permission_mode: str | None = None  # Claude Code's terminal UI: the mode set in its settings
    typed_while_busy: tuple[str, ...] = ()  # the terminal UI: typed once the model called a tool
    # Codex: after its runs, the first run's thread forked in the terminal UI with this prompt
    # (`codex fork <thread> PROMPT`, the one way `codex` forks; `exec` cannot).
    fork_prompt: str | None = None
    # Codex: then the pinned CLI's `codex migrate-rollouts --apply`, as a person who upgraded runs it.
    migrated: bool = False


CLAUDE: dict[str, Scenario] = {
    # Thinking, text and a Bash call in one answer, then the final answer.
    "tools": Scenario("tools"),
    "foreground_subagent": Scenario("foreground_subagent"),
    # `run_in_background: false`: the subagent runs synchronously, in the turn that called it.
    "synchronous_subagent": Scenario("synchronous_subagent"),
    "background_subagent": Scenario("background_subagent"),
    "parallel_subagents": Scenario("parallel_subagents"),
    "denied_tool": Scenario("denied_tool"),
    # The model's WebSearch call: the CLI's own request to the API's web_search tool.
    "web_search": Scenario("web_search"),
    # Every attempt answers 500 (one retry), and a 400 that is not retried.
    "fatal_500": Scenario("fatal_500"),
    "bad_request": Scenario("bad_request"),
    "max_turns": Scenario("max_turns"),
    # Two `claude -p` runs, the second `--resume <session>` of the first.
    "resumed": Scenario("stream_json_input", (Run(), Run("And now?", resume=True)), case="stream_json_input"),
    # `resumed` with `--fork-session`: the second run goes on in a new session of its own.
    "forked": Scenario(
        "stream_json_input",
        (Run(), Run("And now?", resume=True, arguments=("--fork-session",))),
        case="stream_json_input",
    ),
    # `forked`, then a fork of the fork: its copy holds lines the first fork copied too.
    "forked_twice": Scenario(
        "stream_json_input",
        (
            Run(),
            Run("And now?", resume=True, arguments=("--fork-session",)),
            Run("Anything else?", resume=True, resume_latest=True, arguments=("--fork-session",)),
        ),
        case="stream_json_input",
    ),
    # A session, then `/compact` sent to it resumed, then one more prompt.
    "compacted": Scenario(
        "stream_json_input",
        (Run(), Run("/compact", resume=True), Run("Anything else?", resume=True)),
        case="stream_json_input",
    ),
    # A session whose first answer reports a context close to the window, resumed: the CLI
    # compacts it by itself before the next prompt.
    # The session log format of an older Claude Code: the same conversations, recorded with 2.0.32.
    "v2.0.32_tools": Scenario("tools", cli_version="2.0.32"),
    # `tools` in the terminal UI a person uses (`claude PROMPT`), left with Ctrl-C twice.
    "interactive": Scenario("tools", interactive=True),
    # `resumed`'s conversation, its second prompt typed in the same terminal UI.
    "interactive_two_prompts": Scenario("stream_json_input", interactive=True, follow_ups=("And now?",)),
    # `parallel_subagents` in the terminal UI: the two subagents' notifications come as the
    # person waits at the prompt. In accept-edits mode, set in the person's settings: the UI's
    # own auto mode asks its server whether to launch a subagent, which a scripted model is not.
    "interactive_subagents": Scenario("parallel_subagents", interactive=True, permission_mode="acceptEdits"),
    # A second prompt typed while the first turn's command runs (a few seconds): the UI queues
    # it and hands it to the model with the command's result, in the same turn.
    "interactive_typed_while_busy": Scenario(
        "busy_prompt", case="tools", interactive=True, typed_while_busy=("And also this?",)
    ),
    # The person presses Esc while that command runs, then types another prompt.
    "interactive_interrupted": Scenario(
        "busy_prompt", case="tools", interactive=True, typed_while_busy=(INTERRUPT, "Never mind.")
    ),
    # `compacted` in the terminal UI: `/compact` typed between two prompts.
    "interactive_compacted": Scenario(
        "stream_json_input",
        case="stream_json_input",
        interactive=True,
        follow_ups=(COMPACT, "Anything else?"),
    ),
    "auto_compacted": Scenario(
        "auto_compact",
        (Run(), Run("And now?", resume=True)),
        case="tools",
        environment=(("CLAUDE_CODE_AUTO_COMPACT_WINDOW", "100000"),),
    ),
}

CODEX: dict[str, Scenario] = {
    # Reasoning, a command that succeeds and one that fails, the answer.
    "shell": Scenario("shell"),
    # apply_patch adds a file.
    "apply_patch": Scenario("apply_patch"),
    # tool_search, then the MCP tool `docs/lookup`.
    "mcp_tool": Scenario("mcp_tool"),
    # A subagent (`multi_agent_v2`): spawned, waited for; its rollout is a file of its own.
    "subagent": Scenario("subagent", config=(("features.multi_agent_v2", "true"),)),
    # A hosted web search in the same response as the answer.
    "web_search": Scenario("web_search"),
    # Code mode, the model the terminal UI offers (gpt-6-sol): commands run from a script.
    "code_mode": Scenario("code_mode", (Run(arguments=("-m", "gpt-6-sol")),)),
    # Every kind of item in one turn: commands (one failing), a patch, tool_search and the MCP
    # tool, a web search, the answer.
    "tour": Scenario("tour"),
    # A command, then every attempt at the next step fails with HTTP 500: the turn fails.
    "tool_then_500": Scenario("tool_then_500"),
    # `codex exec`, then `codex exec resume <thread id>` with a second prompt.
    "resumed": Scenario("plain", (Run(), Run("And now?", resume=True))),
    # `codex exec`, then its thread forked in the terminal UI with a second prompt.
    "forked": Scenario("plain", fork_prompt="And now?"),
    # The rollout format of an older Codex (no `token_usage_record`, no typed items, no
    # `ordinal`): the same conversations, recorded with 0.140.
    "v0.140_shell": Scenario("shell", cli_version="0.140.0"),
    # `shell` in the terminal UI a person uses (`codex PROMPT`), left with Ctrl-D.
    "interactive": Scenario("shell", interactive=True),
    # `resumed`'s conversation, its second prompt typed in the same terminal UI.
    "interactive_two_prompts": Scenario("plain", interactive=True, follow_ups=("And now?",)),
    # A second prompt typed while the first turn's command runs (a few seconds).
    "interactive_typed_while_busy": Scenario(
        "busy_prompt", interactive=True, typed_while_busy=("And also this?",)
    ),
    # The person presses Esc while that command runs, then types another prompt.
    "interactive_interrupted": Scenario(
        "busy_prompt", interactive=True, typed_while_busy=(INTERRUPT, "Never mind.")
    ),
    # `/compact` typed in the terminal UI between two prompts.
    "interactive_compacted": Scenario("plain", interactive=True, follow_ups=(COMPACT, "And now?")),
    # `subagent` in the terminal UI.
    "interactive_subagent": Scenario(
        "subagent", config=(("features.multi_agent_v2", "true"),), interactive=True
    ),
    # `v0.140_shell` migrated by the pinned Codex (`codex migrate-rollouts --apply`): rewritten in place.
    "v0.140_shell_migrated": Scenario("shell", cli_version="0.140.0", migrated=True),
    "v0.140_mcp_tool": Scenario("mcp_tool", cli_version="0.140.0"),
    "v0.140_resumed": Scenario("plain", (Run(), Run("And now?", resume=True)), cli_version="0.140.0"),
    # Auto-compaction: with a token limit below what the first turn reported, the resumed
    # turn compacts the history first. (In one turn that calls tools, a limit the scripted
    # usage exceeds compacts after every answer, and the scripted model, which picks its
    # answer by the call ids already sent, starts over each time: codex never ends.)
    "compacted": Scenario(
        "plain",
        (Run(), Run("And now?", resume=True)),
        config=(("model_auto_compact_token_limit", "1000"),),
    ),
}


def without_machine_paths(text: str, scratch: Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(scratch))
    return text.replace(str(scratch), "/scratch").replace(slug, "-scratch")


def _lines(stdout: str) -> list[dict[str, Any]]:
    found = []
    for line in stdout.splitlines():
        try:
            found.append(json.loads(line))
        except ValueError:
            continue
    return found


def _claude_session_id(stdout: str) -> str:
    return next(str(line["session_id"]) for line in _lines(stdout) if line.get("session_id"))


def _codex_thread_id(stdout: str) -> str:
    return next(str(line["thread_id"]) for line in _lines(stdout) if line.get("type") == "thread.started")


@dataclass
class Recording:
    runs: list[dict[str, Any]] = field(default_factory=list)
    stdouts: list[str] = field(default_factory=list)
    terminal: list[str] = field(default_factory=list)  # what a terminal UI printed when it ended
    maintenance: list[dict[str, Any]] = field(default_factory=list)  # commands run on the logs after
    served: list[dict[str, Any]] = field(default_factory=list)


def record_claude(scenario: Scenario, scratch: Path) -> tuple[Recording, list[Path]]:
    cli = claude_code.cli_at(scenario.cli_version or claude_code.CLAUDE_CODE_VERSION)
    case = claude_code.CASES[scenario.case or scenario.model]
    home, work = scratch_dirs(scratch)
    recording = Recording()
    session_id = latest_id = ""
    with claude_offline.model_server(scenario.model, scratch) as model:
        environment = {**claude_code.case_environment(case, model, home), **dict(scenario.environment)}
        if scenario.interactive:
            as_after_first_use(home, work, scenario.permission_mode)
            prompt = claude_scenarios.prompt_for(scenario.model)
            projects = home / ".claude" / "projects"
            printed = run_ui(
                CLAUDE_UI,
                [str(cli), prompt],
                environment,
                work,
                projects,
                scenario.follow_ups,
                typed_while_busy=scenario.typed_while_busy,
            )
            recording.terminal.append(printed)
            typed = [prompt, *scenario.typed_while_busy, *scenario.follow_ups]
            recording.runs.append(_run_meta(typed, 0, ""))
            recording.served = model.served()
            return recording, [projects]
        for run in scenario.runs:
            prompt = run.prompt or claude_scenarios.prompt_for(scenario.model)
            resume = ("--resume", latest_id if run.resume_latest else session_id) if run.resume else ()
            arguments = [*claude_code.print_args(*case.arguments, *resume, *run.arguments), prompt]
            recorded = run_cli([str(cli), *arguments], model, environment, work)
            if recorded.exit_code != case.exit_code:  # not as scripted: no fixture
                stderr = recorded.stderr.strip()[-500:]
                raise RuntimeError(f"run exited {recorded.exit_code}, expected {case.exit_code}: {stderr}")
            session_id = session_id or _claude_session_id(recorded.stdout)
            latest_id = _claude_session_id(recorded.stdout)
            recording.stdouts.append(recorded.stdout)
            recording.runs.append(_run_meta(arguments, recorded.exit_code, recorded.stderr))
        recording.served = model.served()
    return recording, [home / ".claude" / "projects"]


def record_codex(scenario: Scenario, scratch: Path) -> tuple[Recording, list[Path]]:
    cli = codex_cli.cli_at(scenario.cli_version or codex_cli.CODEX_VERSION)
    home, work = scratch_dirs(scratch)
    recording = Recording()
    thread_id = ""
    with codex_offline.model_server(scenario.model, scratch) as model:
        codex_home = codex_offline.write_codex_home(
            scratch / "codex-home", model, codex_cli.model_slug(scenario.model)
        )
        environment = codex_offline.offline_environment(codex_home, home)
        overrides = [part for key, value in scenario.config for part in ("-c", f"{key}={value}")]
        if scenario.interactive:
            prompt = codex_scenarios.prompt_for(scenario.model)
            command = [str(cli), "--no-daemon", *overrides, prompt]
            sessions = codex_home / "sessions"
            recording.terminal.append(
                run_ui(
                    CODEX_UI,
                    command,
                    environment,
                    work,
                    sessions,
                    scenario.follow_ups,
                    typed_while_busy=scenario.typed_while_busy,
                )
            )
            typed = [*scenario.typed_while_busy, *scenario.follow_ups]
            recording.runs.append(_run_meta(command[1:] + typed, 0, ""))
            recording.served = model.served()
            return recording, [codex_home / "sessions"]
        for run in scenario.runs:
            prompt = run.prompt or codex_scenarios.prompt_for(scenario.model)
            resume = ("resume", thread_id) if run.resume else ()
            arguments = [
                "exec",
                "--json",
                "--skip-git-repo-check",
                *overrides,
                *run.arguments,
                *resume,
                prompt,
            ]
            recorded = run_cli([str(cli), *arguments], model, environment, work)
            thread_id = thread_id or _codex_thread_id(recorded.stdout)
            recording.stdouts.append(recorded.stdout)
            recording.runs.append(_run_meta(arguments, recorded.exit_code, recorded.stderr))
        if scenario.migrated:
            migrate = [str(codex_cli.cli_at(codex_cli.CODEX_VERSION)), "migrate-rollouts", "--apply"]
            done = subprocess.run(
                migrate, env=environment, cwd=work, capture_output=True, text=True, timeout=120
            )
            said = {"arguments": migrate[1:], "exit_code": done.returncode, "stdout": done.stdout.strip()}
            recording.maintenance.append({"codex": codex_cli.CODEX_VERSION, **said})
        if scenario.fork_prompt is not None:
            command = [str(cli), "--no-daemon", *overrides, "fork", thread_id, scenario.fork_prompt]
            forked_ui = dataclasses.replace(CODEX_UI, answers=())  # the thread's model is settled
            recording.terminal.append(run_ui(forked_ui, command, environment, work, codex_home / "sessions"))
            recording.runs.append(_run_meta(command[1:], 0, ""))
        recording.served = model.served()
    return recording, [codex_home / "sessions"]


def _run_meta(arguments: list[str], exit_code: int, stderr: str) -> dict[str, Any]:
    return {"arguments": arguments, "exit_code": exit_code, "stderr": stderr.strip()[-2000:]}


Recorder = Callable[[Scenario, Path], tuple[Recording, list[Path]]]
CLIS: dict[str, tuple[dict[str, Scenario], Recorder, dict[str, str]]] = {
    "claude_code": (CLAUDE, record_claude, {"claude_code": claude_code.CLAUDE_CODE_VERSION}),
    "codex": (CODEX, record_codex, {"codex": codex_cli.CODEX_VERSION}),
}


def record_one(cli: str, name: str) -> None:
    scenarios, recorder, version = CLIS[cli]
    scenario = scenarios[name]
    target = FIXTURES / cli / name
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        recording, session_roots = recorder(scenario, scratch)
        if target.exists():
            shutil.rmtree(target)
        target.mkdir(parents=True)
        for number, stdout in enumerate(recording.stdouts, 1):
            (target / f"stdout-{number}.jsonl").write_text(without_machine_paths(stdout, scratch))
        for number, printed in enumerate(recording.terminal, 1):
            (target / f"terminal-{number}.txt").write_text(without_machine_paths(printed, scratch))
        files = []
        for root in session_roots:
            for path in sorted(p for p in root.rglob("*") if p.is_file()):
                relative = without_machine_paths(str(path.relative_to(scratch)), scratch)
                kept = target / relative
                kept.parent.mkdir(parents=True, exist_ok=True)
                kept.write_text(without_machine_paths(path.read_text(), scratch))
                files.append(relative)
        runs = [
            {
                **run,
                "arguments": [without_machine_paths(a, scratch) for a in run["arguments"]],
                "stderr": without_machine_paths(run["stderr"], scratch),
            }
            for run in recording.runs
        ]
        cli_version = dict.fromkeys(version, scenario.cli_version) if scenario.cli_version else version
        meta = {
            **cli_version,
            "model_scenario": scenario.model,
            "runs": runs,
            "session_files": files,
            "served": recording.served,
        }
        if recording.maintenance:
            meta["maintenance"] = recording.maintenance
        (target / "meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    exits = [run["exit_code"] for run in runs]
    print(f"{cli}/{name}: exits {exits}, {len(files)} session files, {len(recording.served)} served")


def selected(names: list[str]) -> list[tuple[str, str]]:
    every = [(cli, name) for cli, (scenarios, _, _) in CLIS.items() for name in scenarios]
    if not names:
        return every
    chosen = []
    for name in names:
        cli, _, bare = name.rpartition("/")
        matches = [(c, n) for c, n in every if n == bare and cli in ("", c)]
        if not matches:
            raise SystemExit(f"no scenario {name!r}; known: {', '.join(f'{c}/{n}' for c, n in every)}")
        chosen.extend(matches)
    return chosen


def main(names: list[str]) -> None:
    chosen = [f"{cli}/{name}" for cli, name in selected(names)]
    record_all(chosen, lambda chosen_name: record_one(*chosen_name.split("/", 1)))


if __name__ == "__main__":
    main(sys.argv[1:])
