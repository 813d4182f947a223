"""JSON encoding that never raises, for whatever an adapter hands us.

The fast path is one `orjson.dumps` call. Only when it fails do we pay for the
fallbacks, and each fallback reports what it changed so the caller can record a
`transcript.error` instead of silently storing something unfaithful.
"""

from __future__ import annotations

import json
import math
import reprlib
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any, Final, NamedTuple

import orjson

from transcript_otel.records.joined_search import parts_holding
from transcript_otel.records.literal_search import leftmost_first
from transcript_otel.records.non_finite import has_non_finite_float

_REPR: Final = reprlib.Repr()
_REPR.maxstring = 200
_REPR.maxother = 200


class Encoded(NamedTuple):
    """JSON bytes plus, when the encoding was not faithful, why."""

    data: bytes
    problem: str | None = None


def _fallback(value: object) -> object:
    """Convert what orjson cannot encode; `repr` is the last resort."""
    if isinstance(value, (set, frozenset)):
        return list(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).decode("utf-8", "backslashreplace")
    try:
        return repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


class _RecordingFallback:
    """`_fallback` that remembers which types it had to convert."""

    __slots__ = ("converted",)

    def __init__(self) -> None:
        self.converted: set[str] = set()

    def __call__(self, value: object) -> object:
        self.converted.add(type(value).__name__)
        return _fallback(value)


def _problems(fallback: _RecordingFallback, *notes: str) -> str | None:
    found = list(notes)
    if fallback.converted:
        found.append(
            f"values of type {', '.join(sorted(fallback.converted))} were converted "
            "(sets to lists, bytes to text, anything else to its repr)"
        )
    return "; ".join(found) or None


def _exact(data: bytes) -> bytes:
    """`data` in a block of its own size. orjson's output keeps the buffer it reserved,
    many times the JSON for text-heavy values: kept in a record for the sinks, that, not
    the JSON, is what the backlog would hold. A copy costs a memcpy; below `_COPY_FROM`
    bytes the reserve is small, not worth a copy."""
    return data if len(data) < _COPY_FROM else bytes(memoryview(data))


_COPY_FROM: Final = 2048


def plain_json(value: object) -> bytes | None:
    """`value` encoded by orjson alone (the common case); None when orjson cannot encode
    it (`repaired_json` can). Whether a NaN became a null is left to the caller (see
    `null_count`). No `Encoded` is built: the writer calls this for every entry."""
    try:
        data = orjson.dumps(value)
    except TypeError:
        return None
    return data if len(data) < _COPY_FROM else bytes(memoryview(data))  # `_exact`, inline


def dumps(value: object, *, finite: bool = False) -> Encoded:
    """Encode `value` as JSON; never raises; reports every change it had to make.

    1. orjson alone (`plain_json`); then, in `repaired_json`, orjson converting unknown
       types with `_fallback` (reported);
    2. orjson with non-str keys turned into strings (reported);
    3. stdlib json, which handles lone surrogates and integers above 64 bits
       faithfully (keys it cannot represent are skipped, which is reported);
    4. a stub naming the failure (cycles, nesting deeper than the encoders allow).

    NaN and infinities, which JSON cannot hold, come out as null and are reported;
    the check only runs when the output holds a `null` at all, and not when the caller
    knows `value` holds only finite floats (`finite`).
    """
    data = plain_json(value)
    if data is None:
        return repaired_json(value, finite=finite)
    if not finite and _nulled_non_finite(value, data):
        return Encoded(data, NON_FINITE_NOTE)
    return Encoded(data)


