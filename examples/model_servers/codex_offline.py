"""The real Codex CLI run offline: the scripted Responses API on loopback, and a throwaway
`CODEX_HOME` whose `config.toml` makes it the model provider (measured with Codex 0.171.0,
see shared reference real-agents.md and docs/harnesses.md).
"""

from __future__ import annotations

import contextlib
import json
import sys
from pathlib import Path

from codex_scenarios import MODEL, prompt_for
from openai_responses import serve
from scripted_http import ModelServer, environment_without, running

# The provider's key variable (`env_key`): codex sends its value as the bearer token.
API_KEY_VARIABLE = "SCRIPTED_MODEL_API_KEY"
MCP_SERVER = Path(__file__).resolve().parent / "mcp_docs_server.py"


def model_server(scenario: str, directory: Path) -> contextlib.AbstractContextManager[ModelServer]:
    """The scripted Responses API serving `scenario`, in a thread of ours."""
    return running(serve, scenario, prompt_for(scenario), directory)


def _toml(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string


def write_codex_home(
    codex_home: Path, model: ModelServer, model_slug: str = MODEL, features: tuple[str, ...] = ()
) -> Path:
    """A `CODEX_HOME` whose config selects the scripted provider, never asks for approval, does
    not sandbox commands, retries a failed request or stream once, and offers the stdlib MCP
    server `docs`; `features`: those turned on (`multi_agent_v2`: the subagent tools)."""
    codex_home.mkdir(parents=True, exist_ok=True)
    turned_on = "".join(f"{feature} = true\n" for feature in features)
    config = f"""\
model = {_toml(model_slug)}
model_provider = "scripted"
approval_policy = "never"
sandbox_mode = "danger-full-access"

[model_providers.scripted]
name = "scripted"
base_url = {_toml(model.url + "/v1")}
wire_api = "responses"
env_key = {_toml(API_KEY_VARIABLE)}
request_max_retries = 1
stream_max_retries = 1
stream_idle_timeout_ms = 20000

[mcp_servers.docs]
command = {_toml(sys.executable)}
args = [{_toml(str(MCP_SERVER))}]
""" + (f"\n[features]\n{turned_on}" if features else "")
    (codex_home / "config.toml").write_text(config)
    return codex_home


def offline_environment(codex_home: Path, home: Path) -> dict[str, str]:
    """The environment that runs the real CLI with `codex_home`'s provider and nothing else reachable."""
    return environment_without(
        ("OPENAI_", "CODEX_", "OTEL_", "TRANSCRIPT_OTEL_"),
        HOME=str(home),
        CODEX_HOME=str(codex_home),
        **{API_KEY_VARIABLE: "sk-scripted-model"},
    )
