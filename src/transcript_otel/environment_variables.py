"""Environment variables read by transcript-otel (arguments take precedence).

| Variable | Default | Meaning |
|---|---|---|
| `TRANSCRIPT_OTEL_EMISSION` | `true` | Emit transcript entries at all (`transcript_emission`). |
| `TRANSCRIPT_OTEL_EMIT_RAW` | `true` | Include `raw` source data in entries (`transcript_emit_raw`). |
| `TRANSCRIPT_OTEL_JSONL` | `true` | Write the local JSONL mirror. |
| `TRANSCRIPT_OTEL_JSONL_DIR` | `$XDG_STATE_HOME/transcript-otel/runs` | Directory of per-run files. |
| `TRANSCRIPT_OTEL_JSONL_PATH` | unset | One file every run appends to, instead of one file per run. |
| `TRANSCRIPT_OTEL_LOG_RECORDS` | `true` | Emit OTel log records. |
| `TRANSCRIPT_OTEL_SPAN_EVENTS` | `true` | Add span events to the current span. |
| `TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH` | `4096` | Longest span-event attribute value, in characters. |
| `TRANSCRIPT_OTEL_SPAN_EVENT_MAX_BYTES` | `4194304` | Span events one span keeps whole (4 MiB). |
| `TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES` | `67108864` | Bound of the in-memory backlog (64 MiB). |
| `TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT` | `5` | Seconds that flush and shutdown may take at most. |
| `TRANSCRIPT_OTEL_BACKEND_PROFILE` | `generic` | `generic`, `jaeger`, `grafana`, `phoenix`: length limits. |
| `TRANSCRIPT_OTEL_CONTENT` | `full` | `full`, `metadata` (no text) or `none` (see `content.py`). |
| `TRANSCRIPT_OTEL_CONTENT_EXCLUDE` | unset | Categories kept as metadata only (comma-separated). |
| `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT` | unset | GenAI content to spans and/or events. |
| `TRANSCRIPT_OTEL_OPENINFERENCE` | profile's: `false` | Also `input.value`/`output.value` on spans. |
| `TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH` | profile's: `16384` | Longest GenAI content attribute. |

The capture variable: `SPAN_ONLY` (as unset), `EVENT_ONLY`, `SPAN_AND_EVENT` (as `true`) or
`NO_CONTENT` (as `false`, which also means `metadata` entries if `TRANSCRIPT_OTEL_CONTENT` is unset).
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Mapping
from typing import Final

TRANSCRIPT_OTEL_EMISSION: Final = "TRANSCRIPT_OTEL_EMISSION"
TRANSCRIPT_OTEL_EMIT_RAW: Final = "TRANSCRIPT_OTEL_EMIT_RAW"
TRANSCRIPT_OTEL_JSONL: Final = "TRANSCRIPT_OTEL_JSONL"
TRANSCRIPT_OTEL_JSONL_DIR: Final = "TRANSCRIPT_OTEL_JSONL_DIR"
TRANSCRIPT_OTEL_JSONL_PATH: Final = "TRANSCRIPT_OTEL_JSONL_PATH"
TRANSCRIPT_OTEL_LOG_RECORDS: Final = "TRANSCRIPT_OTEL_LOG_RECORDS"
TRANSCRIPT_OTEL_SPAN_EVENTS: Final = "TRANSCRIPT_OTEL_SPAN_EVENTS"
TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH: Final = "TRANSCRIPT_OTEL_SPAN_EVENT_MAX_LENGTH"
TRANSCRIPT_OTEL_SPAN_EVENT_MAX_BYTES: Final = "TRANSCRIPT_OTEL_SPAN_EVENT_MAX_BYTES"
TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES: Final = "TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES"
TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT: Final = "TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT"
TRANSCRIPT_OTEL_BACKEND_PROFILE: Final = "TRANSCRIPT_OTEL_BACKEND_PROFILE"
TRANSCRIPT_OTEL_OPENINFERENCE: Final = "TRANSCRIPT_OTEL_OPENINFERENCE"
TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH: Final = "TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH"

_logger = logging.getLogger(__name__)
_TRUE: Final = frozenset(("1", "true", "yes", "on"))
_FALSE: Final = frozenset(("0", "false", "no", "off"))


def env_flag(name: str, default: bool, environ: Mapping[str, str] | None = None) -> bool:
    """A boolean variable (of `environ`, else the process's); an unreadable value warns and keeps
    the default."""
    value = (os.environ if environ is None else environ).get(name)
    if value is None or not value.strip():
        return default
    lowered = value.strip().lower()
    if lowered in _TRUE:
        return True
    if lowered in _FALSE:
        return False
    _logger.warning("transcript-otel: %s=%r is not a boolean; using %s", name, value, default)
    return default


def env_number(name: str, default: float, environ: Mapping[str, str] | None = None) -> float:
    """A positive number (of `environ`, else the process's); an unreadable value warns and keeps
    the default."""
    value = (os.environ if environ is None else environ).get(name)
    if value is None or not value.strip():
        return default
    try:
        number = float(value)
    except ValueError:
        number = -1.0
    if not math.isfinite(number) or number <= 0:
        _logger.warning("transcript-otel: %s=%r is not a positive number; using %s", name, value, default)
        return default
    return number


def env_text(name: str) -> str | None:
    value = os.environ.get(name)
    return value if value else None
