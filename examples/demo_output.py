"""What the demo's agents (codex_agent.py, claude_sdk_agent.py) print once their run is over:
the run read back from the JSONL mirror as `transcript-otel show` and `summary` print it, and
where the transcript went."""

from __future__ import annotations

import shlex
import shutil
import sys
from pathlib import Path

import transcript_otel
from transcript_otel.cli.read_commands import format_summary
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.show import ShowWriter, wants_colour
from transcript_otel.reading.sources import open_run


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


def print_newest_run(configuration: transcript_otel.Configuration, pattern: str) -> int:
    """The newest run in the JSONL mirror whose file name matches `pattern`, printed by
    `print_run`: the exit status, 1 (and why, on stderr) when no run was written."""
    directory = Path(configuration.jsonl_directory or ".")
    runs = sorted(directory.glob(pattern), key=lambda path: path.stat().st_mtime)
    if not runs:
        print(f"no transcript was written to {directory}", file=sys.stderr)
        return 1
    print_run(str(runs[-1]), configuration)
    return 0
