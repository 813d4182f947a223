"""Cutting long values for span events so that JSON stays valid and readable.

A value that is JSON (an encoded `detail`, a raw notification) keeps its
structure: long strings are shortened and long lists and objects lose their
tail, each cut marked with how much was removed. The budget is found by a
binary search, so only oversized values pay for it.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from transcript_otel._serialize import dumps

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


def truncate_plain(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, the cut marked with the original length."""
    if len(text) <= limit:
        return text
    marker = f"…[truncated, original length {len(text)}]"
    if len(marker) >= limit:  # no room for the full marker: keep the bare ellipsis
        return text[: max(0, limit - 1)] + "…"[:limit]
    return text[: limit - len(marker)] + marker


def truncate_json(text: str, limit: int) -> str:
    """JSON `text` cut to at most `limit` characters as valid, marked JSON.

    Text that does not parse as JSON is cut as plain text.
    """
    if len(text) <= limit:
        return text
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
    if not isinstance(parsed, (dict, list)):
        return truncate_plain(text, limit)
    try:
        return _shrink_to_fit(parsed, text, limit)
    except RecursionError:  # nesting deeper than we can walk: a plain, marked cut
        return truncate_plain(text, limit)


def _shrink_to_fit(parsed: dict[str, Any] | list[Any], text: str, limit: int) -> str:
    """Shrink string and container budgets until the JSON fits.

    Each try costs a walk of the value, so the next budget is scaled by how far
    the last candidate overshot: two or three tries instead of a binary search.
    """
    budget = limit // 2
    while budget >= _MIN_STRING:
        candidate = dumps(_shrink(parsed, budget, max(_MIN_ITEMS, budget // 16))).data
        if len(candidate) <= limit:
            return candidate.decode("utf-8")
        budget = min(budget - 1, int(budget * limit * 0.9 / len(candidate)))
    # Too many nodes for even the smallest budget: keep a readable, valid preview.
    size = limit // 2
    while size > 0:
        preview = orjson.dumps({"truncated_json_preview": text[:size]}).decode("utf-8")
        if len(preview) <= limit:
            return preview
        size //= 2
    return "{}"
