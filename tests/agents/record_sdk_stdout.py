"""Record what the real Claude Code CLI prints on stdout when claude-agent-sdk drives it.

    .venv/bin/python tests/agents/record_sdk_stdout.py [NAME...]

Each recording of `RECORDINGS` runs claude-agent-sdk (`query()`, or a `ClaudeSDKClient` given
several prompts) on the CLI `make agents` installs, against the scripted model, through a
launcher that copies the CLI's stdout and keeps its exit status. It lands in
`tests/fixtures/claude_sdk/NAME.jsonl` (the stdout, machine paths as `/scratch`) and
`NAME.meta.json` (the CLI and SDK versions, the model's scenario, the prompts, the exit status
and what the model served); `replay_claude_cli.py` plays it back to the SDK as its CLI. The
`tools` recording is also `tests/fixtures/line_streams/claude-sdk-stdout.jsonl`: its first line
is the CLI's `control_response` to the SDK's `initialize`, what `transcript-otel run` sees when
it wraps an SDK-driven CLI. A recording that fails (the SDK raises where it should not, or
the CLI exits otherwise than its case says) is not written, and the script exits 1.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_code import CASES, CLAUDE_CODE_VERSION, ROOT, cli_at
from record_claude_fixtures import without_machine_paths
from recording import record_all

sys.path.insert(0, str(ROOT / "examples" / "model_servers"))
from claude_offline import model_server, offline_environment

FIXTURES = ROOT / "tests" / "fixtures" / "claude_sdk"
LINE_STREAM = ROOT / "tests" / "fixtures" / "line_streams" / "claude-sdk-stdout.jsonl"


@dataclass(frozen=True)
class Recording:
    """One SDK run: the model's scenario, the prompts after the scenario's own (each a turn of one
    `ClaudeSDKClient`; none: one `query()`)."""

    scenario: str
    follow_ups: tuple[str, ...] = ()


RECORDINGS: dict[str, Recording] = {
    # A text answer, nothing else.
    "plain": Recording("stream_json_input"),
    # Thinking, text and a Bash call, then the answer.
    "tools": Recording("tools"),
    # Two background subagents, a Bash call each, their notification turns.
    "parallel_subagents": Recording("parallel_subagents"),
    # An API error the CLI does not retry: an error result, exit status 1.
    "bad_request": Recording("bad_request"),
    # One client, two prompts: a turn each.
    "two_prompts": Recording("stream_json_input", ("And now?",)),
}


async def _drive(recording: Recording, options: Any, prompt: str) -> None:
    from claude_agent_sdk import ClaudeSDKClient, query

    if not recording.follow_ups:
        async for _ in query(prompt=prompt, options=options):
            pass
        return
    async with ClaudeSDKClient(options=options) as client:
        for said in (prompt, *recording.follow_ups):
            await client.query(said)
            async for _ in client.receive_response():
                pass


async def record(recording: Recording, scratch: Path) -> tuple[str, dict[str, Any]]:
    import claude_agent_sdk
    from claude_agent_sdk import ClaudeAgentOptions

    home, work, copy = scratch / "home", scratch / "work", scratch / "stdout.jsonl"
    home.mkdir()
    work.mkdir()
    launcher = scratch / "claude"
    launcher.write_text(
        "#!/bin/bash\n"
        f'"{cli_at(CLAUDE_CODE_VERSION)}" "$@" | tee "{copy}"\n'
        "status=${PIPESTATUS[0]}\n"
        f'echo "$status" > "{copy}.exit"\n'
        'exit "$status"\n'
    )
    launcher.chmod(0o755)
    expected = CASES[recording.scenario].exit_code
    with model_server(recording.scenario, scratch) as model:
        options = ClaudeAgentOptions(
            cli_path=str(launcher),
            env=offline_environment(model, home),
            cwd=str(work),
            permission_mode="bypassPermissions",
        )
        try:
            await _drive(recording, options, model.prompt)
        except Exception:
            if not expected:
                raise
        served = model.served()
    exit_code = int(Path(f"{copy}.exit").read_text())
    if exit_code != expected:
        raise RuntimeError(f"the CLI exited {exit_code}, expected {expected}")
    meta = {
        "claude_code": CLAUDE_CODE_VERSION,
        "claude_agent_sdk": claude_agent_sdk.__version__,
        "model_scenario": recording.scenario,
        "prompts": [model.prompt, *recording.follow_ups],
        "exit_code": exit_code,
        "served": served,
    }
    return copy.read_text(), meta


def record_one(name: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        stdout, meta = asyncio.run(record(RECORDINGS[name], Path(scratch)))
        stdout = without_machine_paths(stdout, Path(scratch))
    FIXTURES.mkdir(parents=True, exist_ok=True)
    target = FIXTURES / f"{name}.jsonl"
    target.write_text(stdout)
    target.with_suffix(".meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    if name == "tools":
        shutil.copyfile(target, LINE_STREAM)
    print(
        f"{target}: {len(stdout.splitlines())} lines, exit {meta['exit_code']}, {len(meta['served'])} served"
    )


def main(names: list[str]) -> None:
    record_all(names or list(RECORDINGS), record_one, "recordings")


if __name__ == "__main__":
    main(sys.argv[1:])
