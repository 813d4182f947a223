"""Run the real weakincentives adapters against the scripted fake agents.

Usage (under a Python 3.13 venv that has ``weakincentives[claude-agent-sdk]``, or
``weakincentives[openai,litellm]`` for the chat adapters of 0.18 to 0.24)::

    <venv>/bin/python tests/agents/wink_driver.py --out RESULTS.jsonl \\
        [--configure] [--adapter codex|claude|agentic|openai|litellm|chat] [--scenarios plain,rich,...]

For every applicable (adapter, scenario) the driver builds a prompt named
``<adapter>-<scenario>`` (namespace ``demo``) with one WINK tool ``echo``,
evaluates it with a fresh ``Session()`` through the adapter's public
``evaluate()``, and appends one JSON line to ``--out``::

    {"adapter", "scenario", "prompt_name", "session_id", "ok", "text",
     "error_type", "error", "seconds", "wink_version"}

The fakes (fake_codex.py, fake_claude.py) are started through small ``/bin/sh``
wrappers that exec them with this interpreter; the scenario reaches them
through ``FAKE_SCENARIO`` in the environment. Where ``WINK_DRIVER_CODEX_CLI`` names
the real Codex CLI, the Codex adapter runs it instead, offline against the scripted
Responses API (``examples/model_servers``), on that model's scenarios; each record
then also holds ``served`` (what the model answered), and with
``WINK_DRIVER_CODEX_RECORD=DIR`` the app-server's stdout is kept as
``DIR/<scenario>.jsonl``. The OpenAI and LiteLLM adapters
talk, through the real ``openai`` and ``litellm`` clients, to a scripted server
(fake_chat_server.py) in this process, which reads the scenario from the model
name. No network, no API keys.

weakincentives is imported with importlib (it is absent from the repo's dev
venv, where mypy checks this file), and its API is feature-detected.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import faulthandler
import importlib
import importlib.metadata
import json
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

HERE = Path(__file__).resolve().parent
FAKE_AGENTS = HERE.parent.parent / "examples" / "fake_agents"
MODEL_SERVERS = FAKE_AGENTS.parent / "model_servers"
sys.path[:0] = [str(FAKE_AGENTS.parent), str(FAKE_AGENTS), str(MODEL_SERVERS), str(HERE)]
import wink_acp  # noqa: E402
from codex_offline import model_server, offline_environment, write_codex_home  # noqa: E402
from codex_scenarios import APP_SERVER_SCENARIOS, MODEL, UNKNOWN_MODEL, prompt_for  # noqa: E402
from fake_chat_server import ScriptedChatServer  # noqa: E402

import codex_agent  # noqa: E402  (the demo's prompt with the WINK tool `echo`, and its launcher)
from codex_agent import write_launcher  # noqa: E402

REAL_CLAUDE_CLI = "WINK_DRIVER_CLAUDE_CLI"
REAL_CODEX_CLI = "WINK_DRIVER_CODEX_CLI"
CODEX_RECORD_DIR = "WINK_DRIVER_CODEX_RECORD"
# The scripted model's scenarios the real Codex app-server runs (codex_scenarios.SCENARIOS);
# `subagent` with `multi_agent_v2` on, as `codex exec -c features.multi_agent_v2=true` runs it.
REAL_CODEX_SCENARIOS = (*APP_SERVER_SCENARIOS, "subagent")
FAKES = {"codex": FAKE_AGENTS / "fake_codex.py", "claude": FAKE_AGENTS / "fake_claude.py"}
MODULES = {
    "codex": "weakincentives.adapters.codex_app_server",  # 0.25+
    "claude": "weakincentives.adapters.claude_agent_sdk",
    "openai": "weakincentives.adapters.openai",  # 0.18 to 0.24
    "litellm": "weakincentives.adapters.litellm",  # 0.18 to 0.24
    **wink_acp.MODULES,  # 0.26+, on the real `opencode acp` and `gemini --acp`
}
CHAT_SCENARIOS = ("text", "tool", "parallel", "error")
SCENARIOS = {
    "codex": REAL_CODEX_SCENARIOS if os.environ.get(REAL_CODEX_CLI) else ("plain", "rich", "failed"),
    "claude": ("plain", "rich", "error"),
    "openai": CHAT_SCENARIOS,
    "litellm": CHAT_SCENARIOS,
    **wink_acp.SCENARIOS,
}
GROUPS = {"agentic": ("codex", "claude"), "chat": ("openai", "litellm"), "acp": tuple(wink_acp.ADAPTERS)}
CHAT_SERVER_URL = "FAKE_CHAT_BASE_URL"
# Per-scenario limits: the adapter's own deadline, then a hard stop for the process.
DEADLINE_S = 30.0
HARD_LIMIT_S = 60.0


@dataclasses.dataclass
class RunContext:
    """What one scenario's run holds open (a scripted model) and what it served."""

    stack: contextlib.ExitStack
    served: Callable[[], list[dict[str, Any]]] | None = None


def _module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


def _require(name: str) -> ModuleType:
    return importlib.import_module(name)


