"""`transcript-otel import`: the sessions the agent CLIs kept, as runs in the mirror."""

from __future__ import annotations

import argparse
import contextlib
import os
import signal
import sys
import textwrap
import warnings
from pathlib import Path
from typing import Any, Final, TextIO

from transcript_otel import environment_variables as env
from transcript_otel.cli.import_sending import RunSender
from transcript_otel.cli.import_workers import (
    Outcome,
    StoppedBySignalError,
    imports,
    stopped_by_signals,
    usable_cpus,
)
from transcript_otel.cli.read_commands import number_at_least
from transcript_otel.instrumentation.cli_logs import (
    claude_projects_dir,
    codex_archived_dir,
    codex_sessions_dir,
)
from transcript_otel.otlp.sdk_presence import SENDING_DISABLED, sdk_disabled, sdk_installed
from transcript_otel.reading.escapes import visible, visible_name
from transcript_otel.sessions.files import SessionFiles, find_sessions
from transcript_otel.sessions.formats import Format, not_a_session
from transcript_otel.sessions.gemini_home import gemini_sessions_dir
from transcript_otel.sessions.opencode_db import opencode_database
from transcript_otel.sessions.recorded_spans import sampler_needs_the_sdk
from transcript_otel.sinks.jsonl_files import default_directory

_DESCRIPTION: Final = (
    "Import the sessions Claude Code, Codex, Gemini CLI and OpenCode kept themselves (no wrapper "
    "needed): each becomes one run in the local JSONL mirror, with the times, tokens and models the files "
    "recorded, subagents as their own sources and spans, and ids derived from the session, so "
    "importing again replaces the run instead of adding a second. When an OTLP endpoint is set "
    "(--endpoint or OTEL_EXPORTER_OTLP_ENDPOINT) each run is also sent there, as `replay` sends it "
    "(that needs the [otlp] extra: without it nothing is imported, exit 2); after a run the backend "
    "did not take, the others are not sent, each said (so a backend that does not answer costs one "
    "export timeout, not one per session). "
    "Sessions are imported --jobs at a time in worker processes, and said in the order found. "
    "What a file holds is told by its first lines, not its name: below a directory every *.jsonl "
    "file is looked at, and one that is no session log (a saved stdout, a mirror's run) is skipped, "
    "said in one line. On a terminal a line on stderr tells the progress (sessions, MB, MB/s, time "
    "left), and a summary line ends the import (sessions, entries, MB, seconds, warnings); "
    "piped, stderr says only what went wrong. --json: one JSON object on stdout instead of a line "
    "per session (each session's run, adapter, entries and status; the totals). "
    "Exits 1 when a session could not be imported or sent (each said in one line), "
    "2 for bad paths and for a file named on its own that is no session log; "
    "stopped by SIGINT, SIGTERM or SIGHUP it leaves no worker running and no file half-written "
    "(exit 130, or 128 + the signal)."
)
_WIDTH: Final = 88
_SENDING_NEEDS_THE_SDK: Final = (
    "transcript-otel import: sending runs to an OTLP endpoint (--endpoint, OTEL_EXPORTER_OTLP_ENDPOINT) "
    "needs the OpenTelemetry SDK and OTLP exporters, which the core install leaves out: "
    "pip install 'transcript-otel[otlp]'"
)
_SAMPLER_NEEDS_THE_SDK: Final = (
    "transcript-otel import: OTEL_TRACES_SAMPLER needs the OpenTelemetry SDK, which the core install "
    "leaves out: every span is recorded (pip install 'transcript-otel[otlp]')"
)
_EPILOG: Final = """examples:
  transcript-otel import --claude-code --codex --opencode
  transcript-otel import ~/.claude/projects/-home-me-repo/0b6f...jsonl
  OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 transcript-otel import --codex"""


def add_import(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "import",
        help="import the sessions Claude Code, Codex, Gemini CLI and OpenCode kept",
        description=textwrap.fill(_DESCRIPTION, _WIDTH),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="session files or directories")
    parser.add_argument(
        "--claude-code",
        action="store_true",
        help="every Claude Code session ($CLAUDE_CONFIG_DIR or ~/.claude)",
    )
    parser.add_argument(
        "--codex",
        action="store_true",
        help="every Codex session, archived ones too ($CODEX_HOME or ~/.codex)",
    )
    parser.add_argument(
        "--gemini", action="store_true", help="every Gemini CLI session ($GEMINI_CLI_HOME or ~/.gemini/tmp)"
    )
    parser.add_argument(
        "--opencode",
        action="store_true",
        help="every OpenCode session ($OPENCODE_DB, else $XDG_DATA_HOME/opencode/opencode.db, "
        "else ~/.local/share/opencode/opencode.db), read-only",
    )
    parser.add_argument(
        "--jsonl-dir",
        type=Path,
        help=f"the mirror to import into (default: ${env.TRANSCRIPT_OTEL_JSONL_DIR}, else "
        f"{default_directory()})",
    )
    parser.add_argument("--endpoint", help="also send each run to this OTLP endpoint")
    parser.add_argument(
        "-j",
        "--jobs",
        type=number_at_least(1),
        metavar="N",
        help="sessions imported at once, each in a worker process (default: the CPUs this process "
        "may use; 1: all in this process)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object on stdout instead of a line per session: each session's path, run "
        "file, adapter, entries and status, the files skipped, and the totals",
    )
    parser.set_defaults(handler=run_import)


