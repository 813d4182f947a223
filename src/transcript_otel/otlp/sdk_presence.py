"""Whether the OTel SDK is there to use: installed (a core install, without `[otlp]`, has none)
and not disabled by `OTEL_SDK_DISABLED`; and the one line that says what to install when the
environment asks for what only the SDK does."""

from __future__ import annotations

import functools
import importlib.util
import logging
import os
from typing import Final

from transcript_otel.otlp import exporters

_logger = logging.getLogger(__name__)
_DISABLED: Final = "OTEL_SDK_DISABLED"
_SIGNALS: Final[tuple[exporters.Signal, ...]] = ("TRACES", "LOGS", "METRICS")
# What `replay` and `import --endpoint`, whose job is to send, say instead of sending nothing.
SENDING_DISABLED: Final = (
    "OTEL_SDK_DISABLED=true turns the OpenTelemetry SDK off: nothing would be sent (unset it to send)"
)
_EXPORT_NEEDS_THE_SDK: Final = (
    "{who}: exporting to an OTLP endpoint or the console needs the OpenTelemetry SDK and OTLP "
    "exporters, which the core install leaves out: pip install 'transcript-otel[otlp]' (the mirror "
    "gets {what})"
)


def sdk_installed() -> bool:
    """Whether the OTel SDK can be imported."""
    try:
        return importlib.util.find_spec("opentelemetry.sdk") is not None
    except (ImportError, ValueError):  # a parent that is no package; a None in sys.modules
        return False


def sdk_disabled() -> bool:
    """`OTEL_SDK_DISABLED` as the specification's booleans read: only `true` (any case) is
    true, as the SDK's own providers read it; another value than `false` or empty warns once."""
    value = os.environ.get(_DISABLED, "").strip().lower()
    if value not in ("", "true", "false"):
        _warn_not_a_boolean(value)
    return value == "true"


@functools.cache
def _warn_not_a_boolean(value: str) -> None:
    _logger.warning("transcript-otel: %s=%r is neither true nor false; read as false", _DISABLED, value)


def export_asked(endpoint: str | None = None, protocol: str | None = None) -> bool:
    """Whether `endpoint` or the environment asks for an OTLP or console export of any signal
    (metrics only when `OTEL_METRICS_EXPORTER` names one)."""
    return any(
        exporters.otlp_url(signal, endpoint, protocol) or exporters.console_wanted(signal)
        for signal in _SIGNALS
    )


def export_needs_the_sdk(who: str, what: str) -> str:
    """The one line saying that `who` exports nothing without the SDK, and that the mirror gets `what`."""
    return _EXPORT_NEEDS_THE_SDK.format(who=who, what=what)
