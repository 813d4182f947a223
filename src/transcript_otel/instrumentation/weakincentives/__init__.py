"""OpenTelemetry transcript instrumentation for `weakincentives` 0.24 to 0.27.

Usage::

    from transcript_otel.instrumentation.weakincentives import WeakincentivesInstrumentor

    WeakincentivesInstrumentor().instrument()  # or: opentelemetry-instrument python agent.py

Each `evaluate()` of the Codex app-server, Claude Agent SDK, ACP and OpenCode adapters
becomes an `invoke_agent` span with a `chat` span per turn and an `execute_tool` span
per tool call, and its canonical transcript is emitted through the transcript
pipeline (log records, span events, the local JSONL mirror). Versions without a
native transcript (Codex 0.25, Claude 0.24/0.25) get one built by our mappings;
0.26+ entries are mirrored from weakincentives' own emitter, never duplicated.
Patches apply when a module is imported, also after `instrument()`; a name a
version lacks is skipped.
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from transcript_otel.instrumentation._patching import PatchSet
from transcript_otel.instrumentation.weakincentives import _acp, _claude, _codex, _native
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation
from transcript_otel.instrumentation.weakincentives.package import _instruments
from transcript_otel.version import __version__

__all__ = ["WeakincentivesInstrumentor"]


class WeakincentivesInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments the weakincentives agentic adapters (a singleton, like every BaseInstrumentor)."""

    # Class attributes: BaseInstrumentor is a singleton whose __init__ re-runs.
    _state: WinkInstrumentation | None = None
    _patches: PatchSet | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(__name__, __version__, kwargs.get("tracer_provider"))
        state = WinkInstrumentation(tracer)
        patch_set = PatchSet(
            "weakincentives",
            [
                *_native.patches(state),
                *_codex.patches(state),
                *_claude.patches(state),
                *_acp.patches(state),
            ],
        )
        patch_set.activate()
        type(self)._state, type(self)._patches = state, patch_set

    def _uninstrument(self, **kwargs: Any) -> None:
        cls = type(self)
        if cls._state is not None:
            cls._state.active = False
        if cls._patches is not None:
            cls._patches.deactivate()
        cls._state = cls._patches = None

    @property
    def applied_patches(self) -> list[str]:
        """`module:attribute` of every patch in place (what this weakincentives version offers)."""
        return [] if self._patches is None else self._patches.applied
