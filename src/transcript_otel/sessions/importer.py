"""A session log recorded as a run, after the fact: `transcript-otel import`.

Each session becomes one run in the local JSONL mirror, built by the same `AgentRun` a live
run uses (its `invoke_agent` root, a `chat` span per turn, `execute_tool` spans, subagents'
`invoke_agent` spans with their own `chat` spans) at the times the files recorded. Its ids
are derived from the session (the run id from its kind and session id, span and trace ids
from the run id, in the order the spans open), and the run's file is written aside and
moved into place whole: importing a session again gives the same run, replacing the first,
never a second copy. The spans go to the mirror as `transcript.span` records, from which
`replay` sends them to an OTLP backend with these ids.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from itertools import chain
from pathlib import Path
from typing import Final

from transcript_otel.capture.defaults import pipeline_from_environment
from transcript_otel.capture.shared import WAKE_THRESHOLD
from transcript_otel.model.entries import TranscriptSummary
from transcript_otel.records.run import RunInfo
from transcript_otel.sessions.files import SessionFiles, SessionKind
from transcript_otel.sessions.recorder import HARNESSES, SessionRecorder, run_id_of
from transcript_otel.sessions.timeline import TimedLine, timeline
from transcript_otel.sinks.jsonl_files import run_file_name

# An import has no agent waiting on it: the writer gets the time it needs to write it all.
_IMPORT_SHUTDOWN_S: Final = 3600.0
# Undated lines looked past for the session's first time, at most.
_MAX_UNDATED_LINES: Final = 10_000
# The records queued, or the bytes of the lines read, before what they made is written: what
# bounds the memory an import holds (the entries' objects take a few times their line's bytes).
_DRAIN_AT_RECORDS: Final = WAKE_THRESHOLD
_DRAIN_AT_BYTES: Final = 4 * 1024 * 1024


class EmptySessionError(ValueError):
    """The session's files hold no line."""


@dataclass(frozen=True, slots=True)
class ImportedRun:
    session: SessionFiles
    session_id: str
    run_id: str
    path: Path  # the run's file in the mirror
    summary: TranscriptSummary


def import_session(session: SessionFiles, directory: Path) -> ImportedRun:
    """Record `session` as a run in the mirror `directory`; replaces an earlier import of it.

    Raises `EmptySessionError` for a session without lines, `OSError` for files that cannot
    be read or written; a line that is not what the CLI writes becomes an `unknown` entry,
    and a failure of ours a `transcript.error` record, never an exception.
    """
    harness = HARNESSES[session.kind]
    map_line = harness.line_mapper(None, session.path)
    lines = harness.lines(session, map_line) if harness.lines else timeline(session.sources(), map_line)
    # The run began at the first time a line tells (older files open with undated lines):
    # never the file's modification time while any line has one.
    head: list[TimedLine] = []
    for timed in lines:
        head.append(timed)
        if timed.at_ns or len(head) >= _MAX_UNDATED_LINES:
            break
    if not head:
        raise EmptySessionError("no lines to import")  # the caller names the session
    session_id = next((t.said.session_id for t in head if t.said.session_id), None)
    session_id = session_id or session_id_from_name(session)
    run_id = run_id_of(session.kind, session_id)
    started_ns = head[-1].at_ns or session.path.stat().st_mtime_ns
    directory.mkdir(parents=True, exist_ok=True)
    final = directory / run_file_name(
        RunInfo(harness.prompt_name, harness.adapter, session_id, started_ns, run_id=run_id)
    )
    partial = directory / f".{run_id}.importing"
    partial.unlink(missing_ok=True)
    # No agent shares this process, so no writer thread: this one writes what it read, every
    # few hundred records (one thread, no GIL handed back and forth, nothing ever dropped).
    pipeline = pipeline_from_environment(
        jsonl=True,
        jsonl_path=partial,
        log_records=False,
        span_events=False,
        shutdown_timeout_s=_IMPORT_SHUTDOWN_S,
        drained_by_caller=True,
    )
    pipeline.yield_every_s = math.inf  # no other thread of ours waits for the GIL
    backlog = pipeline.backlog
    try:
        recorder = SessionRecorder(
            harness, session_id=session_id, run_id=run_id, started_ns=started_ns, pipeline=pipeline
        )
        read = 0
        for timed in chain(head, lines):
            recorder.apply(timed)
            read += timed.size
            if len(backlog) >= _DRAIN_AT_RECORDS or read >= _DRAIN_AT_BYTES:
                pipeline.wait_for_room(_IMPORT_SHUTDOWN_S)  # drains, on this thread
                read = 0
        recorder.finish()
        pipeline.shutdown()
        os.replace(partial, final)
    except BaseException:
        pipeline.shutdown()  # once only: a second call does nothing
        partial.unlink(missing_ok=True)  # interrupted: the earlier import, if any, stays whole
        raise
    return ImportedRun(session, session_id, run_id, final, recorder.run.emitter.stop())


def session_id_from_name(session: SessionFiles) -> str:
    """Claude: `<session>.jsonl`; Codex: `rollout-<time>-<session uuid>.jsonl`."""
    stem = session.path.stem
    return stem[-36:] if session.kind is SessionKind.CODEX and len(stem) > 36 else stem
