"""The real Gemini CLI run offline: the scripted Gemini API on loopback, a throwaway HOME whose
`~/.gemini/settings.json` selects API-key auth and turns off telemetry, usage statistics,
auto-update and folder trust (measured with Gemini CLI 0.61.0, see docs/gemini-opencode-notes.md).
"""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

from chat_scenarios import prompt_for
from gemini_api import serve
from scripted_http import ModelServer, environment_without, running

API_KEY = "scripted-gemini-key"
SETTINGS = {
    "security": {"auth": {"selectedType": "gemini-api-key"}, "folderTrust": {"enabled": False}},
    "telemetry": {"enabled": False},
    "privacy": {"usageStatisticsEnabled": False},
    "general": {"enableAutoUpdate": False, "enableAutoUpdateNotification": False, "maxAttempts": 2},
}


def model_server(scenario: str, directory: Path) -> contextlib.AbstractContextManager[ModelServer]:
    """The scripted Gemini API serving `scenario`, in a thread of ours."""
    return running(serve, scenario, prompt_for(scenario), directory)


def write_settings(home: Path) -> Path:
    path = home / ".gemini" / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(SETTINGS, indent=2) + "\n")
    return path


def offline_environment(model: ModelServer, home: Path) -> dict[str, str]:
    """The environment that runs the real CLI against `model` with nothing else reachable."""
    write_settings(home)
    return environment_without(
        ("GEMINI_", "GOOGLE_", "OTEL_", "TRANSCRIPT_OTEL_", "XDG_"),
        HOME=str(home),
        XDG_CONFIG_HOME=str(home / ".config"),
        XDG_DATA_HOME=str(home / ".local" / "share"),
        XDG_CACHE_HOME=str(home / ".cache"),
        XDG_STATE_HOME=str(home / ".local" / "state"),
        GOOGLE_GEMINI_BASE_URL=model.url,
        GEMINI_API_KEY=API_KEY,
        GEMINI_TELEMETRY_ENABLED="false",
        GEMINI_CLI_TRUST_WORKSPACE="true",
        NO_BROWSER="true",
    )
