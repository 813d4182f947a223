"""Cutting long values for span events so that JSON stays valid and readable.

A value that is JSON (an encoded `detail`, a raw notification) keeps its
structure: long strings are shortened and long lists and objects lose their
tail, each cut marked with how much was removed. Only oversized values pay for
it, and what they pay grows with the limit, not with their size.
"""

from __future__ import annotations

from itertools import islice
from typing import Any, Final

import orjson

from transcript_otel.records.serialize import dumps

# Below this many characters a value is not worth showing cut: its container is cut instead.
_MIN_ROOM: Final = 12
# What a cut's marker takes, kept free while more keys or items may follow:
# `,"…":"[+12345 keys]"` or `,"…[+12345 items]"`.
_MARKER_ROOM: Final = 24
# A list item that would be shown cut, after whole ones, must have this much room.
_USEFUL_PREVIEW: Final = 64
_TRIES: Final = 4
# Bytes a pass may encode to measure list items, per character of the limit.
_MEASURED_PER_LIMIT: Final = 64


def truncate_plain(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, the cut marked with the original length."""
    if len(text) <= limit:
        return text
    marker = f"…[truncated, original length {len(text)}]"
    if len(marker) >= limit:  # no room for the full marker: keep the bare ellipsis
        return text[: max(0, limit - 1)] + "…"[:limit]
    return text[: limit - len(marker)] + marker


_UNPARSED: Final[Any] = object()


def truncate_json(text: str, limit: int, *, parsed: Any = _UNPARSED) -> str:
    """JSON `text` cut to at most `limit` characters as valid, marked JSON.

    `parsed`: what `text` encodes, when the caller holds it (a record's detail), which
    saves parsing `text` again; should cutting it fail,
    `text` is parsed after all. Text that does not parse as JSON is cut as plain text.
    Never raises.
    """
    if len(text) <= limit:
        return text
    if parsed is not _UNPARSED:
        try:
            return _truncate_parsed(parsed, text, limit)
        except Exception:  # a held value JSON encodes in ways the cut did not foresee
            pass
    try:
        # orjson directly: a preview need not keep integers beyond 64 bits exact.
        held = orjson.loads(text)
    except (orjson.JSONDecodeError, RecursionError):
        return truncate_plain(text, limit)
    return _truncate_parsed(held, text, limit)


def _truncate_parsed(parsed: Any, text: str, limit: int) -> str:
    if isinstance(parsed, str):  # a JSON string: cut its content, keep it a JSON string
        size = limit
        while size > 0:
            quoted = dumps(truncate_plain(parsed, size)).data.decode("utf-8")
            if len(quoted) <= limit:
                return quoted
            size = min(size - 1, size * limit // len(quoted))
        return truncate_plain(text, limit)
    if not isinstance(parsed, (dict, list, tuple)):
        return truncate_plain(text, limit)
    return _shrink_to_fit(parsed, text, limit)


def _shrink_to_fit(parsed: dict[str, Any] | list[Any] | tuple[Any, ...], text: str, limit: int) -> str:
    """`parsed` cut to fit `limit` characters of JSON.

    One pass builds the cut value from estimated sizes and stops walking where the
    room runs out, so a value costs what is kept, not what it holds. Escapes the
    estimate missed can make the result too long: then the room is scaled down by
    the overshoot and the pass runs again (rarely more than once).
    """
    room = limit
    for _ in range(_TRIES):
        try:
            cut = _Cut(limit).fit(parsed, room)[0]
        except RecursionError:  # nested deeper than the cut can follow: the preview below
            break
        candidate = dumps(cut).data.decode("utf-8")
        if len(candidate) <= limit:
            return candidate
        room = min(room - 1, int(room * limit * 0.95 / len(candidate)))
        if room < _MIN_ROOM:
            break
    return json_preview(text, limit)  # too many nodes for even the smallest room


def json_preview(text: str, limit: int) -> str:
    """JSON `text` as `{"truncated_json_preview": <its start>}` in at most `limit` characters:
    valid and readable, and cheap (`text` is not parsed), but without its structure."""
    size = limit // 2
    while size > 0:
        preview = orjson.dumps({"truncated_json_preview": text[:size]}).decode("utf-8")
        if len(preview) <= limit:
            return preview
        size //= 2
    return "{}" if limit >= 2 else truncate_plain(text, limit)


def _scalar_size(value: bool | int | float | None) -> int:
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    return len(repr(value))


def _string_size(text: str) -> int:
    """JSON length of `text`: its quotes, and the escapes of the common characters needing one."""
    return len(text) + 2 + text.count('"') + text.count("\\") + text.count("\n")


def _as_json(value: Any) -> Any:
    """A value JSON has no type for (a dataclass, an enum, a datetime...) as orjson encodes it."""
    try:
        return orjson.loads(orjson.dumps(value, default=repr))
    except (TypeError, orjson.JSONDecodeError):
        return f"<{type(value).__name__}>"


# Larger than any room: the value is walked instead.
_UNMEASURED: Final = 1 << 62


class _Cut:
    """One pass of the cut. Whole list items are measured by orjson in C, far faster than a
    walk in Python, but a large item that does not fit is encoded for nothing, once per
    level of nesting: past `measure_left` bytes so measured, items are walked instead."""

    __slots__ = ("measure_left",)

    def __init__(self, limit: int) -> None:
        self.measure_left = _MEASURED_PER_LIMIT * limit

    def fit(self, value: Any, room: int) -> tuple[Any, int, bool]:
        """`value` cut to about `room` characters of JSON: the cut value, its estimated JSON
        length, and whether anything in it was cut."""
        if isinstance(value, str):
            return self._string(value, room)
        if isinstance(value, dict):
            return self._object(value, room)
        if isinstance(value, (list, tuple)):
            return self._array(value, room)
        if value is None or isinstance(value, (bool, int, float)):
            return value, _scalar_size(value), False
        return self.fit(_as_json(value), room)

    def _string(self, text: str, room: int) -> tuple[str, int, bool]:
        if len(text) + 2 <= room:
            size = _string_size(text)
            if size <= room:
                return text, size, False
        kept = text[: max(0, room - 2 - len(f"…[+{len(text)} chars]"))]
        budget = len(kept)
        escaped = _string_size(kept) - 2
        while escaped > budget:  # escapes take room too: keep the share that fits, strictly less
            kept = kept[: len(kept) * budget // escaped]
            escaped = _string_size(kept) - 2
        cut = f"{kept}…[+{len(text) - len(kept)} chars]"
        return cut, _string_size(cut), True

    def _object(self, value: dict[Any, Any], room: int) -> tuple[dict[str, Any], int, bool]:
        """Keys in order while there is room; the number of the others under the key `…`.

        Short scalars are kept whole, their room set aside first (up to half of it); the
        other values (containers, long strings) share what is left, each at most an even
        share of it, so a large value early in the object does not crowd out the keys after it.
        """
        items = [
            (key if isinstance(key, str) else str(_as_json(key)), item)
            for key, item in islice(value.items(), max(1, room // 4))  # a key takes at least `"":0,`
        ]
        sizes = _whole_sizes(items, room // len(items) if items else room)
        # A key takes its quotes, its colon and a comma (escapes: see _TRIES).
        set_aside = sum(
            len(key) + 4 + size for (key, _), size in zip(items, sizes, strict=True) if size is not None
        )
        sharing = sizes.count(None)
        kept: dict[str, Any] = {}
        left = room - 2
        last = len(value) - 1
        cut_inside = False
        for index, ((key, item), size) in enumerate(zip(items, sizes, strict=True)):
            key_size = len(key) + 4
            marker_room = _MARKER_ROOM if index < last else 0
            if size is not None:
                set_aside -= key_size + size
            else:
                # Short values that cannot all fit keep no more than half of what is left.
                share = (left - min(set_aside, left // 2) - marker_room) // sharing - key_size
                sharing -= 1
                if share >= _MIN_ROOM:
                    item, size, cut = self.fit(item, share)
                    cut_inside = cut_inside or cut
            if size is None or key_size + size > left - marker_room:
                return _cut_object(kept, len(value) - index, room)
            kept[key] = item
            left -= key_size + size
        if len(items) < len(value):
            return _cut_object(kept, len(value) - len(items), room)
        return kept, room - left, cut_inside

    def _array(self, value: list[Any] | tuple[Any, ...], room: int) -> tuple[list[Any], int, bool]:
        """Items in order while there is room, then the number of the others. Items shown are
        whole but for the last one shown, which may be cut if that leaves it some room."""
        kept: list[Any] = []
        left = room - 2
        cut_inside = False
        for index, item in enumerate(value):
            marker_room = _MARKER_ROOM if index < len(value) - 1 else 0
            share = left - marker_room - 1
            if share < _MIN_ROOM:
                break
            size = self._measured(item) if isinstance(item, (dict, list, tuple)) else _UNMEASURED
            if size <= share:  # the common item of a long list: whole, measured in C
                kept.append(item)
                left -= size + 1
                continue
            fitted, size, cut = self.fit(item, share)
            if cut and kept and share < _USEFUL_PREVIEW:
                break
            kept.append(fitted)
            left -= size + 1
            if cut:
                cut_inside = True
                break
        if len(kept) < len(value):
            kept.append(f"…[+{len(value) - len(kept)} items]")
            return kept, room, True
        return kept, room - left, cut_inside

    def _measured(self, value: dict[Any, Any] | list[Any] | tuple[Any, ...]) -> int:
        """The JSON length of `value` in UTF-8 bytes (at least its characters), while the
        allowance lasts; `_UNMEASURED` when it is spent or orjson cannot encode `value`."""
        if self.measure_left <= 0:
            return _UNMEASURED
        try:
            size = len(orjson.dumps(value))
        except TypeError:
            return _UNMEASURED
        self.measure_left -= size
        return size


def _whole_sizes(items: list[tuple[str, Any]], room: int) -> list[int | None]:
    """The JSON length of each value that is a scalar fitting `room` whole; None for the
    others. Inline rather than per-value calls: this runs for every key of every object
    shown, and a Python call costs more here than the work."""
    sizes: list[int | None] = []
    for _, item in items:
        kind = type(item)
        if kind is str or (kind is not dict and kind is not list and isinstance(item, str)):
            size = len(item) + 2
            if size <= room:
                size += item.count('"') + item.count("\\") + item.count("\n")
            sizes.append(size if size <= room else None)
        elif item is None or kind is int or kind is float or kind is bool:
            sizes.append(_scalar_size(item))
        else:  # containers, and what JSON has no type for: cut by `_Cut.fit`
            sizes.append(None)
    return sizes


def _cut_object(kept: dict[str, Any], removed: int, room: int) -> tuple[dict[str, Any], int, bool]:
    marker = "…"
    while marker in kept:  # an object's own key `…` is not overwritten
        marker += "…"
    kept[marker] = f"[+{removed} keys]"
    return kept, room, True
