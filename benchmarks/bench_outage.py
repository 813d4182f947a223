"""Section 4b: an OTLP backend outage, with `configure()` set up as a user would.

Issue 8, target 3: the backlog is bounded in bytes; a backend outage at 100
entries/s of 50 KB costs no more than that bound; drops are counted and reported
as `transcript.error` records, never silent.

Each run is a fresh process that calls `transcript_otel.configure(jsonl_dir=...)`
with `OTEL_EXPORTER_OTLP_ENDPOINT` pointing at a dead loopback backend, so all
three sinks are on (JSONL mirror, OTel log records, span events) and both signals
export over OTLP/HTTP with `configure()`'s settings. The backend is down in one
of two ways:

* `refused`: nothing listens on the port; each export is refused at once and the
  exporter retries with backoff until its 5 s timeout;
* `silent`: a socket accepts the connection and reads forever (`SilentServer`, tests/fault_servers.py),
  so each export request is held for the exporter's full timeout.

Inside one span, as an agent's run, the process emits `ENTRIES` distinct entries
(`make_entry(key, variant)`: each has its own strings, as when an adapter parses
each notification): one minute's worth at 100 entries/s. They are emitted as fast
as the writer takes them (`produce` waits while the pipeline's backlog is over half
its bound), so the pipeline itself drops nothing and the export queue is what is
tested. Once the export queue is full, what an outage holds no longer grows, so
ten minutes at 100/s is the same steady state as one. Two more runs (`PACED`) are the
outage as issue 8 states it: 50 KB entries at 100 a second for the whole minute, in
the run's span, and in pairs (a tool call and its result) each in a tool span of its
own, 50 tool calls a second, so that spans pile up in the span export queue as well.

On demand only (section `outage10`, ten minutes): that outage as issue 8 states it,
for its full ten minutes, the one-span variant (the heavier of the two), with the peak
RSS growth taken after each minute, so that a slow climb would show.

Two export queues, same run, same endpoint:

* `configure`: what `configure()` builds, `BoundedLogRecordProcessor` (8 MiB of
  estimated payload, batches of 64);
* `sdk_batch`, the baseline: the SDK's `BatchLogRecordProcessor` with
  `max_export_batch_size=64` (queue 2048 records), as `configure()` built it
  before; set as the global logger provider before `configure()`, which then uses
  it, with its shutdown registered on the pipeline as `configure()` did for the
  providers it created.

Reported per run: peak RSS growth (sampled every 10 ms on a thread, from just
before the first entry to the end of `shutdown`), the export queue's counters,
the `transcript.error` records about `otel_logs` in the JSONL mirror, the entries
in the mirror, and how long `Configuration.shutdown()` took. RSS is what glibc's
malloc holds: memory freed by Python may stay in the process (see README.md).
"""

from __future__ import annotations

import functools
import gc
import json
import os
import shutil
import sys
import tempfile
import time
import uuid
from collections.abc import Iterable
from typing import Any, Final

from opentelemetry import trace

import transcript_otel
from bench_throughput import produce
from entries import SIZES, Entry, make_entry
from harness import RssSampler, peak_rss_bytes, read_mirror, run_child
from otel_setup import CountingProcessor, ExporterMessages, SdkLogs, export_queue_of, sdk_logs

ENTRIES: Final = 6_000  # one minute at 100 entries/s
# (backend, export queue, pace) per entry size. The baseline runs against the refusing
# port only: its queue fills to 2048 records whichever way the backend is down, and each
# run of the nested entries takes about 40 s. `FAST`: as fast as the writer takes them.
FAST: Final = "fast"
RUNS: Final = (("refused", "configure", FAST), ("refused", "sdk_batch", FAST), ("silent", "configure", FAST))
# Issue 8's outage as stated, once: 100 entries/s of 50 KB, for the whole minute (60 s).
TOOL_SPANS: Final = "-in-tool-spans"
PACED: Final = (("50kb", "refused", "configure", "100"), ("50kb", "refused", "configure", "100" + TOOL_SPANS))
# Section `outage10`: the first of `PACED` for the whole ten minutes (60,000 entries).
LONG: Final = PACED[0]
LONG_MINUTES: Final = 10
MIB: Final = 1 << 20


