"""`_serialize`: JSON encoding that never raises, and says when it was not faithful."""

from __future__ import annotations

import dataclasses
import enum
import json
import math
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel.records.non_finite import has_non_finite_float
from transcript_otel.records.serialize import (
    dumps,
    iso_timestamp,
    loads,
    null_count,
    safe_text,
)

from helpers import Opaque, ReprRaises


class DictSubclass(dict[str, Any]):
    """orjson encodes it as a dict; marshal refuses it."""


class HidingDict(dict[str, Any]):
    """Its own `values()` shows nothing; orjson reads the dict's storage all the same."""

    def values(self) -> Any:
        return iter(())


class HidingList(list[Any]):
    def __iter__(self) -> Any:
        return iter(())


class Reading(enum.Enum):
    BROKEN = math.nan


@dataclasses.dataclass
class Measurement:
    value: float


def nested(depth: int) -> list[Any]:
    root: list[Any] = []
    current = root
    for _ in range(depth):
        child: list[Any] = []
        current.append(child)
        current = child
    return root


# Text including lone surrogates, which UTF-8 cannot encode.
ANY_TEXT = st.text(st.characters(codec=None, exclude_categories=()), max_size=20)
JSON_SCALARS = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**63 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | ANY_TEXT
)
JSON_VALUES = st.recursive(
    JSON_SCALARS,
    lambda children: st.lists(children, max_size=4) | st.dictionaries(ANY_TEXT, children, max_size=4),
    max_leaves=20,
)
JUNK = st.recursive(
    JSON_SCALARS
    | st.binary(max_size=8)
    | st.sets(st.integers(), max_size=3)
    | st.decimals(allow_nan=True)
    | st.builds(Opaque)
    | st.builds(ReprRaises)
    | st.integers()
    | st.floats(),
    lambda children: (
        st.lists(children, max_size=3)
        | st.tuples(children)
        | st.dictionaries(st.integers() | ANY_TEXT | st.tuples(st.integers()), children, max_size=3)
    ),
    max_leaves=12,
)


def test_plain_values_take_the_fast_path() -> None:
    value = {"text": "héllo ✓", "n": 3, "f": 1.5, "list": [None, True], "nested": {"k": "v"}}
    encoded = dumps(value)
    assert encoded.problem is None
    assert encoded.data == orjson.dumps(value)
    assert loads(encoded.data) == value


def test_integers_beyond_64_bits_are_faithful() -> None:
    value = {"big": 2**70 + 1, "negative": -(2**63) - 1}
    encoded = dumps(value)
    assert encoded.problem is None
    assert json.loads(encoded.data) == value  # the JSON text holds the exact digits
    decoded = loads(encoded.data)  # ... and reading it back must not turn them into floats
    assert decoded == value
    assert type(decoded["big"]) is int


def test_lone_surrogates_are_faithful() -> None:
    value = {"text": "a\ud800b", "key\udfff": ["\udc80"]}
    encoded = dumps(value)
    assert encoded.problem is None
    assert encoded.data.isascii()
    assert loads(encoded.data) == value


def test_deep_nesting_is_faithful() -> None:
    value = {"deep": nested(300)}
    encoded = dumps(value)
    assert encoded.problem is None
    assert loads(encoded.data) == value


def test_cycle_becomes_a_stub_with_the_reason() -> None:
    value: dict[str, Any] = {"name": "loop"}
    value["self"] = value
    encoded = dumps(value)
    assert encoded.problem is not None
    assert "Circular reference" in encoded.problem
    stub = loads(encoded.data)
    assert stub["serialization_error"] == encoded.problem
    assert stub["repr"].startswith("{'name': 'loop', 'self': {")


def test_unrepresentable_keys_are_dropped_and_reported() -> None:
    encoded = dumps({(1, 2): "tuple key", "kept": 1})
    assert encoded.problem == "keys that JSON cannot represent were dropped"
    assert loads(encoded.data) == {"kept": 1}


@pytest.mark.parametrize(
    "value",
    [
        pytest.param({"set": {1, 2, 3}}, id="set"),
        pytest.param({"bytes": b"ab\xff"}, id="bytes"),
        pytest.param({"decimal": Decimal("1.10")}, id="decimal"),
        pytest.param({"object": Opaque()}, id="custom-object"),
        pytest.param({"object": ReprRaises()}, id="repr-raises"),
        pytest.param({1: "int key"}, id="int-key"),
        pytest.param({1: "int key", "big": 2**70}, id="int-key-and-a-long-integer"),
        pytest.param({"nan": math.nan}, id="nan"),
        pytest.param({"inf": math.inf}, id="infinity"),
    ],
)
def test_lossy_conversions_are_reported(value: dict[Any, Any]) -> None:
    """What JSON cannot hold is either stored faithfully or reported as a problem."""
    encoded = dumps(value)
    assert loads(encoded.data) is not None
    assert loads(encoded.data) == value or encoded.problem is not None, (encoded, value)


