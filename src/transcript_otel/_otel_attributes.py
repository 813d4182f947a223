"""The flat OTel attributes of a prepared record, shared by both OTel sinks."""

from __future__ import annotations

from typing import Any

from transcript_otel import attributes as attr
from transcript_otel._genai import genai_attributes
from transcript_otel._records import PreparedRecord
from transcript_otel._serialize import dumps
from transcript_otel._truncate import truncate_text
from transcript_otel.model import TranscriptEvent

Scalar = str | int | float | bool

_NOT_ATTRIBUTES = frozenset(("detail", "trace_id", "span_id"))


def record_attributes(record: PreparedRecord, *, max_length: int | None = None) -> dict[str, Scalar]:
    """The envelope as `transcript.*` attributes plus the GenAI keys it maps onto.

    Nested values become JSON strings. With `max_length`, longer strings are cut
    (JSON-preserving) and marked with `<key>.truncated` and `<key>.original_length`.
    """
    attributes: dict[str, Scalar] = {attr.RUN_ID: record.run.run_id}
    for key, value in record.context.items():
        if key in _NOT_ATTRIBUTES:
            continue
        attributes[f"{attr.NAMESPACE}.{key}"] = _scalar(value)
    if record.detail_json is not None:
        attributes[attr.DETAIL] = record.detail_json.decode("utf-8")
    if record.run.session_id is not None:
        attributes[attr.GEN_AI_CONVERSATION_ID] = record.run.session_id
    if record.event is TranscriptEvent.ENTRY:
        attributes.update(genai_attributes(record.context["entry_type"], record.detail))
    if max_length is not None:
        _truncate_in_place(attributes, max_length)
    return attributes


def _scalar(value: Any) -> Scalar:
    if isinstance(value, (str, int, float, bool)):
        return value
    return dumps(value).data.decode("utf-8")


def _truncate_in_place(attributes: dict[str, Scalar], max_length: int) -> None:
    for key, value in list(attributes.items()):
        if isinstance(value, str) and len(value) > max_length:
            attributes[key], _ = truncate_text(value, max_length)
            attributes[key + attr.TRUNCATED_SUFFIX] = True
            attributes[key + attr.ORIGINAL_LENGTH_SUFFIX] = len(value)