def _baseline_logger_provider() -> SdkLogs:
    """The SDK's batch processor, batches of 64, into the exporter `configure()` would build."""
    from opentelemetry._logs import set_logger_provider

    from transcript_otel.otlp import exporters
    from transcript_otel.otlp.export_sizes import DEFAULT_BATCH_SIZE

    url = exporters.endpoint_for("LOGS")
    if url is None:
        raise RuntimeError("OTEL_EXPORTER_OTLP_ENDPOINT is not set")
    exporter = exporters.otlp_exporter("LOGS", url, exporters.protocol_for("LOGS"))
    logs = sdk_logs(exporter, max_export_batch_size=DEFAULT_BATCH_SIZE)
    set_logger_provider(logs.provider)
    return logs


def produce_paced(
    emitter: transcript_otel.TranscriptEmitter, entries: Iterable[Entry], per_s: float, *, tool_spans: bool
) -> int:
    """Emit `entries` at `per_s` a second on a fixed schedule, as an agent would; 0 waits.

    `tool_spans`: each pair of entries in a span of its own, ended as instrumentors end
    theirs (by the writer, once the pair is written).
    """
    tracer = trace.get_tracer("benchmarks.outage")
    started = time.monotonic()
    span: trace.Span | None = None
    context = None
    for number, entry in enumerate(entries):
        delay = started + number / per_s - time.monotonic()
        if delay > 0:
            time.sleep(delay)
        if tool_spans and number % 2 == 0:
            span = tracer.start_span("execute_tool codex:command")
            context = trace.set_span_in_context(span)
        emitter.emit(entry.entry_type, detail=entry.detail, raw=entry.raw, context=context)
        if span is not None and number % 2 == 1:
            emitter.after_written(functools.partial(span.end, end_time=time.time_ns()))
            span = None
    return 0


def _label(key: str, pace: str) -> str:
    """The entry's name, and how it was paced unless as fast as the writer takes it."""
    label = dict(SIZES)[key]
    if pace == FAST:
        return label
    in_spans = ", in tool spans of 2" if pace.endswith(TOOL_SPANS) else ""
    return f"{label}, {pace.removesuffix(TOOL_SPANS)}/s{in_spans}"


