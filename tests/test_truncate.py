"""`truncate_json`: span-event values cut to a limit, JSON kept valid, every cut marked."""

from __future__ import annotations

import enum
import json
import re
import time
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.entry_record import prepare_entry
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.run import RunInfo
from transcript_otel.records.truncate import truncate_json
from transcript_otel.sinks import SpanEventSink
from transcript_otel.sinks.record_attributes import truncated_attributes

from conftest import OTelHarness

CUT_STRING = re.compile(r"^(.*)…\[\+(\d+) chars\]$", re.DOTALL)
CUT_ITEMS = re.compile(r"^…\[\+(\d+) items\]$")
CUT_KEYS = re.compile(r"^\[\+(\d+) keys\]$")
PLAIN_MARKER = re.compile(r"…\[truncated, original length (\d+)\]$")


def truncate_text(text: str, limit: int) -> tuple[str, bool]:
    """The cut value and whether it was cut (the function returns its input when it fits)."""
    cut = truncate_json(text, limit)
    return cut, cut is not text


@pytest.mark.parametrize("text", ["", "short", '{"a": 1}', "x" * 100])
def test_values_within_the_limit_are_unchanged(text: str) -> None:
    assert truncate_text(text, 100) == (text, False)


def test_plain_text_is_cut_to_the_limit_with_the_original_length() -> None:
    text = "lorem ipsum " * 100
    cut, was_cut = truncate_text(text, 200)
    assert was_cut
    assert len(cut) == 200
    match = PLAIN_MARKER.search(cut)
    assert match
    assert int(match.group(1)) == len(text)
    assert text.startswith(cut[: match.start()])


def test_long_string_inside_json_is_shortened_and_marked() -> None:
    text = json.dumps({"command": "ls -la", "aggregatedOutput": "b" * 5000})
    cut, was_cut = truncate_text(text, 300)
    assert was_cut
    assert len(cut) <= 300
    value = json.loads(cut)
    assert value["command"] == "ls -la"
    match = CUT_STRING.match(value["aggregatedOutput"])
    assert match
    kept, removed = match.group(1), int(match.group(2))
    assert kept == "b" * len(kept)
    assert len(kept) + removed == 5000


def test_long_list_loses_its_tail_with_a_count() -> None:
    items = list(range(1000))
    cut, was_cut = truncate_text(json.dumps(items), 120)
    assert was_cut
    assert len(cut) <= 120
    value = json.loads(cut)
    match = CUT_ITEMS.match(value[-1])
    assert match
    kept = value[:-1]
    assert kept == items[: len(kept)]
    assert len(kept) + int(match.group(1)) == 1000


def test_wide_object_loses_keys_with_a_count() -> None:
    original = {f"key{index}": index for index in range(500)}
    cut, was_cut = truncate_text(json.dumps(original), 150)
    assert was_cut
    assert len(cut) <= 150
    value = json.loads(cut)
    match = CUT_KEYS.match(value.pop("…"))
    assert match
    assert all(original[key] == item for key, item in value.items())
    assert len(value) + int(match.group(1)) == 500


def test_nested_structure_stays_valid_and_keeps_its_shape() -> None:
    original = {
        "notification": {"item": {"id": "call_1", "type": "commandExecution", "output": "z" * 10_000}}
    }
    cut, _ = truncate_text(json.dumps(original), 500)
    value = json.loads(cut)
    assert value["notification"]["item"]["id"] == "call_1"
    assert value["notification"]["item"]["output"].startswith("z")


def test_non_ascii_json_is_measured_in_characters() -> None:
    text = json.dumps({"text": "ü✓😀" * 2000}, ensure_ascii=False)
    cut, was_cut = truncate_text(text, 400)
    assert was_cut
    assert len(cut) <= 400
    assert CUT_STRING.match(json.loads(cut)["text"])


def test_json_too_dense_for_any_budget_becomes_a_valid_preview() -> None:
    text = json.dumps([[index] for index in range(2000)])
    cut, was_cut = truncate_text(text, 20)
    assert was_cut
    assert len(cut) <= 20
    json.loads(cut)


def test_text_that_only_looks_like_json_is_cut_as_plain_text() -> None:
    text = '{"unterminated": "' + "x" * 500
    cut, was_cut = truncate_text(text, 100)
    assert was_cut
    assert len(cut) == 100
    assert PLAIN_MARKER.search(cut)


def test_deeply_nested_text_is_cut_without_raising() -> None:
    text = "[" * 100_000
    cut, was_cut = truncate_text(text, 100)
    assert was_cut
    assert len(cut) <= 100
    assert PLAIN_MARKER.search(cut)


@pytest.mark.parametrize("limit", [10, 20])
def test_tiny_limits_are_respected(limit: int) -> None:
    cut, was_cut = truncate_text("x" * 1000, limit)
    assert was_cut
    assert len(cut) <= limit


