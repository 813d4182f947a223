"""The real Claude Code CLI run offline: the scripted model on loopback, the settings that keep
the CLI from reaching anything else (measured with Claude Code 2.1.332, see
shared reference real-agents.md and docs/harnesses.md).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from anthropic_api import serve
from claude_scenarios import prompt_for
from scripted_http import ModelServer, environment_without, running

API_KEY = "sk-ant-scripted-model"


def model_server(scenario: str, directory: Path) -> contextlib.AbstractContextManager[ModelServer]:
    """The scripted Anthropic Messages API serving `scenario`, in a thread of ours."""
    return running(serve, scenario, prompt_for(scenario), directory)


def offline_environment(model: ModelServer, home: Path) -> dict[str, str]:
    """The environment that runs the real CLI against `model` with nothing else reachable."""
    return environment_without(
        ("ANTHROPIC_", "CLAUDE", "OTEL_", "TRANSCRIPT_OTEL_"),
        HOME=str(home),
        ANTHROPIC_BASE_URL=model.url,
        ANTHROPIC_API_KEY=API_KEY,
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        IS_SANDBOX="1",  # as root the CLI refuses bypassPermissions without it
    )