def run_outage(key: str, backend: str, queue: str, pace: str, minutes: str = "1") -> dict[str, Any]:
    """Child process: one outage run of `minutes` minutes' worth of entries; its figures."""
    minute_count = int(minutes)
    entries_total = ENTRIES * minute_count
    # The peak is taken after each part (halves of a one-minute run, minutes of a longer one):
    # the same peak after each shows a steady state, not a slow leak.
    parts = max(2, minute_count)
    directory = tempfile.mkdtemp(prefix="bench-outage-")
    with ExporterMessages() as exporter_messages:  # counted, not printed
        baseline = _baseline_logger_provider() if queue == "sdk_batch" else None
        configuration = transcript_otel.configure(service_name="bench-outage", jsonl_dir=directory)
        if baseline is not None:
            configuration.pipeline.add_shutdown_callback(baseline.provider.shutdown)
            emitted = baseline.counter
        else:
            # Only counts what reaches the provider: the export queue does not count what it took.
            emitted = CountingProcessor()
            configuration.logger_provider.add_log_record_processor(emitted)
        pipeline = configuration.pipeline
        tracer = trace.get_tracer("benchmarks.outage")
        emitter = transcript_otel.TranscriptEmitter(
            prompt_name=f"bench-outage-{key}", adapter="codex_app_server", session_id=str(uuid.uuid4())
        )
        make_entry(key)  # the entry builders' module-level text, before the RSS baseline
        gc.collect()
        with RssSampler() as rss:
            started = time.monotonic()
            with tracer.start_as_current_span(f"invoke_agent bench-outage-{key}"):

                def emit(variants: range) -> int:
                    entries = (make_entry(key, variant) for variant in variants)
                    if pace == FAST:
                        return produce(pipeline, emitter, entries)
                    rate = float(pace.removesuffix(TOOL_SPANS))
                    return produce_paced(emitter, entries, rate, tool_spans=pace.endswith(TOOL_SPANS))

                waits = 0
                growth_by_part: list[int] = []
                for part in range(parts):
                    waits += emit(range(part * entries_total // parts, (part + 1) * entries_total // parts))
                    growth_by_part.append(rss.growth)
                emitter.stop(wait=False)
            emitting_s = time.monotonic() - started
            shutdown_started = time.monotonic()
            configuration.shutdown()
            shutdown_s = time.monotonic() - shutdown_started
        if emitter.jsonl_path is None:
            raise RuntimeError("configure() set up no JSONL mirror")
        mirror = read_mirror(emitter.jsonl_path)
        shutil.rmtree(directory)  # up to 650 MB of mirror per run (5.9 GB for `outage10`)
        result: dict[str, Any] = {
            "pace": pace,
            "minutes": minute_count,
            "entries": entries_total,
            "emitting_s": emitting_s,
            "producer_waits": waits,
            "shutdown_s": shutdown_s,
            "rss_before": rss.start,
            "rss_growth_peak": rss.growth,
            "rss_growth_peak_first_half": growth_by_part[parts // 2 - 1],
            "rss_growth_peak_by_part": growth_by_part,
            "growth_over_bound": rss.growth / pipeline.max_backlog_bytes,
            "bound_bytes": pipeline.max_backlog_bytes,
            "process_peak_rss": peak_rss_bytes(),
            "mirror_entries": mirror.entries,
            "mirror_errors": mirror.events["transcript.error"],
            "export_drop_reports": mirror.sink_failures["otel_logs"],
            "export_failed_reported": mirror.failed_export_reported,
            "pipeline_dropped": mirror.pipeline_dropped,
            "records_into_sdk": emitted.emitted,
        }
        if baseline is not None:
            # The SDK counts nothing it drops: what never reached the exporter was lost unreported
            # (pushed out of its full queue, or still queued when the process ends).
            _, exported, failed = baseline.snapshot()
            result.update(
                export_dropped=None,
                export_failed=failed,
                lost_unreported=emitted.emitted - exported - failed,
            )
        else:
            export_queue = export_queue_of(configuration.logger_provider)
            result.update(
                export_dropped=export_queue.dropped,
                export_failed=export_queue.failed,
                # Neither exported nor dropped: in the queue or in flight when shutdown gave up.
                lost_unreported=emitted.emitted - export_queue.dropped - export_queue.failed,
            )
        result["exporter_messages"] = sum(exporter_messages.counts.values())
    return result


def _child_environment(endpoint: str) -> dict[str, str]:
    """This environment without OTel or transcript-otel settings, plus the dead endpoint."""
    environment = {
        key: value for key, value in os.environ.items() if not key.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))
    }
    environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = endpoint
    return environment


def main() -> dict[str, Any]:
    from fault_servers import SilentServer

    from loopback import free_port

    results: list[dict[str, Any]] = []
    with SilentServer() as silent:
        # A free port nobody listens on: connections are refused.
        endpoints = {"refused": f"http://127.0.0.1:{free_port()}", "silent": silent.endpoint}
        runs = [(key, *run) for key, _ in SIZES for run in RUNS] + list(PACED)
        for key, backend, queue, pace in runs:
            results.append(_outage_row(key, backend, queue, pace, endpoints[backend]))
        received = f"{silent.connections} connections, {silent.bytes_read / MIB:.0f} MiB read, no answer"
    return {"outage": results, "info": {"silent_receiver": received}}


def main_long() -> dict[str, Any]:
    """Section `outage10`: the outage as issue 8 states it, for its full ten minutes."""
    from loopback import free_port

    refused = f"http://127.0.0.1:{free_port()}"
    return {"outage_long": [_outage_row(*LONG, refused, minutes=LONG_MINUTES)]}


def _outage_row(
    key: str, backend: str, queue: str, pace: str, endpoint: str, *, minutes: int = 1
) -> dict[str, Any]:
    """One outage run in a child process against `endpoint`: what it was and its figures."""
    outcome = run_child(
        __file__,
        key,
        backend,
        queue,
        pace,
        str(minutes),
        env=_child_environment(endpoint),
        timeout_s=minutes * 60 + 600,
    )
    run = {"key": key, "label": _label(key, pace), "backend": backend, "queue": queue, "pace": pace}
    return {**run, **outcome}


if __name__ == "__main__":
    print(json.dumps(run_outage(*sys.argv[1:6])))
    sys.stdout.flush()
    # The baseline's SDK queue would keep retrying its backlog at exit; the figures are out.
    os._exit(0)
