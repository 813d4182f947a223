"""Bad input to the emitter never raises: it is stored faithfully or recorded as `transcript.error`."""

from __future__ import annotations

import math
import tempfile
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from transcript_otel import (
    TranscriptEmitter,
    TranscriptPipeline,
    check_invariants,
    read_records,
    reconstruct_transcript,
)
from transcript_otel.sinks import JsonlMirror

from helpers import Opaque, ReprRaises, entry_contexts, run_records

MakeEmitter = Callable[..., TranscriptEmitter]


class HashRaises:
    def __hash__(self) -> int:
        raise RuntimeError("no hash for you")


@pytest.fixture
def make_emitter(jsonl_pipeline: TranscriptPipeline) -> MakeEmitter:
    def build(**options: Any) -> TranscriptEmitter:
        options.setdefault("prompt_name", "p")
        options.setdefault("adapter", "a")
        return TranscriptEmitter(pipeline=jsonl_pipeline, **options)

    return build


def errors(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record for record in records if record["event"] == "transcript.error"]


def outcome(emitter: TranscriptEmitter) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(entry contexts, error records) of the stopped run."""
    emitter.stop()
    records = run_records(emitter)
    assert check_invariants(records) == []
    return entry_contexts(records), errors(records)


def assert_faithful_or_reported(
    emitter: TranscriptEmitter, detail: Any = None, raw: Any = None
) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The single entry emitted round-trips exactly, or a transcript.error names it."""
    emitter.stop()
    records = run_records(emitter)
    (entry,) = reconstruct_transcript(records)
    found = errors(records)
    faithful = entry.detail == ({} if detail is None else detail) and entry.raw == raw
    if not faithful:
        assert found, f"stored unfaithfully without a transcript.error: {entry.detail!r} {entry.raw!r}"
        for error in found:
            assert error["level"] == "WARNING"
            assert error["context"]["sequence_number"] == 1
            assert error["context"]["source"] == "main"
    (context,) = entry_contexts(records)
    return context, found


# -- detail ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "detail",
    [
        pytest.param({"value": {1, 2}}, id="set"),
        pytest.param({"value": frozenset({"a"})}, id="frozenset"),
        pytest.param({"value": b"\x00\xff"}, id="bytes"),
        pytest.param({"value": Decimal("3.14")}, id="decimal"),
        pytest.param({"value": Opaque()}, id="custom-object"),
        pytest.param({"value": ReprRaises()}, id="repr-raises"),
        pytest.param({"value": math.nan}, id="nan"),
        pytest.param({1: "a", 2: "b"}, id="int-keys"),
        pytest.param({(1, 2): "a", "kept": True}, id="tuple-keys"),
        pytest.param({None: 1}, id="none-key"),
    ],
)
def test_non_json_detail(make_emitter: MakeEmitter, detail: dict[Any, Any]) -> None:
    emitter = make_emitter()
    emitter.emit("tool_result", detail=detail)  # never raises
    assert_faithful_or_reported(emitter, detail)