def repaired_json(value: object, *, finite: bool = False) -> Encoded:
    """`dumps` for a value orjson alone cannot encode (`plain_json` returned None)."""
    fallback = _RecordingFallback()
    try:
        data = _exact(orjson.dumps(value, default=fallback))
        non_finite = not finite and _nulled_non_finite(value, data)
        if not non_finite and not fallback.converted:
            return Encoded(data)
        return Encoded(data, _problems(fallback, *_NON_FINITE_NOTE[non_finite]))
    except TypeError:
        pass
    try:
        data = _exact(orjson.dumps(value, default=fallback, option=orjson.OPT_NON_STR_KEYS))
        non_finite = not finite and _nulled_non_finite(value, data)
        notes = ("non-string keys were converted to strings", *_NON_FINITE_NOTE[non_finite])
        return Encoded(data, _problems(fallback, *notes))
    except TypeError:
        pass
    try:
        value, notes = _finite(value)
        text = json.dumps(value, default=fallback, ensure_ascii=True, allow_nan=False)
        if _has_non_str_key(value):  # which json.dumps turns into strings without a word
            notes = ("non-string keys were converted to strings", *notes)
        return Encoded(text.encode("ascii"), _problems(fallback, *notes))
    except TypeError:
        pass  # a key JSON cannot represent (a tuple, an object)
    except (ValueError, RecursionError) as exc:
        return _stub(value, exc)
    try:
        text = json.dumps(value, default=fallback, ensure_ascii=True, allow_nan=False, skipkeys=True)
        notes = ("keys that JSON cannot represent were dropped", *notes)
        return Encoded(text.encode("ascii"), _problems(fallback, *notes))
    except (TypeError, ValueError, RecursionError) as exc:
        return _stub(value, exc)


NON_FINITE_NOTE: Final = "NaN or infinite floats were written as null"
_NON_FINITE_NOTE: Final = ((), (NON_FINITE_NOTE,))
# A SIMD substring search, faster than `b"null" in data`, on every entry's detail.
_NULL: Final = leftmost_first([b"null"])


def null_count(data: bytes) -> int:
    """How many `null` `data` (encoded JSON) holds, in strings too: a NaN can have become
    one only where it holds one, and it is one too many for the None values written."""
    return len(_NULL.find_matches_as_indexes(data))


def _nulled_non_finite(value: object, data: bytes) -> bool:
    """Whether orjson, encoding `value` as `data`, wrote a NaN or an infinity as null."""
    nulls = null_count(data)
    return nulls > 0 and has_non_finite_float(value, nulls)


def parts_holding_null(parts: Sequence[bytes]) -> list[bool]:
    """For each of `parts` (encoded JSON), whether it holds a `null`, in one search for all."""
    return parts_holding(_NULL, parts)


def _has_non_str_key(value: object) -> bool:
    """Whether a dict in `value` has a key that is not a str (cycles are safe)."""
    containers = [value]
    seen: set[int] = set()
    while containers:
        container = containers.pop()
        if id(container) in seen:
            continue
        seen.add(id(container))
        if isinstance(container, dict):
            if not all(isinstance(key, str) for key in container):
                return True
            containers.extend(item for item in container.values() if isinstance(item, (dict, list, tuple)))
        elif isinstance(container, (list, tuple)):
            containers.extend(item for item in container if isinstance(item, (dict, list, tuple)))
    return False


def _finite(value: object) -> tuple[object, tuple[str, ...]]:
    """`value`, with NaN and infinities replaced by None (a copy, only when needed)."""
    if not has_non_finite_float(value):
        return value, ()
    return _replace_non_finite(value), _NON_FINITE_NOTE[1]


def _replace_non_finite(value: object) -> object:
    if type(value) is float and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _replace_non_finite(item) for key, item in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):  # sets would become lists anyway
        return [_replace_non_finite(item) for item in value]
    return value


def _stub(value: object, exc: BaseException) -> Encoded:
    reason = f"not JSON-serializable: {type(exc).__name__}: {exc}"
    stub = {"serialization_error": reason, "repr": preview(value)}
    return Encoded(orjson.dumps(stub, default=_fallback), reason)


def preview(value: object) -> str:
    """`repr(value)`, cut to about 200 characters; never raises."""
    try:
        return _REPR.repr(value)
    except Exception:
        return f"<unrepresentable {type(value).__name__}>"


