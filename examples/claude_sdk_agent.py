"""A claude-agent-sdk agent, instrumented by one `configure()` call.

It calls the real `claude_agent_sdk.query()` (Python 3.11+) with a scripted `claude`
CLI (`examples/fake_agents/fake_claude_stream.py`) standing in for Claude Code: by
default a turn in which two subagents run in parallel, each with its own tool call.
transcript-otel captures the transcript: spans and log records go to the OTLP
backend when OTEL_EXPORTER_OTLP_ENDPOINT is set, and every entry goes to the local
JSONL mirror, printed here in a human-readable form.

    python examples/claude_sdk_agent.py [--scenario parallel|tool|thinking|plain|error] [--jsonl-dir DIR]

Without the `configure()` line, `opentelemetry-instrument python agent.py` instruments
it the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import transcript_otel
from codex_agent import print_run, write_launcher
from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor

FAKE_CLAUDE = Path(__file__).resolve().parent / "fake_agents" / "fake_claude_stream.py"
SCENARIOS = ("parallel", "tool", "thinking", "plain", "error")
PROMPT_NAME = "claude-sdk-demo"


async def run_agent(cli: str, scenario: str) -> list[Any]:
    from claude_agent_sdk import ClaudeAgentOptions, query

    options = ClaudeAgentOptions(cli_path=cli, env={"FAKE_SCENARIO": scenario})
    return [
        message async for message in query(prompt="Count the files and read the README.", options=options)
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="parallel", choices=SCENARIOS)
    parser.add_argument("--jsonl-dir", help="where the JSONL mirror writes (default: the XDG state dir)")
    args = parser.parse_args()

    # Naming the runs is optional (the default name is `claude-agent-sdk`); configure()
    # leaves an instrumentor that is already instrumented as it is.
    ClaudeAgentSdkInstrumentor().instrument(prompt_name=PROMPT_NAME)
    configuration = transcript_otel.configure(service_name="claude-sdk-demo", jsonl_dir=args.jsonl_dir)

    with tempfile.TemporaryDirectory(prefix="claude-sdk-demo-") as workdir:
        cli = write_launcher(Path(workdir), "claude", FAKE_CLAUDE)
        try:
            messages = asyncio.run(run_agent(cli, args.scenario))
            outcome = f"{len(messages)} messages, the last a {type(messages[-1]).__name__}"
        except Exception as exc:  # the demo shows a failed run's transcript too
            outcome = f"raised {type(exc).__name__}: {exc}"
    transcript_otel.flush()

    print(f"claude-agent-sdk query(): {outcome}\n")
    directory = Path(configuration.jsonl_directory or ".")
    runs = sorted(directory.glob(f"*_{PROMPT_NAME}_*.jsonl"), key=lambda path: path.stat().st_mtime)
    if not runs:
        print(f"no transcript was written to {directory}", file=sys.stderr)
        return 1
    print_run(str(runs[-1]), configuration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
