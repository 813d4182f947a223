"""Record what the real Claude Code CLI prints on stdout when claude-agent-sdk drives it.

    .venv/bin/python tests/agents/record_sdk_stdout.py [SCENARIO]

Runs `claude_agent_sdk.query()` (the `tools` scenario by default) on the CLI `make agents`
installs, through a launcher that copies the CLI's stdout, and writes that copy to
`tests/fixtures/line_streams/claude-sdk-stdout.jsonl`, machine paths as `/scratch`. Its
first line is the CLI's `control_response` to the SDK's `initialize`: what
`transcript-otel run` sees when it wraps an SDK-driven CLI.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_code import CLAUDE_CODE_VERSION, ROOT, cli_at
from record_claude_fixtures import without_machine_paths

sys.path.insert(0, str(ROOT / "examples" / "model_servers"))
from claude_offline import model_server, offline_environment

FIXTURE = ROOT / "tests" / "fixtures" / "line_streams" / "claude-sdk-stdout.jsonl"


async def record(scenario: str, scratch: Path) -> str:
    from claude_agent_sdk import ClaudeAgentOptions, query

    home, work, copy = scratch / "home", scratch / "work", scratch / "stdout.jsonl"
    home.mkdir()
    work.mkdir()
    launcher = scratch / "claude"
    launcher.write_text(f'#!/bin/sh\nexec "{cli_at(CLAUDE_CODE_VERSION)}" "$@" | tee "{copy}"\n')
    launcher.chmod(0o755)
    with model_server(scenario, scratch) as model:
        options = ClaudeAgentOptions(
            cli_path=str(launcher),
            env=offline_environment(model, home),
            cwd=str(work),
            permission_mode="bypassPermissions",
        )
        async for _ in query(prompt=model.prompt, options=options):
            pass
    return copy.read_text()


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        stdout = asyncio.run(record(sys.argv[1] if len(sys.argv) > 1 else "tools", Path(scratch)))
        FIXTURE.write_text(without_machine_paths(stdout, Path(scratch)))
    print(f"{FIXTURE}: {len(stdout.splitlines())} lines")


if __name__ == "__main__":
    main()
