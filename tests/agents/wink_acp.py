"""The ACP adapters of weakincentives (0.26+) on the real ACP agents, for `wink_driver.py`.

`OpenCodeACPAdapter` runs `opencode acp` and `ACPAdapter` runs `gemini --acp`, each offline
against its scripted model (`examples/model_servers`, served in the driver's process) in the
environment `opencode_offline.py`/`gemini_offline.py` make (throwaway HOME and XDG folders,
OpenCode's config-folder guard files, `PWD`, `TMPDIR`). weakincentives starts the agent with
its own environment plus `ACPClientConfig.env`, so the agent is started through `env -i` with
the offline environment alone: nothing of the driver's (its OTLP endpoint, our settings) leaks
in. WINK never sends `authenticate`: Gemini CLI's `session/new` authenticates by itself, as
its settings (`security.auth.selectedType: gemini-api-key`) select (docs/harnesses.md).
"""

from __future__ import annotations

import functools
import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import chat_scenarios
import gemini_offline
import opencode_offline
from scripted_http import ModelServer

OPENCODE_CLI = "WINK_DRIVER_OPENCODE_CLI"
GEMINI_CLI = "WINK_DRIVER_GEMINI_CLI"
MODULES = {
    "opencode_acp": "weakincentives.adapters.opencode_acp",
    "gemini_acp": "weakincentives.adapters.acp",
}
# Per agent: its client config and adapter classes, the variable naming its CLI, its arguments.
AGENTS = {
    "opencode_acp": ("OpenCodeACPClientConfig", "OpenCodeACPAdapter", OPENCODE_CLI, ("acp",)),
    # `gemini --acp` asks before running a shell command in its default mode; weakincentives'
    # answer to `session/request_permission` fails (docs/harnesses.md), so YOLO mode.
    "gemini_acp": ("ACPClientConfig", "ACPAdapter", GEMINI_CLI, ("--acp", "--approval-mode", "yolo")),
}
# `continued`: `shell`, then, as the prompt's task completion checker asks once (0.27's
# continuation loop; 0.26 has none), a second `session/prompt` in the same session.
SCENARIOS = {"opencode_acp": ("shell", "continued"), "gemini_acp": ("shell",)}
CONTINUED = "continued"
FEEDBACK = "scripted-shell: count the lines of data.txt once more."
# OpenCode starts in a few seconds; Gemini CLI loads more.
STARTUP_TIMEOUT_S = 60.0


def _clean_start(
    cli: str, arguments: tuple[str, ...], environment: Mapping[str, str]
) -> tuple[str, tuple[str, ...]]:
    """`agent_bin`, `agent_args` that start `cli` with `environment` and nothing else."""
    return "/usr/bin/env", ("-i", *(f"{key}={value}" for key, value in environment.items()), cli, *arguments)


def _environment(agent: str, model: ModelServer, home: Path, cwd: Path) -> dict[str, str]:
    if agent == "opencode_acp":
        return opencode_offline.offline_environment(model, home, cwd)
    # Gemini CLI 0.61.0 relaunches itself in a child node process, and the process
    # weakincentives started exits: runs hung after the answer (docs/harnesses.md). One process.
    environment = gemini_offline.offline_environment(model, home)
    return {**environment, "PWD": str(cwd), "GEMINI_CLI_NO_RELAUNCH": "true"}


def acp_adapter(agent: str, scratch: Path, cwd: Path, scenario: str, context: Any) -> Any:
    """`agent`'s adapter on its real CLI, whose scripted model serves `scenario` (held open by
    `context`, which gets what it served)."""
    config_class, adapter_class, cli_variable, arguments = AGENTS[agent]
    offline = opencode_offline if agent == "opencode_acp" else gemini_offline
    model = context.stack.enter_context(offline.model_server(model_scenario(scenario), scratch))
    context.served = model.served
    home = scratch / "home"
    home.mkdir()
    environment = {**_environment(agent, model, home, cwd), "TMPDIR": str(scratch)}
    agent_bin, agent_args = _clean_start(os.environ[cli_variable], arguments, environment)
    module = importlib.import_module(MODULES[agent])
    config = getattr(module, config_class)(
        agent_bin=agent_bin, agent_args=agent_args, cwd=str(cwd), startup_timeout_s=STARTUP_TIMEOUT_S
    )
    return getattr(module, adapter_class)(client_config=config)


ADAPTERS: dict[str, Callable[[Path, Path, str, Any], Any | None]] = {
    agent: functools.partial(acp_adapter, agent) for agent in AGENTS
}


def model_scenario(scenario: str) -> str:
    """The scripted model's scenario a run serves (`continued` is `shell` asked twice: the
    model answers a step past its last with the last)."""
    return "shell" if scenario == CONTINUED else scenario


def prompt_text(scenario: str) -> str:
    """The text that selects the scripted model's conversation."""
    return chat_scenarios.prompt_for(model_scenario(scenario))


class AsksOnce:
    """A weakincentives task completion checker: not done the first time (its feedback is the
    next prompt), done after."""

    def __init__(self) -> None:
        self.asked = False

    def check(self, context: Any) -> Any:
        result = importlib.import_module("weakincentives.prompt.task_completion").TaskCompletionResult
        if self.asked:
            return result(complete=True)
        self.asked = True
        return result(complete=False, feedback=FEEDBACK)


def task_completion_checker(scenario: str) -> AsksOnce | None:
    return AsksOnce() if scenario == CONTINUED else None