JSON_LEAVES = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text()
)
LONG_TEXT = st.integers(min_value=50, max_value=800).map(lambda n: "é" * n)
JSON_CONTAINERS = st.recursive(
    st.lists(JSON_LEAVES | LONG_TEXT, max_size=12)
    | st.dictionaries(st.text(max_size=8), JSON_LEAVES | LONG_TEXT, max_size=12),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=60, deadline=None)
@given(JSON_CONTAINERS, st.integers(min_value=40, max_value=2000))
def test_json_stays_valid_within_the_limit(value: Any, limit: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    cut, was_cut = truncate_text(text, limit)
    assert len(cut) <= limit
    assert was_cut == (len(text) > limit)
    decoded = json.loads(cut)
    if not was_cut:
        assert cut == text
    else:
        assert isinstance(decoded, (dict, list))


@settings(max_examples=100, deadline=None)
@given(st.text(min_size=1, max_size=3000), st.integers(min_value=40, max_value=1000))
def test_plain_text_within_the_limit(text: str, limit: int) -> None:
    cut, was_cut = truncate_text(text, limit)
    assert len(cut) <= limit
    assert was_cut == (len(text) > limit)
    if not was_cut:
        assert cut == text


def test_span_event_values_are_cut_and_marked(make_pipeline: Any, otel: OTelHarness) -> None:
    pipeline: TranscriptPipeline = make_pipeline([SpanEventSink(max_value_length=512)])
    detail = {"notification": {"aggregatedOutput": "o" * 20_000}}
    with otel.tracer.start_as_current_span("turn"):
        emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
        emitter.emit("tool_result", detail=detail, raw="r" * 1000)
        emitter.emit("user_message", detail={"text": "short"})
        assert emitter.flush()
    (span,) = otel.finished_spans()
    long_event, short_event = [event for event in span.events if event.name == "transcript.entry"]
    attributes = long_event.attributes
    assert attributes is not None
    encoded = json.dumps(detail, separators=(",", ":"))
    assert attributes["transcript.detail.truncated"] is True
    assert attributes["transcript.detail.original_length"] == len(encoded)
    assert len(str(attributes["transcript.detail"])) <= 512
    shown = json.loads(str(attributes["transcript.detail"]))
    assert CUT_STRING.match(shown["notification"]["aggregatedOutput"])
    assert attributes["transcript.raw.truncated"] is True
    assert attributes["transcript.raw.original_length"] == 1000
    assert PLAIN_MARKER.search(str(attributes["transcript.raw"]))
    assert short_event.attributes is not None
    assert json.loads(str(short_event.attributes["transcript.detail"])) == {"text": "short"}
    assert "transcript.detail.truncated" not in short_event.attributes


def test_a_large_value_does_not_crowd_out_the_keys_after_it() -> None:
    original = {"output": "x" * 10_000, "exit_code": 0, "status": "completed", "command": "pytest -q"}
    value = json.loads(truncate_text(json.dumps(original), 300)[0])
    assert {key: value[key] for key in ("exit_code", "status", "command")} == {
        "exit_code": 0,
        "status": "completed",
        "command": "pytest -q",
    }
    assert CUT_STRING.match(value["output"])


def test_a_long_list_of_objects_shows_whole_objects_then_a_count() -> None:
    results = [{"number": index, "title": f"issue {index}", "state": "open"} for index in range(345)]
    cut, was_cut = truncate_text(json.dumps({"results": results, "error": None}), 1000)
    assert was_cut
    assert len(cut) <= 1000
    value = json.loads(cut)
    assert value["error"] is None
    *shown, count = value["results"]
    assert shown == results[: len(shown)]
    assert len(shown) > 5
    match = CUT_ITEMS.match(count)
    assert match
    assert len(shown) + int(match.group(1)) == 345


def test_tuples_in_a_held_value_are_cut_like_lists() -> None:
    held = {"items": tuple(range(1000)), "name": "n"}
    text = json.dumps(held)
    value = json.loads(truncate_json(text, 200, parsed=held))
    assert value["name"] == "n"
    *shown, count = value["items"]
    assert shown == list(range(len(shown)))
    match = CUT_ITEMS.match(count)
    assert match
    assert len(shown) + int(match.group(1)) == 1000


def test_span_events_cut_the_redacted_detail(make_pipeline: Any, otel: OTelHarness) -> None:
    """The cut detail is read from the held value only when its JSON is that value's
    encoding: a secret redacted in the JSON stays redacted in the span event."""
    secret = "sk-ant-api03-" + "A" * 40
    pipeline: TranscriptPipeline = make_pipeline([SpanEventSink(max_value_length=400)])
    with otel.tracer.start_as_current_span("turn"):
        emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=pipeline)
        emitter.emit("tool_result", detail={"key": secret, "output": "o" * 5_000})
        emitter.emit("tool_result", detail={"note": "none", "output": "p" * 5_000})
        assert emitter.flush()
    (span,) = otel.finished_spans()
    redacted, plain = [event.attributes for event in span.events if event.name == "transcript.entry"]
    assert redacted is not None
    assert plain is not None
    shown = json.loads(str(redacted["transcript.detail"]))
    assert shown["key"].startswith("[REDACTED:anthropic_key:")
    assert secret not in str(redacted["transcript.detail"])
    assert CUT_STRING.match(shown["output"])
    plain_shown = json.loads(str(plain["transcript.detail"]))
    assert plain_shown["note"] == "none"
    assert CUT_STRING.match(plain_shown["output"])
    assert len(str(plain["transcript.detail"])) <= 400


