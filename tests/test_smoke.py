"""The shortest end-to-end path: emit three entries, read them back from every sink."""

from __future__ import annotations

from transcript_otel import TranscriptEmitter, TranscriptPipeline

from conftest import OTelHarness
from helpers import entry_contexts, run_records


def test_entries_reach_all_three_sinks(full_pipeline: TranscriptPipeline, otel: OTelHarness) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="a", pipeline=full_pipeline)
    with otel.tracer.start_as_current_span("run"), emitter:
        emitter.emit("user_message", detail={"text": "hi"})
        emitter.emit("assistant_message", detail={"text": "hello"})
        full_pipeline.flush()
    contexts = entry_contexts(run_records(emitter))
    assert [c["entry_type"] for c in contexts] == ["user_message", "assistant_message"]
    events = [r.log_record.event_name for r in otel.finished_logs()]
    assert events == ["transcript.start", "transcript.entry", "transcript.entry", "transcript.stop"]
    (span,) = otel.finished_spans()
    assert [e.name for e in span.events][:3] == ["transcript.start", "transcript.entry", "transcript.entry"]
