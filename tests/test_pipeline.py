"""`TranscriptPipeline` and the JSONL mirror: failing sinks, the backlog bound, flush,
shutdown, file permissions and naming, fixed-path mode, fork."""

from __future__ import annotations

import logging
import os
import re
import signal
import stat
import threading
import time
import warnings
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

import transcript_otel.sinks.jsonl as jsonl_module
import transcript_otel.sinks.jsonl_files as jsonl_files
from transcript_otel import (
    TranscriptEmitter,
    TranscriptPipeline,
    check_invariants,
    read_records,
    reconstruct_transcript,
)
from transcript_otel.capture.defaults import pipeline_from_environment
from transcript_otel.capture.writer import MAX_DEFER_S
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks import JsonlMirror, Sink

from helpers import entry_contexts, run_records

MakePipeline = Callable[..., TranscriptPipeline]
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


class RecordingSink(Sink):
    """A test sink: keeps what it is given; can fail or block on demand."""

    def __init__(
        self,
        name: str = "recording",
        *,
        fail_write: Callable[[PreparedRecord], bool] | None = None,
        fail_flush: bool = False,
        fail_path: bool = False,
    ) -> None:
        self.name = name
        self.records: list[PreparedRecord] = []
        self.fail_write = fail_write
        self.fail_flush = fail_flush
        self.fail_path = fail_path
        self.flushes = 0

    def local_path(self, run: RunInfo) -> str | None:
        if self.fail_path:
            raise RuntimeError("cannot name a file")
        return None

    def write(self, record: PreparedRecord) -> None:
        if self.fail_write is not None and self.fail_write(record):
            raise RuntimeError("disk on fire")
        self.records.append(record)

    def flush(self) -> None:
        self.flushes += 1
        if self.fail_flush:
            raise OSError("flush failed")

    def events(self) -> list[str]:
        return [record.event.value for record in self.records]


class BlockingSink(RecordingSink):
    """Blocks the writer on the first `transcript.entry` until `release` is set."""

    def __init__(self) -> None:
        super().__init__("blocking")
        self.entered = threading.Event()
        self.release = threading.Event()
        self.timed_out = False
        self._blocked_once = False

    def write(self, record: PreparedRecord) -> None:
        if record.event is TranscriptEvent.ENTRY and not self._blocked_once:
            self._blocked_once = True
            self.entered.set()
            # Bounded, so a regression fails the test instead of hanging the suite.
            self.timed_out = not self.release.wait(10.0)
        super().write(record)


def errors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record for record in records if record["event"] == "transcript.error"]


def micros(timestamp: str) -> int:
    return (datetime.fromisoformat(timestamp) - EPOCH) // timedelta(microseconds=1)


# -- failing sinks ---------------------------------------------------------------------


def test_sink_failing_on_every_write(
    make_pipeline: MakePipeline, runs_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failing = RecordingSink("failing", fail_write=lambda record: True)
    healthy = RecordingSink("healthy")
    pipeline = make_pipeline([JsonlMirror(runs_dir), failing, healthy])
    with caplog.at_level(logging.WARNING, logger="transcript_otel"):
        with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
            emitter.emit("user_message", detail={"text": "hi"})
            emitter.emit("tool_use", source="subagent:1")
        summary = emitter.stop()
    assert summary.total_entries == 2
    records = run_records(emitter)
    # Errors about a batch follow the batch, in the order of the records they are about.
    assert [r["event"] for r in records if r["event"] != "transcript.error"] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ]
    assert len(errors(records)) == 4
    failed_about = [
        (e["context"]["failed_event"], e["context"]["entry_type"], e["context"]["source"])
        for e in errors(records)
    ]
    assert failed_about == [
        ("transcript.start", None, None),
        ("transcript.entry", "user_message", "main"),
        ("transcript.entry", "tool_use", "subagent:1"),
        ("transcript.stop", None, None),
    ]
    for error in errors(records):
        assert error["level"] == "WARNING"
        assert error["context"]["sink"] == "failing"
        assert "sink 'failing' failed: RuntimeError: disk on fire" in error["context"]["error"]
    assert failing.records == []
    # The other healthy sink got the same records and the same four errors.
    assert sorted(healthy.events()) == sorted(r["event"] for r in records)
    assert [r.context["failed_event"] for r in healthy.records if r.event is TranscriptEvent.ERROR] == [
        e["context"]["failed_event"] for e in errors(records)
    ]
    # Python logging hears about a broken sink once, not once per record.
    warnings_about_failing = [r for r in caplog.records if "'failing'" in r.getMessage()]
    assert len(warnings_about_failing) == 1


