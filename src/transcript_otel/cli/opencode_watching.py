"""`transcript-otel watch --opencode`: OpenCode's database followed beside the session files."""

from __future__ import annotations

import argparse
import sys
import threading
from pathlib import Path
from typing import TextIO

from opentelemetry import trace

from transcript_otel.capture.defaults import get_pipeline
from transcript_otel.sessions.opencode_db import opencode_database
from transcript_otel.sessions.opencode_watch import OpenCodeWatcher


def following_opencode(
    args: argparse.Namespace, tracer: trace.Tracer, state: Path, stopped: threading.Event, out: TextIO
) -> threading.Thread | None:
    """With `--opencode`, a thread following OpenCode's database until `stopped` (None without):
    its rounds run beside the session files' (`Watcher`), into the same pipeline; how far it read
    is kept beside the watch's `state` (`watch.opencode.json`)."""
    if not args.opencode:
        return None
    database = opencode_database()
    watcher = OpenCodeWatcher(
        database,
        pipeline=get_pipeline(),
        tracer=tracer,
        idle_s=args.idle,
        position=state.with_suffix(".opencode.json"),
        on_follow=lambda session: print(
            f"transcript-otel watch: following opencode session {session} in {database}",
            file=sys.stderr,
            flush=True,
        ),
    )
    waiting = "" if database.is_file() else " (not there yet: looked for every round)"
    print(f"transcript-otel watch: following OpenCode's database {database}{waiting}", file=out, flush=True)
    thread = threading.Thread(
        target=watcher.run, args=(stopped,), name="transcript-otel-opencode", daemon=True
    )
    thread.start()
    return thread
