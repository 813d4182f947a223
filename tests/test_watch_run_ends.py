"""Many runs of `transcript-otel watch` ending together keep their spans: the watch stopping with
SIGTERM, sessions that went idle in the same round, a start after SIGKILL taking every session
over at once. A span that ends while the writer's backlog is past its bound gets no
`transcript.span` record, and the root and `chat` spans are where a run's tokens are: issue 51's
soak (10,000 sessions) had runs whose totals were 0 / 0 while their entries were all there.
The bound is made small here (`TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES`) so that 40 runs ending
together press on it as thousands do at the default."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.cli.without_sdk import recorded_for_the_mirror
from transcript_otel.genai.attributes import session_usage
from transcript_otel.mappings.claude_cost import summed_model_usage
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.sessions import watch
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState, saved_state
from transcript_otel.sinks import JsonlMirror

from loopback import subprocess_env
from session_fixtures import CLAUDE

CLI = [sys.executable, "-m", "transcript_otel.cli"]
SESSIONS = 40
BACKLOG_BYTES = 256 * 1024
INPUT, OUTPUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
RUN_INPUT, RUN_OUTPUT = "transcript.usage.input_tokens", "transcript.usage.output_tokens"


def _source() -> Path:
    (path,) = (CLAUDE / "tools/home/.claude/projects/-scratch-work").glob("*.jsonl")
    return path


def _cli_totals(session_file: Path) -> tuple[int, int]:
    """Input and output tokens as Claude Code recorded them (its last `cost-state`)."""
    last = [line for line in session_file.read_bytes().splitlines() if b'"type":"cost-state"' in line][-1]
    totals = session_usage({"session_usage": summed_model_usage(json.loads(last)["modelUsage"])})
    return totals[INPUT], totals[OUTPUT]


class _Watch:
    """The real watch of `home` with a small backlog bound, its mirror `runs`, its state."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.home, self.runs, self.state = tmp_path / "home", tmp_path / "runs", tmp_path / "watch.json"
        (self.home / "project").mkdir(parents=True, exist_ok=True)
        self._command = [*CLI, "watch", str(self.home), "--state", str(self.state), *options]
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = subprocess_env(
            TRANSCRIPT_OTEL_JSONL_DIR=str(self.runs), TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES=str(BACKLOG_BYTES)
        )
        self._process = subprocess.Popen(self._command, env=env, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        assert "following" in self._process.stdout.readline()

    def stop(self, how: signal.Signals) -> None:
        assert self._process is not None
        self._process.send_signal(how)
        assert self._process.wait(120) == (-signal.SIGKILL if how == signal.SIGKILL else 0)
        self._process = None

    def exported(self, files: list[Path]) -> bool:
        """Whether the state keeps each file's end (it does once the lines before it are written)."""
        try:
            kept = saved_state(self.state)["files"]
        except (OSError, ValueError):
            return False
        return all(kept.get(str(path), {}).get("offset") == path.stat().st_size for path in files)

    def records(self) -> list[dict[str, Any]]:
        return [r for path in sorted(self.runs.glob("*.jsonl")) for r in read_records(path)]


def _copies(source: Path, folder: Path) -> list[Path]:
    """`SESSIONS` copies of the recorded session in `folder`, each a session of its own."""
    data = source.read_bytes()
    files = []
    for _ in range(SESSIONS):
        copy = str(uuid.uuid4())
        path = folder / f"{copy}.jsonl"
        path.write_bytes(data.replace(source.stem.encode(), copy.encode()))
        files.append(path)
    return files


def _wait_for(condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "not within the time given"
        time.sleep(0.1)


def _write_sessions(watch: _Watch) -> list[Path]:
    """`SESSIONS` copies of the recorded session, each under an id of its own, written whole
    together; the ones checked. Before them one more, a line at a time: until the pipeline has
    measured what entries hold, its bound is a few records (that session's records are not
    checked: its spans end within that bound)."""
    source = _source()
    data = source.read_bytes()
    first = watch.home / "project" / "first.jsonl"
    for line in data.replace(source.stem.encode(), b"first").splitlines(keepends=True):
        with first.open("ab") as out:
            out.write(line)
        _wait_for(lambda: watch.exported([first]))
    files = _copies(source, watch.home / "project")
    _wait_for(lambda: watch.exported(files))
    return files


def _tokens_by_session(records: list[dict[str, Any]]) -> tuple[dict[str, list[int]], dict[str, list[int]]]:
    """Each session's root spans' totals and its chat spans' tokens, summed over its runs."""
    roots: dict[str, list[int]] = {}
    chats: dict[str, list[int]] = {}
    for record in records:
        if record["event"] != TranscriptEvent.SPAN.value:
            continue
        context = record["context"]
        attributes = context.get("attributes") or {}
        session = context["session_id"]
        if not context.get("parent_span_id"):
            total = roots.setdefault(session, [0, 0])
            total[0] += attributes.get(RUN_INPUT, 0)
            total[1] += attributes.get(RUN_OUTPUT, 0)
        if str(context.get("name", "")).startswith("chat"):
            total = chats.setdefault(session, [0, 0])
            total[0] += attributes.get(INPUT, 0)
            total[1] += attributes.get(OUTPUT, 0)
    return roots, chats


def _each_session_counts_the_cli_totals(watch: _Watch, files: list[Path], killed: int = 0) -> None:
    _each_session_counts_the_cli_totals_in(watch.records(), files, killed)


def _each_session_counts_the_cli_totals_in(
    records: list[dict[str, Any]], files: list[Path], killed: int = 0
) -> None:
    """`killed`: the runs a killed watch left open (never ended)."""
    expected = list(_cli_totals(_source()))
    roots, chats = _tokens_by_session(records)
    sessions = sorted(path.stem for path in files)
    assert {s: roots.get(s) for s in sessions} == dict.fromkeys(sessions, expected)
    assert {s: chats.get(s) for s in sessions} == dict.fromkeys(sessions, expected)
    mine = [r for r in records if r["context"]["session_id"] in sessions]
    # Every run ended, and said nothing went missing.
    assert _stops(mine) == sum(r["event"] == TranscriptEvent.START.value for r in mine) - killed
    assert [r["context"]["error"] for r in mine if r["event"] == TranscriptEvent.ERROR.value] == []


def _stops(records: list[dict[str, Any]]) -> int:
    return sum(r["event"] == TranscriptEvent.STOP.value for r in records)


@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGINT])
def test_runs_ended_by_a_stop_keep_their_spans(how: signal.Signals, tmp_path: Path) -> None:
    """The watch stopped with every session's run open: all of them end at once. Before: 27 of
    the 40 runs had no root span record (their totals 0 / 0)."""
    watch = _Watch(tmp_path, "--idle", "inf")
    watch.start()
    try:
        files = _write_sessions(watch)
    finally:
        watch.stop(how)
    _each_session_counts_the_cli_totals(watch, files)