def run_import(args: argparse.Namespace, out: TextIO) -> int:
    try:
        with stopped_by_signals():
            return _run_import(args, out)
    except StoppedBySignalError as stop:
        name = signal.Signals(stop.signum).name
        print(
            f"transcript-otel import: stopped by {name}: the sessions not listed above were not imported",
            file=sys.stderr,
        )
        return 128 + stop.signum


def _run_import(args: argparse.Namespace, out: TextIO) -> int:
    from transcript_otel.cli.import_report import ImportReport  # (what only an import loads)

    paths = list(args.paths)
    for wanted, roots, name in (
        (args.claude_code, [claude_projects_dir()], "Claude Code"),
        (args.codex, [codex_sessions_dir(), codex_archived_dir()], "Codex"),  # archived ones too
        (args.gemini, [gemini_sessions_dir()], "Gemini CLI"),
    ):
        found = [root for root in roots if root.is_dir()] if wanted else []
        paths += found
        if wanted and not found:
            print(f"transcript-otel import: no {name} sessions at {visible_name(roots[0])}", file=sys.stderr)
    if args.opencode:
        database = opencode_database()
        if database.is_file():
            paths.append(database)
        else:
            print(
                f"transcript-otel import: no OpenCode sessions at {visible_name(database)}", file=sys.stderr
            )
    if not paths and not (args.claude_code or args.codex or args.gemini or args.opencode):
        raise ValueError(
            "name session files or directories, or --claude-code / --codex / --gemini / --opencode"
        )
    directory = args.jsonl_dir or Path(env.env_text(env.TRANSCRIPT_OTEL_JSONL_DIR) or default_directory())
    sends = args.endpoint is not None or bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    if sends and not sdk_installed():  # a core install: said before anything is imported
        print(_SENDING_NEEDS_THE_SDK, file=sys.stderr)
        return 2
    if sends and sdk_disabled():  # (it would import, then send each run in vain)
        print(f"transcript-otel import: {SENDING_DISABLED}", file=sys.stderr)
        return 2
    if sampler_needs_the_sdk():
        print(_SAMPLER_NEEDS_THE_SDK, file=sys.stderr)
    refused: dict[Path, Format] = {}
    sessions = list(find_sessions(paths, refused=refused))
    for path, what in refused.items():  # below a folder; a file named on its own raised
        print(f"transcript-otel import: skipped {not_a_session(path, what)}", file=sys.stderr)
    if not sessions:
        if paths:  # else the lines above said where none were
            named = ", ".join(map(visible_name, paths))
            print(f"transcript-otel import: no sessions in {named}", file=sys.stderr)
        return 1
    jobs = min(args.jobs or usable_cpus(), len(sessions))
    # A file that could not be read may be a session not imported: a failure, not a mere skip.
    failed = sum(what is Format.UNREADABLE for what in refused.values())
    imported_from: dict[Path, Path] = {}  # each run written, from which session's file
    sender = RunSender(args.endpoint) if sends else None
    report = ImportReport(sessions, refused, sys.stderr, as_json=args.json)
    with report, contextlib.closing(imports(sessions, directory, jobs)) as outcomes:
        for session, outcome in zip(sessions, outcomes, strict=True):
            said_on = None if args.json else out
            report.before_saying(outcome, said_on, sends)
            said = _say(session, outcome, sender, said_on)
            failed += not said
            earlier = imported_from.get(outcome.run) if outcome.run is not None else None
            if earlier is not None:  # `find_sessions` gives each file once: another file, one session
                report.wipe()
                print(
                    f"transcript-otel import: {visible_name(session.path)} is the same session as "
                    f"{visible_name(earlier)} (a copy?): "
                    "its run replaced that one",
                    file=sys.stderr,
                )
            if outcome.run is not None:
                imported_from[outcome.run] = session.path
            report.done(session, outcome, sent=said)
    report.finish(out)
    return 1 if failed else 0


def _say(session: SessionFiles, outcome: Outcome, sender: RunSender | None, out: TextIO | None) -> bool:
    """Say how `session`'s import went (its run on `out`, unless None: `--json` tells it), and
    send the run with `sender`, if any; whether all went well."""
    for warned in outcome.warned:
        warnings.showwarning(*warned)
    if outcome.run is None:
        error = visible(str(outcome.error))
        print(f"transcript-otel import: {visible_name(session.path)}: {error}", file=sys.stderr)
        return False
    if out is not None:
        print(
            f"{visible_name(session.path)} -> {visible_name(outcome.run)} ({outcome.entries} entries"
            + (f", {outcome.subagents} subagents" if outcome.subagents > 0 else "")
            + ")",
            file=out,
        )
    return sender.send(outcome.run) if sender is not None else True
