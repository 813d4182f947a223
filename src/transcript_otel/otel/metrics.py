"""The one metric transcript-otel keeps: transcript records lost, by where they were lost.

Recorded through the OTel metrics API on the writer and export threads (never the agent's), so it
costs nothing without a MeterProvider, and reaches whatever provider the application,
or `configure()` with `OTEL_METRICS_EXPORTER=otlp`, set up. The same losses are in the
transcript as `transcript.error` records; the metric is for alerting across runs.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Final

from transcript_otel.version import __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter

DROPPED_RECORDS: Final = "transcript_otel.records.dropped"
# Where a record was lost: the backlog before the writer, or one sink (`jsonl`, `otel_logs`, ...).
WHERE: Final = "transcript_otel.dropped.where"
BACKLOG: Final = "backlog"


@functools.cache
def _dropped_counter() -> Counter:
    # Made on first use: a MeterProvider set after import is still the one used (the API's
    # proxy meter forwards to it), and a process that never drops pays nothing, not even the
    # import of the metrics API (issue 30).
    from opentelemetry import metrics

    meter = metrics.get_meter("transcript_otel", __version__)
    return meter.create_counter(
        DROPPED_RECORDS,
        unit="{record}",
        description="Transcript records dropped, and where (also reported as transcript.error records)",
    )


def count_dropped(count: int, where: str) -> None:
    """Add `count` records lost at `where`; never raises (metrics must not cost a transcript)."""
    try:
        _dropped_counter().add(count, {WHERE: where})
    except Exception:  # a broken MeterProvider is the application's; the records say it already
        return