def safe_text(value: object) -> tuple[str, str | None]:
    """`value` as an exact str that UTF-8 can encode, and a note when it had to change.

    A str subclass becomes its plain text: its own `__eq__` or `__hash__` (which may
    raise) must not run where the writer compares and counts it."""
    if isinstance(value, str):
        if type(value) is not str:
            value = str.__str__(value)
        if value.isascii():
            return value, None
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            return (
                value.encode("utf-8", "backslashreplace").decode("utf-8"),
                "text held lone surrogates; they were escaped as \\udXXXX",
            )
        return value, None
    if isinstance(value, (bytes, bytearray, memoryview)):
        data = bytes(value)
        try:
            return data.decode("utf-8"), None
        except UnicodeDecodeError:
            return (
                data.decode("utf-8", "backslashreplace"),
                "bytes were not valid UTF-8; invalid bytes were escaped as \\xNN",
            )
    try:
        text = str(_fallback(value))
    except Exception:  # a container holding something whose repr raises
        text = f"<unrepresentable {type(value).__name__}>"
    return safe_text(text)[0], f"expected str, got {type(value).__name__}"


_second_prefix: tuple[int, str] = (-1, "")
_day_prefix: tuple[int, str] = (-1, "")


def iso_timestamp(timestamp_ns: int) -> str:
    """ISO-8601 UTC with microseconds and a `+00:00` suffix, as the spec's examples.

    The date-and-seconds prefix is cached: entries arrive many per second, and
    `datetime.isoformat()` costs more than the rest of building a record. A new second
    is told from its day's prefix, also cached: an import's entries are seconds apart,
    and `strftime` would cost more than the rest of the timestamp at each new second.
    """
    global _second_prefix, _day_prefix
    seconds, remainder = divmod(timestamp_ns, 1_000_000_000)
    cached_second, prefix = _second_prefix
    if seconds != cached_second:
        days, second_of_day = divmod(seconds, 86_400)
        cached_day, day = _day_prefix
        if days != cached_day:
            day = datetime.fromtimestamp(days * 86_400, UTC).strftime("%Y-%m-%dT")
            _day_prefix = (days, day)
        hours, rest = divmod(second_of_day, 3_600)
        prefix = "%s%02d:%02d:%02d" % (day, hours, *divmod(rest, 60))  # noqa: UP031
        _second_prefix = (seconds, prefix)
    # %-formatting: faster than an f-string's `:06d`, for every record.
    return "%s.%06d+00:00" % (prefix, remainder // 1000)  # noqa: UP031


# orjson reads an integer beyond 64 bits as a float: a line holding a run of 19 digits or more
# (-9223372036854775809 is the shortest such integer) goes to the stdlib. One `translate` finds
# the run, faster than a regex would (benchmarks/NOTES.md, issue 32's third pass).
_DIGITS_AS_ZERO: Final = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
_LONG_NUMBER: Final = b"0" * 19


def parse_json(line: bytes | str) -> Any:
    """`json.loads(line)`, in half its time: what parses, what it parses to and what it raises
    (`ValueError`, `RecursionError`) are the stdlib's. orjson reads the line wherever it reads
    it alike; the stdlib takes what orjson would read otherwise (long integers, above) or
    refuses (NaN, an infinite number, a lone surrogate, nesting past 1024 levels)."""
    encoded = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if _LONG_NUMBER not in encoded.translate(_DIGITS_AS_ZERO):
        try:
            return orjson.loads(encoded)
        except orjson.JSONDecodeError:
            pass
    return json.loads(line)


def loads(line: bytes | str) -> Any:
    """Parse JSON (`parse_json`); never raises anything but ValueError."""
    try:
        return parse_json(line)
    except RecursionError as exc:
        raise ValueError(f"JSON nested too deeply: {exc}") from exc
