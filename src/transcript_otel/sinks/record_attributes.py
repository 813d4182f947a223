"""The flat OTel attributes of a prepared record, shared by both OTel sinks."""

from __future__ import annotations

from typing import Any

from transcript_otel.genai.attributes import genai_attributes
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.otel import attributes as attr
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.serialize import dumps
from transcript_otel.records.truncate import json_preview, truncate_json, truncate_plain

Scalar = str | int | float | bool

_NOT_ATTRIBUTES = frozenset(("detail", "trace_id", "span_id"))


def record_attributes(record: PreparedRecord) -> dict[str, Scalar]:
    """The envelope as `transcript.*` attributes plus the GenAI keys it maps onto.

    Nested values become JSON strings. Built once per record and shared by the
    sinks (cached on the record); callers must not modify the returned dict.
    """
    if record.otel_attributes is not None:
        return record.otel_attributes
    attributes: dict[str, Scalar] = {attr.RUN_ID: record.run.run_id}
    for key, value in record.context.items():
        if key == "detail" and record.detail_json is not None:
            attributes[attr.DETAIL] = record.detail_json.decode("utf-8")  # in envelope order
        elif key not in _NOT_ATTRIBUTES and value is not None:
            attributes[f"{attr.NAMESPACE}.{key}"] = _scalar(value)
    if record.run.session_id is not None:
        attributes[attr.GEN_AI_CONVERSATION_ID] = record.run.session_id
    if record.event is TranscriptEvent.ENTRY:
        attributes.update(genai_attributes(record.context["entry_type"], record.detail))
    record.otel_attributes = attributes
    return attributes


def truncated_attributes(
    record: PreparedRecord, max_length: int, *, preview: bool = False
) -> dict[str, Scalar]:
    """`record_attributes` with strings longer than `max_length` cut and marked.

    JSON values (`transcript.detail`, a raw notification) keep their structure and
    stay valid JSON; other text is cut as text. Each cut adds `<key>.truncated` and
    `<key>.original_length`. `preview`: a cut far cheaper than keeping the structure:
    JSON values become a `json_preview` of their start, other text is cut as text.
    With nothing to cut, the shared `record_attributes` themselves (not to be modified).
    """
    shared = record_attributes(record)
    long = [
        (key, value) for key, value in shared.items() if isinstance(value, str) and len(value) > max_length
    ]
    if not long:
        return shared  # most records: no copy
    attributes = dict(shared)
    for key, value in long:
        if preview:
            is_json = key == attr.DETAIL or value.startswith(("{", "["))
            attributes[key] = (
                json_preview(value, max_length) if is_json else truncate_plain(value, max_length)
            )
        elif key == attr.DETAIL and record.detail_is_json:
            attributes[key] = _cut_held_detail(record, value, max_length)
        else:
            attributes[key] = truncate_json(value, max_length)
        attributes[key + attr.TRUNCATED_SUFFIX] = True
        attributes[key + attr.ORIGINAL_LENGTH_SUFFIX] = len(value)
    return attributes


def _cut_held_detail(record: PreparedRecord, detail_json: str, max_length: int) -> str:
    """The record's detail cut from the value it holds (no parse of its JSON). Should the
    built-in redaction find a secret in the cut, the agent changed the value after `emit()`
    (it must not): then the cut is made from the redacted JSON instead."""
    cut = truncate_json(detail_json, max_length, parsed=record.detail)
    if record.redactor is not None:
        encoded = cut.encode("utf-8")
        if record.redactor.encoded(encoded) is not encoded:
            return truncate_json(detail_json, max_length)
    return cut


def _scalar(value: Any) -> Scalar:
    if isinstance(value, (str, int, float, bool)):
        return value
    return dumps(value).data.decode("utf-8")
