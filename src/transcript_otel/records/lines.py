"""A record as a line of the debug bundle's `logs/app.jsonl`: the JSONL mirror's lines.

Every line has the same shape (timestamp, level, logger, event, message, then the context);
what an entry's line holds before its context is the same for every entry of a type, so it
is encoded once per type.
"""

from __future__ import annotations

from typing import Any, Final

import orjson

from transcript_otel.model.entries import CANONICAL_ENTRY_TYPES, TranscriptEvent
from transcript_otel.records.prepared import PreparedRecord, record_level, record_message
from transcript_otel.records.serialize import dumps

LOGGER_NAME: Final = "transcript_otel"


def _line(timestamp: str, event: TranscriptEvent, context: dict[str, Any]) -> dict[str, Any]:
    """The debug-bundle `logs/app.jsonl` record: the context comes last."""
    return {
        "timestamp": timestamp,
        "level": record_level(event),
        "logger": LOGGER_NAME,
        "event": event,  # a StrEnum: orjson writes its value, without the slow `.value`
        "message": record_message(event, context),
        "context": context,
    }


def _entry_line_head(entry_type: str) -> bytes:
    """What an entry's line holds between its timestamp and its context's value: the
    same for every entry of a type, so it is encoded once, by the encoder of the lines."""
    template = orjson.dumps(_line("", TranscriptEvent.ENTRY, {"entry_type": entry_type}))
    return template[len(_LINE_START) + len(b'""') : template.rindex(b'"context":') + len(b'"context":')]


_LINE_START: Final = b'{"timestamp":'
_ENTRY_LINE_HEADS: Final = {entry_type: _entry_line_head(entry_type) for entry_type in CANONICAL_ENTRY_TYPES}


def encode_line(record: PreparedRecord) -> bytes:
    """The debug-bundle `logs/app.jsonl` line for `record`, newline included."""
    line = line_or_parts(record, _NO_PARTS)
    return line if isinstance(line, bytes) else b"".join(line)


_NO_PARTS: Final = 1 << 62


def line_or_parts(record: PreparedRecord, parts_from: int) -> bytes | tuple[bytes, ...]:
    """`encode_line`'s line; for an entry whose context's JSON takes `parts_from` bytes or
    more, the parts it is joined from, in order (a buffer takes them without a joined copy).

    An entry's line is joined from its encoded parts (the head per entry type, above):
    cheaper, for every entry, than building and encoding the line's dict."""
    context = record.context
    if record.event is TranscriptEvent.ENTRY:
        head = _ENTRY_LINE_HEADS.get(context["entry_type"])
        if head is not None:
            try:
                context_json = orjson.dumps(context)
                parts = (_LINE_START, orjson.dumps(record.timestamp), head, context_json, b"}\n")
            except TypeError:
                pass  # the line's dict, below, falls back on the encoder that never fails
            else:
                return parts if len(context_json) >= parts_from else b"".join(parts)
    return _whole_line(record)


def _whole_line(record: PreparedRecord) -> bytes:
    context = record.context
    line = _line(record.timestamp, record.event, context)
    try:
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
    except TypeError:
        # Lifecycle extras may hold anything a caller passed; entries are pre-sanitized.
        line["context"] = {key: orjson.Fragment(dumps(value).data) for key, value in context.items()}
        return orjson.dumps(line, option=orjson.OPT_APPEND_NEWLINE)
