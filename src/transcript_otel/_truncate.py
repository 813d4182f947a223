"""Cutting long values for span events so that JSON stays valid and readable.

A value that is JSON (an encoded `detail`, a raw notification) keeps its
structure: long strings are shortened and long lists and objects lose their
tail, each cut marked with how much was removed. The budget is found by a
binary search, so only oversized values pay for it.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from transcript_otel._serialize import dumps, loads

_MIN_STRING: Final = 8
_MIN_ITEMS: Final = 1


def _shrink(value: Any, max_string: int, max_items: int) -> Any:
    if isinstance(value, str):
        if len(value) <= max_string:
            return value
        return f"{value[:max_string]}…[+{len(value) - max_string} chars]"
    if isinstance(value, list):
        kept = [_shrink(item, max_string, max_items) for item in value[:max_items]]
        if len(value) > max_items:
            kept.append(f"…[+{len(value) - max_items} items]")
        return kept
    if isinstance(value, dict):
        items = list(value.items())
        shrunk = {key: _shrink(item, max_string, max_items) for key, item in items[:max_items]}
        if len(items) > max_items:
            shrunk["…"] = f"[+{len(items) - max_items} keys]"
        return shrunk
    return value


def _cut_plain(text: str, limit: int) -> str:
    marker = f"…[truncated, original length {len(text)}]"
    if len(marker) >= limit:  # no room for the full marker: keep the bare ellipsis
        return text[: max(0, limit - 1)] + "…"[:limit]
    return text[: limit - len(marker)] + marker


def truncate_text(text: str, limit: int) -> tuple[str, bool]:
    """`text` cut to at most `limit` characters; JSON text stays valid JSON.

    Returns the value and whether it was cut.
    """
    if len(text) <= limit:
        return text, False
    try:
        parsed = loads(text)
    except ValueError:
        return _cut_plain(text, limit), True
    if isinstance(parsed, str):  # a JSON string: cut its content, keep it a JSON string
        size = limit
        while size > 0:
            quoted = dumps(_cut_plain(parsed, size)).data.decode("utf-8")
            if len(quoted) <= limit:
                return quoted, True
            size = min(size - 1, size * limit // len(quoted))
        return _cut_plain(text, limit), True
    if not isinstance(parsed, (dict, list)):
        return _cut_plain(text, limit), True
    try:
        return _shrink_to_fit(parsed, text, limit), True
    except RecursionError:  # nesting deeper than we can walk: a plain, marked cut
        return _cut_plain(text, limit), True


def _shrink_to_fit(parsed: dict[str, Any] | list[Any], text: str, limit: int) -> str:
    best: str | None = None
    low, high = _MIN_STRING, limit
    while low <= high:
        budget = (low + high) // 2
        candidate = dumps(_shrink(parsed, budget, max(_MIN_ITEMS, budget // 16))).data
        if len(candidate) <= limit:
            best = candidate.decode("utf-8")
            low = budget + 1
        else:
            high = budget - 1
    if best is not None:
        return best
    # Too many nodes for even the smallest budget: keep a readable, valid preview.
    size = limit // 2
    while size > 0:
        preview = orjson.dumps({"truncated_json_preview": text[:size]}).decode("utf-8")
        if len(preview) <= limit:
            return preview
        size //= 2
    return "{}"
