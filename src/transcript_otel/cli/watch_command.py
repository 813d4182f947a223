"""`transcript-otel watch`: the sessions the agent CLIs keep, exported as they are written."""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import textwrap
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from transcript_otel import environment_variables as env
from transcript_otel.instrumentation.cli_logs import claude_projects_dir, codex_sessions_dir
from transcript_otel.sessions.gemini_home import gemini_sessions_dir
from transcript_otel.sinks.jsonl_files import default_directory

if TYPE_CHECKING:
    from opentelemetry import trace

    from transcript_otel.sessions.files import SessionFiles
    from transcript_otel.sessions.watch_state import WatchState

_DESCRIPTION: Final = (
    "Follow the sessions Claude Code, Codex, Gemini CLI and OpenCode write (no wrapper needed) "
    "and export each line as it is written, as a live run would: to the local JSONL mirror "
    "(--jsonl-dir, else $TRANSCRIPT_OTEL_JSONL_DIR, else {mirror}), where `transcript-otel show "
    "last` reads it, "
    "and, when an OTLP endpoint is set (--endpoint or OTEL_EXPORTER_OTLP_ENDPOINT), to that "
    "backend too. Each session it starts following is said on stderr. At its first start the "
    "watch takes sessions up from their end (`transcript-otel import` reads their past); later "
    "it goes on from where it stopped (kept in --state). Runs until SIGINT, SIGTERM or SIGHUP. "
    "To run it as a user service, see docs/harnesses.md (a systemd user unit)."
)


_EPILOG: Final = """example:
  OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 transcript-otel watch --claude-code --codex"""
_SERVICE: Final = "transcript-otel-watch"
_TRACER_NAME: Final = "transcript_otel.sessions"


def add_watch(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "watch",
        help="export the sessions Claude Code, Codex, Gemini CLI and OpenCode write, live",
        description=textwrap.fill(
            _DESCRIPTION.format(mirror=default_directory()),
            88,
            break_on_hyphens=False,
            break_long_words=False,
        ),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="directories to follow")
    parser.add_argument(
        "--claude-code", action="store_true", help="$CLAUDE_CONFIG_DIR/projects or ~/.claude/projects"
    )
    parser.add_argument("--codex", action="store_true", help="$CODEX_HOME/sessions or ~/.codex/sessions")
    parser.add_argument("--gemini", action="store_true", help="$GEMINI_CLI_HOME/.gemini/tmp or ~/.gemini/tmp")
    parser.add_argument(
        "--opencode",
        action="store_true",
        help="OpenCode's database ($OPENCODE_DB, else $XDG_DATA_HOME/opencode/opencode.db, else "
        "~/.local/share/opencode/opencode.db), read-only",
    )
    parser.add_argument(
        "--jsonl-dir",
        type=Path,
        help=f"the mirror to write the runs to (default: ${env.TRANSCRIPT_OTEL_JSONL_DIR}, else "
        f"{default_directory()})",
    )
    parser.add_argument(
        "--endpoint", help="also export to this OTLP endpoint (default: $OTEL_EXPORTER_OTLP_ENDPOINT)"
    )
    parser.add_argument(
        "--state",
        type=Path,
        help="where it keeps how far each file was exported "
        "(default: $XDG_STATE_HOME/transcript-otel/watch.json, or ~/.local/state/...)",
    )
    parser.add_argument(
        "--idle",
        type=_seconds,
        default=300.0,
        metavar="SECONDS",
        help="end a session's run after this idle time (default: %(default)s)",
    )
    parser.set_defaults(handler=run_watch)


