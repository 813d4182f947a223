"""Failure modes found in review: forks, slow sinks at shutdown, hostile fields, bad settings."""

from __future__ import annotations

import os
import time
import warnings
from collections.abc import Callable
from pathlib import Path

import orjson
import pytest

import transcript_otel.sinks.jsonl as jsonl_module
from transcript_otel import TranscriptEmitter, TranscriptPipeline, TranscriptReadWarning, read_records
from transcript_otel.reading.otlp_records import record_from_otlp
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks import JsonlMirror, Sink

from helpers import entry_contexts, run_records

MakePipeline = Callable[..., TranscriptPipeline]


class SlowSink(Sink):
    """An OTel-like sink that takes 50 ms per record (a synchronous exporter, backend down)."""

    name = "slow"

    def write(self, record: PreparedRecord) -> None:
        time.sleep(0.05)


def test_shutdown_completes_the_mirror_behind_a_slow_sink(
    make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    pipeline = make_pipeline([JsonlMirror(runs_dir), SlowSink()])
    emitter = TranscriptEmitter(prompt_name="slow", adapter="a", pipeline=pipeline)
    emitter.start()
    for index in range(200):
        emitter.emit("user_message", detail={"index": index})
    started = time.monotonic()
    pipeline.shutdown(2.0)  # the slow sink alone would need 10 s
    assert time.monotonic() - started < 4.0
    contexts = entry_contexts(run_records(emitter))
    assert [c["sequence_number"] for c in contexts] == list(range(1, 201))


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_child_continues_as_its_own_run(jsonl_pipeline: TranscriptPipeline) -> None:
    emitter = TranscriptEmitter(prompt_name="fork", adapter="a", pipeline=jsonl_pipeline)
    emitter.start()
    emitter.emit("user_message", detail={"who": "parent"})
    assert emitter.flush()
    parent_path = emitter.jsonl_path
    read_end, write_end = os.pipe()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the writer thread exists, on purpose
        pid = os.fork()
    if pid == 0:  # the child
        try:
            emitter.emit("assistant_message", detail={"who": "child"})
            emitter.stop()
            os.write(write_end, (emitter.jsonl_path or "").encode())
        finally:
            os._exit(0)
    os.close(write_end)
    _, status = os.waitpid(pid, 0)
    child_path = os.read(read_end, 4096).decode()
    os.close(read_end)
    assert os.waitstatus_to_exitcode(status) == 0
    assert child_path
    assert child_path != parent_path
    child = entry_contexts(list(read_records(child_path)))
    assert [(c["sequence_number"], c["detail"]["who"]) for c in child] == [(1, "child")]
    emitter.emit("assistant_message", detail={"who": "parent"})
    emitter.stop()
    parent = entry_contexts(run_records(emitter))
    assert [(c["sequence_number"], c["detail"]["who"]) for c in parent] == [(1, "parent"), (2, "parent")]


def test_error_fields_cannot_overwrite_the_run_identity(jsonl_pipeline: TranscriptPipeline) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="real", pipeline=jsonl_pipeline) as emitter:
        emitter.error("something odd", adapter="spoofed", note="bad\udcff")
    (error,) = [r for r in run_records(emitter) if r["event"] == "transcript.error"]
    assert error["context"]["adapter"] == "real"
    assert error["context"]["note"] == "bad\\udcff"


def test_non_finite_settings_fall_back_to_defaults(
    monkeypatch: pytest.MonkeyPatch, make_pipeline: MakePipeline
) -> None:
    from transcript_otel.capture.defaults import pipeline_from_environment

    monkeypatch.setenv("TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH", "inf")
    monkeypatch.setenv("TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES", "nan")
    monkeypatch.setenv("TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT", "inf")
    pipeline = pipeline_from_environment(jsonl=False)
    assert pipeline.max_backlog_bytes == 64 * 1024 * 1024
    assert pipeline.shutdown_timeout_s == 5.0
    pipeline.shutdown(1.0)


