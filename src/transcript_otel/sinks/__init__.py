"""The sinks a prepared transcript record is written to.

Every sink runs on the pipeline's background writer thread, never on the agent's.
"""

from typing import TYPE_CHECKING, Final

if TYPE_CHECKING:
    from transcript_otel.sinks.base import Sink
    from transcript_otel.sinks.jsonl import JsonlMirror
    from transcript_otel.sinks.otel_logs import OTelLogSink
    from transcript_otel.sinks.span_events import SpanEventSink

# Each sink loads on first use, as the package's names do: a module of the package
# (`jsonl_files`: where the mirror is) must not load the OTel sinks and the records with it,
# which were a third of the command line's start.
_LOADED_ON_FIRST_USE: Final = {
    "Sink": "transcript_otel.sinks.base",
    "JsonlMirror": "transcript_otel.sinks.jsonl",
    "OTelLogSink": "transcript_otel.sinks.otel_logs",
    "SpanEventSink": "transcript_otel.sinks.span_events",
}

if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        module_name = _LOADED_ON_FIRST_USE.get(name)
        if module_name is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        from importlib import import_module

        value = getattr(import_module(module_name), name)
        globals()[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted({*globals(), *_LOADED_ON_FIRST_USE})


__all__ = ["JsonlMirror", "OTelLogSink", "Sink", "SpanEventSink"]
