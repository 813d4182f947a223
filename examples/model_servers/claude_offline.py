"""The real Claude Code CLI run offline: the scripted model on loopback, the settings that keep
the CLI from reaching anything else (measured with Claude Code 2.1.332, see
shared reference real-agents.md and docs/harnesses.md).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anthropic_api import serve
from claude_scenarios import prompt_for


@dataclass
class ModelServer:
    """A scripted model serving one scenario; `served()` is what it answered, in order."""

    scenario: str
    url: str
    log_path: Path

    def served(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]

    @property
    def prompt(self) -> str:
        return prompt_for(self.scenario)


@contextlib.contextmanager
def model_server(scenario: str, directory: Path) -> Iterator[ModelServer]:
    log_path = directory / f"served-{scenario}.jsonl"
    server = serve(scenario, 0, log_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ModelServer(scenario, f"http://127.0.0.1:{server.server_address[1]}", log_path)
    finally:
        server.shutdown()
        server.server_close()


def offline_environment(model: ModelServer, home: Path) -> dict[str, str]:
    """The environment that runs the real CLI against `model` with nothing else reachable."""
    environment = {
        key: value
        for key, value in os.environ.items()
        if not key.startswith(("ANTHROPIC_", "CLAUDE", "OTEL_", "TRANSCRIPT_OTEL_"))
    }
    environment.update(
        HOME=str(home),
        ANTHROPIC_BASE_URL=model.url,
        ANTHROPIC_API_KEY="sk-ant-scripted-model",
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1",
        DISABLE_TELEMETRY="1",
        DISABLE_AUTOUPDATER="1",
        DISABLE_ERROR_REPORTING="1",
        IS_SANDBOX="1",  # as root the CLI refuses bypassPermissions without it
    )
    return environment
