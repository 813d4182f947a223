"""The writer searches a batch's entries at once (for secrets, and for a NaN written as null):
what reaches the mirror is what searching each entry alone gives, record for record."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path
from typing import Any

import ahocorasick_rs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.content import ContentPolicy
from transcript_otel.records.content_search import BATCH_SEARCH_MAX_BYTES, DeferredSearch, search_batch
from transcript_otel.records.entry_record import prepare_entry
from transcript_otel.records.joined_search import parts_holding
from transcript_otel.records.lines import encode_line
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks import JsonlMirror

from helpers import run_records

ANTHROPIC_KEY = "sk-ant-" + "a1B2" * 8
AWS_KEY = "AKIA" + "Q" * 16
GITHUB_TOKEN = "ghp_" + "x" * 36
NEAR_MISS = "the task-list and risk-free ASIAN food"  # literals with no secret after them

# -- parts_holding ---------------------------------------------------------------------

SEARCHER = ahocorasick_rs.BytesAhoCorasick([b"ab", b"xyz"], matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST)


@pytest.mark.parametrize(
    ("parts", "expected"),
    [
        ([], []),
        ([b""], [False]),
        ([b"", b"ab", b""], [False, True, False]),
        ([b"ab"], [True]),
        ([b"a", b"b"], [False, False]),  # an occurrence never spans two parts
        ([b"xy", b"z", b"xyz"], [False, False, True]),
        ([b"ab ab ab xyz", b"none", b"..ab"], [True, False, True]),  # many in one part, one in the last
        ([b"ab" * 1000, b"b" * 10, b"a", b"zxyz"], [True, False, False, True]),
    ],
)
def test_parts_holding_names_exactly_the_parts_with_an_occurrence(
    parts: list[bytes], expected: list[bool]
) -> None:
    assert parts_holding(SEARCHER, parts) == expected


@given(st.lists(st.binary(max_size=12).filter(lambda part: b"\0" not in part), max_size=12))
def test_parts_holding_agrees_with_searching_each_part(parts: list[bytes]) -> None:
    assert parts_holding(SEARCHER, parts) == [bool(SEARCHER.find_matches_as_indexes(part)) for part in parts]
    # The `@` URL credentials are placed from counts as an occurrence too.
    assert parts_holding(SEARCHER, parts, also=b"@") == [
        bool(SEARCHER.find_matches_as_indexes(part)) or b"@" in part for part in parts
    ]


# -- a batch searched at once is each entry searched alone -------------------------------

TEXTS = st.sampled_from(
    [
        "plain words",
        ANTHROPIC_KEY,
        f"export KEY={AWS_KEY}\n",
        f"token {GITHUB_TOKEN} and {ANTHROPIC_KEY}",
        NEAR_MISS,
        "null",
        "Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345",
        "é🚀 " * 3,
    ]
)
VALUES = st.one_of(
    TEXTS,
    st.none(),
    st.sampled_from([0.5, math.nan, math.inf, -math.inf, 7]),
)
DETAILS = st.one_of(
    st.none(),
    st.dictionaries(st.sampled_from(["text", "result", "code", "note"]), VALUES, max_size=4),
    # Searched with the batch, but too large for the NaN check of small details at once.
    st.builds(lambda text, value: {"text": text * (4096 // len(text) + 1), "v": value}, TEXTS, VALUES),
    # Too large to wait for the batch: searched on its own.
    st.builds(lambda text: {"text": text * (BATCH_SEARCH_MAX_BYTES // len(text) + 1)}, TEXTS),
)
RAWS = st.one_of(st.none(), TEXTS, st.builds(lambda text: f'{{"text": "{text}", "code": null}}', TEXTS))
ENTRIES = st.lists(st.tuples(DETAILS, RAWS), min_size=1, max_size=12)


def _items(entries: list[tuple[Any, Any]]) -> list[QueuedItem]:
    run = RunInfo("batch", "cli", "s", 0)
    return [
        (TranscriptEvent.ENTRY, run, "tool_result", "main", 1_000 + index, detail, raw, None)
        for index, (detail, raw) in enumerate(entries)
    ]


def _seen_by_sinks(record: PreparedRecord) -> tuple[Any, ...]:
    return (encode_line(record), record.detail_json, record.detail_is_json, record.problems)


@settings(max_examples=150, deadline=None)
@given(ENTRIES, st.booleans())
def test_a_batch_searched_at_once_is_each_entry_searched_alone(
    entries: list[tuple[Any, Any]], redacting: bool
) -> None:
    redactor = Redactor() if redacting else None
    alone = [prepare_entry(item, redactor) for item in _items(entries)]
    deferred: list[DeferredSearch] = []
    together = [prepare_entry(item, redactor, None, deferred) for item in _items(entries)]
    search_batch(deferred)
    assert [_seen_by_sinks(record) for record in together] == [_seen_by_sinks(record) for record in alone]
    # Only small entries wait for their batch; large ones are searched on their own.
    for search in deferred:
        size = len(search.record.detail_json or b"") + len(search.record.context.get("raw") or "")
        assert size <= BATCH_SEARCH_MAX_BYTES


def test_user_rules_and_reduced_content_are_searched_entry_by_entry() -> None:
    # A user's rules run after the built-in ones on raw text: such entries are not deferred.
    user = Redactor(patterns=[("ticket", r"TICKET-\d+")])
    deferred: list[DeferredSearch] = []
    item = _items([({"text": f"{ANTHROPIC_KEY} TICKET-12"}, f"raw {ANTHROPIC_KEY} TICKET-12")])[0]
    record = prepare_entry(item, user, ContentPolicy(), deferred)
    assert deferred == []
    assert ANTHROPIC_KEY not in json.dumps(record.context["raw"])
    assert "TICKET-12" not in record.context["raw"]
    assert "[REDACTED:ticket:" in record.context["raw"]


@dataclasses.dataclass
class _Unreadable:
    """orjson encodes it from its fields; reading one through Python raises."""

    value: float

    def __getattribute__(self, name: str) -> Any:
        if name == "value":
            raise RuntimeError("unreadable")
        return object.__getattribute__(self, name)


def test_a_search_that_fails_drops_the_entry_content_and_says_so() -> None:
    item = _items([({"reading": _Unreadable(math.nan), "secret": ANTHROPIC_KEY}, f"raw {ANTHROPIC_KEY}")])[0]
    deferred: list[DeferredSearch] = []
    record = prepare_entry(item, Redactor(), None, deferred)
    assert [search.record for search in deferred] == [record]
    search_batch(deferred)  # never raises
    assert "detail" not in record.context
    assert "raw" not in record.context
    assert record.detail_json is None
    failure = "detail and raw were left out: searching them failed: RuntimeError('unreadable')"
    assert record.problems == [failure]
    assert record.context["sequence_number"] == 1


# -- through the writer ------------------------------------------------------------------


def test_the_mirror_of_a_batch_holds_no_secret_and_reports_each_nan_after_its_entry(
    make_pipeline: Any, runs_dir: Path
) -> None:
    pipeline: TranscriptPipeline = make_pipeline([JsonlMirror(runs_dir)], max_backlog_bytes=1 << 40)
    emitter = TranscriptEmitter(prompt_name="batch", adapter="cli", pipeline=pipeline)
    with emitter:
        for index in range(300):  # more than one batch
            detail: dict[str, Any] = {"n": index, "code": None}
            raw = None
            if index % 7 == 0:
                detail["text"] = f"use {ANTHROPIC_KEY}"
            if index % 11 == 0:
                raw = f'{{"key": "{AWS_KEY}"}}'
            if index % 13 == 0:
                detail["score"] = math.nan
            if index % 50 == 0:
                detail["log"] = f"{GITHUB_TOKEN} " + "y" * BATCH_SEARCH_MAX_BYTES  # searched alone
            emitter.emit("tool_result", detail=detail, raw=raw)
    assert emitter.jsonl_path is not None
    text = Path(emitter.jsonl_path).read_text("utf-8")
    for secret in (ANTHROPIC_KEY, AWS_KEY, GITHUB_TOKEN):
        assert secret not in text
    records = run_records(emitter)
    entries = [record for record in records if record["event"] == "transcript.entry"]
    assert [entry["context"]["detail"]["n"] for entry in entries] == list(range(300))
    assert [entry["context"]["sequence_number"] for entry in entries] == list(range(1, 301))
    assert "[REDACTED:anthropic_key:" in entries[7]["context"]["detail"]["text"]
    assert "[REDACTED:aws_access_key:" in entries[11]["context"]["raw"]
    assert "[REDACTED:github_token:" in entries[50]["context"]["detail"]["log"]
    # Each entry that held a NaN is followed by the error naming it, and no other is.
    for position, record in enumerate(records):
        if record["event"] != "transcript.entry":
            continue
        index = record["context"]["detail"]["n"]
        following = records[position + 1]
        if index % 13 == 0:
            assert following["event"] == "transcript.error"
            assert following["context"]["sequence_number"] == index + 1
            assert "NaN or infinite floats were written as null" in following["context"]["error"]
        else:
            assert following["event"] != "transcript.error"