def test_nan_with_a_surrogate_still_writes_strict_json(jsonl_pipeline: TranscriptPipeline) -> None:
    with TranscriptEmitter(prompt_name="p", adapter="a", pipeline=jsonl_pipeline) as emitter:
        emitter.emit("tool_result", detail={"ratio": float("nan"), "text": "bad\udcff", "n": -(2**63) - 1})
    assert emitter.jsonl_path is not None
    lines = Path(emitter.jsonl_path).read_bytes().splitlines()
    entry = next(line for line in lines if b"transcript.entry" in line)
    assert b"NaN" not in entry
    (context,) = entry_contexts(run_records(emitter))
    assert context["detail"]["ratio"] is None
    assert context["detail"]["n"] == -(2**63) - 1
    with pytest.raises(orjson.JSONDecodeError):
        orjson.loads(entry)  # the escaped lone surrogate is valid JSON orjson refuses; our reader copes


def test_a_cut_detail_in_otlp_is_kept_as_text_with_a_warning() -> None:
    otlp = {
        "eventName": "transcript.entry",
        "attributes": [
            {"key": "transcript.entry_type", "value": {"stringValue": "user_message"}},
            {"key": "transcript.detail", "value": {"stringValue": '{"text": "cut here'}},
        ],
    }
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        record = record_from_otlp(otlp)
    assert record["context"]["detail"] == '{"text": "cut here'
    assert any(issubclass(w.category, TranscriptReadWarning) for w in caught)


def test_idle_files_are_closed_and_reopened(
    monkeypatch: pytest.MonkeyPatch, make_pipeline: MakePipeline, runs_dir: Path
) -> None:
    monkeypatch.setattr(jsonl_module, "IDLE_CLOSE_S", 0.0)
    mirror = JsonlMirror(runs_dir)
    pipeline = make_pipeline([mirror])
    emitter = TranscriptEmitter(prompt_name="idle", adapter="a", pipeline=pipeline)
    emitter.emit("user_message", detail={"n": 1})
    assert pipeline.flush()  # written, then idle for IDLE_CLOSE_S (0 here): closed
    assert mirror._files == {}
    emitter.emit("user_message", detail={"n": 2})
    emitter.stop()
    assert [c["detail"]["n"] for c in entry_contexts(run_records(emitter))] == [1, 2]


def _square(number: int) -> int:
    time.sleep(0.1)  # work that takes a while: the worker's own writer thread has run meanwhile
    return number * number


def _square_and_record(number: int) -> int:
    """A pool worker that records one entry in the run it inherited."""
    emitter = _INHERITED[0]
    emitter.emit("tool_result", detail={"square": number * number})
    assert emitter.flush(10.0)
    return number * number