def _accepts(cls: Any, field: str) -> bool:
    return dataclasses.is_dataclass(cls) and field in {f.name for f in dataclasses.fields(cls)}


def build_prompt(adapter: str, scenario: str) -> Any:
    if adapter == "codex" and os.environ.get(REAL_CODEX_CLI):
        task = prompt_for(scenario)  # selects the scripted model's scenario
    elif adapter in wink_acp.ADAPTERS:
        checker = wink_acp.task_completion_checker(scenario)
        return codex_agent.build_prompt(f"{adapter}-{scenario}", wink_acp.prompt_text(scenario), checker)
    else:
        task = f"Scenario {scenario}: call the echo tool with the text 'hi', then reply."
    return codex_agent.build_prompt(f"{adapter}-{scenario}", task)


def codex_adapter(wrapper_dir: Path, cwd: Path, scenario: str, context: RunContext) -> Any | None:
    codex = _module(MODULES["codex"])
    if codex is None:
        return None
    real_cli = os.environ.get(REAL_CODEX_CLI)
    if not real_cli:
        config = codex.CodexAppServerClientConfig(
            codex_bin=write_launcher(wrapper_dir, "codex", FAKES["codex"]), cwd=str(cwd)
        )
        return codex.CodexAppServerAdapter(client_config=config)
    model = context.stack.enter_context(model_server(scenario, wrapper_dir))
    context.served = model.served
    slug = UNKNOWN_MODEL if scenario == "unknown_model" else MODEL
    features = ("multi_agent_v2",) if scenario == "subagent" else ()
    codex_home = write_codex_home(wrapper_dir / "codex-home", model, slug, features)
    home = wrapper_dir / "home"
    home.mkdir()
    environment = offline_environment(codex_home, home)
    wanted = ("HOME", "CODEX_HOME", *(key for key in environment if key.startswith("SCRIPTED_")))
    config = codex.CodexAppServerClientConfig(
        codex_bin=_recording(wrapper_dir, real_cli, scenario),
        cwd=str(cwd),
        env={key: environment[key] for key in wanted},
    )
    return codex.CodexAppServerAdapter(
        model_config=codex.CodexAppServerModelConfig(model=slug), client_config=config
    )


def _recording(wrapper_dir: Path, cli: str, scenario: str) -> str:
    """The CLI, or where `WINK_DRIVER_CODEX_RECORD` asks, a launcher that keeps its stdout."""
    record_dir = os.environ.get(CODEX_RECORD_DIR)
    if not record_dir:
        return cli
    kept = Path(record_dir) / f"{scenario}.jsonl"
    launcher = wrapper_dir / "codex-recording"
    launcher.write_text(f'#!/bin/bash\n"{cli}" "$@" | tee "{kept}"\n')
    launcher.chmod(0o755)
    return str(launcher)


def claude_adapter(wrapper_dir: Path, cwd: Path, scenario: str, context: RunContext) -> Any | None:
    claude = _module(MODULES["claude"])
    if claude is None:
        return None
    # The real Claude Code CLI where the tests name one (it talks to their scripted model).
    cli = os.environ.get(REAL_CLAUDE_CLI) or write_launcher(wrapper_dir, "claude", FAKES["claude"])
    # claude-agent-sdk has no environment variable for the CLI path and
    # weakincentives never sets ClaudeAgentOptions.cli_path, so point the SDK's
    # CLI discovery (bundled binary, then PATH) at the fake.
    transport = _require("claude_agent_sdk._internal.transport.subprocess_cli").SubprocessCLITransport

    def find_cli(self: Any) -> str:
        return cli

    transport._find_cli = find_cli

    kwargs: dict[str, Any] = {"cwd": str(cwd)}
    collector_cls = getattr(claude, "TranscriptCollectorConfig", None)
    if collector_cls is not None and _accepts(claude.ClaudeAgentSDKClientConfig, "transcript_collection"):
        kwargs["transcript_collection"] = collector_cls(poll_interval=0.05, subagent_discovery_interval=0.05)
    return claude.ClaudeAgentSDKAdapter(client_config=claude.ClaudeAgentSDKClientConfig(**kwargs))


def openai_adapter(wrapper_dir: Path, cwd: Path, scenario: str, context: RunContext) -> Any | None:
    openai = _module(MODULES["openai"])
    if openai is None:
        return None
    config = _require("weakincentives.adapters.config").OpenAIClientConfig(
        api_key="test-key", base_url=os.environ[CHAT_SERVER_URL], max_retries=0
    )
    return openai.OpenAIAdapter(model=f"fake-{scenario}", client_config=config)


def litellm_adapter(wrapper_dir: Path, cwd: Path, scenario: str, context: RunContext) -> Any | None:
    litellm = _module(MODULES["litellm"])
    if litellm is None:
        return None
    config = _require("weakincentives.adapters.config").LiteLLMClientConfig(
        api_key="test-key", api_base=os.environ[CHAT_SERVER_URL], num_retries=0
    )
    return litellm.LiteLLMAdapter(model=f"openai/fake-{scenario}", completion_config=config)


