"""What the agent thread queues for the writer: the item tuple, and how an entry's span is decided later.

Built on the agent's thread at the cost of one tuple; everything else about an entry (its
number, its record, its span) is worked out on the background writer.
"""

from __future__ import annotations

from typing import Any

from opentelemetry.context import Context

from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.records.run import RunInfo


class EntryPlacement:
    """Decides an entry's OTel context on the writer, in queue order, instead of on the agent's
    thread: an instrumented run places each entry in its span there, opening and ending spans
    as the entry implies (starting an SDK span costs far more than queueing an entry). A plain base class,
    not an ABC: the writer checks every entry's context against it, and `isinstance` with an
    ABC goes through `ABCMeta.__instancecheck__`."""

    __slots__ = ()

    def place(self, entry_type: Any, source: Any, detail: Any, timestamp_ns: int) -> Context | None:
        """The context of this entry; never raises."""
        raise NotImplementedError


# What the agent thread appends to the backlog. A plain tuple: cheapest to build. Entries
# are numbered by the writer, in this queue's order (`RunInfo.count_entry`).
#   (event, run, entry_type, source, timestamp_ns, detail, raw, context)
QueuedItem = tuple[TranscriptEvent, RunInfo, Any, Any, int, Any, Any, Context | EntryPlacement | None]
