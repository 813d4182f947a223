"""A claude-agent-sdk agent, instrumented by one `configure()` call, on the real Claude Code CLI.

It calls the real `claude_agent_sdk.query()` (Python 3.11+), which runs the real Claude
Code CLI (the npm package `make agents` installs under `.agents/`, or `--cli PATH`).
Only the model is scripted: a local Anthropic Messages API
(`examples/model_servers/anthropic_api.py`) answers on loopback, so the run is offline.
By default the model has the agent launch two subagents in parallel, each with its own
Bash call. transcript-otel captures the transcript: spans and log records go to the
OTLP backend when OTEL_EXPORTER_OTLP_ENDPOINT is set, and every entry goes to the local
JSONL mirror, printed here in a human-readable form.

    python examples/claude_sdk_agent.py [--scenario parallel_subagents|tools|background_subagent|...]
                                        [--cli PATH] [--jsonl-dir DIR]

Without the `configure()` line, `opentelemetry-instrument python agent.py` instruments
it the same way.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

import transcript_otel
from demo_output import print_newest_run
from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor

EXAMPLES = Path(__file__).resolve().parent
sys.path.insert(0, str(EXAMPLES / "model_servers"))

from claude_offline import model_server, offline_environment  # noqa: E402
from claude_scenarios import SCENARIOS  # noqa: E402

INSTALLED_CLI = EXAMPLES.parent / ".agents" / "claude-code" / "node_modules" / ".bin" / "claude"
PROMPT_NAME = "claude-sdk-demo"


async def run_agent(cli: str, scenario: str, workdir: Path) -> list[Any]:
    from claude_agent_sdk import ClaudeAgentOptions, query

    home, work = workdir / "home", workdir / "work"
    home.mkdir()
    work.mkdir()
    # claude-agent-sdk 0.1 has no `cli_path`: it runs the `claude` it finds on PATH.
    located: dict[str, Any] = {}
    if "cli_path" in {field.name for field in dataclasses.fields(ClaudeAgentOptions)}:
        located["cli_path"] = cli
    else:
        os.environ["PATH"] = f"{Path(cli).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    with model_server(scenario, workdir) as model:
        options = ClaudeAgentOptions(
            **located,
            env=offline_environment(model, home),
            cwd=str(work),
            permission_mode="bypassPermissions",
        )
        return [message async for message in query(prompt=model.prompt, options=options)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="parallel_subagents", choices=sorted(SCENARIOS))
    parser.add_argument("--cli", default=os.environ.get("TRANSCRIPT_OTEL_CLAUDE_CLI", str(INSTALLED_CLI)))
    parser.add_argument("--jsonl-dir", help="where the JSONL mirror writes (default: the XDG state dir)")
    args = parser.parse_args()
    if not Path(args.cli).exists():
        print(f"no Claude Code CLI at {args.cli}: run `make agents` or pass --cli", file=sys.stderr)
        return 2

    # Naming the runs is optional (the default name is `claude-agent-sdk`); configure()
    # leaves an instrumentor that is already instrumented as it is.
    ClaudeAgentSdkInstrumentor().instrument(prompt_name=PROMPT_NAME)
    configuration = transcript_otel.configure(service_name="claude-sdk-demo", jsonl_dir=args.jsonl_dir)

    with tempfile.TemporaryDirectory(prefix="claude-sdk-demo-") as workdir:
        try:
            messages = asyncio.run(run_agent(args.cli, args.scenario, Path(workdir)))
            outcome = f"{len(messages)} messages, the last a {type(messages[-1]).__name__}"
        except Exception as exc:  # the demo shows a failed run's transcript too
            outcome = f"raised {type(exc).__name__}: {exc}"
    transcript_otel.flush()

    print(f"claude-agent-sdk query() on Claude Code {args.cli}: {outcome}\n")
    return print_newest_run(configuration, f"*_{PROMPT_NAME}_*.jsonl")


if __name__ == "__main__":
    sys.exit(main())
