"""What every weakincentives wrapper shares: the tracer, an on/off switch, argument reading."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from transcript_otel.instrumentation._agent_run import AgentRun, current_run

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())


@dataclass(slots=True)
class WinkInstrumentation:
    """Shared by the wrappers of one `instrument()`; `active` is cleared by `uninstrument()`.

    Wrappers check it because bound methods cached before `uninstrument()` outlive it.
    """

    tracer: trace.Tracer
    active: bool = True

    def run(self) -> AgentRun | None:
        """The current instrumented run, unless capture is off or suppressed."""
        if not self.active:
            return None
        run = current_run()
        if run is None or not is_instrumentation_enabled():
            return None
        return run


def argument(args: tuple[Any, ...], kwargs: dict[str, Any], name: str, position: int | None = None) -> Any:
    """A call's argument by name, else by position (wrapped methods are bound: no `self`)."""
    if name in kwargs:
        return kwargs[name]
    if position is not None and position < len(args):
        return args[position]
    return None


def guarded(what: str, action: Callable[[], object]) -> None:
    """Run a telemetry step; a failure is logged, never raised into the agent."""
    try:
        action()
    except Exception:
        _logger.debug("transcript-otel: %s failed", what, exc_info=True)
