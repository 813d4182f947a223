"""The real Claude Code CLI against the scripted model (`examples/model_servers/anthropic_api.py`).

The CLI is the npm package pinned in the Makefile (`make agents` installs it under
`.agents/`); `TRANSCRIPT_OTEL_CLAUDE_CLI` names another binary. Each run gets a throwaway
`HOME` and working directory and the settings that keep the CLI offline.

    python tests/agents/claude_code.py SCENARIO

runs one scenario with `claude -p --output-format stream-json --verbose` and prints the
stream, then what the model served (for recording fixtures by hand).
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "model_servers"))

from captured_run import Recorded, installed_cli, older_cli, record_main, run_cli, scratch_dirs  # noqa: E402
from claude_offline import model_server, offline_environment  # noqa: E402
from claude_scenarios import prompt_for  # noqa: E402
from scripted_http import ModelServer  # noqa: E402

CLAUDE_CODE_VERSION = "2.1.332"
CLI_VARIABLE = "TRANSCRIPT_OTEL_CLAUDE_CLI"
INSTALLED_CLI = ROOT / ".agents" / "claude-code" / "node_modules" / ".bin" / "claude"


def cli_path() -> Path | None:
    """The real `claude` binary, if installed (`make agents`)."""
    return installed_cli(CLI_VARIABLE, INSTALLED_CLI)


def cli_at(version: str) -> Path:
    """The `claude` binary of `version`: the pinned one, or an older one (`older_cli`)."""
    if version != CLAUDE_CODE_VERSION:
        return older_cli(ROOT, "@anthropic-ai/claude-code", version)
    cli = cli_path()
    if cli is None:
        raise RuntimeError("no Claude Code CLI: run `make agents`")
    return cli


USAGE_KEYS = ("input_tokens", "output_tokens", "cache_read_input_tokens", "cache_creation_input_tokens")


def served_usage(served: list[dict[str, Any]], conversation: str | None = None) -> dict[str, int]:
    """What the model answered (in all, or in one conversation), summed: every key of `USAGE_KEYS`."""
    totals = dict.fromkeys(USAGE_KEYS, 0)
    for answer in served:
        if "usage" in answer and conversation in (None, answer["conversation"]):
            for key in USAGE_KEYS:
                totals[key] += answer["usage"][key]
    return totals


def print_args(*extra: str) -> list[str]:
    """`claude -p` printing stream-json, allowed every tool."""
    return [
        "-p",
        "--output-format",
        "stream-json",
        "--verbose",
        "--permission-mode",
        "bypassPermissions",
        *extra,
    ]


@dataclass(frozen=True)
class Case:
    """How the CLI runs one scenario: its extra arguments and environment; with `follow_ups`,
    the prompts come as stream-json on stdin (`--input-format stream-json`), the scenario's
    prompt first, then these."""

    arguments: tuple[str, ...] = ()
    environment: tuple[tuple[str, str], ...] = ()
    api_key: bool = True
    follow_ups: tuple[str, ...] = ()
    exit_code: int = 0  # the CLI's exit status when the scenario goes as scripted


# The scenarios the tests run and the fixtures record, with what each needs of the CLI.
CASES: dict[str, Case] = {
    "tools": Case(),
    "foreground_subagent": Case(),
    "synchronous_subagent": Case(),
    "background_subagent": Case(),
    "parallel_subagents": Case(),
    "retry_500": Case(),
    "rate_limited": Case(),
    "redacted_thinking": Case(),
    "web_search": Case(),
    "fatal_500": Case(environment=(("CLAUDE_CODE_MAX_RETRIES", "1"),), exit_code=1),
    "fatal_529": Case(environment=(("CLAUDE_CODE_MAX_RETRIES", "1"),), exit_code=1),
    "bad_request": Case(exit_code=1),
    "mid_stream_error": Case(),
    "max_turns": Case(arguments=("--max-turns", "1"), exit_code=1),
    "denied_tool": Case(arguments=("--permission-mode", "default")),
    "no_api_key": Case(api_key=False, exit_code=1),
    "unknown_flag": Case(arguments=("--no-such-flag",), exit_code=1),
    "stream_json_input": Case(follow_ups=("And now?", "Anything else?")),
}


def case_environment(case: Case, model: ModelServer, home: Path) -> dict[str, str]:
    environment = offline_environment(model, home)
    environment.update(case.environment)
    if not case.api_key:
        del environment["ANTHROPIC_API_KEY"]
    return environment


def case_arguments(scenario: str, case: Case) -> list[str]:
    # The last --permission-mode given wins.
    if case.follow_ups:
        return print_args("--input-format", "stream-json", *case.arguments)
    return [*print_args(*case.arguments), prompt_for(_model_scenario(scenario))]


def case_input(scenario: str, case: Case) -> str | None:
    """What the CLI reads on stdin: the prompts as stream-json user messages, if the case has them."""
    if not case.follow_ups:
        return None
    prompts = (prompt_for(_model_scenario(scenario)), *case.follow_ups)
    return "".join(
        json.dumps({"type": "user", "message": {"role": "user", "content": prompt}}) + "\n"
        for prompt in prompts
    )


def _model_scenario(scenario: str) -> str:
    """The model's scenario of a CLI case (the cases that fail before the model use `tools`)."""
    return scenario if scenario not in ("no_api_key", "unknown_flag") else "tools"


def record(
    scenario: str,
    scratch: Path,
    command_prefix: tuple[str, ...] = (),
    environment: dict[str, str] | None = None,
) -> Recorded:
    """Run the real CLI on one scenario (under `command_prefix`, e.g. `transcript-otel run --`,
    with `environment` added to the offline one)."""

    cli = cli_path()
    if cli is None:
        raise RuntimeError(f"no Claude Code CLI: run `make agents` or set {CLI_VARIABLE}")
    case = CASES[scenario]
    home, work = scratch_dirs(scratch)
    with model_server(_model_scenario(scenario), scratch) as model:
        command = [*command_prefix, str(cli), *case_arguments(scenario, case)]
        environment = {**case_environment(case, model, home), **(environment or {})}
        return run_cli(command, model, environment, work, case_input(scenario, case))


if __name__ == "__main__":
    record_main(record)