def test_sink_failing_on_one_entry_skips_it_only_there(make_pipeline: MakePipeline, runs_dir: Path) -> None:
    flaky = RecordingSink("flaky", fail_write=lambda r: r.context.get("sequence_number") == 2)
    healthy = RecordingSink("healthy")
    pipeline = make_pipeline([flaky, JsonlMirror(runs_dir), healthy])
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    for index in range(3):
        emitter.emit("assistant_message", detail={"i": index})
    emitter.stop()
    records = run_records(emitter)
    assert [c["sequence_number"] for c in entry_contexts(records)] == [1, 2, 3]
    (error,) = errors(records)
    assert error["context"]["sink"] == "flaky"
    assert error["context"]["sequence_number"] == 2
    assert error["context"]["entry_type"] == "assistant_message"
    assert error["context"]["failed_event"] == "transcript.entry"
    flaky_entries = [r.context["sequence_number"] for r in flaky.records if r.event is TranscriptEvent.ENTRY]
    assert flaky_entries == [1, 3]
    assert "transcript.error" not in flaky.events()  # the error about a sink is not sent to it
    assert sorted(healthy.events()) == sorted(r["event"] for r in records)


def test_sink_failing_in_flush(make_pipeline: MakePipeline, runs_dir: Path) -> None:
    """A flush failure never reaches the agent; the other sinks get everything and an error."""
    bad_flush = RecordingSink("bad_flush", fail_flush=True)
    pipeline = make_pipeline([JsonlMirror(runs_dir), bad_flush])
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    for index in range(10):
        emitter.emit("assistant_message", detail={"i": index})
    assert emitter.flush() is True
    summary = emitter.stop()
    assert summary.total_entries == 10
    records = run_records(emitter)
    assert [c["detail"]["i"] for c in entry_contexts(records)] == list(range(10))
    # The failing sink still receives every record after its failed flush.
    assert [
        r.context["sequence_number"] for r in bad_flush.records if r.event is TranscriptEvent.ENTRY
    ] == list(range(1, 11))
    assert bad_flush.flushes >= 1
    # ... and the failure is reported in the transcript, naming the sink.
    assert any("bad_flush" in e["context"]["error"] for e in errors(records)), errors(records)


