"""The `transcript-otel` command line.

Public: the `transcript-otel` command (`transcript_otel.cli.main`); its modules are internal.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import logging
import os
import signal
import sys
import warnings
from collections.abc import Sequence
from typing import Any

from transcript_otel.cli import (
    completion_command,
    export_commands,
    import_command,
    list_command,
    read_commands,
    watch_command,
)
from transcript_otel.mappings.lines import ADAPTER_NAMES, ADAPTER_VARIABLE
from transcript_otel.reading.errors import RunNotFoundError
from transcript_otel.version import __version__

__all__ = ["main"]

_RUN_HELP = f"""\
Run an agent command and capture its transcript: its output passes through
unchanged (on a pseudo-terminal when stdout is a terminal), and its stdout lines
become transcript entries (log records, span events and the local JSONL mirror),
exported over OTLP when OTEL_EXPORTER_OTLP_ENDPOINT is set. Exits with the command's
status; signals sent to the wrapper are forwarded to the command. What capture could
not do (lines it could not keep up with, a failing mirror, records a dead backend
never took) is printed on stderr after the command's output.

adapters: rtf1 (@@RALPH@@ lines), codex-json (codex exec --json),
claude-stream-json (claude -p --output-format stream-json), opencode-json
(opencode run --format json), plain (every line is assistant text), auto (the
default: chosen from the command line or the first lines; ${ADAPTER_VARIABLE} sets
another default).

example:
  transcript-otel run --prompt-name fix-tests -- codex exec --json "fix the failing tests"
