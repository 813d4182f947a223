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
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

import transcript_otel
from transcript_otel.cli.read_commands import format_summary
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.show import ShowWriter, wants_colour
from transcript_otel.reading.sources import open_run

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


def build_prompt(name: str, task: str) -> Any:
    """A prompt `demo:<name>` whose one section offers the WINK tool `echo`."""
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
    return Prompt(PromptTemplate(ns="demo", key=name, name=name, sections=(section,)))


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


def transcript_otel_command() -> str:
    """How to call `transcript-otel` from any directory: by name when the shell finds this
    environment's, else by its full path (`make demo`'s .venv-demo is not on PATH)."""
    beside = Path(sys.executable).parent / "transcript-otel"
    if not beside.is_file():
        return "transcript-otel"
    on_path = shutil.which("transcript-otel")
    return (
        "transcript-otel"
        if on_path and Path(on_path).resolve() == beside.resolve()
        else str(beside.absolute())
    )


def print_run(path: str, configuration: transcript_otel.Configuration) -> None:
    """The run as `transcript-otel show` and `summary` print it, and where it went."""
    source = open_run(path)
    writer = ShowWriter(sys.stdout, colour=wants_colour(sys.stdout), max_chars=300)
    for record in source.records():
        writer.write(record)
    print(format_summary(RunDigest.of(source.records())))
    print(f"JSONL mirror: {path}")
    command = shlex.quote(transcript_otel_command())
    print(f"  read it again: {command} show {shlex.quote(path)}")
    print(f"  as a page:     {command} export {shlex.quote(path)} --format html -o run.html")
    if configuration.otlp_endpoint:
        print(f"OTLP export:  {configuration.otlp_endpoint} ({configuration.otlp_protocol})")
    else:
        print("OTLP export:  off (set OTEL_EXPORTER_OTLP_ENDPOINT to send spans and log records)")


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
    directory = Path(configuration.jsonl_directory or ".")
    runs = sorted(directory.glob(f"*_{prompt_name}_{session.session_id}.jsonl"))
    if not runs:
        print(f"no transcript was written to {directory}", file=sys.stderr)
        return 1
    print_run(str(runs[-1]), configuration)
    return 0


if __name__ == "__main__":
    sys.exit(main())
