"""Every line the real CLIs printed or logged (the recorded fixtures), with each of its fields in
turn replaced by a value of another type: every mapping still returns canonical entries, and an
import of the session still records a valid run, with no `transcript.error`.

Random JSON rarely reaches a mapping's deeper branches (a block in a message in a line of a
known type); the recorded lines reach them all, so one field at a time is changed in a line
the CLI really writes. A line shape (its keys, and the values of the keys a mapping branches
on) is changed once, in the first file that has it. Each file's lines go through one mapper,
changed lines and the real ones interleaved, as a session with odd lines in it would.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Final

import pytest

from transcript_otel import check_invariants, read_records
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.mappings.codex import CodexMapper
from transcript_otel.mappings.codex_exec import CodexExecAdapter
from transcript_otel.mappings.gemini_stream import GeminiStreamJsonAdapter
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.model.entries import CANONICAL_ENTRY_TYPES, TranscriptEvent
from transcript_otel.records.serialize import dumps
from transcript_otel.sessions.files import SessionKind
from transcript_otel.sessions.recorder import HARNESSES, SessionRecorder
from transcript_otel.sessions.timeline import TimedLine
from transcript_otel.sinks import JsonlMirror

from session_fixtures import SESSIONS

FIXTURES: Final = Path(__file__).resolve().parent / "fixtures"
# Of another type than any field the CLIs write holds, or of the same type but unexpected.
ODD_VALUES: Final[tuple[Any, ...]] = ([], {}, None, 7, "x")
# The keys whose values a mapping branches on: lines differing there are different shapes.
BRANCH_KEYS: Final = frozenset({"type", "subtype", "method", "name", "role", "kind", "status"})
MAX_DEPTH: Final = 7


def _shape(value: Any, key: Any = None, depth: int = 0) -> Any:
    if depth > MAX_DEPTH:
        return "deeper"
    if isinstance(value, dict):
        return tuple(sorted((k, _shape(v, k, depth + 1)) for k, v in value.items()))
    if isinstance(value, list):
        return tuple(_shape(item, key, depth + 1) for item in value[:3])
    return value if key in BRANCH_KEYS and isinstance(value, str) else type(value).__name__


def _paths(value: Any, at: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    """Where a value can be replaced: every field, and the first items of lists, to a depth."""
    yield at
    if len(at) >= MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, (*at, key))
    elif isinstance(value, list):
        for index, item in enumerate(value[:3]):
            yield from _paths(item, (*at, index))


def _replaced(value: Any, at: tuple[Any, ...], new: Any) -> Any:
    if not at:
        return new
    copied = value.copy()
    copied[at[0]] = _replaced(value[at[0]], at[1:], new)
    return copied


def _mutations(path: Path, seen: set[Any]) -> Iterator[bytes]:
    """The file's lines, each of a shape not `seen` before preceded by its changed copies."""
    for line in path.read_bytes().splitlines():
        value = json.loads(line)
        shape = _shape(value)
        if shape not in seen:
            seen.add(shape)
            for at in _paths(value):
                for odd in ODD_VALUES:
                    yield json.dumps(_replaced(value, at, odd)).encode()
        yield line


def _assert_canonical(entries: Any) -> None:
    listed = entries if isinstance(entries, list) else [] if entries is None else [entries]
    for entry in listed:
        assert isinstance(entry, MappedEntry)
        assert entry.entry_type in CANONICAL_ENTRY_TYPES
        dumps(entry.detail)  # what the writer will do with it: must not raise


def _session_files(cli: str) -> list[Path]:
    """The session logs (not the stdout the CLI printed beside them)."""
    return sorted(path for path in (SESSIONS / cli).rglob("*.jsonl") if not path.name.startswith("stdout"))


@pytest.mark.parametrize(
    ("kind", "cli", "recorded"),
    [
        (SessionKind.CLAUDE_CODE, "claude_code", 15),
        (SessionKind.CODEX, "codex", 15),
        (SessionKind.GEMINI, "gemini", 6),
    ],
    ids=str,
)
def test_session_lines_with_a_field_changed_map_and_record_a_valid_run(
    kind: SessionKind,
    cli: str,
    recorded: int,
    tmp_path: Path,
    make_pipeline: Callable[..., TranscriptPipeline],
) -> None:
    harness = HARNESSES[kind]
    files = _session_files(cli)
    assert len(files) >= recorded
    seen: set[Any] = set()
    for index, path in enumerate(files):
        # Written on this thread, as an import writes: nothing dropped however fast lines come.
        pipeline = make_pipeline([JsonlMirror(tmp_path / str(index))], drained_by_caller=True)
        recorder = SessionRecorder(
            harness, session_id=f"s-{index}", run_id=f"r-{index}", started_ns=1, pipeline=pipeline
        )
        map_line = harness.mapper(None, path)  # not guarded: a mapping that raises fails the test
        for number, line in enumerate(_mutations(path, seen)):
            said = map_line(line, "main")
            assert isinstance(said, SessionLine)
            _assert_canonical(said.entries)
            assert said.timestamp_ns is None or isinstance(said.timestamp_ns, int)
            assert all(v is None or isinstance(v, str) for v in (said.model, said.session_id))
            recorder.apply(TimedLine(said.timestamp_ns or 1, 0, number, "main", said, len(line)))
            if len(pipeline.backlog) >= 1000:
                pipeline.drain_here()
        recorder.finish()
        pipeline.shutdown(30.0)
        (run,) = (tmp_path / str(index)).glob("*.jsonl")
        records = list(read_records(run))
        assert [r["context"]["error"] for r in records if r["event"] == TranscriptEvent.ERROR.value] == []
        assert check_invariants(records) == []


def _claude_stream_json() -> Callable[[bytes], Any]:
    mapper = ClaudeStreamMapper()
    return lambda line: mapper.message(json.loads(line))


def _codex_exec_json() -> Callable[[bytes], Any]:
    adapter = CodexExecAdapter()
    return lambda line: adapter.feed(line.decode())


def _gemini_stream_json() -> Callable[[bytes], Any]:
    adapter = GeminiStreamJsonAdapter()
    return lambda line: adapter.feed(line.decode()) + adapter.flush()


def _codex_app_server() -> Callable[[bytes], Any]:
    """Each line as the weakincentives client hands it to `_process_notification`."""
    mapper = CodexMapper()

    def notification(line: bytes) -> Any:
        value = json.loads(line)
        if not isinstance(value, dict):
            return mapper.notification(None, value)
        return mapper.notification(value.get("method"), value.get("params"))

    return notification


# What each recorded stream is, and the mapping its lines go through, one per file.
STREAMS: Final = {
    "claude stream-json": ("claude_code/*.jsonl", _claude_stream_json),
    "codex exec --json": ("codex/exec/*.jsonl", _codex_exec_json),
    "codex app-server": ("codex/app-server/*.jsonl", _codex_app_server),
    "gemini stream-json": ("line_streams/gemini/*.stream-json.jsonl", _gemini_stream_json),
}


@pytest.mark.parametrize("stream", sorted(STREAMS))
def test_stream_lines_with_a_field_changed_map_to_canonical_entries(stream: str) -> None:
    pattern, make = STREAMS[stream]
    files = sorted(FIXTURES.glob(pattern))
    assert len(files) >= 5
    seen: set[Any] = set()
    for path in files:
        map_line = make()
        for line in _mutations(path, seen):
            _assert_canonical(map_line(line))
