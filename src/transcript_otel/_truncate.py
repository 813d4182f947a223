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

from transcript_otel._serialize import dumps

# Below this many characters a value is not worth showing cut: its container is cut instead.
_MIN_ROOM: Final = 12
# What a cut's marker takes, kept free while more keys or items may follow:
# `,"…":"[+12345 keys]"` or `,"…[+12345 items]"`.
_MARKER_ROOM: Final = 24
# A list item that would be shown cut, after whole ones, must have this much room.
_USEFUL_PREVIEW: Final = 64
_TRIES: Final = 4


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
    saves parsing `text` (150 µs for 50 KB of small objects). Text that does not parse
    as JSON is cut as plain text.
    """
    if len(text) <= limit:
        return text
    if parsed is _UNPARSED:
        try:
            # orjson directly: a preview need not keep integers beyond 64 bits exact.
            parsed = orjson.loads(text)
        except (orjson.JSONDecodeError, RecursionError):
            return truncate_plain(text, limit)
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
    try:
        return _shrink_to_fit(parsed, text, limit)
    except RecursionError:  # nesting deeper than we can walk: a plain, marked cut
        return truncate_plain(text, limit)


def _shrink_to_fit(parsed: dict[str, Any] | list[Any] | tuple[Any, ...], text: str, limit: int) -> str:
    """`parsed` cut to fit `limit` characters of JSON.

    One pass builds the cut value from estimated sizes and stops walking where the
    room runs out, so a value costs what is kept, not what it holds. Escapes the
    estimate missed can make the result too long: then the room is scaled down by
    the overshoot and the pass runs again (rarely more than once).
    """
    room = limit
    for _ in range(_TRIES):
        cut, _, _ = _fit(parsed, room)
        candidate = dumps(cut).data.decode("utf-8")
        if len(candidate) <= limit:
            return candidate
        room = min(room - 1, int(room * limit * 0.95 / len(candidate)))
        if room < _MIN_ROOM:
            break
    # Too many nodes for even the smallest room: keep a readable, valid preview.
    size = limit // 2
    while size > 0:
        preview = orjson.dumps({"truncated_json_preview": text[:size]}).decode("utf-8")
        if len(preview) <= limit:
            return preview
        size //= 2
    return "{}"


def _fit(value: Any, room: int) -> tuple[Any, int, bool]:
    """`value` cut to about `room` characters of JSON: the cut value, its estimated JSON
    length, and whether anything in it was cut."""
    if isinstance(value, str):
        return _fit_string(value, room)
    if isinstance(value, dict):
        return _fit_object(value, room)
    if isinstance(value, (list, tuple)):
        return _fit_array(value, room)
    return value, _scalar_size(value), False


def _scalar_size(value: Any) -> int:
    if value is None or value is True:
        return 4
    if value is False:
        return 5
    return len(str(value))


def _string_size(text: str) -> int:
    """JSON length of `text`: its quotes, and the escapes of the common characters needing one."""
    return len(text) + 2 + text.count('"') + text.count("\\") + text.count("\n")


def _fit_string(text: str, room: int) -> tuple[str, int, bool]:
    if len(text) + 2 <= room:
        size = _string_size(text)
        if size <= room:
            return text, size, False
    kept = text[: max(0, room - 2 - len(f"…[+{len(text)} chars]"))]
    kept = kept[: max(0, 2 * len(kept) + 2 - _string_size(kept))]  # room for its escapes
    cut = f"{kept}…[+{len(text) - len(kept)} chars]"
    return cut, _string_size(cut), True


def _whole_sizes(items: list[tuple[str, Any]], room: int) -> list[int | None]:
    """The JSON length of each value that is a scalar fitting `room` whole; None for the
    others. Inline rather than per-value calls: this runs for every key of every object
    shown, and a Python call costs more here than the work."""
    sizes: list[int | None] = []
    for _, item in items:
        kind = type(item)
        if kind is str:
            size = len(item) + 2
            if size <= room:
                size += item.count('"') + item.count("\\") + item.count("\n")
            sizes.append(size if size <= room else None)
        elif kind is dict or kind is list or kind is tuple or isinstance(item, (dict, list, tuple)):
            sizes.append(None)
        else:
            sizes.append(_scalar_size(item))
    return sizes


def _fit_object(value: dict[str, Any], room: int) -> tuple[dict[str, Any], int, bool]:
    """Keys in order while there is room; the number of the others under the key `…`.

    Short scalars are kept whole, their room set aside first; the other values
    (containers, long strings) share what is left, each at most an even share of it,
    so a large value early in the object does not crowd out the keys after it.
    """
    items = list(islice(value.items(), max(1, room // 4)))  # a key takes at least `"":0,`
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
            share = (left - set_aside - marker_room) // sharing - key_size
            sharing -= 1
            if share >= _MIN_ROOM:
                item, size, cut = _fit(item, share)
                cut_inside = cut_inside or cut
        if size is None or key_size + size > left - marker_room:
            return _cut_object(kept, len(value) - index, room)
        kept[key] = item
        left -= key_size + size
    if len(items) < len(value):
        return _cut_object(kept, len(value) - len(items), room)
    return kept, room - left, cut_inside


def _encoded_size(value: dict[str, Any] | list[Any] | tuple[Any, ...]) -> int:
    """The JSON length of `value` in UTF-8 bytes (at least its characters): one orjson call
    for a whole list item, where walking it in Python costs 20x more."""
    try:
        return len(orjson.dumps(value))
    except TypeError:  # not JSON as orjson sees it: let the walk measure it
        return _UNMEASURED


# Larger than any room: the value is walked instead.
_UNMEASURED: Final = 1 << 62


def _cut_object(kept: dict[str, Any], removed: int, room: int) -> tuple[dict[str, Any], int, bool]:
    kept["…"] = f"[+{removed} keys]"
    return kept, room, True


def _fit_array(value: list[Any] | tuple[Any, ...], room: int) -> tuple[list[Any], int, bool]:
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
        size = _encoded_size(item) if isinstance(item, (dict, list, tuple)) else share + 1
        if size <= share:  # the common item of a long list: whole, found in C
            kept.append(item)
            left -= size + 1
            continue
        fitted, size, cut = _fit(item, share)
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
