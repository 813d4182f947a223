"""A watch started again names its runs after the session, whatever line comes first: a Codex
subagent's rollout opens with its own thread's `session_meta`, and when that was the first line
a restarted watch recorded, the run took the subagent's thread id for the session's (the watch
soak, benchmarks/soak_watch.py, found 29 such runs in 10,000 sessions: their entries in no run
of their session)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from transcript_otel import read_records
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.watch import Watcher

from session_fixtures import codex_day

DAY = codex_day("subagent")


def test_a_run_that_opens_with_a_subagents_first_line_is_its_sessions(
    tmp_path: Path, polling_watcher: Callable[[], Watcher]
) -> None:
    root, child = sorted(DAY.glob("*.jsonl"), key=lambda path: path.stat().st_size, reverse=True)
    root_id = root.stem[-36:]
    target = tmp_path / "home" / "day"
    target.mkdir(parents=True)

    first = polling_watcher()
    (target / root.name).write_bytes(root.read_bytes())  # the root thread, whole
    first.poll_once()
    first.close()  # stopped; its subagent's file is written while no watch runs
    (target / child.name).write_bytes(child.read_bytes())
    second = polling_watcher()
    second.poll_once()
    second.close()
    records = [r for path in (tmp_path / "runs").glob("*.jsonl") for r in read_records(path)]
    starts = [r["context"]["session_id"] for r in records if r["event"] == TranscriptEvent.START.value]
    assert starts == [root_id, root_id]
    assert {r["context"]["session_id"] for r in records} == {root_id}
