"""Building the JSON that goes out within a length: copies of what pieces hold, redacted and
JSON-safe (`AttributeBuilder`), fitted in at most the limit's characters *and still valid
against the GenAI conventions' schemas*.

`_fit_array` shortens the longest words (texts, strings inside arguments and results, schema
descriptions; never ids, names, roles or types) to one length ending in "…", first no shorter
than `_TEXT_FLOOR` while whole items are left out from one end, then to nothing; it never adds
markers. Knows nothing of entries or of the content policy.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final, Literal, NamedTuple

import orjson

from transcript_otel.genai.lookup import value_at
from transcript_otel.genai.pieces import attribute_json
from transcript_otel.records.serialize import safe_text
from transcript_otel.records.truncate import truncate_plain

# Texts are shortened to this many characters before any message is left out.
_TEXT_FLOOR: Final = 128
_ELLIPSIS: Final = "…"
# Nesting copied from arguments and results; deeper values become their text.
_MAX_DEPTH: Final = 32


class AttributeBuilder:
    """Copies what goes out, redacted and JSON-safe; remembers whether anything was cut, and
    whether a copy held a float (then what it builds is encoded by the stdlib: see `_encode`)."""

    __slots__ = ("_redact", "floats", "limit", "truncated")

    def __init__(self, redact: Callable[[str], str], limit: int, truncated: bool) -> None:
        self._redact = redact
        self.limit = limit
        self.truncated = truncated
        self.floats = False

    def text(self, text: Any) -> str:
        return self._redact(safe_text(text)[0])

    def joined(self, texts: tuple[str, ...]) -> str:
        return self.text("\n".join(safe_text(text)[0] for text in texts))

    def value(self, value: Any) -> Any:
        """A JSON-safe copy of `value`, every string redacted. A structure of more than `limit`
        items could not fit anyway: its copy stops there (and counts as cut)."""
        budget = [self.limit]
        return self._copy(value, 0, budget)

    def _copy(self, value: Any, depth: int, budget: list[int]) -> Any:
        budget[0] -= 1
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, bool | int):
            return value
        if isinstance(value, float):
            self.floats = True
            return value if math.isfinite(value) else None
        if depth < _MAX_DEPTH and isinstance(value, Mapping | list | tuple):
            try:
                return self._container(value, depth, budget)
            except Exception:  # a container that cannot be read (the redactor's own errors recur)
                self.truncated = True
        return self.text(value)  # anything else (or nested too deep, or unreadable): its text

    def _container(self, value: Any, depth: int, budget: list[int]) -> Any:
        if isinstance(value, Mapping):
            copied: dict[str, Any] = {}
            for key, item in value.items():
                if budget[0] <= 0:
                    self.truncated = True
                    break
                copied[self.text(key)] = self._copy(item, depth + 1, budget)
            return copied
        items = []
        for item in value:
            if budget[0] <= 0:
                self.truncated = True
                break
            items.append(self._copy(item, depth + 1, budget))
        return items

    def plain(self, text: str) -> str:
        """A text value (not JSON) within the limit."""
        if len(text) > self.limit:
            self.truncated = True
            return truncate_plain(text, self.limit)
        return text

    def fit(self, items: list[Any], shape: _Shape, drop: _Drop) -> str | None:
        """`items` as a JSON array within the limit, or None when even cut it cannot fit."""
        encoded = [self._encode(item) for item in items]
        if _array_length(encoded) <= self.limit:  # the common case: an array is its items joined
            return "[" + ",".join(encoded) + "]"
        fitted, cut = _fit_array(items, self.limit, shape, drop)
        if fitted is None and shape == "message" and items:
            fitted = _fit_last_message(items[-1], self.limit)
            cut = True
        self.truncated = self.truncated or cut
        return None if fitted is None else attribute_json(fitted)

    def fit_value(self, value: Any) -> str | None:
        """One JSON value within the limit (its strings shortened), or None."""
        encoded = self._encode(value)
        if len(encoded) <= self.limit:
            return encoded
        fitted, cut = _fit_array([value], self.limit + 2, "value", None)  # `[` and `]` not counted
        self.truncated = self.truncated or cut
        return None if fitted is None else attribute_json(fitted[0])

    def _encode(self, value: Any) -> str:
        """`attribute_json(value)` of what this builder built (its copies, strings it made, literals).
        orjson writes it faster, the same text but for floats (`1e-05` is
        `1e-5` to it), which only copies bring in; an integer beyond 64 bits it refuses."""
        if not self.floats:
            try:
                return orjson.dumps(value).decode()
            except TypeError:
                pass
        return attribute_json(value)


_Shape = Literal["message", "part", "definition", "value"]
_Drop = Literal["start", "end"] | None


class _Leaf(NamedTuple):
    """A string that may be shortened: `container[key]`, `length` characters of JSON (quotes aside)."""

    container: Any
    key: Any
    length: int


def _encoded_length(text: str) -> int:
    """Characters of `text` in JSON, without its quotes (escapes count: `\\n` is 2, `\\u0001` 6)."""
    return len(attribute_json(text)) - 2


def _leaf(container: Any, key: Any, text: str) -> _Leaf:
    return _Leaf(container, key, _encoded_length(text))


def _prefix(text: str, room: int) -> str:
    """The start of `text` that takes at most `room` characters of JSON (about the longest)."""
    end = min(len(text), room)
    while end > 0:
        over = _encoded_length(text[:end]) - room
        if over <= 0:
            return text[:end]
        end -= over  # each character left out takes at least one of JSON with it
    return ""


def _string_leaves(value: Any, found: list[_Leaf]) -> None:
    """Every string inside an argument or result (all of them are words)."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        if isinstance(item, str):
            if item:
                found.append(_leaf(value, key, item))
        else:
            _string_leaves(item, found)


