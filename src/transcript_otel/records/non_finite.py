"""Whether a NaN or an infinity hides in a value: orjson writes them as null, and the record
must say that it changed them.

The encoder asks only where the value's JSON holds a `null` (`serialize.null_count`). A value
of a few hundred nodes is walked in Python (`has_non_finite_float`); a larger one goes
through marshal first (`may_hold_non_finite`), which rules out most of them in one C pass.
"""

from __future__ import annotations

import dataclasses
import enum
import marshal
import math
from typing import Any, Final

from transcript_otel.records.literal_search import leftmost_first


def has_non_finite_float(value: object, nulls: int = 0) -> bool:
    """Whether a NaN or an infinity hides in `value` (orjson writes them as null).

    A value of a few hundred nodes is walked in Python; a larger one is first passed
    to marshal, which rules out most of them in one C pass, faster than the walk, and only a
    value it cannot rule out is walked in full.

    `nulls`: how many `null` the value's JSON holds, in strings too (`null_count`), if
    known. Each None written is one of them: once the walk has met that many, none is left
    for a NaN, and the rest need not be looked at. Most details hold a few, near their top
    (`"error":null`), so a large one is ruled out in a few dicts, without marshal.
    """
    found = _walk_for_non_finite(value, _WALK_BUDGET, nulls)
    if found is not None:
        return found
    return may_hold_non_finite(value) and bool(_walk_for_non_finite(value, None))


# Nodes walked before marshal is asked: a string-heavy entry has a handful, and
# marshal would copy all its text to find what the walk finds in those few nodes.
_WALK_BUDGET: Final = 256


# Containers whose None items are each a `null` of orjson's output: plain ones, not what
# `_members` made of another value (it reads a dataclass's fields by name: one may be unset).
_WRITTEN_AS_IS: Final = frozenset((dict, list, tuple))


def _walk_for_non_finite(value: object, budget: int | None, nulls: int = 0) -> bool | None:
    """The walk; None when it would visit more than `budget` nodes to answer; False as
    soon as it has met `nulls` None values (see `has_non_finite_float`), when that is given.

    Iterative, and each container is visited once, so cycles and deep nesting are safe.
    Leaves are checked where they are found rather than pushed: most nodes are leaves.
    Containers are read as orjson reads them, through the C storage of dicts, lists and
    tuples (a subclass's own `values()` or `__iter__` is not called), and through the
    members of what orjson writes as JSON too (dataclasses, enums) or what the encoder's
    fallback turns into lists (sets).
    """
    if isinstance(value, float):
        return not math.isfinite(value)
    value = _members(value)
    if value is None:
        return False
    containers = [value]
    seen = {id(value)}
    isfinite = math.isfinite
    nulls_left = nulls  # None values yet to meet; 0: not counted
    while containers:
        container = containers.pop()
        if budget is not None:
            budget -= len(container)
            if budget < 0:
                return None
        counted = nulls_left and type(container) in _WRITTEN_AS_IS
        for item in dict.values(container) if isinstance(container, dict) else container:
            kind = type(item)
            if kind is str or kind is int:
                continue  # the common cases first
            if item is None:
                if counted:
                    nulls_left -= 1
                    if not nulls_left:
                        return False  # every null is a None: no NaN became one
                continue
            if kind is float:
                if not isfinite(item):
                    return True
            elif id(item) not in seen:
                inner = _members(item)
                if inner is not None:
                    seen.add(id(item))
                    containers.append(inner)
    return False


class _Members(list[Any]):
    """What `_members` made of a value: its None items are not counted as its JSON's nulls."""

    __slots__ = ()


def _members(value: object) -> dict[Any, Any] | list[Any] | tuple[Any, ...] | None:
    """What of `value` may hold a float, as a dict, a plain list or a plain tuple (the walk
    reads a dict through `dict.values`), or `_Members`; None for a leaf."""
    if isinstance(value, dict):
        return value
    if isinstance(value, list):
        return value if type(value) is list else _Members(list.__iter__(value))
    if isinstance(value, tuple):
        return value if type(value) is tuple else _Members(tuple.__iter__(value))
    if isinstance(value, (str, bytes, bytearray, int)):
        return None
    if isinstance(value, float):
        return _Members((value,))
    if isinstance(value, (set, frozenset)):
        return _Members(value)
    if isinstance(value, enum.Enum):
        return _Members((value.value,))
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _Members(getattr(value, field.name, None) for field in dataclasses.fields(value))
    return None


# marshal writes a float as its 8 IEEE 754 bytes, little-endian; a NaN or an infinity
# ends with an exponent of all ones: a byte 0xF0-0xFF, then 0x7F or 0xFF. UTF-8 text
# never holds that pair (0xF5-0xFF never occur, 0xF0-0xF4 lead continuation bytes),
# so only a length, an integer or bytes can match by chance, and then the walk decides.
_NON_FINITE_TAIL: Final = leftmost_first(
    [bytes((low, high)) for low in range(0xF0, 0x100) for high in (0x7F, 0xFF)]
)


def may_hold_non_finite(value: Any) -> bool:
    """False only when `value` certainly holds no NaN or infinity: one marshal pass and
    one search, cheaper than walking a value of more than a handful of nodes, and cheaper
    still for a list of many values at once."""
    try:
        data = marshal.dumps(value)
    except Exception:  # a type marshal does not know (subclasses included), or too deep
        return True
    return bool(_NON_FINITE_TAIL.find_matches_as_indexes(data))