def test_sink_failing_to_name_the_run_file(
    make_pipeline: MakePipeline, runs_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    broken = RecordingSink("broken", fail_path=True)
    pipeline = make_pipeline([broken, JsonlMirror(runs_dir)])
    with (
        caplog.at_level(logging.WARNING, logger="transcript_otel"),
        TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter,
    ):
        emitter.emit("user_message")
        path = emitter.jsonl_path
    # The sink after it still names the file, and the entries reach both sinks.
    assert path is not None
    assert Path(path).parent == runs_dir
    assert len(entry_contexts(run_records(emitter))) == 1
    assert [r for r in broken.records if r.event is TranscriptEvent.ENTRY]
    assert any("'broken'" in r.getMessage() and "could not name" in r.getMessage() for r in caplog.records)


def test_run_file_is_named_on_the_writer_not_on_the_agent_thread(
    make_pipeline: MakePipeline, runs_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Naming a run's file claims the name in the directory: never on the agent's thread,
    which must not wait for a filesystem, unless the application asks for the path."""
    looked_from: list[str] = []
    claim = jsonl_files.claim_private

    def recording_claim(path: Path) -> bool:
        looked_from.append(threading.current_thread().name)
        return claim(path)

    monkeypatch.setattr(jsonl_module, "claim_private", recording_claim)
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    emitter.emit("user_message", detail={"text": "hi"})
    emitter.stop()
    assert looked_from
    assert threading.current_thread().name not in looked_from, looked_from
    # The file the writer named is the one the emitter reports, and it holds the run.
    path = emitter.jsonl_path
    assert path is not None
    assert Path(path).exists()
    assert len(entry_contexts(run_records(emitter))) == 1
    assert len(looked_from) == 1  # named once


# -- the backlog bound -----------------------------------------------------------------


def test_full_backlog_drops_before_numbering_and_reports(make_pipeline: MakePipeline, runs_dir: Path) -> None:
    blocking = BlockingSink()
    pipeline = make_pipeline([JsonlMirror(runs_dir), blocking], max_backlog_bytes=1)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    emitter.emit("user_message", detail={"i": 0})
    assert blocking.entered.wait(10.0), "the writer never reached the blocking sink"
    # The writer is stuck inside a sink: nothing drains the backlog now.
    limit = pipeline.backlog_limit
    for index in range(1, 201):
        emitter.emit("assistant_message", detail={"i": index})  # returns at once, never blocks
    dropped = emitter.dropped_entries
    assert dropped == 200 - limit
    assert dropped > 0
    blocking.release.set()
    summary = emitter.stop()
    assert not blocking.timed_out
    assert emitter.dropped_entries == dropped
    records = run_records(emitter)
    contexts = entry_contexts(records)
    # Dropped entries never got a sequence number: the transcript has no gap.
    assert [c["sequence_number"] for c in contexts] == list(range(1, limit + 2))
    assert [c["detail"]["i"] for c in contexts] == list(range(limit + 1))
    (error,) = errors(records)
    assert error["level"] == "WARNING"
    assert error["context"]["dropped_entries"] == dropped
    assert f"{dropped} transcript entries dropped" in error["context"]["error"]
    stop = records[-1]
    assert stop["event"] == "transcript.stop"
    assert stop["context"]["dropped_entries"] == dropped
    assert stop["context"]["total_entries"] == limit + 1
    assert summary.total_entries == limit + 1
    assert check_invariants(records) == []


def test_timestamp_is_captured_at_emit_not_at_write(make_pipeline: MakePipeline, runs_dir: Path) -> None:
    blocking = BlockingSink()
    pipeline = make_pipeline([JsonlMirror(runs_dir), blocking])
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.emit("user_message")
    assert blocking.entered.wait(10.0)
    before = time.time_ns() // 1000
    emitter.emit("assistant_message")
    after = time.time_ns() // 1000
    time.sleep(0.01)  # the writer resumes well after the emit
    blocking.release.set()
    emitter.stop()
    second = entry_contexts(run_records(emitter))[1]
    assert before <= micros(second["timestamp"]) <= after


# -- flush and shutdown ----------------------------------------------------------------


def test_flush_returns_true_with_everything_on_disk(jsonl_pipeline: TranscriptPipeline) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=jsonl_pipeline)
    emitter.start()
    for index in range(1000):
        emitter.emit("assistant_message", source=f"subagent:{index % 3}", detail={"i": index})
    assert jsonl_pipeline.flush() is True
    records = run_records(emitter)  # read before stop(): the flush alone put it on disk
    assert records[0]["event"] == "transcript.start"
    assert sorted(c["detail"]["i"] for c in entry_contexts(records)) == list(range(1000))
    assert jsonl_pipeline.flush(deep=True) is True


def test_emit_after_shutdown_is_dropped_and_counted(make_pipeline: MakePipeline, runs_dir: Path) -> None:
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.emit("user_message")
    pipeline.shutdown(5.0)
    assert emitter.jsonl_path is not None
    written = Path(emitter.jsonl_path).read_bytes()
    assert len(entry_contexts(run_records(emitter))) == 1
    emitter.emit("assistant_message")
    emitter.emit("assistant_message", source="subagent:x")
    assert emitter.dropped_entries == 2
    summary = emitter.stop(timeout_s=0.5)  # no exception, bounded
    assert summary.total_entries == 1
    assert pipeline.flush(0.5) is False  # nothing can be written any more
    assert Path(emitter.jsonl_path).read_bytes() == written
    pipeline.shutdown(1.0)  # idempotent


# -- files -----------------------------------------------------------------------------


def test_files_are_private(jsonl_pipeline: TranscriptPipeline, runs_dir: Path) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=jsonl_pipeline) as emitter:
        emitter.emit("user_message", detail={"secret": "token"})
    assert emitter.jsonl_path is not None
    path = Path(emitter.jsonl_path)
    assert path.parent == runs_dir
    assert stat.S_IMODE(runs_dir.stat().st_mode) == 0o700
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_fixed_path_file_is_private(make_pipeline: MakePipeline, tmp_path: Path) -> None:
    target = tmp_path / "private" / "all.jsonl"
    pipeline = make_pipeline([JsonlMirror(path=target)])
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
        emitter.emit("user_message")
    assert emitter.jsonl_path == str(target)
    assert stat.S_IMODE(target.parent.stat().st_mode) == 0o700
    assert stat.S_IMODE(target.stat().st_mode) == 0o600


def test_file_name_has_time_prompt_and_session(jsonl_pipeline: TranscriptPipeline, runs_dir: Path) -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    with TranscriptEmitter(
        prompt_name="code review/ü!", adapter="a", session_id="550e8400-e29b", pipeline=jsonl_pipeline
    ) as emitter:
        emitter.emit("user_message")
    after = datetime.now(UTC)
    assert emitter.jsonl_path is not None
    name = Path(emitter.jsonl_path).name
    match = re.fullmatch(r"(\d{8}T\d{6}Z)_code-review_550e8400-e29b\.jsonl", name)
    assert match, name
    started = datetime.strptime(match.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
    assert before <= started <= after
    assert [p.name for p in runs_dir.iterdir()] == [name]


def test_file_name_without_session_uses_the_run_id(jsonl_pipeline: TranscriptPipeline) -> None:
    with TranscriptEmitter(prompt_name="review", adapter="a", pipeline=jsonl_pipeline) as emitter:
        emitter.emit("user_message")
    assert emitter.jsonl_path is not None
    assert re.fullmatch(rf"\d{{8}}T\d{{6}}Z_review_{emitter.run_id}\.jsonl", Path(emitter.jsonl_path).name)


def test_each_run_has_its_own_file(jsonl_pipeline: TranscriptPipeline) -> None:
    """Two runs of the same prompt in the same session, started together, do not share a file."""
    first = TranscriptEmitter(prompt_name="p", adapter="a", session_id="s", pipeline=jsonl_pipeline)
    second = TranscriptEmitter(prompt_name="p", adapter="a", session_id="s", pipeline=jsonl_pipeline)
    first.start()
    second.start()
    first.emit("user_message", detail={"run": 1})
    second.emit("user_message", detail={"run": 2})
    first.stop()
    second.stop()
    assert first.jsonl_path != second.jsonl_path
    for emitter, run in ((first, 1), (second, 2)):
        records = run_records(emitter)
        assert {r["context"]["run_id"] for r in records if "run_id" in r["context"]} == {emitter.run_id}
        assert [c["detail"]["run"] for c in entry_contexts(records)] == [run]


def test_fixed_path_mode_appends_every_run(make_pipeline: MakePipeline, tmp_path: Path) -> None:
    target = tmp_path / "transcripts.jsonl"
    pipeline = make_pipeline([JsonlMirror(path=target)])
    run_ids = []
    for index in range(2):
        with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
            emitter.emit("user_message", detail={"run": index})
            emitter.emit("assistant_message", detail={"run": index})
        run_ids.append(emitter.run_id)
    # Another pipeline (another process, say) appends to the same file.
    other = make_pipeline([JsonlMirror(path=target)])
    with TranscriptEmitter(prompt_name="q", adapter="a", pipeline=other) as emitter:
        emitter.emit("user_message", detail={"run": 2})
    run_ids.append(emitter.run_id)
    records = list(read_records(target))
    assert [r["event"] for r in records] == [
        "transcript.start",
        "transcript.entry",
        "transcript.entry",
        "transcript.stop",
    ] * 2 + ["transcript.start", "transcript.entry", "transcript.stop"]
    assert [r["context"]["run_id"] for r in records if r["event"] == "transcript.start"] == run_ids
    assert [c["detail"]["run"] for c in entry_contexts(records)] == [0, 0, 1, 1, 2]
    assert check_invariants(records) == []
    assert len(reconstruct_transcript(records)) == 5


def test_directory_from_environment(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv("TRANSCRIPT_OTEL_JSONL_DIR", str(tmp_path / "env-runs"))
    monkeypatch.setenv("TRANSCRIPT_OTEL_LOG_RECORDS", "false")
    monkeypatch.setenv("TRANSCRIPT_OTEL_SPAN_EVENTS", "false")
    monkeypatch.delenv("TRANSCRIPT_OTEL_JSONL_PATH", raising=False)
    pipeline = pipeline_from_environment()
    try:
        with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline) as emitter:
            emitter.emit("user_message")
        assert emitter.jsonl_path is not None
        assert Path(emitter.jsonl_path).parent == tmp_path / "env-runs"
        assert len(entry_contexts(run_records(emitter))) == 1
    finally:
        pipeline.shutdown(5.0)


# -- fork ------------------------------------------------------------------------------


def wait_for_child(pid: int, timeout_s: float) -> int:
    """The child's exit code; a child that hangs is killed and fails the test."""
    deadline = time.monotonic() + timeout_s
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status)
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            pytest.fail("the forked child did not finish")
        time.sleep(0.01)


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs os.fork")
def test_fork_child_writes_its_own_run_and_no_parent_line_twice(
    make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    pipeline = make_pipeline([JsonlMirror(runs_dir)])
    parent = TranscriptEmitter(prompt_name="parent", adapter="a", pipeline=pipeline)
    parent.start()
    for index in range(500):
        parent.emit("assistant_message", detail={"i": index})
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # "multi-threaded, fork() may deadlock"
        pid = os.fork()
    if pid == 0:  # pragma: no cover - the child
        code = 1
        try:
            child = TranscriptEmitter(prompt_name="child", adapter="a", session_id="kid", pipeline=pipeline)
            with child:
                for index in range(20):
                    child.emit("user_message", detail={"c": index})
            code = 0 if child.flush(5.0) else 2
        finally:
            os._exit(code)
    assert wait_for_child(pid, timeout_s=30.0) == 0
    for index in range(500, 600):
        parent.emit("assistant_message", detail={"i": index})
    parent.stop()
    assert parent.jsonl_path is not None
    lines = Path(parent.jsonl_path).read_bytes().splitlines()
    assert len(lines) == len(set(lines)), "a line of the parent was written twice"
    records = run_records(parent)
    assert [c["sequence_number"] for c in entry_contexts(records)] == list(range(1, 601))
    assert [r["event"] for r in records].count("transcript.start") == 1
    assert check_invariants(records) == []
    (child_file,) = runs_dir.glob("*_child_kid.jsonl")
    child_records = list(read_records(child_file))
    assert [r["event"] for r in child_records] == ["transcript.start"] + ["transcript.entry"] * 20 + [
        "transcript.stop"
    ]
    assert [c["detail"]["c"] for c in entry_contexts(child_records)] == list(range(20))
    assert {r["context"]["prompt_name"] for r in child_records} == {"child"}


# -- deferred actions (how instrumentors end their spans) -------------------------------


def test_after_pending_runs_on_the_writer_once_earlier_entries_are_written(
    jsonl_pipeline: TranscriptPipeline,
) -> None:
    emitter = TranscriptEmitter(prompt_name="deferred", adapter="test", pipeline=jsonl_pipeline)
    seen: list[tuple[int, str]] = []

    def action() -> None:
        assert emitter.jsonl_path is not None
        lines = Path(emitter.jsonl_path).read_text().splitlines()
        seen.append((len(lines), threading.current_thread().name))

    emitter.start()
    for number in range(300):  # more than one writer batch
        emitter.emit("assistant_message", detail={"text": f"m{number}"})
    emitter.after_written(action)
    assert jsonl_pipeline.flush(5)
    assert seen == [(301, "transcript-otel-writer")]


def test_after_pending_runs_at_once_after_shutdown_and_a_failure_is_counted(
    jsonl_pipeline: TranscriptPipeline,
) -> None:
    jsonl_pipeline.shutdown(5)
    ran: list[str] = []
    jsonl_pipeline.after_pending(lambda: ran.append(threading.current_thread().name))
    assert ran == [threading.current_thread().name]

    def broken() -> None:
        raise RuntimeError("boom")

    before = jsonl_pipeline.internal_errors
    jsonl_pipeline.after_pending(broken)  # never raises into the caller
    assert jsonl_pipeline.internal_errors == before + 1


# -- a pipeline drained by its caller (`transcript-otel import`) ------------------------


def test_a_pipeline_drained_by_its_caller_writes_on_the_callers_thread_only(
    make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    threads_before = set(threading.enumerate())  # other tests' writers may still be stopping
    pipeline = make_pipeline([JsonlMirror(runs_dir)], drained_by_caller=True)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    emitter.emit("user_message", detail={"i": 0})
    ran: list[str] = []
    emitter.after_written(lambda: ran.append(threading.current_thread().name))
    time.sleep(0.1)  # a writer thread, if one ran, would have written by now
    assert [path.stat().st_size for path in runs_dir.glob("*.jsonl")] in ([], [0])
    assert ran == []
    assert set(threading.enumerate()) <= threads_before
    pipeline.drain_here()
    assert ran == [threading.current_thread().name]
    assert [c["detail"] for c in entry_contexts(run_records(emitter))] == [{"i": 0}]


def test_a_pipeline_drained_by_its_caller_never_drops(make_pipeline: MakePipeline, runs_dir: Path) -> None:
    # A bound of 1 byte, which a threaded pipeline holds to by dropping (the test above):
    # here the caller's pace bounds the backlog, and everything it queued is written.
    pipeline = make_pipeline([JsonlMirror(runs_dir)], max_backlog_bytes=1, drained_by_caller=True)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    for index in range(3000):
        emitter.emit("assistant_message", detail={"i": index})
    assert pipeline.wait_for_room(5.0) is True  # drains, at once
    assert not pipeline.backlog
    summary = emitter.stop()
    assert emitter.dropped_entries == 0
    records = run_records(emitter)
    assert [c["detail"]["i"] for c in entry_contexts(records)] == list(range(3000))
    assert errors(records) == []
    assert summary.total_entries == 3000
    assert check_invariants(records) == []


@pytest.mark.parametrize("drained_by_caller", [False, True], ids=["writer thread", "caller"])
def test_actions_deferred_by_actions_run_as_on_the_writer_thread(
    make_pipeline: MakePipeline, runs_dir: Path, drained_by_caller: bool
) -> None:
    """While the caller drains, it is the writer: what an action of the drain does takes its
    place in the queue: an entry it emits is written next, before what was queued after the
    action, and an action it queues (a span that ends after another) runs right after that
    entry; a flush within is a no-op; all as on the writer thread."""
    taken = RecordingSink()
    pipeline = make_pipeline([JsonlMirror(runs_dir), taken], drained_by_caller=drained_by_caller)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    seen: list[tuple[str, int]] = []

    def lines() -> int:  # the records the sinks have taken (in the file, or in its buffer)
        return len(taken.records)

    def outer() -> None:
        seen.append(("outer", lines()))
        emitter.emit("assistant_message", detail={"after": "outer"})
        emitter.after_written(lambda: seen.append(("inner", lines())))
        seen.append(("flushed within", int(pipeline.flush(1.0))))

    emitter.start()
    for index in range(300):  # more than one batch
        emitter.emit("assistant_message", detail={"i": index})
    emitter.after_written(outer)
    emitter.emit("assistant_message", detail={"after": "queued"})
    assert pipeline.flush(5.0) is True
    assert seen == [("outer", 301), ("flushed within", 0), ("inner", 302)]
    details = [c["detail"] for c in entry_contexts(run_records(emitter))]
    assert details[300:] == [{"after": "outer"}, {"after": "queued"}]


def test_a_pipeline_drained_by_its_caller_flushes_its_sinks_once_a_drain(
    make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    """Not after every batch (a span's end ends one: an import has thousands); what was
    drained is in the file when the drain returns."""
    taken = RecordingSink()
    pipeline = make_pipeline([JsonlMirror(runs_dir), taken], drained_by_caller=True)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    for index in range(10):
        emitter.emit("assistant_message", detail={"i": index})
        emitter.after_written(lambda: None)  # each ends a batch
    pipeline.drain_here()
    assert taken.flushes == 1
    assert emitter.jsonl_path is not None
    assert len(Path(emitter.jsonl_path).read_text().splitlines()) == 11


def test_a_failed_flush_after_a_drain_by_the_caller_is_reported_for_what_it_drained(
    make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    failing = RecordingSink("failing", fail_flush=True)
    pipeline = make_pipeline([JsonlMirror(runs_dir), failing], drained_by_caller=True)
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
    emitter.start()
    for index in range(5):
        emitter.emit("assistant_message", detail={"i": index})
        emitter.after_written(lambda: None)
    pipeline.drain_here()
    (report,) = errors(run_records(emitter))
    assert report["context"]["sink"] == "failing"
    assert report["context"]["possibly_lost_records"] == 6  # the start and the five entries


def test_only_a_pipeline_drained_by_its_caller_is_drained_by_it(
    make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    with pytest.raises(RuntimeError, match="drained by its caller"):
        make_pipeline([JsonlMirror(runs_dir)]).drain_here()


# -- when the writer writes: after the agent's bursts, bounded ----------------------------


class TimedSink(RecordingSink):
    """Notes when each batch reached it."""

    def __init__(self) -> None:
        super().__init__("timed")
        self.batch_times: list[float] = []

    def flush(self) -> None:
        super().flush()
        self.batch_times.append(time.monotonic())


def _emit_every_millisecond(emitter: TranscriptEmitter, stop: threading.Event) -> threading.Thread:
    def agent() -> None:
        number = 0
        while not stop.is_set():
            emitter.emit("assistant_message", detail={"n": number})
            number += 1
            time.sleep(0.001)

    thread = threading.Thread(target=agent)
    thread.start()
    return thread


def test_an_agent_that_never_pauses_still_gets_its_records_written(make_pipeline: MakePipeline) -> None:
    sink = TimedSink()
    pipeline = make_pipeline([sink])
    emitter = TranscriptEmitter(prompt_name="busy", adapter="test", pipeline=pipeline)
    stop = threading.Event()
    started = time.monotonic()
    agent = _emit_every_millisecond(emitter, stop)
    try:
        deadline = started + 10 * MAX_DEFER_S
        while not sink.batch_times and time.monotonic() < deadline:
            time.sleep(0.01)
        # The writer waited for a pause that never came, for at most MAX_DEFER_S after its tick.
        assert sink.batch_times, "nothing was written while the agent kept emitting"
        assert agent.is_alive()
    finally:
        stop.set()
        agent.join()
    assert pipeline.flush(5.0)
    numbers = [record.detail["n"] for record in sink.records]
    assert numbers == list(range(len(numbers)))


def test_a_flush_does_not_wait_for_the_agent_to_pause(make_pipeline: MakePipeline) -> None:
    sink = TimedSink()
    pipeline = make_pipeline([sink])
    emitter = TranscriptEmitter(prompt_name="busy", adapter="test", pipeline=pipeline)
    stop = threading.Event()
    agent = _emit_every_millisecond(emitter, stop)
    try:
        time.sleep(0.1)  # the writer has ticked and is waiting for a pause
        emitter.emit("user_message", detail={"marker": True})
        asked = time.monotonic()
        assert pipeline.flush(5.0) is True
        waited = time.monotonic() - asked
    finally:
        stop.set()
        agent.join()
    assert any(record.context.get("entry_type") == "user_message" for record in sink.records)
    assert waited < MAX_DEFER_S / 2, f"flush waited {waited:.3f} s for the burst to end"