def _part_leaves(part: Any, found: list[_Leaf]) -> None:
    if not isinstance(part, dict):
        return
    kind = part.get("type")
    if kind in ("text", "reasoning") and isinstance(part.get("content"), str):
        found.append(_leaf(part, "content", part["content"]))
    elif kind == "tool_call":
        _leaves_under(part, "arguments", found)
    elif kind == "tool_call_response":
        _leaves_under(part, "response", found)


def _leaves_under(container: dict[str, Any], key: str, found: list[_Leaf]) -> None:
    value = container.get(key)
    if isinstance(value, str):
        if value:
            found.append(_leaf(container, key, value))
    else:
        _string_leaves(value, found)


def _description_leaves(value: Any, found: list[_Leaf], depth: int = 0) -> None:
    """A JSON schema's `description` strings: shortening anything else could break the schema."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "description" and isinstance(item, str) and item:
                found.append(_leaf(value, key, item))
            else:
                _description_leaves(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _description_leaves(item, found, depth + 1)


def _leaves(item: Any, shape: _Shape) -> list[_Leaf]:
    """The strings of `item` that may be shortened: words, never ids, names, roles or types."""
    found: list[_Leaf] = []
    if shape == "message":
        for part in value_at(item, "parts") or ():
            _part_leaves(part, found)
    elif shape == "part":
        _part_leaves(item, found)
    elif shape == "definition":
        _description_leaves(item, found)
    elif isinstance(item, str):
        found.append(_leaf([item], 0, item))  # a bare string cannot be shortened in place
    else:
        _string_leaves(item, found)
    return found


def _array_length(encoded: list[str]) -> int:
    return sum(map(len, encoded)) + max(len(encoded) - 1, 0) + 2


def _spare(leaves: list[_Leaf], floor: int) -> int:
    """What shortening every leaf to `floor` characters of JSON (and "…") saves, at least."""
    return sum(leaf.length - floor - 1 for leaf in leaves if leaf.length > floor + 1)


def _shorten(leaves: list[_Leaf], excess: int, floor: int) -> None:
    """Cut the longest leaves to one length (no shorter than `floor`) that saves `excess`."""
    low, high = floor, max(leaf.length for leaf in leaves)
    while low < high:  # the longest length that still saves enough
        middle = (low + high + 1) // 2
        if _spare(leaves, middle) >= excess:
            low = middle
        else:
            high = middle - 1
    for leaf in leaves:
        if leaf.length > low + 1:
            leaf.container[leaf.key] = _prefix(leaf.container[leaf.key], low) + _ELLIPSIS


def _fit_array(items: list[Any], limit: int, shape: _Shape, drop: _Drop) -> tuple[list[Any] | None, bool]:
    """`items` (built here: changed in place) shortened to encode in at most `limit` characters:
    `(items, whether anything was cut)`, or `(None, True)`. Texts are shortened to `_TEXT_FLOOR`
    before whole items are left out (from `drop`'s end); then to nothing."""
    items = list(items)
    encoded = [attribute_json(item) for item in items]
    if _array_length(encoded) <= limit:
        return items, False
    if not items:
        return None, True
    bare = isinstance(items[0], str) if shape == "value" and len(items) == 1 else False
    leaves = [_leaves(item, shape) for item in items]
    for floor in (_TEXT_FLOOR, 0):
        spare = [_spare(found, floor) for found in leaves]
        while drop is not None and len(items) > 1 and _array_length(encoded) - sum(spare) > limit:
            index = 0 if drop == "start" else -1
            for column in (items, encoded, leaves, spare):
                del column[index]
        excess = _array_length(encoded) - limit
        if excess <= 0:
            return items, True
        if excess <= sum(spare):
            everything = [leaf for found in leaves for leaf in found]
            _shorten(everything, excess, floor)
            if bare:  # the value was a string: its shortened copy is in its leaf's box
                items = [everything[0].container[0]]
            if len(attribute_json(items)) <= limit:
                return items, True
            return None, True  # cannot happen (see `_spare`); never return too much
    return None, True


def _fit_last_message(message: Any, limit: int) -> list[Any] | None:
    """The last message alone, with as many of its newest parts as fit: for a message whose
    parts alone are more than the limit can hold."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return None
    shell = {**message, "parts": []}
    room = limit - len(attribute_json([shell])) + 2  # its parts' JSON replaces the shell's `[]`
    parts, _ = _fit_array(message["parts"], room, "part", "start") if room > 2 else (None, True)
    if not parts:
        return None
    fitted = [{**message, "parts": parts}]
    return fitted if len(attribute_json(fitted)) <= limit else None
