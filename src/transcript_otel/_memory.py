"""About how much memory a value holds, for the byte bounds of the export queues and span events."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

_MAX_DEPTH: Final = 32


def payload_bytes(value: Any, depth: int = 0) -> int:
    """About how much memory `value` holds: its strings and bytes, with a little per item.

    A string costs what Python keeps (`sys.getsizeof`): one emoji makes every character
    of a string 4 bytes, and an outage queue of such text holds 4x its UTF-8 size.
    """
    if isinstance(value, (str, bytes, bytearray)):
        return sys.getsizeof(value)
    if depth >= _MAX_DEPTH:
        return 8
    if isinstance(value, Mapping):
        return sum(len(str(key)) + payload_bytes(item, depth + 1) for key, item in value.items())
    if isinstance(value, (list, tuple)):
        return sum(8 + payload_bytes(item, depth + 1) for item in value)
    return 8
