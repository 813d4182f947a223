"""How much memory a queued entry keeps alive: what the backlog's byte bound counts.

The backlog holds the agent's own objects (`detail`, `raw`) until the writer runs. Their
size is measured, not derived from their JSON: a dict of short strings takes ten times its
JSON in Python objects, a long ASCII string about its length. Measuring walks the objects
with `sys.getsizeof`, so it is only done for samples of entries (`TranscriptPipeline`).
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections import deque
from collections.abc import Iterable
from typing import Any, Final

from transcript_otel.model import RawJson

# The queued tuple of eight fields and its own timestamp int.
_ITEM_BYTES: Final = sys.getsizeof((None,) * 8) + sys.getsizeof(2**62)
# Objects visited per measurement at most: a huge nested detail is extrapolated from its
# first part rather than walked on the agent's thread.
_MAX_OBJECTS: Final = 2_000


def entry_held_bytes(detail: Any, raw: Any) -> int:
    """The bytes a queued entry with this `detail` and `raw` keeps in memory.

    Counted as if nothing in it were shared with other entries (dict keys usually are):
    an overestimate, on the safe side of the bound."""
    return _ITEM_BYTES + _object_bytes([detail, raw])


def mean_held_bytes(items: Iterable[Any]) -> float | None:
    """The mean of `entry_held_bytes` over the queued entries among `items` (tuples; the
    backlog's flush requests are skipped); None if there are none."""
    sizes = [entry_held_bytes(item[5], item[6]) for item in items if type(item) is tuple]
    return sum(sizes) / len(sizes) if sizes else None


def sample_of(backlog: deque[Any], size: int, rng: random.Random, newest: int | None = None) -> list[Any]:
    """`size` items at random places in `backlog`, or among its `newest` items (all of them if
    there are no more). Random, not evenly spaced: entries of alternating sizes would alias
    with an even spacing."""
    count = len(backlog) if newest is None else min(newest, len(backlog))
    offsets = range(1, count + 1)
    sample = []
    for offset in offsets if count <= size else rng.sample(offsets, size):
        # An index walks the deque's blocks of 64 from the nearer end: ~1 µs at 100,000 entries.
        # The writer may take entries meanwhile: then the sample is a little smaller.
        with contextlib.suppress(IndexError):
            sample.append(backlog[-offset])
    return sample


def _object_bytes(roots: list[Any]) -> int:
    getsizeof = sys.getsizeof
    pending = roots
    total = visited = 0
    while pending and visited < _MAX_OBJECTS:
        value = pending.pop()
        visited += 1
        kind = type(value)
        if value is None or kind is bool:
            continue  # singletons: nothing the entry holds alone
        total += getsizeof(value)
        if kind is dict:
            pending.extend(value.keys())
            pending.extend(value.values())
        elif kind is list or kind is tuple:
            pending.extend(value)
        elif kind is RawJson:
            pending.append(value.value)
    if pending:  # budget spent: what is left is taken to be like what was measured
        total += len(pending) * total // max(visited, 1)
    return total
