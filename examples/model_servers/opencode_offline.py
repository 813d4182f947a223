"""The real OpenCode CLI run offline: the scripted chat completions API on loopback as a custom
`@ai-sdk/openai-compatible` provider, throwaway HOME and XDG folders, everything else off
(measured with OpenCode 1.18.33, see docs/gemini-opencode-notes.md).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path
from typing import Any

from chat_scenarios import prompt_for
from openai_chat import serve
from scripted_http import ModelServer, environment_without, running

API_KEY = "sk-scripted-model"
PROVIDER = "scripted"
MODEL = "scripted-chat"
# Dollars per million tokens: OpenCode computes each step's cost from these.
COST = {"input": 1.0, "output": 4.0, "cache_read": 0.1, "cache_write": 1.25}


def model_server(scenario: str, directory: Path) -> contextlib.AbstractContextManager[ModelServer]:
    """The scripted chat completions API serving `scenario`, in a thread of ours."""
    return running(serve, scenario, prompt_for(scenario), directory)


def config(model: ModelServer) -> dict[str, Any]:
    """`opencode.json`: the scripted provider and model (reasoning, tool calls, prices) selected
    for turns and titles, every tool allowed, no sharing, no auto-update, no LSP or formatters."""
    scripted_model = {
        "name": "Scripted chat",
        "reasoning": True,
        "tool_call": True,
        "temperature": True,
        "cost": COST,
        "limit": {"context": 200000, "output": 32000},
    }
    return {
        "$schema": "https://opencode.ai/config.json",
        "provider": {
            PROVIDER: {
                "npm": "@ai-sdk/openai-compatible",
                "name": "Scripted",
                "options": {"baseURL": model.url + "/v1", "apiKey": API_KEY},
                "models": {MODEL: scripted_model},
            }
        },
        "model": f"{PROVIDER}/{MODEL}",
        "small_model": f"{PROVIDER}/{MODEL}",
        "enabled_providers": [PROVIDER],
        "permission": {"bash": "allow", "edit": "allow", "webfetch": "deny"},
        "autoupdate": False,
        "share": "disabled",
        "lsp": False,
        "formatter": False,
    }


def xdg(home: Path) -> dict[str, str]:
    return {
        "XDG_CONFIG_HOME": str(home / ".config"),
        "XDG_DATA_HOME": str(home / ".local" / "share"),
        "XDG_CACHE_HOME": str(home / ".cache"),
        "XDG_STATE_HOME": str(home / ".local" / "state"),
    }


# OpenCode 1.18.33 installs `@opencode-ai/plugin` from the npm registry into each config folder
# in the background (`Npm.install`), unless the folder has `node_modules` and a lock file whose
# root dependencies hold it already: these files say so (nothing is installed; no plugin runs).
PLUGIN_PACKAGE = "@opencode-ai/plugin"
PLUGIN_VERSION = "1.18.33"


def write_config(home: Path, model: ModelServer) -> Path:
    """`$XDG_CONFIG_HOME/opencode/opencode.json`, and the files that keep OpenCode from
    installing its plugin package there."""
    folder = home / ".config" / "opencode"
    (folder / "node_modules").mkdir(parents=True, exist_ok=True)
    dependencies = {PLUGIN_PACKAGE: PLUGIN_VERSION}
    (folder / "package.json").write_text(json.dumps({"dependencies": dependencies}) + "\n")
    lock = {"lockfileVersion": 3, "packages": {"": {"dependencies": dependencies}}}
    (folder / "package-lock.json").write_text(json.dumps(lock) + "\n")
    path = folder / "opencode.json"
    path.write_text(json.dumps(config(model), indent=2) + "\n")
    return path


def offline_environment(model: ModelServer, home: Path, work: Path) -> dict[str, str]:
    """The environment that runs the real CLI in `work` against `model` with nothing else
    reachable. `PWD` is set: OpenCode takes its project folder from it, not from the cwd."""
    write_config(home, model)
    return environment_without(
        ("OPENCODE", "OPENAI_", "ANTHROPIC_", "GEMINI_", "GOOGLE_", "OTEL_", "TRANSCRIPT_OTEL_", "XDG_"),
        HOME=str(home),
        PWD=str(work),
        **xdg(home),
        OPENCODE_DISABLE_AUTOUPDATE="1",
        OPENCODE_DISABLE_MODELS_FETCH="1",
        OPENCODE_DISABLE_SHARE="1",
        OPENCODE_DISABLE_LSP_DOWNLOAD="1",
    )
