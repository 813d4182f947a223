"""The sinks a prepared transcript record is written to.

Every sink runs on the pipeline's background writer thread, never on the agent's.

Public: `transcript_otel.sinks` (the names in its `__all__`); its modules are internal.
"""

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from transcript_otel.sinks.base import Sink
    from transcript_otel.sinks.jsonl import JsonlMirror
    from transcript_otel.sinks.otel_logs import OTelLogSink
    from transcript_otel.sinks.span_events import SpanEventSink

# Each sink loads on first use, as the package's names do: a module of the package
# (`jsonl_files`: where the mirror is) must not load the OTel sinks and the records with it,
# which would slow the command line's start.
_LOADED_ON_FIRST_USE: Final = {
    "Sink": "transcript_otel.sinks.base",
    "JsonlMirror": "transcript_otel.sinks.jsonl",
    "OTelLogSink": "transcript_otel.sinks.otel_logs",
    "SpanEventSink": "transcript_otel.sinks.span_events",
}

if not TYPE_CHECKING:  # PEP 562; hidden from type checkers, which see the imports above

    def __getattr__(name: str) -> object:
        from importlib import import_module

        if name not in _LOADED_ON_FIRST_USE:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        sink = globals()[name] = getattr(import_module(_LOADED_ON_FIRST_USE[name]), name)
        return sink


__all__ = ["JsonlMirror", "OTelLogSink", "Sink", "SpanEventSink"]
