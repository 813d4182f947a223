"""One search for many byte literals, leftmost-first: ahocorasick-rs where it is installed,
else the standard library with the same answers.

ahocorasick-rs has no wheel for musl (Alpine), PyPy or less common CPUs, where pip would
need a Rust toolchain to build it; without it the package still imports and finds the
same occurrences, at a cost section 3c measures (benchmarks/README.md).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Final, Protocol

try:
    import ahocorasick_rs
except ImportError:  # no wheel for this platform, and not built
    ahocorasick_rs = None  # type: ignore[assignment]


class LiteralSearch(Protocol):
    """What the searches of this package ask of a searcher (ahocorasick-rs's method)."""

    def find_matches_as_indexes(self, haystack: bytes, /) -> list[tuple[int, int, int]]:
        """The (literal index, start, end) of the occurrences, leftmost-first: from the left,
        the earliest listed literal that occurs at the leftmost place, then on after it."""
        ...


# A byte of the filter's answer that is not zero: a place where a literal may start.
_MAY_START: Final = re.compile(b"[^\\x00]")


class PythonLiteralSearch:
    """`LiteralSearch` in the standard library, by the idea of ahocorasick-rs's SIMD filter.

    The literals are dealt into 8 groups. For each of a literal's first (up to) three bytes, a
    `bytes.translate` table sets its group's bit in that byte's value; read as integers, the
    three translations shifted onto one another and ANDed leave a bit where a literal of that
    group may start. Text without any (nearly all) costs three translations and integer steps,
    less than one `re` alternation of the literals would; a place left is compared with each
    literal of its groups in order.
    """

    __slots__ = ("_by_group", "_tables")

    def __init__(self, literals: Sequence[bytes]) -> None:
        if not literals or not all(literals):
            raise ValueError("a literal search needs literals, none of them empty")
        width = min(3, *(len(literal) for literal in literals))
        tables = [bytearray(256) for _ in range(width)]
        for index, literal in enumerate(literals):
            for place, table in enumerate(tables):
                table[literal[place]] |= 1 << (index % 8)
        self._tables = [bytes(table) for table in tables]
        # Per value of a filter byte, the literals its bits name, in their order.
        self._by_group = [
            [(index, literal) for index, literal in enumerate(literals) if value >> (index % 8) & 1]
            for value in range(256)
        ]

    def find_matches_as_indexes(self, haystack: bytes, /) -> list[tuple[int, int, int]]:
        starts = 0
        for place, table in enumerate(self._tables):
            bits = int.from_bytes(haystack.translate(table), "little") >> (8 * place)
            starts = bits if place == 0 else starts & bits
            if not starts:
                return []  # the common case
        found: list[tuple[int, int, int]] = []
        resume = 0
        by_group = self._by_group
        for candidate in _MAY_START.finditer(starts.to_bytes(len(haystack), "little")):
            start = candidate.start()
            if start < resume:
                continue
            for index, literal in by_group[candidate.group()[0]]:
                if haystack.startswith(literal, start):
                    found.append((index, start, start + len(literal)))
                    resume = start + len(literal)
                    break
        return found


def leftmost_first(literals: Sequence[bytes]) -> LiteralSearch:
    """A leftmost-first search for `literals` (none empty), in their order of priority."""
    if ahocorasick_rs is None:
        return PythonLiteralSearch(literals)
    return ahocorasick_rs.BytesAhoCorasick(list(literals), matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST)
