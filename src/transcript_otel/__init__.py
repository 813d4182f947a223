"""transcript-otel: one canonical transcript of every agent run, over OpenTelemetry.

Usage::

    import transcript_otel

    transcript_otel.configure(service_name="my-agent")   # SDK + OTLP + JSONL + instrumentors

    emitter = transcript_otel.TranscriptEmitter(prompt_name="review", adapter="my_adapter")
    with emitter:
        emitter.emit("user_message", detail={"text": "Review this diff"})

Each entry becomes an OTel log record (`transcript.entry`), a span event on the
current span, and a line of the local JSONL mirror. See README.md and docs/.
"""

from typing import TYPE_CHECKING, Final

from transcript_otel.version import __version__

if TYPE_CHECKING:
    from transcript_otel.capture.defaults import get_pipeline, set_pipeline
    from transcript_otel.capture.emitter import TranscriptEmitter
    from transcript_otel.capture.pipeline import TranscriptPipeline
    from transcript_otel.model.entries import (
        CANONICAL_ENTRY_TYPES,
        ENVELOPE_KEYS,
        EntryType,
        TranscriptEntry,
        TranscriptEvent,
        TranscriptSummary,
        subagent_source,
    )
    from transcript_otel.model.invariants import Violation, check_invariants
    from transcript_otel.otlp.setup import Configuration, ConfigurationError, configure
    from transcript_otel.reading.lines import TranscriptReadWarning
    from transcript_otel.reading.otlp_records import records_from_otlp
    from transcript_otel.reading.reconstruct import (
        read_located_records,
        read_records,
        reconstruct_transcript,
        summarize,
    )

# Every public name but the version loads on first use (issue 30): importing the package is
# what every process under `opentelemetry-instrument` pays, whether it records anything or not,
# and what a process that records pays once more at its first emitter. Name -> the module that
# defines it; the `TYPE_CHECKING` imports above give type checkers the same.
_LOADED_ON_FIRST_USE: Final = {
    "get_pipeline": "transcript_otel.capture.defaults",
    "set_pipeline": "transcript_otel.capture.defaults",
    "TranscriptEmitter": "transcript_otel.capture.emitter",
    "Violation": "transcript_otel.model.invariants",
    "check_invariants": "transcript_otel.model.invariants",
    "CANONICAL_ENTRY_TYPES": "transcript_otel.model.entries",
    "ENVELOPE_KEYS": "transcript_otel.model.entries",
    "EntryType": "transcript_otel.model.entries",
    "TranscriptEntry": "transcript_otel.model.entries",
    "TranscriptEvent": "transcript_otel.model.entries",
    "TranscriptSummary": "transcript_otel.model.entries",
    "subagent_source": "transcript_otel.model.entries",
    "records_from_otlp": "transcript_otel.reading.otlp_records",
    "TranscriptPipeline": "transcript_otel.capture.pipeline",
    "TranscriptReadWarning": "transcript_otel.reading.lines",
    "read_located_records": "transcript_otel.reading.reconstruct",
    "read_records": "transcript_otel.reading.reconstruct",
    "reconstruct_transcript": "transcript_otel.reading.reconstruct",
    "summarize": "transcript_otel.reading.reconstruct",
    "Configuration": "transcript_otel.otlp.setup",
    "ConfigurationError": "transcript_otel.otlp.setup",
    "configure": "transcript_otel.otlp.setup",
}

# Hidden from type checkers: they would otherwise accept any misspelt attribute of the package.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module_name = _LOADED_ON_FIRST_USE.get(name)
        if module_name is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module_name), name)
        globals()[name] = value  # later lookups find it without calling this
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LOADED_ON_FIRST_USE})


def flush(timeout_s: float | None = None) -> bool:
    """Write everything emitted so far and push it to the OTel exporters; bounded."""
    from transcript_otel.capture.defaults import get_pipeline

    return get_pipeline().flush(timeout_s, deep=True)


__all__ = [
    "CANONICAL_ENTRY_TYPES",
    "ENVELOPE_KEYS",
    "Configuration",
    "ConfigurationError",
    "EntryType",
    "TranscriptEmitter",
    "TranscriptEntry",
    "TranscriptEvent",
    "TranscriptPipeline",
    "TranscriptReadWarning",
    "TranscriptSummary",
    "Violation",
    "__version__",
    "check_invariants",
    "configure",
    "flush",
    "get_pipeline",
    "read_located_records",
    "read_records",
    "reconstruct_transcript",
    "records_from_otlp",
    "set_pipeline",
    "subagent_source",
    "summarize",
]
