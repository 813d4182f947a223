"""The `opentelemetry_configurator` entry point: `opentelemetry-instrument` with no other distro.

`opentelemetry-instrument python agent.py` calls `configure()` of the first
configurator it finds (or the one `OTEL_PYTHON_CONFIGURATOR` names) before it loads
the instrumentors. Ours runs `transcript_otel.configure()` without instrumenting,
since `opentelemetry-instrument` instruments through the entry points itself.
"""

from __future__ import annotations

import logging
from typing import Any

_logger = logging.getLogger(__name__)


class TranscriptOtelConfigurator:
    """SDK providers and OTLP exporters from the `OTEL_*` variables, plus the transcript sinks."""

    def configure(self, **kwargs: Any) -> None:
        from transcript_otel.otlp.setup import ConfigurationError, configure

        try:
            configure(instrument=False)
        except ConfigurationError as exc:
            # Raised here, `opentelemetry-instrument` would print a traceback and load no
            # instrumentor: nothing captured. An export it cannot make (e.g. gRPC without
            # `[otlp-grpc]`) costs the export only.
            _logger.warning(
                "transcript-otel: %s; nothing is exported, the JSONL mirror gets the transcript", exc
            )
            try:
                configure(instrument=False, export=False)
            except ConfigurationError as again:  # a setting of the transcript itself: no capture
                _logger.warning("transcript-otel: %s; nothing is captured", again)
