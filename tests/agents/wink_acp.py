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

import importlib
import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import chat_scenarios
import gemini_offline
import opencode_offline

OPENCODE_CLI = "WINK_DRIVER_OPENCODE_CLI"
GEMINI_CLI = "WINK_DRIVER_GEMINI_CLI"
MODULES = {
    "opencode_acp": "weakincentives.adapters.opencode_acp",
    "gemini_acp": "weakincentives.adapters.acp",
}
SCENARIOS = ("shell",)
# `gemini --acp` asks before running a shell command in its default mode; weakincentives'
# answer to `session/request_permission` fails (see docs/harnesses.md), so run it in YOLO mode.
GEMINI_ARGS = ("--acp", "--approval-mode", "yolo")
# OpenCode starts in a few seconds; Gemini CLI loads more.
STARTUP_TIMEOUT_S = 60.0


def _clean_start(
    cli: str, arguments: tuple[str, ...], environment: Mapping[str, str]
) -> tuple[str, tuple[str, ...]]:
    """`agent_bin`, `agent_args` that start `cli` with `environment` and nothing else."""
    return "/usr/bin/env", ("-i", *(f"{key}={value}" for key, value in environment.items()), cli, *arguments)


def _client_config(
    module: Any, cls: str, cli: str, arguments: tuple[str, ...], env: dict[str, str], cwd: Path
) -> Any:
    agent_bin, agent_args = _clean_start(cli, arguments, env)
    return getattr(module, cls)(
        agent_bin=agent_bin, agent_args=agent_args, cwd=str(cwd), startup_timeout_s=STARTUP_TIMEOUT_S
    )


def opencode_acp_adapter(scratch: Path, cwd: Path, scenario: str, context: Any) -> Any | None:
    module = importlib.import_module(MODULES["opencode_acp"])
    model = context.stack.enter_context(opencode_offline.model_server(scenario, scratch))
    context.served = model.served
    home = scratch / "home"
    home.mkdir()
    environment = opencode_offline.offline_environment(model, home, cwd)
    environment["TMPDIR"] = str(scratch)
    config = _client_config(
        module, "OpenCodeACPClientConfig", os.environ[OPENCODE_CLI], ("acp",), environment, cwd
    )
    return module.OpenCodeACPAdapter(client_config=config)


def gemini_acp_adapter(scratch: Path, cwd: Path, scenario: str, context: Any) -> Any | None:
    module = importlib.import_module(MODULES["gemini_acp"])
    model = context.stack.enter_context(gemini_offline.model_server(scenario, scratch))
    context.served = model.served
    home = scratch / "home"
    home.mkdir()
    environment = gemini_offline.offline_environment(model, home)
    # Gemini CLI relaunches itself in a child node process and exits: weakincentives would then
    # wait for ever on the agent it started (measured with 0.61.0). This keeps it one process.
    environment.update(TMPDIR=str(scratch), PWD=str(cwd), GEMINI_CLI_NO_RELAUNCH="true")
    config = _client_config(module, "ACPClientConfig", os.environ[GEMINI_CLI], GEMINI_ARGS, environment, cwd)
    return module.ACPAdapter(client_config=config)


ADAPTERS: dict[str, Callable[[Path, Path, str, Any], Any | None]] = {
    "opencode_acp": opencode_acp_adapter,
    "gemini_acp": gemini_acp_adapter,
}


def prompt_text(scenario: str) -> str:
    """The text that selects the scripted model's conversation."""
    return chat_scenarios.prompt_for(scenario)
