"""How much the OTLP export queues may hold, and what their items weigh.

The bounds `configure()` gives the queues (`export_queue`), and the estimate of the
memory one log record or span holds, which the queue counts against them. Plain
Python: `exporters` reads the bounds without the OTel SDK.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any, Final

# Log records (and, separately, spans) waiting for export: the memory each queue may hold.
DEFAULT_MAX_QUEUE_BYTES: Final = 8 * 1024 * 1024
# Batches of 512 (the SDK default) of 50 KB entries make 25 MB requests that collectors
# refuse (413); 64 keeps requests within common limits.
DEFAULT_BATCH_SIZE: Final = 64
# A batch is also cut at this many bytes (as the queue counts them): the exporter encodes
# it holding the GIL (the protobuf serialization in one C call), and the agent's thread,
# back from I/O, waits for that.
DEFAULT_BATCH_BYTES: Final = 1024 * 1024
# What a record costs besides its strings: the SDK objects, ids, timestamps, the dicts.
RECORD_OVERHEAD_BYTES: Final = 512
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


def record_bytes(log_record: Any) -> int:
    """The estimated size of one SDK record (`ReadWriteLogRecord`, or `LogData` before 1.39)."""
    inner = getattr(log_record, "log_record", log_record)
    attributes = getattr(inner, "attributes", None) or {}
    return RECORD_OVERHEAD_BYTES + payload_bytes(getattr(inner, "body", None)) + payload_bytes(attributes)


def span_bytes(span: Any) -> int:
    """The estimated size of one finished SDK span: its name, attributes and events."""
    size = RECORD_OVERHEAD_BYTES + payload_bytes(getattr(span, "name", None))
    size += payload_bytes(getattr(span, "attributes", None) or {})
    for event in getattr(span, "events", None) or ():
        size += 64 + payload_bytes(getattr(event, "attributes", None) or {})
    return size
