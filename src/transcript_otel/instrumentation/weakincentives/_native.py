"""weakincentives 0.26+ emit canonical entries themselves: mirror them, never synthesize a copy.

Wrapping `TranscriptEmitter.emit` catches every native entry of the Codex, Claude,
ACP and OpenCode adapters. Inside an instrumented `evaluate()` the entry joins that
run (and its spans); an emitter used outside one gets a mirror run of its own.
"""

from __future__ import annotations

import logging
import threading
import weakref
from collections.abc import Callable
from contextvars import ContextVar, Token
from typing import Any, Final, Self

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.instrumentation._calls import argument, guarded
from transcript_otel.instrumentation._patching import Factory, Patch, Replacement, Wrapper, takes
from transcript_otel.instrumentation.span_tree.agent_run import current_run
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation
from transcript_otel.mappings.codex import bridge_unknown
from transcript_otel.model.entries import MAIN_SOURCE, EntryType

TRANSCRIPT_MODULE: Final = "weakincentives.runtime.transcript"

ENTRY_UNKNOWN: Final = EntryType.UNKNOWN.value

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())

_standalone: weakref.WeakKeyDictionary[Any, TranscriptEmitter] = weakref.WeakKeyDictionary()
_standalone_lock = threading.Lock()


def _standalone_mirror(native: Any) -> TranscriptEmitter:
    with _standalone_lock:
        mirror = _standalone.get(native)
        if mirror is None:
            session_id = getattr(native, "_session_id", None)
            mirror = TranscriptEmitter(
                prompt_name=str(getattr(native, "_prompt_name", "")),
                adapter=str(getattr(native, "_adapter", "")),
                session_id=None if session_id is None else str(session_id),
            )
            mirror.start()
            _standalone[native] = mirror
        return mirror


class HarnessCall:
    """A call into the harness's own transcript code (a bridge handling one notification), as a
    context manager: how many entries it emitted inside.

    A class rather than a `contextlib.contextmanager`: it runs on the agent's thread, where a
    generator-based manager costs several times as much."""

    __slots__ = ("_token", "emitted")

    def __init__(self) -> None:
        self.emitted = 0
        self._token: Token[HarnessCall | None] | None = None

    def __enter__(self) -> Self:
        self._token = _HARNESS_CALL.set(self)
        return self

    def __exit__(self, *exc_info: object) -> None:
        if self._token is not None:
            _HARNESS_CALL.reset(self._token)
            self._token = None


_HARNESS_CALL: ContextVar[HarnessCall | None] = ContextVar("transcript_otel_harness_call", default=None)


# `TranscriptEmitter.emit` of 0.26 and 0.27, annotations left out.
_KNOWN_EMIT: Final = "(self, entry_type, *, source='main', detail=None, raw=None)"


def _mirror(native: Any, entry_type: Any, source: Any, detail: Any, raw: Any) -> None:
    """Record a native entry in the current run, or in the emitter's own mirror run.

    Called for every entry, so inline, with no wrapper between it and `emit()`. Inside a
    run nothing more is checked: suppression decided whether the run started. Never raises.
    """
    try:
        if entry_type == ENTRY_UNKNOWN:
            entry_type, detail = bridge_unknown(detail, raw)
        if not getattr(native, "_emit_raw", True):
            raw = None
        call = _HARNESS_CALL.get()
        if call is not None:
            call.emitted += 1
        run = current_run()
        if run is not None:
            native_detail = run.native_detail
            if native_detail is not None and type(raw) is str:
                detail = native_detail(detail)
            run.record(entry_type, source=source, detail=detail, raw=raw)
        elif is_instrumentation_enabled():
            _standalone_mirror(native).emit(entry_type, source=source, detail=detail, raw=raw)
    except Exception:
        _logger.debug("transcript-otel: mirror of a native entry failed", exc_info=True)


def _emit(state: WinkInstrumentation) -> Factory:
    """`TranscriptEmitter.emit(entry_type, *, source, detail, raw)`: called for every entry, so a
    plain function (see `Replacement`), with the known signature where it has it."""

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        if takes(original, _KNOWN_EMIT):

            def emit(
                self: Any,
                entry_type: str,
                *,
                source: str = MAIN_SOURCE,
                detail: dict[str, Any] | None = None,
                raw: str | None = None,
            ) -> Any:
                if state.active:
                    _mirror(self, entry_type, source, detail, raw)
                return original(self, entry_type, source=source, detail=detail, raw=raw)

            return emit

        def emit_any(self: Any, *args: Any, **kwargs: Any) -> Any:
            if state.active:
                entry_type = argument(args, kwargs, "entry_type", 0)
                source = kwargs.get("source", MAIN_SOURCE)
                detail, raw = kwargs.get("detail"), kwargs.get("raw")
                _mirror(self, entry_type, source, detail, raw)
            return original(self, *args, **kwargs)

        return emit_any

    return make


def _stop(state: WinkInstrumentation) -> Wrapper:
    """`TranscriptEmitter.stop()`: stops the standalone mirror, if this emitter had one."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        with _standalone_lock:
            mirror = _standalone.pop(instance, None)
        if mirror is not None:
            guarded("stop of a mirror", lambda: mirror.stop(wait=False))
        return wrapped(*args, **kwargs)

    return wrapper


def patches(state: WinkInstrumentation) -> list[Patch | Replacement]:
    return [
        Replacement(TRANSCRIPT_MODULE, "TranscriptEmitter.emit", _emit(state)),
        Patch(TRANSCRIPT_MODULE, "TranscriptEmitter.stop", _stop(state)),
    ]