def test_tuple_keys_are_dropped_and_reported(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    detail: dict[Any, Any] = {(1, 2): "a", "kept": True}
    emitter.emit("tool_result", detail=detail)
    context, found = assert_faithful_or_reported(emitter, detail)
    assert context["detail"] == {"kept": True}
    (error,) = found
    assert "keys that JSON cannot represent were dropped" in error["context"]["error"]
    assert error["context"]["entry_type"] == "tool_result"


def test_huge_detail_is_stored_complete(make_emitter: MakeEmitter) -> None:
    big = "x" * (5 * 1024 * 1024)
    emitter = make_emitter()
    emitter.emit("tool_result", detail={"output": big, "after": 1})
    emitter.emit("assistant_message", detail={"text": "next"})
    contexts, found = outcome(emitter)
    assert found == []
    assert contexts[0]["detail"]["output"] == big
    assert contexts[0]["detail"]["after"] == 1
    assert contexts[1]["detail"] == {"text": "next"}


def test_deep_detail_is_stored_faithfully(make_emitter: MakeEmitter) -> None:
    deep: list[Any] = []
    current = deep
    for _ in range(300):
        child: list[Any] = []
        current.append(child)
        current = child
    current.append("bottom")
    emitter = make_emitter()
    emitter.emit("system_event", detail={"deep": deep})
    emitter.stop()
    records = run_records(emitter)
    assert errors(records) == []
    (entry,) = reconstruct_transcript(records)
    assert entry.detail == {"deep": deep}


def test_cyclic_detail_becomes_a_stub_and_an_error(make_emitter: MakeEmitter) -> None:
    cyclic: dict[str, Any] = {"name": "loop"}
    cyclic["self"] = cyclic
    emitter = make_emitter()
    emitter.emit("system_event", detail=cyclic)
    emitter.emit("user_message", detail={"fine": True})
    contexts, found = outcome(emitter)
    stub = contexts[0]["detail"]
    assert "Circular reference" in stub["serialization_error"]
    assert stub["repr"].startswith("{'name': 'loop'")
    (error,) = found
    assert error["level"] == "WARNING"
    assert "Circular reference" in error["context"]["error"]
    assert error["context"]["sequence_number"] == 1
    assert contexts[1]["detail"] == {"fine": True}


def test_lone_surrogates_in_detail_are_faithful(make_emitter: MakeEmitter) -> None:
    detail = {"text": "half a pair: \ud83d", "key\udc00": ["\udfff"]}
    emitter = make_emitter()
    emitter.emit("assistant_message", detail=detail)
    assert_faithful_or_reported(emitter, detail)


@pytest.mark.parametrize("detail", [["a", "list"], "a string", 42, ("tuple",)])
def test_detail_that_is_not_a_dict_is_wrapped_and_reported(make_emitter: MakeEmitter, detail: Any) -> None:
    emitter = make_emitter()
    emitter.emit("assistant_message", detail=detail)
    (context,), (error,) = outcome(emitter)
    assert set(context["detail"]) == {"value"}
    assert f"detail must be a dict, got {type(detail).__name__}" in error["context"]["error"]


# -- raw -------------------------------------------------------------------------------


def test_lone_surrogates_in_raw(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message", raw='{"text": "\ud800"}')
    context, found = assert_faithful_or_reported(emitter, raw='{"text": "\ud800"}')
    assert context["raw"] == '{"text": "\\ud800"}'
    (error,) = found
    assert "raw: text held lone surrogates" in error["context"]["error"]


def test_invalid_utf8_bytes_as_raw(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message", raw=b'{"text": "caf\xe9"}')  # type: ignore[arg-type]
    (context,), (error,) = outcome(emitter)
    assert context["raw"] == '{"text": "caf\\xe9"}'
    assert "raw: bytes were not valid UTF-8" in error["context"]["error"]


@pytest.mark.parametrize("raw", [42, {"a": 1}, ["line"], 1.5])
def test_raw_of_a_wrong_type(make_emitter: MakeEmitter, raw: Any) -> None:
    emitter = make_emitter()
    emitter.emit("user_message", raw=raw)
    (context,), (error,) = outcome(emitter)
    assert context["raw"] == repr(raw)
    assert f"raw: expected str, got {type(raw).__name__}" in error["context"]["error"]


# -- source, entry type, identity ------------------------------------------------------


@pytest.mark.parametrize("source", [["main"], {"a": 1}, HashRaises()])
def test_an_unhashable_source_is_recorded_as_main_and_reported(
    make_emitter: MakeEmitter, source: Any
) -> None:
    """The writer numbers entries per source, so it never hashes what the agent passed: the
    entry is kept under `main` (a source must be `main` or `subagent:<id>`), and reported."""
    emitter = make_emitter()
    emitter.emit("user_message", detail={"n": 1})
    emitter.emit("user_message", source=source, detail={"n": 2})
    emitter.emit("user_message", detail={"n": 3})
    emitter.stop()
    records = run_records(emitter)
    numbered = [(c["source"], c["sequence_number"], c["detail"]["n"]) for c in entry_contexts(records)]
    assert numbered == [("main", 1, 1), ("main", 2, 2), ("main", 3, 3)]
    (error,) = errors(records)
    assert error["level"] == "WARNING"
    assert f"source: expected str, got {type(source).__name__}" in error["context"]["error"]
    assert error["context"]["error"].endswith("recorded as 'main'")
    assert check_invariants(records) == []
    assert emitter.stop().total_entries == 3


def test_non_str_source_is_recorded_as_main_and_reported(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message", source=7)  # type: ignore[arg-type]
    emitter.emit("user_message", source="subagent:7")  # the valid form stays as it is
    emitter.stop()
    records = run_records(emitter)
    assert [context["source"] for context in entry_contexts(records)] == ["main", "subagent:7"]
    (error,) = errors(records)
    assert "source: expected str, got int; source '7' is neither" in error["context"]["error"]


class EqRaises(str):
    def __eq__(self, other: object) -> bool:
        raise RuntimeError("no eq for you")

    __hash__ = str.__hash__


class StrHashRaises(str):
    def __hash__(self) -> int:
        raise RuntimeError("no hash for you")


@pytest.mark.parametrize("source", [EqRaises("main"), StrHashRaises("main"), EqRaises("subagent:x")])
def test_a_str_subclass_source_is_kept_as_its_text(make_emitter: MakeEmitter, source: str) -> None:
    """The writer compares and counts plain text, never the agent's object."""
    emitter = make_emitter()
    emitter.emit("user_message", detail={"n": 1})
    emitter.emit("user_message", source=source, detail={"n": 2})
    emitter.emit("user_message", detail={"n": 3})
    contexts, found = outcome(emitter)
    text = str.__str__(source)
    expected = (
        [("main", 1, 1), ("main", 2, 2), ("main", 3, 3)]
        if text == "main"
        else [
            ("main", 1, 1),
            (text, 1, 2),
            ("main", 2, 3),
        ]
    )
    assert [(c["source"], c["sequence_number"], c["detail"]["n"]) for c in contexts] == expected
    assert found == []
    assert emitter.stop().total_entries == 3


@pytest.mark.parametrize("timestamp_ns", ["x", 1.7e18, float("nan"), -1, 10**30, True])
def test_a_bad_timestamp_is_replaced_by_the_writers_time_and_reported(
    make_emitter: MakeEmitter, timestamp_ns: Any
) -> None:
    emitter = make_emitter()
    emitter.start()
    before = time.time_ns()
    emitter.emit("user_message", detail={"n": 1})
    emitter.emit("user_message", detail={"n": 2}, timestamp_ns=timestamp_ns)
    emitter.emit("user_message", detail={"n": 3})
    summary = emitter.stop()
    contexts, found = outcome(emitter)
    assert [(c["sequence_number"], c["detail"]["n"]) for c in contexts] == [(1, 1), (2, 2), (3, 3)]
    moments = [datetime.fromisoformat(c["timestamp"]) for c in contexts]
    assert moments == sorted(moments)
    assert moments[1] >= datetime.fromtimestamp(before // 1000 / 1e6, UTC)
    (error,) = found
    assert error["context"]["error"].startswith(
        f"timestamp_ns must be nanoseconds since the epoch, got {type(timestamp_ns).__name__} "
    )
    assert error["context"]["sequence_number"] == 2
    assert summary.total_entries == 3
    assert summary.first_timestamp == moments[0]
    assert summary.last_timestamp == moments[-1]


@pytest.mark.parametrize("context", [12345, "ctx"])
def test_an_entry_that_cannot_be_built_takes_no_number(make_emitter: MakeEmitter, context: Any) -> None:
    """An entry whose record fails is named by an error; the numbers of the others have no gap."""
    emitter = make_emitter()
    emitter.emit("user_message", detail={"n": 1})
    emitter.emit("user_message", detail={"n": 2}, context=context)
    emitter.emit("user_message", detail={"n": 3})
    contexts, found = outcome(emitter)
    assert [(c["sequence_number"], c["detail"]["n"]) for c in contexts] == [(1, 1), (2, 3)]
    (error,) = found
    assert error["context"]["error"].startswith("could not build record: ")
    assert emitter.stop().total_entries == 2


def test_a_raw_whose_repr_raises_keeps_its_entry(make_emitter: MakeEmitter) -> None:
    emitter = make_emitter()
    emitter.emit("user_message", detail={"n": 1}, raw=[ReprRaises()])  # type: ignore[arg-type]
    contexts, found = outcome(emitter)
    (context,) = contexts
    assert context["raw"] == "<unrepresentable list>"
    (error,) = found
    assert "raw: expected str, got list" in error["context"]["error"]


@pytest.mark.parametrize(("entry_type", "text"), [(None, "None"), (5, "5"), (b"tool_use", "tool_use")])
def test_entry_type_of_a_wrong_type(make_emitter: MakeEmitter, entry_type: Any, text: str) -> None:
    emitter = make_emitter()
    emitter.emit(entry_type)
    emitter.stop()
    records = run_records(emitter)
    (context,) = entry_contexts(records)
    if text == "tool_use":
        assert context["entry_type"] == "tool_use"
    else:
        assert context["entry_type"] == "unknown"
        assert context["detail"] == {"original_entry_type": text}
        (error,) = errors(records)
        assert "not canonical" in error["context"]["error"]


@pytest.mark.parametrize("field", ["prompt_name", "adapter", "session_id"])
def test_lone_surrogates_in_run_identity(jsonl_pipeline: TranscriptPipeline, field: str) -> None:
    identity: dict[str, Any] = {"prompt_name": "p", "adapter": "a", "session_id": "s"}
    identity[field] = "bad\udc80"
    emitter = TranscriptEmitter(pipeline=jsonl_pipeline, **identity)
    emitter.emit("user_message")
    emitter.stop()
    records = run_records(emitter)
    (entry,) = reconstruct_transcript(records)
    if getattr(entry, field) != "bad\udc80":
        assert errors(records), f"{field} was altered to {getattr(entry, field)!r} without a transcript.error"


# -- property: nothing raises, everything is accounted for -----------------------------

JUNK = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
    | st.binary(max_size=8)
    | st.builds(Opaque)
    | st.builds(ReprRaises),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children)
        | st.dictionaries(
            st.text(max_size=4) | st.integers() | st.tuples(st.integers()), children, max_size=3
        )
    ),
    max_leaves=10,
)


@pytest.fixture(scope="module")
def shared_pipeline() -> Iterator[TranscriptPipeline]:
    with tempfile.TemporaryDirectory() as directory:
        pipeline = TranscriptPipeline([JsonlMirror(Path(directory))])
        yield pipeline
        pipeline.shutdown(5.0)


@settings(max_examples=40, deadline=None)
# An empty source (once went unreported).
@example(entry_type="tool_use", source="", detail=None, raw=None, timestamp_ns=None)
@given(
    entry_type=st.sampled_from(["tool_use", "user_message", "not-a-type"]) | JUNK,
    source=st.sampled_from(["main", "subagent:1"]) | JUNK,
    detail=JUNK,
    raw=JUNK,
    timestamp_ns=st.none() | st.integers(min_value=0, max_value=4 * 10**18) | JUNK,
)
def test_emit_never_raises_and_every_call_is_accounted_for(
    shared_pipeline: TranscriptPipeline,
    entry_type: Any,
    source: Any,
    detail: Any,
    raw: Any,
    timestamp_ns: Any,
) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=shared_pipeline)
    emitter.emit(entry_type, source=source, detail=detail, raw=raw, timestamp_ns=timestamp_ns)
    emitter.emit("user_message", detail={"marker": True})
    emitter.stop()
    assert emitter.jsonl_path is not None
    records = list(read_records(emitter.jsonl_path))
    reported = any(r["event"] == "transcript.error" for r in records)
    for violation in check_invariants(records):
        # Only a source that is not a valid source name may break an invariant, and it is reported.
        assert violation.invariant == 6, str(violation)
        assert reported
    entries = reconstruct_transcript(records)
    assert any(entry.detail == {"marker": True} for entry in entries)
    # The odd call produced an entry, an error, or both.
    assert len(entries) == 2 or reported
