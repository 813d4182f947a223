"""Keep other OpenTelemetry instrumentations from tracing our own export calls.

`opentelemetry.instrumentation.utils.suppress_instrumentation` does exactly this, but
importing that module pulls in wrapt and, through it, asyncio, ssl, email and zipfile:
all added to every `import transcript_otel` (issue 30). The suppression itself
is two values in the OTel context, and the key instrumentations check lives in the OTel
API (`opentelemetry.context`), so this module sets the same values with the API alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Final

from opentelemetry import context

# Private to the OTel API but the one key every instrumentation checks; it holds a uuid,
# so it can only be read from the module that created it.
from opentelemetry.context import _SUPPRESS_INSTRUMENTATION_KEY

# The plain-string key opentelemetry-instrumentation also sets and checks, for
# instrumentations written before the API key existed.
_PLAIN_SUPPRESS_INSTRUMENTATION_KEY: Final = "suppress_instrumentation"


@contextmanager
def suppress_instrumentation() -> Iterator[None]:
    """Within the block, `is_instrumentation_enabled()` is False for this thread's context.

    Same effect as `opentelemetry.instrumentation.utils.suppress_instrumentation()`.
    """
    suppressed = context.set_value(_SUPPRESS_INSTRUMENTATION_KEY, True)
    suppressed = context.set_value(_PLAIN_SUPPRESS_INSTRUMENTATION_KEY, True, suppressed)
    token = context.attach(suppressed)
    try:
        yield
    finally:
        context.detach(token)