def test_runs_ended_on_idle_in_one_round_keep_their_spans(tmp_path: Path) -> None:
    """Sessions written in the same round go idle in the same round: their runs end together."""
    watch = _Watch(tmp_path, "--idle", "1")
    watch.start()
    try:
        files = _write_sessions(watch)
        sessions = {path.stem for path in files}
        _wait_for(
            lambda: _stops([r for r in watch.records() if r["context"]["session_id"] in sessions]) == SESSIONS
        )
    finally:
        watch.stop(signal.SIGTERM)
    _each_session_counts_the_cli_totals(watch, files)


def test_runs_taken_over_together_after_sigkill_keep_their_spans(tmp_path: Path) -> None:
    """SIGKILL with every run open: the next start takes each session over as it starts (each
    run's first chat span reports the killed turn's tokens), and ends them all as it stops."""
    watch = _Watch(tmp_path, "--idle", "inf")
    watch.start()
    try:
        files = _write_sessions(watch)
    finally:
        watch.stop(signal.SIGKILL)
    watch.start()
    watch.stop(signal.SIGTERM)
    _each_session_counts_the_cli_totals(watch, files, killed=SESSIONS)


class _SlowMirror(JsonlMirror):
    """A mirror whose disk turns slow (`each_s` a record), as on a loaded machine."""

    each_s = 0.0

    def write(self, record: PreparedRecord) -> None:
        time.sleep(self.each_s)
        super().write(record)


