"""The `opentelemetry_configurator` entry point: `opentelemetry-instrument` with no other distro.

`opentelemetry-instrument python agent.py` calls `configure()` of the first
configurator it finds (or the one `OTEL_PYTHON_CONFIGURATOR` names) before it loads
the instrumentors. Ours runs `transcript_otel.configure()` without instrumenting,
since `opentelemetry-instrument` instruments through the entry points itself.
"""

from __future__ import annotations

from typing import Any


class TranscriptOtelConfigurator:
    """SDK providers and OTLP exporters from the `OTEL_*` variables, plus the transcript sinks."""

    def configure(self, **kwargs: Any) -> None:
        from transcript_otel.otlp.setup import configure

        configure(instrument=False)
