"""How much memory queued entries keep alive: what the backlog's byte bound counts.

The backlog holds the agent's own objects (`detail`, `raw`) until the writer runs. What
they hold is measured by walking them with `sys.getsizeof`, not guessed from their JSON:
a dict of short strings takes several times its JSON, a long ASCII string about its
length, non-ASCII text four times. A walk costs a call per object, so it is done for a
few sampled entries only (`Backlog`), and a long list is measured on
`_SAMPLED_ITEMS` of its items, spread over it, and scaled (a list of similar items is the
common case): a large nested notification costs a fraction of its walk.
"""

from __future__ import annotations

import contextlib
import random
import sys
from collections.abc import Sequence
from typing import Any, Final

from transcript_otel.capture.shared import DeferredMapping
from transcript_otel.model.entries import RawJson

# The queued tuple of eight fields and its own timestamp int.
_ITEM_BYTES: Final = sys.getsizeof((None,) * 8) + sys.getsizeof(2**62)
# A list with more items than this is measured on `_SAMPLED_ITEMS` of them.
_ALL_ITEMS_UP_TO: Final = 16
_SAMPLED_ITEMS: Final = 8
# Objects walked per entry at most; what is left is extrapolated from what was walked.
_MAX_OBJECTS: Final = 512


def entry_held_bytes(item: tuple[Any, ...] | DeferredMapping) -> float:
    """The bytes a queued item (an entry's `detail` and `raw`, or the native event a deferred
    mapping holds) keeps in memory.

    Counted as if nothing in it were shared with other entries (dict keys often are):
    an overestimate, on the safe side of the bound."""
    if isinstance(item, DeferredMapping):
        return _ITEM_BYTES + _object_bytes(item.native, None)
    return _ITEM_BYTES + _object_bytes(item[5], item[6])


def sample_of(backlog: Sequence[Any], size: int, rng: random.Random, newest: int | None = None) -> list[Any]:
    """Up to `size` queued entries at random places in `backlog`, or among its `newest` items.
    Random, not evenly spaced: entries of alternating sizes would alias with an even spacing."""
    count = len(backlog) if newest is None else min(newest, len(backlog))
    offsets = range(1, count + 1)
    sample = []
    for offset in offsets if count <= size else rng.sample(offsets, size):
        # An index walks the deque's blocks of 64 from the nearer end: cheap even when it is long.
        # The writer may take entries meanwhile: then the sample is a little smaller.
        with contextlib.suppress(IndexError):
            item = backlog[-offset]
            if type(item) is tuple or type(item) is DeferredMapping:  # not a flush request
                sample.append(item)
    return sample


def _object_bytes(detail: Any, raw: Any) -> float:
    getsizeof = sys.getsizeof
    pending: list[tuple[Any, float]] = [(detail, 1.0), (raw, 1.0)]
    total = 0.0
    visited = 0
    while pending and visited < _MAX_OBJECTS:
        value, weight = pending.pop()
        visited += 1
        kind = type(value)
        if value is None or kind is bool:
            continue  # singletons: nothing the entry holds alone
        total += getsizeof(value) * weight
        if kind is dict:  # all of it: a dict's values differ (one may be the long text)
            pending.extend((child, weight) for child in (*value.keys(), *value.values()))
        elif kind is list or kind is tuple:
            _push_items(value, weight, pending)
        elif kind is RawJson:
            pending.append((value.value, weight))
    if pending:  # budget spent: what is left is taken to be like what was walked
        total += sum(weight for _, weight in pending) * total / max(visited, 1)
    return total


def _push_items(items: list[Any] | tuple[Any, ...], weight: float, pending: list[tuple[Any, float]]) -> None:
    count = len(items)
    if count <= _ALL_ITEMS_UP_TO:
        pending.extend((item, weight) for item in items)
        return
    step = count / _SAMPLED_ITEMS
    scaled = weight * step
    pending.extend((items[int(index * step)], scaled) for index in range(_SAMPLED_ITEMS))