_INHERITED: list[TranscriptEmitter] = []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_forked_pool_workers_that_record_nothing_leave_no_file(
    jsonl_pipeline: TranscriptPipeline,
    runs_dir: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A forked pool's workers inherit the run: those that record nothing leave no file (each
    left one holding only `transcript.start`, so `show sess-1` matched 4 runs); one that
    records continues as a run of its own that says which run it was forked from."""
    import multiprocessing

    from transcript_otel.cli import main

    emitter = TranscriptEmitter(prompt_name="pool", adapter="a", session_id="sess-1", pipeline=jsonl_pipeline)
    emitter.start()
    emitter.emit("user_message", detail={"text": "square these"})
    assert emitter.flush()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # the writer thread exists, on purpose
        with multiprocessing.get_context("fork").Pool(3) as pool:
            assert pool.map(_square, range(12)) == [n * n for n in range(12)]
    emitter.stop()
    assert [path.name for path in runs_dir.glob("*.jsonl")] == [Path(str(emitter.jsonl_path)).name]
    monkeypatch.setenv("TRANSCRIPT_OTEL_JSONL_DIR", str(runs_dir))
    capsys.readouterr()
    assert main(["show", "sess-1", "--color", "never"]) == 0
    assert "square these" in capsys.readouterr().out

    _INHERITED[:] = [
        TranscriptEmitter(prompt_name="pool", adapter="a", session_id="s2", pipeline=jsonl_pipeline)
    ]
    _INHERITED[0].start()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with multiprocessing.get_context("fork").Pool(1) as pool:
            assert pool.map(_square_and_record, [3]) == [9]
    parent = _INHERITED.pop()
    parent.stop()
    (child_file,) = [
        path for path in runs_dir.glob("*_s2*.jsonl") if path.name != Path(str(parent.jsonl_path)).name
    ]
    child = list(read_records(child_file))
    assert [r["event"] for r in child] == ["transcript.start", "transcript.entry"]
    assert child[0]["context"]["forked_from_run_id"] == parent.run_id
    assert child[1]["context"]["detail"] == {"square": 9}


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_never_shares_the_file_its_parent_names_after_the_fork(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path
) -> None:
    """The parent names its file after the fork and writes it later; the child, in the same
    second, could not see that name and appended to the parent's file (a flaky test under load).
    Here the order is forced: a pipeline drained by its caller writes nothing until told to."""
    import multiprocessing

    pipeline = make_pipeline([JsonlMirror(runs_dir)], drained_by_caller=True)
    parent = TranscriptEmitter(prompt_name="fork", adapter="a", session_id="same", pipeline=pipeline)
    parent.start()
    parent.emit("user_message", detail={"text": "before the fork"})
    context = multiprocessing.get_context("fork")
    named = context.Event()

    def record_in_child() -> None:
        named.wait(10.0)
        parent.emit("tool_result", detail={"child": True})
        parent.flush(10.0)
        pipeline.shutdown(10.0)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # forking a process with threads
        child = context.Process(target=record_in_child)
        child.start()
    parent_path = Path(str(parent.jsonl_path))  # named (claimed empty) now, after the fork
    assert parent_path.stat().st_size == 0
    named.set()
    child.join(30.0)
    assert child.exitcode == 0
    parent.stop()
    assert parent.flush(10.0)

    (child_path,) = [path for path in runs_dir.glob("*.jsonl") if path != parent_path]
    assert parent.run_id not in child_path.name
    assert "_same-" in child_path.name
    child_records = list(read_records(child_path))
    assert [r["event"] for r in child_records] == ["transcript.start", "transcript.entry"]
    assert child_records[0]["context"]["forked_from_run_id"] == parent.run_id
    assert child_records[1]["context"]["detail"] == {"child": True}
    assert [(r["event"], r["context"].get("detail")) for r in read_records(parent_path)] == [
        ("transcript.start", None),
        ("transcript.entry", {"text": "before the fork"}),
        ("transcript.stop", None),
    ]


def test_two_processes_naming_runs_alike_in_the_same_second_get_two_files(tmp_path: Path) -> None:
    """Two mirrors (what two processes each have) name runs with the same prompt, session and
    start second, neither having written yet: the first name is claimed on disk, so the second
    run takes its run-id suffix instead of appending to the first one's file."""
    started_ns = time.time_ns()
    first = RunInfo("same", "cli", "session-1", started_ns, run_id="a" * 32)
    second = RunInfo("same", "cli", "session-1", started_ns, run_id="b" * 32)

    first_path = Path(JsonlMirror(tmp_path).local_path(first))
    second_path = Path(JsonlMirror(tmp_path).local_path(second))

    assert first_path != second_path
    assert first_path.name.endswith("_same_session-1.jsonl")
    assert second_path.name.endswith("_same_session-1-bbbbbbbbbbbb.jsonl")
    assert first_path.exists()
    assert first_path.stat().st_mode & 0o777 == 0o600


def test_naming_a_run_where_no_file_can_be_made_raises_nothing(tmp_path: Path) -> None:
    """The name stands; the first write fails and is reported as any failed write is."""
    not_a_directory = tmp_path / "file"
    not_a_directory.write_text("")
    path = JsonlMirror(not_a_directory).local_path(RunInfo("p", "a", "s", time.time_ns()))
    assert Path(path).parent == not_a_directory
    assert Path(path).name.endswith("_p_s.jsonl")
