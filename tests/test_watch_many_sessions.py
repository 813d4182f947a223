"""`transcript-otel watch` taking up many sessions in one round (a restart after lines were
written to thousands of sessions, issue 51's soak): each session's few lines are recorded
before the next's are read, so the writer must be waited for between sessions, not only every
256 records of one session. Before, the round queued every session's entries at once and the
pipeline dropped what went past its bound: the soak (benchmarks/soak_watch.py, 10,000 sessions,
a restart with 750 MB to catch up) lost 45,883 of 112,080 entries, each run saying "N
transcript entries dropped: the backlog exceeded its bound"."""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
from opentelemetry import trace

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.sessions import watch
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState, saved_state
from transcript_otel.sinks import JsonlMirror

from session_fixtures import CLAUDE

SESSIONS = 200


class _SlowMirror(JsonlMirror):
    def write(self, record: PreparedRecord) -> None:
        time.sleep(0.0005)
        super().write(record)


def test_a_round_over_many_sessions_drops_no_entry(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    (source,) = (CLAUDE / "tools/home/.claude/projects/-scratch-work").glob("*.jsonl")
    (session,) = find_sessions([source])
    each = sum(
        r["event"] == TranscriptEvent.ENTRY.value
        for r in read_records(import_session(session, tmp_path / "imported").path)
    )
    home = tmp_path / "home" / "project"
    home.mkdir(parents=True)
    runs = tmp_path / "runs"
    # A writer slower than the reading (as on a busy machine), a bound of a few hundred
    # entries (they hold their line, parsed): one session's fit (7), the round's (1,400) do not.
    pipeline = make_pipeline([_SlowMirror(runs)], max_backlog_bytes=16 * 1024 * 1024)
    watcher = Watcher(
        [tmp_path / "home"],
        WatchState(tmp_path / "watch.json"),
        pipeline=pipeline,
        tracer=trace.get_tracer(__name__),
        kernel_changes=False,
    )
    data = source.read_bytes()
    for _ in range(SESSIONS):  # written while the watch did not look: one round takes them all
        copy = str(uuid.uuid4())
        (home / f"{copy}.jsonl").write_bytes(data.replace(source.stem.encode(), copy.encode()))
    watcher.poll_once()
    watcher.close()
    records = [record for path in runs.glob("*.jsonl") for record in read_records(path)]
    assert [r["context"]["error"] for r in records if r["event"] == TranscriptEvent.ERROR.value] == []
    assert sum(r["event"] == TranscriptEvent.ENTRY.value for r in records) == SESSIONS * each


def test_positions_not_kept_in_time_are_kept_at_the_next_round_without_lines(
    tmp_path: Path, polling_watcher: Callable[[], Watcher], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A round whose lines the writer has not written within its wait keeps their positions at
    a later round, also when no more lines come. Before, only a round with new lines kept them:
    once the writing stopped, the state stayed where it was until the watch stopped (the soak's
    watch, idle with every line read, kept a state 750 MB behind for 8 minutes), and a crash
    then would export all of it again."""
    (source,) = (CLAUDE / "tools/home/.claude/projects/-scratch-work").glob("*.jsonl")
    (tmp_path / "home").mkdir()
    state = tmp_path / "watch.json"
    watcher = polling_watcher()
    target = tmp_path / "home" / "project" / source.name
    target.parent.mkdir()
    target.write_bytes(source.read_bytes())
    monkeypatch.setattr(watch, "_WRITE_WAIT_S", 0.0)  # the writer is not waited for
    assert watcher.poll_once() > 0
    assert saved_state(state)["files"] == {}
    monkeypatch.undo()
    watcher.poll_once()  # no new line
    assert saved_state(state)["files"][str(target)]["offset"] == target.stat().st_size
    watcher.close()