"""


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="transcript-otel", description="Agent transcripts as OpenTelemetry."
    )
    parser.add_argument("--version", action="version", version=f"transcript-otel {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    run = commands.add_parser(
        "run",
        help="run an agent command and capture its transcript",
        description=_RUN_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    run.add_argument("--adapter", choices=ADAPTER_NAMES, help="how to read the command's output")
    run.add_argument(
        "--prompt-name",
        help="the run's name, and the service name unless OTEL_SERVICE_NAME is set "
        "(default: the command's name)",
    )
    run.add_argument("agent_command", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...")
    read_commands.add_show(commands)
    read_commands.add_summary(commands)
    read_commands.add_validate(commands)
    list_command.add_list(commands)
    export_commands.add_bundle(commands)
    export_commands.add_export(commands)
    export_commands.add_replay(commands)
    import_command.add_import(commands)
    watch_command.add_watch(commands)
    completion_command.add_completion(commands, parser)
    return parser


class _Warnings:
    """Prints the first `_MAX_WARNINGS` warnings of a reading command and counts the others:
    a corrupt file warns about each of its lines."""

    def __init__(self) -> None:
        self.more = 0
        self.shown = 0

    def show(self, message: Any, category: Any, filename: str, lineno: int, *_: Any, **__: Any) -> None:
        if self.shown >= _MAX_WARNINGS:
            self.more += 1
            return
        self.shown += 1
        from transcript_otel.reading.escapes import visible

        print(f"transcript-otel: warning: {visible(str(message))}", file=sys.stderr)

    def print_the_rest(self) -> None:
        if self.more:
            print(f"transcript-otel: {self.more} more warnings like these not shown", file=sys.stderr)
            self.more = 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = _parser()
    args = parser.parse_args(argv)
    if args.command == "run":
        return _run(parser, args)
    shown = _Warnings()
    warnings.showwarning = shown.show
    with contextlib.suppress(AttributeError, ValueError):  # a lone surrogate is shown escaped
        sys.stdout.reconfigure(errors="backslashreplace")  # type: ignore[union-attr]
    try:
        return _handle(args, shown)
    finally:
        shown.print_the_rest()


def _handle(args: argparse.Namespace, shown: _Warnings) -> int:
    try:
        status: int = args.handler(args, sys.stdout)
        sys.stdout.flush()
    except KeyboardInterrupt:
        print(f"transcript-otel {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `transcript-otel show RUN | head`: the reader had enough
        with contextlib.suppress(OSError):
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except (RunNotFoundError, ValueError, OSError) as exc:
        shown.print_the_rest()  # the error is the last line
        print(f"transcript-otel {args.command}: {exc}", file=sys.stderr)
        return 2
    return status


def _run(parser: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    command = list(args.agent_command)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        parser.error("run: give the agent command after --, e.g. transcript-otel run -- my-agent --flag")
    from opentelemetry import trace

    from transcript_otel.capture.registry import shutdown_all
    from transcript_otel.cli.run_command import block_forwarded_signals, run_command
    from transcript_otel.cli.without_sdk import recorded_for_the_mirror, without_the_sdk
    from transcript_otel.otlp.setup import configure

    block_forwarded_signals()  # before any thread of ours starts: they all hold them
    prompt_name = args.prompt_name or os.path.basename(command[0])
    # Nothing of ours may land in the middle of the command's stderr. The exporters'
    # complaints (a backend down, retried) are dropped: the transcript keeps its own
    # account (transcript.error records, the JSONL mirror). Ours (a failing mirror, a full
    # export queue, records a dead backend never took) are printed once the command is over.
    # Warnings about our settings (a bad variable) show at once: they are about the invocation.
    quiet = logging.getLogger("opentelemetry")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    held = _HeldWarnings()
    for name in (
        "transcript_otel.capture.pipeline",
        "transcript_otel.otlp.export_queue",
        "transcript_otel.otlp.export_processors",
    ):
        logging.getLogger(name).addHandler(held)
        logging.getLogger(name).propagate = False
    # Registered before capture starts, so it runs after the exit's own bounded flush
    # (atexit is last-in, first-out) and prints what that flush had to say.
    atexit.register(held.print_to, sys.stderr)
    # OTEL_SERVICE_NAME, when set, names the service; else the command does.
    service = os.environ.get("OTEL_SERVICE_NAME") or prompt_name
    if without_the_sdk("run", "the transcript"):  # the mirror gets the run, its spans too
        trace.set_tracer_provider(recorded_for_the_mirror(service))
    else:
        try:
            configure(service_name=service, instrument=False)
        except Exception as exc:  # OTLP export is optional; the command runs regardless
            print(
                f"transcript-otel run: no OTLP export ({exc}); the transcript goes to the JSONL mirror",
                file=sys.stderr,
            )
    try:
        status = run_command(command, prompt_name=prompt_name, adapter_name=args.adapter)
        # The command is over: Ctrl-C now must not turn the bounded flush into a traceback.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        shutdown_all()  # bounded; the transcript is out, and what it could not capture is known
    finally:
        held.print_to(sys.stderr)
    if status < 0:  # killed by a signal: die of the same signal
        with contextlib.suppress(OSError, ValueError):  # SIGKILL and SIGSTOP have no handler to reset
            signal.signal(-status, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, {-status})
        os.kill(os.getpid(), -status)
    return status if status >= 0 else 128 - status


class _HeldWarnings(logging.Handler):
    """Keeps transcript-otel's warnings while the command runs, to print after its output
    (the first `_MAX_HELD`; the others are counted)."""

    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []
        self.more = 0

    def emit(self, record: logging.LogRecord) -> None:
        if len(self.messages) >= _MAX_HELD:
            self.more += 1
            return
        with contextlib.suppress(Exception):
            self.messages.append(record.getMessage())

    def print_to(self, stream: Any) -> None:
        with contextlib.suppress(Exception):  # a closed stderr at exit
            for message in self.messages:
                print(message, file=stream)
            if self.more:
                print(f"transcript-otel: {self.more} more warnings not shown", file=stream)
            stream.flush()
        self.messages.clear()
        self.more = 0


_MAX_HELD = 20
_MAX_WARNINGS = 10
