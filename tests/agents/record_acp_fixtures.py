"""Record what the real ACP agents tell weakincentives' ACP client, for the mapping tests.

    .venvs/wink-0.27.0/bin/python tests/agents/record_acp_fixtures.py [--out tests/fixtures/acp]

Runs `OpenCodeACPAdapter` on `opencode acp` and `ACPAdapter` on `gemini --acp` (the installed
CLIs, `make agents`) through `evaluate()`, offline as `wink_acp.py` starts them, on the
scripted model's `shell` (a command, then the answer) and `thinking` (a thought, then the
answer) scenarios, and writes `<agent>-<scenario>.json` for each: the answers to
`initialize`, `session/new` and `session/prompt` and every `session/update` (as JSON, the way
the agent sent them; `available_commands_update` left out: long, and nothing reads it).
Nothing of transcript-otel is loaded. What the model served is `chat_scenarios.SCENARIOS`.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import importlib
import itertools
import json
import os
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
sys.path[:0] = [str(HERE), str(REPO / "examples"), str(REPO / "examples" / "model_servers")]

import wink_acp  # noqa: E402

import codex_agent  # noqa: E402

CLIS = {
    wink_acp.OPENCODE_CLI: REPO / ".agents" / "opencode" / "node_modules" / ".bin" / "opencode",
    wink_acp.GEMINI_CLI: REPO / ".agents" / "gemini-cli" / "node_modules" / ".bin" / "gemini",
}
ANSWERS = ("initialize", "new_session", "prompt")
SKIPPED_UPDATE = "available_commands_update"
SCENARIOS = ("shell", "thinking")


@dataclasses.dataclass
class Context:
    stack: contextlib.ExitStack
    served: Callable[[], list[dict[str, Any]]] | None = None


def _as_json(message: Any) -> Any:
    return message.model_dump(by_alias=True, exclude_none=True)


# The record of the run being made: where the patches below write.
_recording: dict[str, Any] = {}


def _listen() -> None:
    """Keep every answer and update the client gets in `_recording` (patched once)."""
    # Imported by name: neither is in the dev venv, where mypy checks this file.
    connection = importlib.import_module("acp.client.connection").ClientSideConnection
    client = importlib.import_module("weakincentives.adapters.acp.client").ACPClient

    for name in ANSWERS:
        original = getattr(connection, name)

        def answered(original: Callable[..., Any] = original, name: str = name) -> Callable[..., Any]:
            async def call(self: Any, *args: Any, **kwargs: Any) -> Any:
                answer = await original(self, *args, **kwargs)
                _recording["answers"][name] = _as_json(answer)
                return answer

            return call

        setattr(connection, name, answered())
    update_original = client.session_update

    async def session_update(self: Any, session_id: str, update: Any, **kwargs: Any) -> None:
        message = _as_json(update)
        if message.get("sessionUpdate") != SKIPPED_UPDATE:
            _recording["updates"].append(message)
        await update_original(self, session_id, update, **kwargs)

    client.session_update = session_update


def record(agent: str, scenario: str, work: Path) -> dict[str, Any]:
    session = importlib.import_module("weakincentives.runtime").Session

    _recording.clear()
    _recording.update(agent=agent, scenario=scenario, answers={}, updates=[])
    context = Context(contextlib.ExitStack())
    with context.stack:
        scratch = Path(tempfile.mkdtemp(prefix=f"{agent}-", dir=work))
        cwd = scratch / "workspace"
        cwd.mkdir()
        adapter = wink_acp.acp_adapter(agent, scratch, cwd, scenario, context)
        prompt = codex_agent.build_prompt(f"{agent}-{scenario}", wink_acp.prompt_text(scenario))
        adapter.evaluate(prompt, session=session())
    return dict(_recording)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--out", type=Path, default=REPO / "tests" / "fixtures" / "acp")
    args = parser.parse_args(argv)
    for variable, cli in CLIS.items():
        if not cli.exists():
            print(f"{cli} is not installed (`make agents`)", file=sys.stderr)
            return 2
        os.environ[variable] = str(cli)
    args.out.mkdir(parents=True, exist_ok=True)
    _listen()
    with tempfile.TemporaryDirectory(prefix="record-acp-") as tmp:
        for agent, scenario in itertools.product(wink_acp.AGENTS, SCENARIOS):
            recorded = record(agent, scenario, Path(tmp))
            path = args.out / f"{agent}-{scenario}.json"
            path.write_text(json.dumps(recorded, indent=1) + "\n")
            print(f"{path}: {len(recorded['updates'])} updates", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
