"""The lifecycle every transcript-otel instrumentor shares.

A subclass says which patches it needs (`_build`); this class applies them at
`instrument()`, and at `uninstrument()` switches its wrappers off (bound methods
cached before outlive the patch) and restores the originals.
"""

from __future__ import annotations

from typing import Any, Protocol

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from transcript_otel.instrumentation._patching import PatchSet
from transcript_otel.version import __version__


class Switchable(Protocol):
    """What the wrappers of one `instrument()` share; they do nothing once `active` is False."""

    active: bool


class PatchingInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    # Class attributes: BaseInstrumentor is a singleton whose __init__ re-runs.
    _state: Switchable | None = None
    _patches: PatchSet | None = None

    def _build(self, tracer: trace.Tracer, **kwargs: Any) -> tuple[Switchable, PatchSet]:
        """The shared state and the patches of one `instrument(**kwargs)`."""
        raise NotImplementedError

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(type(self).__module__, __version__, kwargs.get("tracer_provider"))
        state, patch_set = self._build(tracer, **kwargs)
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
        """`module:attribute` of every patch in place (what the installed library version offers)."""
        return [] if self._patches is None else self._patches.applied
