"""A real weakincentives Codex agent on the real Codex CLI, instrumented by one `configure()` call.

It runs `CodexAppServerAdapter.evaluate()` (weakincentives 0.25 to 0.27, Python 3.13) on
the real `codex app-server` (the npm package `make agents` installs under `.agents/`, or
`--cli PATH`). Only the model is scripted: a Responses API on loopback
(`examples/model_servers/openai_responses.py`) whose `demo` scenario has Codex reason,
call the bridged WINK tool `echo`, run two commands (one fails), apply a patch, call an
MCP tool (`examples/model_servers/mcp_docs_server.py`), search the web and answer, so
the run is offline. transcript-otel captures the transcript: spans and log records go to
the OTLP backend when OTEL_EXPORTER_OTLP_ENDPOINT is set, and every entry goes to the
local JSONL mirror, printed here as `transcript-otel show` prints it.

    python examples/codex_agent.py [--scenario demo|plain|fatal_500|...] [--cli PATH] [--jsonl-dir DIR]

The same agent without the `configure()` line, run as
`opentelemetry-instrument python agent.py`, is instrumented the same way.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import shlex
import sys
import tempfile
from pathlib import Path
from typing import Any

import transcript_otel
from demo_output import print_newest_run

EXAMPLES = Path(__file__).resolve().parent
sys.path.insert(0, str(EXAMPLES / "model_servers"))

from codex_offline import model_server, offline_environment, write_codex_home  # noqa: E402
from codex_scenarios import MODEL, SCENARIOS  # noqa: E402
from scripted_http import ModelServer  # noqa: E402

INSTALLED_CLI = EXAMPLES.parent / ".agents" / "codex" / "node_modules" / ".bin" / "codex"


@dataclasses.dataclass(slots=True, frozen=True)
class EchoParams:
    text: str


@dataclasses.dataclass(slots=True, frozen=True)
class EchoResult:
    text: str

    def render(self) -> str:
        return self.text


def build_prompt(name: str, task: str, task_completion_checker: Any = None) -> Any:
    """A prompt `demo:<name>` whose one section offers the WINK tool `echo` (and, where given,
    whose `task_completion_checker` (weakincentives 0.26+) may send the agent on)."""
    from weakincentives.prompt import MarkdownSection, Prompt, PromptTemplate, Tool, ToolResult

    def echo(params: EchoParams, *, context: Any) -> Any:
        return ToolResult.ok(EchoResult(text=params.text), message=params.text)

    echo_tool = Tool[EchoParams, EchoResult](
        name="echo", description="Echo the given text back.", handler=echo
    )
    section = MarkdownSection(
        title="Task",
        key="task",
        template=task,
        tools=(echo_tool,),
    )
    checking = {} if task_completion_checker is None else {"task_completion_checker": task_completion_checker}
    return Prompt(PromptTemplate(ns="demo", key=name, name=name, sections=(section,), **checking))


def write_launcher(directory: Path, name: str, script: Path) -> str:
    """A `/bin/sh` launcher at `directory/name` that runs `script` with this interpreter."""
    path = directory / name
    path.write_text(f'#!/bin/sh\nexec {shlex.quote(sys.executable)} {shlex.quote(str(script))} "$@"\n')
    path.chmod(0o755)
    return str(path)


def codex_adapter(cli: str, model: ModelServer, workdir: Path) -> Any:
    """The adapter on the real CLI (it runs `<codex_bin> app-server`), with a throwaway
    `CODEX_HOME` whose provider is the scripted model."""
    from weakincentives.adapters.codex_app_server import (
        CodexAppServerAdapter,
        CodexAppServerClientConfig,
        CodexAppServerModelConfig,
    )

    workspace, home = workdir / "workspace", workdir / "home"
    workspace.mkdir()
    home.mkdir()
    environment = offline_environment(write_codex_home(workdir / "codex-home", model), home)
    wanted = {
        key: environment[key] for key in environment if key in ("HOME", "CODEX_HOME") or "SCRIPTED" in key
    }
    return CodexAppServerAdapter(
        model_config=CodexAppServerModelConfig(model=MODEL),
        client_config=CodexAppServerClientConfig(codex_bin=cli, cwd=str(workspace), env=wanted),
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--scenario", default="demo", choices=sorted(SCENARIOS))
    parser.add_argument("--cli", default=os.environ.get("TRANSCRIPT_OTEL_CODEX_CLI", str(INSTALLED_CLI)))
    parser.add_argument("--jsonl-dir", help="where the JSONL mirror writes (default: the XDG state dir)")
    args = parser.parse_args()
    if not Path(args.cli).exists():
        print(f"no Codex CLI at {args.cli}: run `make agents` or pass --cli", file=sys.stderr)
        return 2

    configuration = transcript_otel.configure(service_name="codex-demo", jsonl_dir=args.jsonl_dir)

    from weakincentives.runtime import Session

    prompt_name = "codex-demo" if args.scenario == "demo" else f"codex-demo-{args.scenario}"
    with (
        tempfile.TemporaryDirectory(prefix="codex-demo-") as workdir,
        model_server(args.scenario, Path(workdir)) as model,
    ):
        session = Session()
        try:
            adapter = codex_adapter(args.cli, model, Path(workdir))
            response = adapter.evaluate(build_prompt(prompt_name, model.prompt), session=session)
            outcome = f"answer: {response.text!r}"
        except Exception as exc:  # the demo shows a failed turn's transcript too
            outcome = f"failed: {type(exc).__name__}: {exc}"
    transcript_otel.flush()

    print(f"weakincentives Codex evaluate() on Codex {args.cli}: {outcome}\n")
    return print_newest_run(configuration, f"*_{prompt_name}_{session.session_id}.jsonl")


if __name__ == "__main__":
    sys.exit(main())
