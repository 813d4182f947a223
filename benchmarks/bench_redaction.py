"""Section 3c: redaction on the writer, and what finding its literals costs by each approach.

The redactor (`transcript_otel.records.redaction`) tries a built-in pattern only where one of
its literals occurs, so searching every entry's detail JSON and raw for those
literals is what redaction costs when there is no secret (nearly always). Each way
of doing that search is timed here on the same entries, in the same process, one
after the other (perf.md section 0 method, single thread):

* the stdlib: `literal in data` for each of the 13 loose literals of the commit
  before this one (`gh`, `k_`, `asic `...), for each of the literals the rules
  name now, one `re` alternation of those, and the pure-Python search the redactor
  falls back on without ahocorasick-rs (`records/literal_search.py`);
* ahocorasick-rs, the leftmost-first search the redactor runs.

Then the redactor as shipped, on detail + raw: with nothing to redact, and with a
key and a near miss (`task-`) planted in each; and with nothing to redact on the
pure-Python search.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Final, TypeVar

import orjson

from entries import SIZES, Entry, make_entry
from harness import Stat, loop_ns_per_call, perf_ns, repeat
from results import Row
from transcript_otel.records import redaction
from transcript_otel.records.literal_search import PythonLiteralSearch
from transcript_otel.records.redaction import _LEFTMOST_LITERALS, _LITERALS, Redactor
from transcript_otel.records.redaction_rules import BUILTIN_RULES

SECTION = "3c. redaction on the writer, per entry (detail JSON + raw, one thread)"
LOOSE_LITERALS: Final = (
    b"PRIVATE KEY-----",
    b"sk-",
    b"AKIA",
    b"ASIA",
    b"gh",
    b"glpat-",
    b"xox",
    b"AIza",
    b"k_",
    b"hf_",
    b"eyJ",
    b"earer ",
    b"asic ",
)
EXACT_LITERALS: Final = tuple(
    dict.fromkeys(literal.text.encode() for rule in BUILTIN_RULES for literal in rule.literals)
)
PYTHON_SEARCH: Final = PythonLiteralSearch(_LITERALS)
_ALTERNATION: Final = re.compile(b"|".join(re.escape(literal) for literal in EXACT_LITERALS))
PLANTED_KEY: Final = "sk-proj-BENCHMARKxBENCHMARKxBENCHMARKx0000"

Search = Callable[[bytes], object]
T = TypeVar("T")
SEARCHES: Final[tuple[tuple[str, Search], ...]] = (
    (
        f"stdlib: `in` for each of {len(LOOSE_LITERALS)} loose literals (the gates before)",
        lambda data: [literal in data for literal in LOOSE_LITERALS],
    ),
    (
        f"stdlib: `in` for each of {len(EXACT_LITERALS)} exact literals",
        lambda data: [literal in data for literal in EXACT_LITERALS],
    ),
    (f"stdlib: one `re` alternation of the {len(EXACT_LITERALS)}", _ALTERNATION.search),
    ("pure-Python fallback (without ahocorasick-rs)", PYTHON_SEARCH.find_matches_as_indexes),
    ("ahocorasick-rs leftmost-first (what the redactor runs)", _LEFTMOST_LITERALS.find_matches_as_indexes),
)
BEST_STDLIB = "best stdlib search / ahocorasick-rs"


def _per_entry_ns(on_detail: Search, detail: bytes, on_raw: Callable[[T], object], raw: T) -> Stat:
    """ns for `on_detail(detail)` and `on_raw(raw)`, as the writer runs them for one entry."""

    def call() -> None:
        on_detail(detail)
        on_raw(raw)

    count = loop_ns_per_call(call)

    def run() -> float:
        start = perf_ns()
        for _ in range(count):
            call()
        return (perf_ns() - start) / count

    return Stat(repeat(run), {"per_run": count})


def _search_row(name: str, search: Search, entries: list[Entry]) -> Row:
    row = Row(SECTION, f"literal search, {name}: ns/entry", "ns")
    for entry in entries:
        # The redactor searches raw as UTF-8 bytes too.
        row.cells[entry.key] = _per_entry_ns(search, orjson.dumps(entry.detail), search, entry.raw.encode())
    return row


def _redactor_row(name: str, entries: list[Entry], plant: str) -> Row:
    row = Row(SECTION, f"Redactor, {name}: ns/entry", "ns")
    redactor = Redactor()
    for entry in entries:
        detail = orjson.dumps({**entry.detail, "note": plant} if plant else entry.detail)
        row.cells[entry.key] = _per_entry_ns(redactor.encoded, detail, redactor.text, entry.raw + plant)
    return row


def _python_search_redactor_row(entries: list[Entry]) -> Row:
    """The Redactor with nothing to redact, on the search it takes where ahocorasick-rs is not
    installed (the built tables' searcher swapped for this row only)."""
    redaction._LEFTMOST_LITERALS = PYTHON_SEARCH
    try:
        return _redactor_row("nothing to redact, pure-Python search (without ahocorasick-rs)", entries, "")
    finally:
        redaction._LEFTMOST_LITERALS = _LEFTMOST_LITERALS


def main() -> list[Row]:
    entries = [make_entry(key) for key, _ in SIZES]
    searches = [_search_row(name, search, entries) for name, search in SEARCHES]
    *stdlib, chosen = searches
    ratio = Row(SECTION, BEST_STDLIB, "ratio")
    for entry in entries:
        best = min(row.cells[entry.key].median for row in stdlib)
        ratio.cells[entry.key] = Stat([best / chosen.cells[entry.key].median])
    return [
        *searches,
        ratio,
        _redactor_row("nothing to redact", entries, ""),
        _redactor_row("a key and a near miss (`task-`) in each", entries, f" task-list {PLANTED_KEY}"),
        _python_search_redactor_row(entries),
    ]