def test_a_stop_keeps_no_position_past_what_the_writer_had_not_written(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline], monkeypatch: pytest.MonkeyPatch
) -> None:
    """A watch stopping waits for its writer as long as it gets on, and keeps the positions only
    once what the runs' ends queued is written: what is still queued when the process exits is
    lost (its shutdown gives up what is left at its deadline). Before: the stop kept the positions
    after a fixed wait (30 s; here made 0), written or not, and the runs ended had no root span
    while the state said their lines were exported."""
    source = _source()
    (tmp_path / "home" / "project").mkdir(parents=True)
    state = tmp_path / "watch.json"
    mirror = _SlowMirror(tmp_path / "runs")
    pipeline = make_pipeline([mirror])
    watcher = Watcher(
        [tmp_path / "home"],
        WatchState(state),
        pipeline=pipeline,
        tracer=recorded_for_the_mirror("test").get_tracer(__name__),
        kernel_changes=False,
    )
    files = _copies(source, tmp_path / "home" / "project")
    assert watcher.poll_once() > 0
    mirror.each_s = 0.05  # the runs' ends (a root span and a stop each): 4 s to write
    monkeypatch.setattr(watch, "_WRITE_WAIT_S", 0.5)
    watcher.close()
    pipeline.shutdown(0.0)  # the process exits: what is still queued is not written
    kept = saved_state(state)["files"]
    records = [r for path in sorted((tmp_path / "runs").glob("*.jsonl")) for r in read_records(path)]
    roots, _ = _tokens_by_session(records)
    expected = list(_cli_totals(source))
    # The writer got on: it was waited for, every run ended in the mirror, every file kept.
    assert {path.stem: kept.get(str(path), {}).get("offset") for path in files} == {
        path.stem: path.stat().st_size for path in files
    }
    assert {path.stem: roots.get(path.stem) for path in files} == {path.stem: expected for path in files}


class _StoppingMirror(JsonlMirror):
    """A mirror that stops the watch (as SIGTERM does) once it has written its first record."""

    watcher: Watcher | None = None

    def write(self, record: PreparedRecord) -> None:
        super().write(record)
        if self.watcher is not None:
            self.watcher.stopped.set()


def test_a_stop_during_a_round_over_many_sessions_does_not_wait_for_the_round(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """SIGTERM while a round reads the backlog of many sessions (a start after the watch was
    stopped a while: issue 51's soak, one stop took 115.8 s): the sessions not read yet are left
    to the next start, which goes on from their kept positions, every line once. Before: the
    round read them all first (systemd kills a service still stopping after 90 s)."""
    source = _source()
    (tmp_path / "home" / "project").mkdir(parents=True)
    state = tmp_path / "watch.json"
    tracer = recorded_for_the_mirror("test").get_tracer(__name__)
    files = _copies(source, tmp_path / "home" / "project")
    state.write_text(json.dumps({"version": 1, "files": {}}))  # not a first start: from their start
    mirror = _StoppingMirror(tmp_path / "runs")
    watcher = Watcher([tmp_path / "home"], WatchState(state), pipeline=make_pipeline([mirror]), tracer=tracer)
    mirror.watcher = watcher
    watcher.run()  # stopped by its first record written
    first = {
        r["context"]["session_id"] for path in (tmp_path / "runs").glob("*.jsonl") for r in read_records(path)
    }
    assert 0 < len(first) < SESSIONS
    again = Watcher(
        [tmp_path / "home"],
        WatchState(state),
        pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
        tracer=tracer,
        kernel_changes=False,
    )
    again.poll_once()
    again.close()
    records = [r for path in sorted((tmp_path / "runs").glob("*.jsonl")) for r in read_records(path)]
    entries = [r["context"]["raw"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    assert len(entries) == len(set(entries))
    _each_session_counts_the_cli_totals_in(records, files)
