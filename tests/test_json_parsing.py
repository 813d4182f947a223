"""Lines are parsed with orjson where it agrees with the stdlib, and by the stdlib where it does not."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transcript_otel.mappings.codex_rollout import CodexRolloutMapper
from transcript_otel.records.serialize import parse_json

_JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(), children, max_size=4),
    max_leaves=20,
)


@given(_JSON)
def test_what_python_writes_parses_to_what_the_stdlib_reads(value: Any) -> None:
    text = json.dumps(value)  # NaN, infinities and integers of any size included
    assert repr(parse_json(text)) == repr(json.loads(text))
    assert repr(parse_json(text.encode())) == repr(json.loads(text))


@pytest.mark.parametrize(
    "text",
    [
        '{"n": NaN, "i": -Infinity}',
        '{"big": 123456789012345678901234567890}',
        '{"lone": "\\ud800"}',
        '{"same": 1, "same": 2}',
        '{"at": 1764227000000000000}',
        "[" * 1100 + "]" * 1100,
    ],
    ids=["nan", "big-int", "lone-surrogate", "duplicate-key", "19-digits", "deep"],
)
def test_what_orjson_refuses_is_read_as_the_stdlib_reads_it(text: str) -> None:
    assert _outcome(parse_json, text) == _outcome(json.loads, text)


def _outcome(parse: Callable[[str], Any], text: str) -> str:
    """What parsing `text` gives, or raises (1,100 levels are too deep for the stdlib of 3.11)."""
    try:
        return repr(parse(text))
    except RecursionError as exc:
        return type(exc).__name__


def test_a_bad_line_raises_the_stdlibs_error() -> None:
    with pytest.raises(json.JSONDecodeError, match=r"^Expecting ',' delimiter: line 1 column 9 \(char 8\)$"):
        parse_json('{"a": 1 "b": 2}')
    with pytest.raises(UnicodeDecodeError):
        parse_json(b'{"a": "\xff"}')  # bytes that are not UTF-8, as `json.loads` says
    said = CodexRolloutMapper().line(b'{"type": "event_msg",')
    assert said.entries[0].entry_type == "unknown"
    assert said.entries[0].detail["parse_error"].startswith("invalid JSON: Expecting property name")
