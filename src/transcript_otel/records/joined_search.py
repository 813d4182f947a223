"""Which of many byte strings hold one of a searcher's literals, found in one search.

Every ahocorasick-rs search lets go of the GIL and takes it back, a cost per call before
a byte is read, and on a writer that shares the GIL with a busy thread each let-go wakes
that thread for nothing (too briefly for it to take the GIL). So a batch's entries are
searched at once, not each entry's parts one by one (benchmarks/NOTES.md). The parts are
joined by a NUL, which no literal of ours holds, so no occurrence spans two parts.
"""

from __future__ import annotations

import bisect
import itertools
from collections.abc import Sequence
from operator import itemgetter
from typing import Final

from transcript_otel.records.literal_search import LiteralSearch

_SEPARATOR: Final = b"\0"
_START: Final = itemgetter(1)


def parts_holding(searcher: LiteralSearch, parts: Sequence[bytes], also: bytes = b"") -> list[bool]:
    """For each of `parts`, whether it holds an occurrence of one of `searcher`'s literals,
    or of `also` (a byte that `bytes.find` finds at memchr speed).

    `searcher` must be leftmost-first (its occurrences come sorted, none overlapping) and
    none of its literals may hold a NUL.
    """
    holding = [False] * len(parts)
    if not parts:
        return holding
    joined = _SEPARATOR.join(parts)
    found = searcher.find_matches_as_indexes(joined)
    at = joined.find(also) if also else -1
    if not found and at < 0:
        return holding  # the common case: nothing in any part
    # Where each part ends in the joined bytes, its separator included.
    ends = list(itertools.accumulate(len(part) + 1 for part in parts))
    index = 0
    while index < len(found):
        part = bisect.bisect_right(ends, found[index][1])
        holding[part] = True
        # One occurrence decides a part: go on with the first one past it.
        index = bisect.bisect_left(found, ends[part], lo=index, key=_START)
    while at >= 0:
        part = bisect.bisect_right(ends, at)
        holding[part] = True
        at = joined.find(also, ends[part])
    return holding