def test_converted_values_stay_readable() -> None:
    value = {"set": {3}, "bytes": b"ab\xff", "decimal": Decimal("1.10"), "obj": Opaque(), "bad": ReprRaises()}
    decoded = loads(dumps(value).data)
    assert decoded["set"] == [3]
    assert decoded["bytes"] == "ab\\xff"
    assert decoded["decimal"] == "Decimal('1.10')"
    assert decoded["obj"] == "Opaque()"
    assert decoded["bad"] == "<unrepresentable ReprRaises>"


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(math.nan, id="top-level"),
        pytest.param({"a": None, "b": [1, "x", {"c": (2, [math.inf])}]}, id="deep-in-a-tuple"),
        pytest.param([None] * 1000 + [-math.inf], id="after-many-nulls"),
        pytest.param({"shared": [1.5], "again": [1.5], "last": [math.nan]}, id="after-a-shared-list"),
        pytest.param(
            [{"score": 0.5, "n": None} for _ in range(300)] + [{"score": math.nan}], id="in-the-301st-dict"
        ),
        pytest.param([[math.inf, None]] + [{"n": None} for _ in range(300)], id="before-300-dicts"),
        pytest.param(
            [DictSubclass({"n": None}) for _ in range(300)] + [[-math.inf]], id="among-dict-subclasses"
        ),
        pytest.param([None, Reading.BROKEN], id="an-enum-value"),
        pytest.param([None, Measurement(math.inf)], id="a-dataclass-field"),
        pytest.param({"n": None, "readings": {math.nan}}, id="in-a-set"),
        pytest.param([None, HidingDict(x=math.nan)], id="a-dict-hiding-its-values"),
        pytest.param([None, HidingList([math.inf])], id="a-list-hiding-its-items"),
    ],
)
def test_non_finite_floats_are_found_wherever_they_hide(value: Any) -> None:
    assert "NaN or infinite floats were written as null" in (dumps(value).problem or "")


@pytest.mark.parametrize(
    "value",
    [
        pytest.param(
            {"error": None, "results": [{"score": 0.5}] * 300 + [{"score": math.nan}]}, id="one-none-first"
        ),
        pytest.param({"note": "nullable", "n": None, "deep": [[[math.inf]]]}, id="null-in-a-string"),
        pytest.param({"n": None, "shared": [None, math.nan], "again": None}, id="nulls-in-order"),
        pytest.param({"error": None, "more": DictSubclass(n=None, f=math.nan)}, id="a-dict-subclass's-none"),
        pytest.param({"error": None, "m": Measurement(None), "x": [-math.inf]}, id="a-dataclass-none"),  # type: ignore[arg-type]
        # A dataclass field never set: orjson writes no null for it.
        pytest.param(
            {"a": [[math.nan]], "b": None, "m": Measurement.__new__(Measurement)}, id="an-unset-field"
        ),
    ],
)
def test_non_finite_floats_are_found_after_none_values(value: Any) -> None:
    # The walk stops once it has met as many None values as the JSON holds `null`s: these
    # hold a NaN all the same, past the None values it meets first.
    assert "NaN or infinite floats were written as null" in (dumps(value).problem or "")


FLOATS = st.sampled_from([0.5, -0.0, 1e308, math.nan, math.inf, -math.inf])
NULLISH = st.none() | FLOATS | st.sampled_from(["null", "nullnull", "x", 1, True])


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        NULLISH,
        lambda children: (
            st.lists(children, max_size=4)
            | st.lists(children, max_size=3).map(tuple)
            | st.dictionaries(st.sampled_from(["a", "null", "b"]), children, max_size=3)
            | st.dictionaries(st.sampled_from(["a", "b"]), children, max_size=3).map(DictSubclass)
            | st.dictionaries(st.sampled_from(["a", "b"]), children, max_size=3).map(HidingDict)
            | st.lists(children, max_size=3).map(HidingList)
            | children.map(Measurement)
            | st.lists(children, max_size=3).map(lambda items: [items, items])  # shared
        ),
        max_leaves=25,
    )
)
def test_counting_the_nulls_finds_what_the_whole_walk_finds(value: Any) -> None:
    data = orjson.dumps(value)
    nulls = null_count(data)
    assert nulls == data.count(b"null")
    assert has_non_finite_float(value, nulls) == has_non_finite_float(value)


def test_nulls_from_none_are_no_problem_even_in_cycles() -> None:
    cyclic: list[Any] = [None, 1.5]
    cyclic.append({"back": cyclic, "n": None})
    assert dumps([None, {"a": None, "f": 2.5}, (None,)]).problem is None
    # Many containers, and the largest finite floats, whose bytes come closest to an infinity's.
    assert dumps([{"big": 1.7976931348623157e308, "small": -5e-324, "n": None}] * 300).problem is None
    # Bytes and integers whose marshal bytes look like an infinity's: the walk decides.
    lookalikes = [{"n": None, "blob": b"\xf0\x7f\xff\xff", "k": 0x7FF0 << 48} for _ in range(300)]
    assert dumps(lookalikes).problem == (
        "values of type bytes were converted (sets to lists, bytes to text, anything else to its repr)"
    )
    assert "NaN" not in (dumps(cyclic).problem or "")


