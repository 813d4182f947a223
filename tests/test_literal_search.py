"""Without ahocorasick-rs (no wheel for musl, PyPy or less common CPUs), the package imports
and finds, and redacts, what it finds with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import ahocorasick_rs
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel.records.literal_search import PythonLiteralSearch

ROOT = Path(__file__).resolve().parents[1]
# Few bytes, so literals overlap, share prefixes and occur often; past 8 they share filter bits.
BYTES = st.binary(min_size=1, max_size=4).map(lambda data: bytes(b"abc-"[byte % 4] for byte in data))


@settings(max_examples=500, deadline=None)
@given(st.lists(BYTES, min_size=1, max_size=20, unique=True), st.lists(BYTES, max_size=30))
def test_the_python_search_answers_as_ahocorasick_leftmost_first(
    literals: list[bytes], pieces: list[bytes]
) -> None:
    haystack = b"".join(pieces)
    expected = ahocorasick_rs.BytesAhoCorasick(
        literals, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
    ).find_matches_as_indexes(haystack)
    assert PythonLiteralSearch(literals).find_matches_as_indexes(haystack) == expected


def test_the_redaction_tests_pass_without_ahocorasick_rs() -> None:
    blocked = (
        "import sys\n"
        "sys.modules['ahocorasick_rs'] = None  # what `import` meets where it is not installed\n"
        "from transcript_otel.records import redaction, serialize\n"
        "from transcript_otel.records.literal_search import PythonLiteralSearch\n"
        "assert isinstance(redaction._LEFTMOST_LITERALS, PythonLiteralSearch)\n"
        "assert isinstance(serialize._NULL, PythonLiteralSearch)\n"
        "import pytest\n"
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'tests/test_redaction.py']))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", blocked], cwd=ROOT, capture_output=True, text=True, timeout=600, check=False
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
    assert " passed" in result.stdout
