"""Reading an entry's `detail` whatever its shape: the value down a path of keys (`value_at`),
the mapping under a key (`mapping_at`, `mapping_or_empty`), a value that is a non-empty
string (`nonempty_text`).

Each adapter shapes details its own way and a harness may print anything, so every reader of
a detail goes through these: where a level is missing or not a mapping they answer None, and
they never raise.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from typing_extensions import TypeIs


def is_mapping(value: Any) -> TypeIs[Mapping[str, Any]]:
    """`isinstance(value, Mapping)`, with a dict (most details and their parts) told at once:
    the ABC's check is slow, and an import asks it of nearly every value it reads."""
    return type(value) is dict or (value is not None and isinstance(value, Mapping))


def value_at(value: Any, *keys: str) -> Any:
    """`value[k1][k2]...`, or None where a level is not a mapping."""
    for key in keys:
        # Dicts and absent levels (most lookups) skip the ABC check, the slow part.
        if type(value) is not dict and (value is None or not isinstance(value, Mapping)):
            return None
        value = value.get(key)
    return value


def mapping_at(value: Any, key: str) -> Mapping[str, Any] | None:
    """`value[key]` when both are mappings, else None."""
    if type(value) is not dict and (value is None or not isinstance(value, Mapping)):
        return None
    found = value.get(key)
    if type(found) is dict or (found is not None and isinstance(found, Mapping)):
        return found
    return None


def mapping_or_empty(value: Any, key: str) -> Mapping[str, Any]:
    """`mapping_at(value, key)`, or an empty mapping: for readers that go on reading keys."""
    return mapping_at(value, key) or {}


def nonempty_text(value: Any) -> str | None:
    """`value` where it is a non-empty string, else None."""
    return value if isinstance(value, str) and value else None
