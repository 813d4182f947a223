"""Parsing a JSON line: orjson, with the stdlib for what orjson reads otherwise or refuses.

orjson parses a CLI's line in half the stdlib's time, and reading lines is a fifth of an
import (benchmarks/NOTES.md). It reads an integer beyond 64 bits as a float, so a line
holding a run of 19 digits or more goes to the stdlib (the check is one `translate`: a
tenth of what orjson saves); where orjson refuses (`NaN`, an infinite number, a lone
surrogate escape, nesting deeper than 1024) the stdlib decides too. So what parses, what
it parses to and the error said for a bad line are the stdlib's.
"""

from __future__ import annotations

import json
from typing import Any, Final

import orjson

_DIGITS_AS_ZERO: Final = bytes(0x30 if 0x30 <= byte <= 0x39 else 0x20 for byte in range(256))
# -9223372036854775809 has 19 digits: the shortest integer orjson does not read as one.
_LONG_NUMBER: Final = b"0" * 19


def loads(text: str | bytes) -> Any:
    """`json.loads(text)`, faster; raises what it raises (`ValueError`, `RecursionError`)."""
    encoded = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    if _LONG_NUMBER in encoded.translate(_DIGITS_AS_ZERO):
        return json.loads(text)
    try:
        return orjson.loads(encoded)
    except orjson.JSONDecodeError:
        return json.loads(text)