HELD_VALUES = st.recursive(
    st.lists(JSON_LEAVES | LONG_TEXT, max_size=12)
    | st.dictionaries(st.text(max_size=8), JSON_LEAVES | LONG_TEXT, max_size=12),
    lambda children: (
        st.lists(children, max_size=4)
        | st.lists(children, max_size=4).map(tuple)
        | st.dictionaries(st.text(max_size=8), children, max_size=4)
    ),
    max_leaves=25,
)


@settings(max_examples=60, deadline=None)
@given(HELD_VALUES, st.integers(min_value=40, max_value=2000))
def test_a_held_value_is_cut_to_valid_json_within_the_limit(value: Any, limit: int) -> None:
    text = json.dumps(value, ensure_ascii=False)
    cut = truncate_json(text, limit, parsed=value)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    else:
        assert isinstance(json.loads(cut), (dict, list))


@dataclass
class CommandResult:
    output: str
    exit_code: int


class Text(str):
    """A str subclass: orjson writes it as a string."""


class Level(enum.Enum):
    HIGH = "high"


@pytest.mark.parametrize(
    "held",
    [
        pytest.param({"result": CommandResult("x" * 5000, 0), "status": "ok"}, id="dataclass"),
        pytest.param({"text": Text("x" * 5000), "status": "ok"}, id="str-subclass"),
        pytest.param({"level": Level.HIGH, "text": "x" * 5000, "status": "ok"}, id="enum"),
    ],
)
def test_a_held_value_of_types_json_lacks_is_cut_as_orjson_writes_it(held: dict[str, Any]) -> None:
    text = dumps_text(held)
    cut = truncate_json(text, 300, parsed=held)
    assert len(cut) <= 300
    value = json.loads(cut)
    assert value["status"] == "ok"
    assert cut.count("…[+") == 1  # the long string, nothing else
    assert "x" * 100 in cut


def dumps_text(value: Any) -> str:
    return orjson.dumps(value).decode("utf-8")


def test_deep_nesting_still_gives_valid_json() -> None:
    held: Any = "x" * 60_000
    for _ in range(600):
        held = {"a": held}
    text = json.dumps(held)
    for cut in (truncate_json(text, 5000, parsed=held), truncate_json(text, 5000)):
        assert len(cut) <= 5000
        json.loads(cut)


def test_an_own_key_named_like_the_marker_is_kept() -> None:
    original = {"…": "mine", **{f"key{index}": index for index in range(200)}}
    value = json.loads(truncate_text(json.dumps(original), 120)[0])
    assert value["…"] == "mine"
    assert CUT_KEYS.match(value["……"])


@pytest.mark.parametrize("limit", [1, 2, 3])
def test_the_smallest_limits_hold_for_json(limit: int) -> None:
    assert len(truncate_json(json.dumps({"a": list(range(100))}), limit)) <= limit


def test_nested_lists_are_measured_within_an_allowance() -> None:
    """Each level of a nested list holds the whole rest: measuring every level's one item
    would encode the value once per level. The cut still holds the limit."""
    held: Any = [{"n": index, "title": f"issue {index}"} for index in range(20_000)]
    for _ in range(100):
        held = [held]
    cut = truncate_json(json.dumps(held), 1000, parsed=held)
    assert len(cut) <= 1000
    json.loads(cut)


def test_a_detail_changed_after_emit_is_cut_from_its_redacted_json() -> None:
    """The agent must not change `detail` after `emit()`; if it does, a secret it put there
    still does not reach a span event unredacted."""
    detail: dict[str, Any] = {"output": "o" * 5000}
    run = RunInfo(prompt_name="p", adapter="a", session_id=None, started_ns=time.time_ns())
    item = (TranscriptEvent.ENTRY, run, "tool_result", "main", time.time_ns(), detail, None, None)
    record = prepare_entry(item, Redactor())
    assert record.detail_is_json
    secret = "sk-ant-api03-" + "A" * 40
    detail["output"] = secret
    shown = truncated_attributes(record, 400)["transcript.detail"]
    assert secret not in str(shown)
    assert CUT_STRING.match(json.loads(str(shown))["output"])


def test_a_string_of_escapes_keeps_what_fits() -> None:
    cut, was_cut = truncate_text(json.dumps(['"' * 400]), 300)
    assert was_cut
    assert len(cut) <= 300
    (shown,) = json.loads(cut)
    match = CUT_STRING.match(shown)
    assert match
    assert len(match.group(1)) > 100
    assert match.group(1) == '"' * len(match.group(1))