def _seconds(text: str) -> float:
    """An argparse `type`: a time above zero, `inf` for never (nan, 0 or less would end every run
    at once, or none; argparse's message names the option)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number of seconds: {text!r}") from None
    if math.isnan(value) or value <= 0:
        raise argparse.ArgumentTypeError(f"must be a number of seconds above 0, not {text!r}")
    return value


def run_watch(args: argparse.Namespace, out: TextIO) -> int:
    from opentelemetry import trace

    from transcript_otel.capture.defaults import get_pipeline
    from transcript_otel.capture.registry import shutdown_all
    from transcript_otel.cli.opencode_watching import following_opencode
    from transcript_otel.cli.without_sdk import recorded_for_the_mirror, without_the_sdk
    from transcript_otel.otlp.setup import configure
    from transcript_otel.sessions.watch import Watcher
    from transcript_otel.sessions.watch_state import WatchState

    _say_each_warning()
    roots = list(args.paths)
    roots += [claude_projects_dir()] if args.claude_code else []
    roots += [codex_sessions_dir()] if args.codex else []
    roots += [gemini_sessions_dir()] if args.gemini else []
    if not roots and not args.opencode:
        raise ValueError("name directories to follow, or --claude-code / --codex / --gemini / --opencode")
    # First: a state another watch holds stops this one before anything is set up.
    state_file = args.state or default_directory().parent / "watch.json"
    state = WatchState(state_file)
    # Where the runs go, as the variables say it (the pipeline and `configure` read them).
    if args.jsonl_dir is not None:
        os.environ[env.TRANSCRIPT_OTEL_JSONL_DIR] = str(args.jsonl_dir)
    if args.endpoint is not None:
        os.environ["OTEL_EXPORTER_OTLP_ENDPOINT"] = args.endpoint
    service = os.environ.get("OTEL_SERVICE_NAME") or _SERVICE
    tracer: trace.Tracer | None = None
    if without_the_sdk("watch", "the sessions"):  # the mirror gets the sessions, spans and all
        tracer = recorded_for_the_mirror(service).get_tracer(_TRACER_NAME)
    else:
        try:
            configure(service_name=service, instrument=False)
        except Exception as exc:  # OTLP export is optional: the mirror still gets every line
            print(
                f"transcript-otel watch: no OTLP export ({exc}); the mirror gets the sessions",
                file=sys.stderr,
            )
            tracer = recorded_for_the_mirror(service).get_tracer(_TRACER_NAME)
    watcher = Watcher(
        roots,
        state,
        pipeline=get_pipeline(),
        tracer=tracer or trace.get_tracer(_TRACER_NAME),
        idle_s=args.idle,
        on_follow=_say_following(state),
        on_root=lambda root: print(
            f"transcript-otel watch: following {root} (it appeared)", file=out, flush=True
        ),
    )
    for stop in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):  # (SIGHUP: a closed terminal)
        signal.signal(stop, lambda *_: watcher.stopped.set())
    _say_roots(roots, watcher.missing_roots, out)
    opencode = following_opencode(
        args, tracer or trace.get_tracer(_TRACER_NAME), state_file, watcher.stopped, out
    )
    try:
        watcher.run()
    finally:
        watcher.stopped.set()
        if opencode is not None:
            opencode.join()
        shutdown_all()
        state.close()
    return 0


def _say_roots(roots: list[Path], missing: list[Path], out: TextIO) -> None:
    """Which folders the watch follows, and which it waits for (a CLI not run here yet)."""
    there = [root for root in roots if root not in missing]
    if there:
        print(f"transcript-otel watch: following {', '.join(map(str, there))}", file=out, flush=True)
    for root in missing:
        why = "not a directory" if root.exists() else "not there yet"
        print(f"transcript-otel watch: waiting for {root} ({why})", file=out, flush=True)


def _say_following(state: WatchState) -> Callable[[SessionFiles], None]:
    """One line on stderr for each session the watch takes up, and from where."""

    def say(session: SessionFiles) -> None:
        where = state.positions.get(session.path)
        start = "from its start" if where is None or where.offset == 0 else f"from byte {where.offset}"
        subagents = len(session.subagents)
        more = f", {subagents} subagent file{'s' * (subagents != 1)}" if subagents else ""
        print(
            f"transcript-otel watch: following {session.kind} session {session.path} ({start}{more})",
            file=sys.stderr,
            flush=True,
        )

    return say


def _say_each_warning() -> None:
    """Each warning said as it comes, not the first ten (as a reading command's): a watch runs for
    months, and says each thing once (a file that is not a regular file, one that cannot be read)."""
    from transcript_otel.reading.escapes import visible

    def show(message: Warning | str, *_: object, **__: object) -> None:
        print(f"transcript-otel: warning: {visible(str(message))}", file=sys.stderr, flush=True)

    warnings.showwarning = show
