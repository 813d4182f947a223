"""The searches of an entry's content, once its record is built: for secrets the built-in rules
name, and for a `null` in its detail that may have been a NaN or an infinity.

Small entries are searched with their batch, one search for all of them each (`search_batch`);
a large one, or one under the user's own redaction rules, alone (`search_alone`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

import orjson

from transcript_otel.records.non_finite import has_non_finite_float, may_hold_non_finite
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.redaction import parts_holding_literals
from transcript_otel.records.serialize import NON_FINITE_NOTE, null_count, parts_holding_null, preview


@dataclass(slots=True)
class DeferredSearch:
    """An entry record whose content `search_batch` has yet to search: for secrets, and for
    a `null` in its detail that may have been a NaN or an infinity (`check_null`)."""

    record: PreparedRecord
    check_null: bool


# Entries up to this size (detail JSON and raw) are searched with their batch; joining
# larger ones would copy more than their own searches cost.
BATCH_SEARCH_MAX_BYTES: Final = 16 * 1024
# Details up to this size (JSON) that hold a null are checked for a NaN with one marshal pass.
_MARSHAL_TOGETHER_MAX_BYTES: Final = 2048


def search_alone(record: PreparedRecord, check_null: bool) -> None:
    """What `search_batch` does for an entry, for one entry on its own (each search its own call)."""
    nulls = null_count(record.detail_json) if check_null and record.detail_json is not None else 0
    if nulls:
        _guarded(record, lambda record: _note_non_finite(record, nulls))
    if record.redactor is not None:
        _guarded(record, _redact_detail)
        _guarded(record, _redact_raw)


def search_batch(deferred: list[DeferredSearch]) -> None:
    """The searches `prepare_entry` left to the batch, one for all its entries each: for a
    `null` in the details (then whether it was a NaN or an infinity, noted as a problem),
    and for the built-in redaction rules' literals (then the entry's part is redacted as
    `prepare_entry` would have). Never raises: a record whose search failed loses its
    content instead, with a problem that says so."""
    nullable = [search for search in deferred if search.check_null]
    holding_null = parts_holding_null([search.record.detail_json or b"" for search in nullable])
    with_null = [search.record for search, holds in zip(nullable, holding_null, strict=True) if holds]
    _note_non_finite_in(with_null)
    redacted = [search.record for search in deferred if search.record.redactor is not None]
    owners: list[tuple[PreparedRecord, bool]] = []  # each part's record, and whether it is the detail
    parts: list[bytes] = []
    for record in redacted:
        if record.detail_json is not None:
            owners.append((record, True))
            parts.append(record.detail_json)
        raw = record.context.get("raw")
        if raw is not None:
            owners.append((record, False))
            parts.append(raw.encode("utf-8", "surrogatepass"))
    for (record, is_detail), holds in zip(owners, parts_holding_literals(parts), strict=True):
        if holds:
            _guarded(record, _redact_detail if is_detail else _redact_raw)


def _note_non_finite_in(records: list[PreparedRecord]) -> None:
    """Note a NaN or an infinity in the detail of each of `records` (each holds a null).

    Most details hold a null (`"exitCode":null`): one marshal pass rules out the small ones
    at once, cheaper than walking each; a larger one, maybe mostly text that marshal would
    copy, is walked on its own.
    """
    small = [record for record in records if len(record.detail_json or b"") <= _MARSHAL_TOGETHER_MAX_BYTES]
    if small and not may_hold_non_finite([record.detail for record in small]):
        records = [
            record for record in records if len(record.detail_json or b"") > _MARSHAL_TOGETHER_MAX_BYTES
        ]
    for record in records:
        _guarded(record, lambda record: _note_non_finite(record, null_count(record.detail_json or b"")))


def _note_non_finite(record: PreparedRecord, nulls: int) -> None:
    """Note a NaN or an infinity in the detail, whose JSON holds `nulls` nulls (counted before
    the redaction, which may change that JSON)."""
    if has_non_finite_float(record.detail, nulls):
        record.problems.append(f"detail: {NON_FINITE_NOTE}")
        record.detail_is_json = False


def _redact_detail(record: PreparedRecord) -> None:
    if record.redactor is None or record.detail_json is None:
        return
    redacted = record.redactor.encoded(record.detail_json)
    if redacted is not record.detail_json:
        record.detail_json = redacted
        record.context["detail"] = orjson.Fragment(redacted)
        record.detail_is_json = False


def _redact_raw(record: PreparedRecord) -> None:
    raw = record.context.get("raw")
    if record.redactor is not None and raw is not None:
        record.context["raw"] = record.redactor.text(raw)


def _guarded(record: PreparedRecord, search: Callable[[PreparedRecord], None]) -> None:
    """`search(record)`; should it fail, the record keeps none of the content it was to search."""
    try:
        search(record)
    except Exception as exc:
        record.context.pop("detail", None)
        record.context.pop("raw", None)
        record.detail_json = None
        record.detail = None
        record.detail_is_json = False
        record.problems.append(f"detail and raw were left out: searching them failed: {preview(exc)}")
