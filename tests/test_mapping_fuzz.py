"""Every mapping against hostile input: nothing raises, everything is accounted for.

Issue 8's list: wrong types, missing keys, huge strings, deep nesting, lone
surrogates, non-str keys, cycles, values JSON cannot hold. A mapping runs inside
the instrumented agent's call (the instrumentors guard it too, but a mapping that
raises would lose the native event), so each must return entries (or nothing, for
the stream pieces it folds) and never raise. The entries it returns must be
canonical and encodable by the pipeline.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.chat import ChatMapper, usage_entry
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.mappings.claude_transcript import ClaudeTranscriptMapper
from transcript_otel.mappings.codex import CodexMapper, native_detail
from transcript_otel.mappings.codex_exec import CodexExecAdapter
from transcript_otel.mappings.lines import ClaudeStreamJsonAdapter, PlainAdapter
from transcript_otel.mappings.rtf1 import Rtf1Adapter
from transcript_otel.model.entries import CANONICAL_ENTRY_TYPES, DetailInRaw, TranscriptEvent
from transcript_otel.records.entry_record import prepare_entry
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import dumps

from helpers import Opaque, ReprRaises

HUGE = "x" * 300_000  # a value far past any attribute limit


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"content": [value], "type": "assistant"}
    return value


def cyclic() -> dict[str, Any]:
    value: dict[str, Any] = {"type": "assistant", "message": {"content": []}}
    value["message"]["content"].append(value)
    value["item"] = value
    return value


LEAVES = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**80), max_value=2**80)  # past 64 bits too
    | st.floats()  # NaN and infinities included
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8)  # lone surrogates
    | st.binary(max_size=8)
    | st.sampled_from(["\ud800" * 3, "\x00"])
    # built, not sampled: hypothesis prints sampled values, and these refuse or flood a repr
    | st.builds(lambda: HUGE)
    | st.builds(Opaque)
    | st.builds(ReprRaises)
)
READ_KEYS = ("type", "role", "content", "item", "message", "text", "id", "usage", "params")
KEYS = st.text(max_size=5) | st.integers() | st.none() | st.tuples(st.integers())  # non-str keys
HOSTILE = st.recursive(
    LEAVES,
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children, children)
        | st.dictionaries(KEYS, children, max_size=3)
        # the keys each mapping reads, holding anything at all
        | st.fixed_dictionaries({}, optional=dict.fromkeys(READ_KEYS, children))
    ),
    max_leaves=10,
)
# Lines as a line agent prints them: any text, and hostile values written as JSON.
LINES = st.text(st.characters(codec=None, exclude_categories=()), max_size=40) | HOSTILE.map(
    lambda value: json.dumps(value, default=lambda _: "<unencodable>", skipkeys=True).replace("\n", " ")
)


def assert_canonical(entries: list[MappedEntry] | MappedEntry | None) -> None:
    listed = entries if isinstance(entries, list) else [] if entries is None else [entries]
    for entry in listed:
        assert isinstance(entry, MappedEntry)
        assert entry.entry_type in CANONICAL_ENTRY_TYPES
        dumps(entry.detail)  # what the writer will do with it: must not raise


RUN = RunInfo("fuzz", "codex_app_server", None, 0)
CODEX_METHODS = ["item/completed", "item/started", "turn/completed", "error"]
FUZZ = settings(max_examples=100, deadline=None)


@FUZZ
@given(
    method=HOSTILE | st.sampled_from(["item/completed", "item/started", "turn/completed", "error"]),
    params=HOSTILE,
)
def test_codex_notifications(method: Any, params: Any) -> None:
    mapper = CodexMapper()
    for _ in range(2):
        assert_canonical(mapper.notification(method, params))
    assert_canonical(mapper.tool_call(params))
    assert_canonical(mapper.tool_result(params, method))
    assert_canonical(mapper.user_message(params))


@FUZZ
@given(message=HOSTILE)
def test_claude_stream_messages(message: Any) -> None:
    mapper = ClaudeStreamMapper()
    for _ in range(2):
        entries = mapper.message(message)
        assert entries, "every message is recorded, as `unknown` when nothing else fits"
        assert_canonical(entries)


@FUZZ
@given(line=HOSTILE | LINES)
def test_claude_transcript_lines(line: Any) -> None:
    entries = ClaudeTranscriptMapper().line(line, "main")
    assert entries
    assert_canonical(entries)


@FUZZ
@given(messages=st.lists(HOSTILE, max_size=4) | HOSTILE, usage=HOSTILE)
def test_chat_messages_and_usage(messages: Any, usage: Any) -> None:
    mapper = ChatMapper()
    assert_canonical(mapper.new_messages(messages))
    for message in messages if isinstance(messages, list) else [messages]:
        assert_canonical(mapper.message(message))
    assert_canonical(usage_entry(usage))


LINE_ADAPTERS: list[Callable[[], Any]] = [
    Rtf1Adapter,
    CodexExecAdapter,
    ClaudeStreamJsonAdapter,
    PlainAdapter,
]


@FUZZ
@given(lines=st.lists(LINES, max_size=5))
@pytest.mark.parametrize("make", LINE_ADAPTERS, ids=lambda make: make.__name__)
def test_line_adapters(make: Callable[[], Any], lines: list[str]) -> None:
    adapter = make()
    for line in lines:
        assert_canonical(adapter.feed(line))
    assert_canonical(adapter.flush())


# Mappings that take parsed values, each called the way its instrumentor calls it.
VALUE_MAPPINGS: dict[str, Callable[[Any], Any]] = {
    "codex notification": lambda value: CodexMapper().notification("item/completed", {"item": value}),
    "codex tool call": lambda value: CodexMapper().tool_call(value),
    "claude stream message": lambda value: ClaudeStreamMapper().message(value),
    "claude transcript line": lambda value: ClaudeTranscriptMapper().line(value, "main"),
    "chat message": lambda value: ChatMapper().message(value),
    "chat messages": lambda value: ChatMapper().new_messages([value, value]),
    "chat usage": usage_entry,
}


@pytest.mark.parametrize("value", [deep(5000), cyclic()], ids=["5000 levels deep", "cyclic"])
@pytest.mark.parametrize("mapping", list(VALUE_MAPPINGS), ids=str)
def test_deep_and_cyclic_values(mapping: str, value: Any) -> None:
    assert_canonical(VALUE_MAPPINGS[mapping](value))


@FUZZ
@given(
    detail=HOSTILE
    | st.fixed_dictionaries({"notification": HOSTILE}, optional={"subtype": HOSTILE, "result": HOSTILE}),
    raw=LINES
    | HOSTILE
    | st.fixed_dictionaries({"method": HOSTILE}, optional={"params": HOSTILE}).map(
        lambda value: json.dumps(value, default=lambda _: "<unencodable>", skipkeys=True)
    ),
)
def test_codex_native_details_and_what_the_writer_takes_out_of_raw(detail: Any, raw: Any) -> None:
    """weakincentives' own Codex entries: any detail is kept as it is or left in `raw`, and
    taking it out of any `raw` gives a detail (with a problem named when it is not there)."""
    kept = native_detail(detail)
    assert kept is detail or isinstance(kept, DetailInRaw)
    record = prepare_entry((TranscriptEvent.ENTRY, RUN, "thinking", "main", 0, kept, raw, None))
    assert record.context["entry_type"] in CANONICAL_ENTRY_TYPES
    if isinstance(kept, DetailInRaw):
        assert isinstance(record.detail, dict)
        assert "notification" in record.detail or any(
            p.startswith("detail: not found in raw") for p in record.problems
        )