@settings(max_examples=150, deadline=None)
@given(JSON_VALUES)
def test_json_values_round_trip_faithfully(value: Any) -> None:
    encoded = dumps(value)
    assert encoded.problem is None
    assert loads(encoded.data) == value


@settings(max_examples=150, deadline=None)
@given(JUNK)
def test_anything_encodes_to_valid_json_without_raising(value: Any) -> None:
    encoded = dumps(value)
    assert isinstance(encoded.data, bytes)
    json.loads(encoded.data)  # valid JSON for any consumer, not only ours
    encoded.data.decode("utf-8")


# -- safe_text -------------------------------------------------------------------------


def test_safe_text_passes_valid_text_through() -> None:
    assert safe_text("plain") == ("plain", None)
    assert safe_text("ünï ✓ 😀") == ("ünï ✓ 😀", None)
    assert safe_text("") == ("", None)


def test_safe_text_escapes_lone_surrogates() -> None:
    text, problem = safe_text("a\ud800b")
    assert text == "a\\ud800b"
    assert problem == "text held lone surrogates; they were escaped as \\udXXXX"
    text.encode("utf-8")


def test_safe_text_decodes_bytes() -> None:
    assert safe_text(b"caf\xc3\xa9") == ("café", None)
    text, problem = safe_text(b"caf\xff\xfe")
    assert text == "caf\\xff\\xfe"
    assert problem == "bytes were not valid UTF-8; invalid bytes were escaped as \\xNN"
    assert safe_text(bytearray(b"ok")) == ("ok", None)


@pytest.mark.parametrize(
    ("value", "text", "kind"),
    [
        (42, "42", "int"),
        (None, "None", "NoneType"),
        (["a"], "['a']", "list"),
        (Opaque(), "Opaque()", "Opaque"),
    ],
)
def test_safe_text_reports_other_types(value: object, text: str, kind: str) -> None:
    assert safe_text(value) == (text, f"expected str, got {kind}")


@settings(max_examples=200, deadline=None)
@given(st.one_of(ANY_TEXT, st.binary(max_size=30)))
def test_safe_text_always_yields_utf8_encodable_text(value: str | bytes) -> None:
    text, problem = safe_text(value)
    text.encode("utf-8")
    if problem is None:
        assert text == (value if isinstance(value, str) else value.decode("utf-8"))


# -- timestamps and loads ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("timestamp_ns", "text"),
    [
        (0, "1970-01-01T00:00:00.000000+00:00"),
        (1_705_314_600_123_456_789, "2024-01-15T10:30:00.123456+00:00"),
        (1_705_314_600_000_000_999, "2024-01-15T10:30:00.000000+00:00"),
        (1_705_314_659_999_999_999, "2024-01-15T10:30:59.999999+00:00"),
    ],
)
def test_iso_timestamp(timestamp_ns: int, text: str) -> None:
    assert iso_timestamp(timestamp_ns) == text


def test_iso_timestamp_across_second_boundaries() -> None:
    base = 1_705_314_600 * 10**9
    stamps = [iso_timestamp(base + offset) for offset in (0, 999_999_999, 10**9, 10**9 + 1_000, 5 * 10**9)]
    assert stamps == [
        "2024-01-15T10:30:00.000000+00:00",
        "2024-01-15T10:30:00.999999+00:00",
        "2024-01-15T10:30:01.000000+00:00",
        "2024-01-15T10:30:01.000001+00:00",
        "2024-01-15T10:30:05.000000+00:00",
    ]
    assert iso_timestamp(base) == stamps[0]  # going back a second is not confused by any caching


@given(st.lists(st.integers(min_value=-(10**18), max_value=253_402_300_799 * 10**9), min_size=1, max_size=20))
def test_iso_timestamp_is_datetimes_in_any_order(stamps: list[int]) -> None:
    """Whatever the order (days and seconds cached, times going back), datetime's own text."""
    for stamp in stamps:
        seconds, nanoseconds = divmod(stamp, 10**9)
        moment = datetime.fromtimestamp(seconds, UTC).replace(microsecond=nanoseconds // 1000)
        assert iso_timestamp(stamp) == moment.isoformat(timespec="microseconds")


def test_loads_accepts_str_and_bytes() -> None:
    assert loads('{"a": 1}') == {"a": 1}
    assert loads(b'{"a": [1, 2]}') == {"a": [1, 2]}
    with pytest.raises(ValueError, match=r"."):
        loads(b"{not json")


def test_keys_json_dumps_converts_silently_are_reported() -> None:
    """Past orjson (an integer beyond 64 bits), the stdlib turns non-string keys into
    strings without a word: that is reported like every other change."""
    encoded = dumps({1: "x", "big": 2**70})
    assert json.loads(encoded.data) == {"1": "x", "big": 2**70}
    assert encoded.problem == "non-string keys were converted to strings"
    assert dumps({"a": [{"b": 2**70}]}).problem is None