ADAPTERS: dict[str, Callable[[Path, Path, str, RunContext], Any | None]] = {
    "codex": codex_adapter,
    "claude": claude_adapter,
    "openai": openai_adapter,
    "litellm": litellm_adapter,
    **wink_acp.ADAPTERS,
}


def deadline() -> Any | None:
    deadlines = _module("weakincentives.deadlines")
    if deadlines is None:
        return None
    return deadlines.Deadline(expires_at=datetime.now(UTC) + timedelta(seconds=DEADLINE_S))


def run_one(adapter_name: str, scenario: str, work: Path, version: str) -> dict[str, Any]:
    session_cls: Any = _require("weakincentives.runtime").Session
    prompt_name = f"{adapter_name}-{scenario}"
    record: dict[str, Any] = {
        "adapter": adapter_name,
        "scenario": scenario,
        "prompt_name": prompt_name,
        "session_id": None,
        "ok": False,
        "text": None,
        "error_type": None,
        "error": None,
        "seconds": 0.0,
        "wink_version": version,
    }
    start = time.monotonic()
    faulthandler.dump_traceback_later(HARD_LIMIT_S, exit=True)
    context = RunContext(contextlib.ExitStack())
    try:
        scratch = Path(tempfile.mkdtemp(prefix=f"{prompt_name}-", dir=work))
        cwd = scratch / "workspace"
        cwd.mkdir()
        adapter = ADAPTERS[adapter_name](scratch, cwd, scenario, context)
        if adapter is None:
            raise RuntimeError(f"the {adapter_name} adapter is not available in weakincentives {version}")
        os.environ["FAKE_SCENARIO"] = scenario
        session = session_cls()
        record["session_id"] = str(session.session_id)
        response = adapter.evaluate(
            build_prompt(adapter_name, scenario), session=session, deadline=deadline()
        )
        record["ok"] = True
        record["text"] = response.text
    except Exception as exc:
        record["error_type"] = type(exc).__name__
        record["error"] = str(exc)
    finally:
        faulthandler.cancel_dump_traceback_later()
        record["seconds"] = round(time.monotonic() - start, 3)
        if context.served is not None:
            record["served"] = context.served()
        context.stack.close()
    return record


class NativeTranscript(logging.Handler):
    """weakincentives' own transcript entries (0.26+) as its emitter logs them: a JSON line each."""

    def __init__(self, path: Path) -> None:
        super().__init__(logging.DEBUG)
        self._out = path.open("a", encoding="utf-8")

    def emit(self, record: logging.LogRecord) -> None:
        if getattr(record, "event", None) == "transcript.entry":
            self._out.write(json.dumps(getattr(record, "context", None)) + "\n")
            self._out.flush()


def capture_native_transcript(path: Path) -> None:
    """Keep what weakincentives' emitter logs at DEBUG, and only here (not propagated)."""
    logger = logging.getLogger("weakincentives.runtime.transcript")
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    logger.addHandler(NativeTranscript(path))


def available(adapter_name: str) -> bool:
    return _module(MODULES[adapter_name]) is not None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", required=True, type=Path, help="JSONL file to append results to")
    parser.add_argument("--configure", action="store_true", help="call transcript_otel.configure() first")
    parser.add_argument("--adapter", choices=(*SCENARIOS, *GROUPS), default="agentic")
    parser.add_argument("--scenarios", default="", help="comma-separated subset (default: all)")
    parser.add_argument("--native-transcript", type=Path, help="JSONL file for weakincentives' own entries")
    args = parser.parse_args(argv)

    if args.native_transcript is not None:
        capture_native_transcript(args.native_transcript)

    if args.configure:
        _require("transcript_otel").configure()

    version = importlib.metadata.version("weakincentives")
    wanted = [s for s in args.scenarios.split(",") if s]
    known = {s for names in SCENARIOS.values() for s in names}
    unknown = sorted(set(wanted) - known)
    if unknown:
        parser.error(f"unknown scenarios {unknown}; known: {sorted(known)}")

    adapters = list(GROUPS.get(args.adapter, (args.adapter,)))
    plan: list[tuple[str, str]] = []
    for name in adapters:
        if not available(name):
            if args.adapter not in GROUPS:
                print(f"wink_driver: the {name} adapter is not in weakincentives {version}", file=sys.stderr)
                return 2
            print(f"wink_driver: skipping {name} (not in weakincentives {version})", file=sys.stderr)
            continue
        plan.extend((name, s) for s in SCENARIOS[name] if not wanted or s in wanted)

    args.out.parent.mkdir(parents=True, exist_ok=True)
    # litellm would fetch its model price list from the network at import.
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    with (
        tempfile.TemporaryDirectory(prefix="wink-driver-") as tmp,
        args.out.open("a", encoding="utf-8") as out,
        ScriptedChatServer() as chat_server,
    ):
        os.environ[CHAT_SERVER_URL] = chat_server.base_url
        for adapter_name, scenario in plan:
            record = run_one(adapter_name, scenario, Path(tmp), version)
            out.write(json.dumps(record) + "\n")
            out.flush()
            status = "ok" if record["ok"] else f"{record['error_type']}: {record['error']}"
            print(f"{adapter_name}-{scenario}: {status} ({record['seconds']} s)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
