"""Structured-log records from exported OTLP log records.

Lets `reconstruct_transcript()` and `check_invariants()` read a transcript back
from what reached an OTLP backend: protobuf `LogRecord`s (as a receiver or the
OTLP encoder produces them) or the OTLP/JSON form of the same messages.
"""

from __future__ import annotations

import base64
import binascii
import string
import warnings
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from transcript_otel.otel import attributes as attr
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.records.serialize import iso_timestamp, loads

_CONTEXT_SKIP = frozenset((attr.RUN_ID,))
_JSON_ATTRIBUTES = frozenset((attr.DETAIL, "transcript.entries_by_source", "transcript.entries_by_type"))


def _any_value(value: Any) -> Any:
    """An OTLP AnyValue (protobuf message or OTLP/JSON dict) as a Python value."""
    if isinstance(value, Mapping):
        if not value:
            return None
        kind, inner = next(iter(value.items()))
        return _json_any_value(kind, inner)
    kind = value.WhichOneof("value")
    if kind is None:
        return None
    inner = getattr(value, kind)
    if kind == "array_value":
        return [_any_value(item) for item in inner.values]
    if kind == "kvlist_value":
        return {kv.key: _any_value(kv.value) for kv in inner.values}
    return inner


def _json_any_value(kind: str, inner: Any) -> Any:
    if kind == "intValue":
        return int(inner)
    if kind == "arrayValue":
        return [_any_value(item) for item in inner.get("values", [])]
    if kind == "kvlistValue":
        return {kv["key"]: _any_value(kv.get("value", {})) for kv in inner.get("values", [])}
    return inner


def _attributes(log_record: Any) -> dict[str, Any]:
    if isinstance(log_record, Mapping):
        pairs = [(kv["key"], kv.get("value", {})) for kv in log_record.get("attributes", [])]
    else:
        pairs = [(kv.key, kv.value) for kv in log_record.attributes]
    return {key: _any_value(value) for key, value in pairs}


def _hex_id(value: Any, size: int) -> str | None:
    """A trace (16 bytes) or span (8 bytes) id as hex, from protobuf bytes, the OTLP/JSON
    hex form, or the base64 form of protobuf's generic JSON mapping."""
    if isinstance(value, str) and value:
        if len(value) == size * 2 and all(c in string.hexdigits for c in value):
            raw = bytes.fromhex(value)
        else:
            try:
                raw = base64.b64decode(value, validate=True)
            except (binascii.Error, ValueError):
                return None
    elif isinstance(value, bytes):
        raw = value
    else:
        return None
    return raw.hex() if len(raw) == size and raw.strip(b"\0") else None


def _nanos(value: Any) -> int | None:
    try:
        nanos = int(value)
    except (TypeError, ValueError):
        return None
    return nanos if nanos > 0 else None


def _json_attribute(key: str, value: Any) -> Any:
    """A JSON-string attribute parsed; one a backend cut (attribute length limits) stays a
    string, with a warning, so the rest of the read-back goes on."""
    try:
        return loads(value)
    except (TypeError, ValueError):
        warnings.warn(
            f"{key} is not valid JSON (cut by an attribute length limit?); kept as a string",
            TranscriptReadWarning,
            stacklevel=4,
        )
        return value


def record_from_otlp(log_record: Any) -> dict[str, Any]:
    """One structured-log record (the JSONL mirror's shape) from one OTLP log record."""
    attributes = _attributes(log_record)
    context: dict[str, Any] = {}
    prefix = f"{attr.NAMESPACE}."
    get = (
        log_record.get
        if isinstance(log_record, Mapping)
        else (lambda name, default=None: getattr(log_record, name, default))
    )
    event = get("event_name") or get("eventName")
    for key, value in attributes.items():
        if not key.startswith(prefix) or key in _CONTEXT_SKIP:
            continue
        context[key[len(prefix) :]] = _json_attribute(key, value) if key in _JSON_ATTRIBUTES else value
    if attr.RUN_ID in attributes and event != "transcript.entry":  # entries keep the pure envelope
        context["run_id"] = attributes[attr.RUN_ID]
    trace_id = _hex_id(get("trace_id") or get("traceId"), 16)
    span_id = _hex_id(get("span_id") or get("spanId"), 8)
    if trace_id:
        context["trace_id"] = trace_id
    if span_id:
        context["span_id"] = span_id
    timestamp = context.get("timestamp")
    if timestamp is None:  # lifecycle records: the log record's own time
        nanos = _nanos(get("time_unix_nano") or get("timeUnixNano"))
        timestamp = iso_timestamp(nanos) if nanos else None
    return {
        "timestamp": timestamp,
        "level": get("severity_text") or get("severityText"),
        "logger": None,
        "event": event,
        "message": _any_value(get("body")) if get("body") is not None else None,
        "context": context,
    }


class NotOtlpError(ValueError):
    """Part of the input does not have the shape of OTLP log records."""


def records_from_otlp(messages: Iterable[Any]) -> Iterator[dict[str, Any]]:
    """Records from OTLP log records, `ScopeLogs`, `ResourceLogs` or export requests.

    Only records of the `transcript.*` events are returned. A part of the input with the
    wrong shape (OTLP/JSON from a tool that got it wrong, a hostile file) raises
    `NotOtlpError`, after the records read before it.
    """
    for log_record in _log_records(messages):
        try:
            record = record_from_otlp(log_record)
        except (TypeError, AttributeError, KeyError, ValueError, StopIteration) as exc:
            raise NotOtlpError(f"a log record of the wrong shape ({type(exc).__name__}: {exc})") from exc
        if str(record.get("event") or "").startswith(f"{attr.NAMESPACE}."):
            yield record


def _log_records(messages: Iterable[Any]) -> Iterator[Any]:
    for message in messages:
        if not isinstance(message, Mapping) and getattr(message, "DESCRIPTOR", None) is None:
            raise NotOtlpError(f"{type(message).__name__} where an OTLP message was expected")
        for name, json_name in _NESTING:
            children = _field(message, name, json_name)
            if children is not None:
                if isinstance(children, str | bytes | Mapping) or not isinstance(children, Iterable):
                    raise NotOtlpError(f"{json_name} is a {type(children).__name__}, not a list")
                yield from (_log_records(children) if name != "log_records" else _checked(children))
                break
        else:
            yield message


_NESTING = (("resource_logs", "resourceLogs"), ("scope_logs", "scopeLogs"), ("log_records", "logRecords"))


def _checked(log_records: Iterable[Any]) -> Iterator[Any]:
    for log_record in log_records:
        if not isinstance(log_record, Mapping) and getattr(log_record, "DESCRIPTOR", None) is None:
            raise NotOtlpError(f"{type(log_record).__name__} where a log record was expected")
        yield log_record


def _field(message: Any, name: str, json_name: str) -> Any:
    if isinstance(message, Mapping):
        return message.get(name, message.get(json_name))
    descriptor = getattr(message, "DESCRIPTOR", None)
    if descriptor is not None and name in descriptor.fields_by_name:
        return getattr(message, name)
    return None
