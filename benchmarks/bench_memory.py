"""Section 4: memory while 10,000 x 50 KB entries pile up behind a sink that blocks.

Every entry is distinct (its own `raw` string and its own parsed `detail`, as when
an adapter parses each notification), so whatever the backlog keeps costs real
memory: ~0.2 MB per entry as Python objects (the text is UCS-4). The only sink
blocks in `write()` until released, like a stuck disk or backend.

Each variant runs in a fresh process. Reported: entries accepted and dropped,
the entry-count limit the pipeline derived from its byte bound, the growth of
the resident set (peak, sampled during the loop, minus the RSS before it),
`emit()` p50 while accepting and while dropping, and whether the drops were
reported in a `transcript.error` record once the sink came back.
"""

from __future__ import annotations

import gc
import json
import sys
import threading
from dataclasses import asdict, dataclass
from typing import Any

from entries import make_entry
from harness import peak_rss_bytes, percentile, perf_ns, rss_bytes, run_child
from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks.base import Sink

ENTRIES = 10_000
ENTRY_KEY = "50kb"
MIB = 1 << 20


@dataclass(frozen=True)
class Variant:
    name: str
    label: str
    max_backlog_bytes: int
    pass_first: int  # records the sink lets through before it blocks


VARIANTS = (
    Variant("learned", "64 MiB bound, sink blocks after 256 records", 64 * MIB, 256),
    Variant("cold", "64 MiB bound, sink blocks from the first record", 64 * MIB, 0),
)


class BlockingSink(Sink):
    """Counts what it receives; blocks in `write()` after `pass_first` records until released."""

    name = "blocking"

    def __init__(self, pass_first: int) -> None:
        self.pass_first = pass_first
        self.released = threading.Event()
        self.blocked = threading.Event()
        self.entries = 0
        self.records = 0
        self.reported_drops = 0

    def register_run(self, run: RunInfo) -> None:
        pass

    def write(self, record: PreparedRecord) -> None:
        self.records += 1
        if self.records > self.pass_first and not self.released.is_set():
            self.blocked.set()
            self.released.wait()
        if record.event.value == "transcript.entry":
            self.entries += 1
        elif record.event.value == "transcript.error":
            self.reported_drops += int(record.context.get("dropped_entries", 0) or 0)

    def flush(self) -> None:
        pass

    def close_run(self, run: RunInfo) -> None:
        pass

    def force_flush(self, timeout_s: float) -> None:
        pass

    def shutdown(self, timeout_s: float) -> None:
        self.released.set()

    def after_fork_in_child(self) -> None:
        pass


def run_variant(variant: Variant) -> dict[str, Any]:
    sink = BlockingSink(variant.pass_first)
    pipeline = TranscriptPipeline([sink], max_backlog_bytes=variant.max_backlog_bytes)
    emitter = TranscriptEmitter(
        prompt_name="bench:memory", adapter="codex_app_server", session_id="mem", pipeline=pipeline
    )
    emit = emitter.emit
    # Let the sink see its first records (the writer learns the entry size), then block.
    warm = variant.pass_first + 1
    for index in range(warm):
        entry = make_entry(ENTRY_KEY, index)
        emit(entry.entry_type, detail=entry.detail, raw=entry.raw)
    del entry
    if not sink.blocked.wait(60):
        raise RuntimeError("the sink never blocked")
    gc.collect()
    rss_before = rss_bytes()
    peak = rss_before
    accepted_ns: list[int] = []
    dropped_ns: list[int] = []
    dropped_before = emitter.dropped_entries
    for index in range(warm, warm + ENTRIES):
        made = make_entry(ENTRY_KEY, index)
        drops = emitter.dropped_entries
        start = perf_ns()
        emit(made.entry_type, detail=made.detail, raw=made.raw)
        elapsed = perf_ns() - start
        (dropped_ns if emitter.dropped_entries != drops else accepted_ns).append(elapsed)
        del made
        if index % 100 == 0:
            peak = max(peak, rss_bytes())
    gc.collect()
    rss_after = rss_bytes()
    peak = max(peak, rss_after)
    backlog = len(pipeline.backlog)
    limit = pipeline.backlog_limit
    dropped = emitter.dropped_entries - dropped_before
    sink.released.set()
    emitter.stop(120.0)
    pipeline.shutdown(30.0)
    accepted_ns.sort()
    dropped_ns.sort()
    growth = peak - rss_before
    return {
        **asdict(variant),
        "entries": ENTRIES,
        "accepted": ENTRIES - dropped,
        "dropped": dropped,
        "backlog_at_end": backlog,
        "backlog_limit_entries": limit,
        "rss_before": rss_before,
        "rss_growth_peak": growth,
        "rss_growth_end": rss_after - rss_before,
        "growth_over_bound": growth / variant.max_backlog_bytes,
        "process_peak_rss": peak_rss_bytes(),
        "emit_p50_accepted_ns": percentile(accepted_ns, 0.5),
        "emit_p50_dropped_ns": percentile(dropped_ns, 0.5),
        "sink_entries_after_release": sink.entries,
        "drops_reported_in_error_records": sink.reported_drops,
    }


def main() -> dict[str, Any]:
    return {"memory": [{**asdict(variant), **run_child(__file__, variant.name)} for variant in VARIANTS]}


if __name__ == "__main__":
    chosen = {variant.name: variant for variant in VARIANTS}[sys.argv[1]]
    print(json.dumps(run_variant(chosen)))
