"""weakincentives 0.26+ emit canonical entries themselves: mirror them, never synthesize a copy.

Wrapping `TranscriptEmitter.emit` catches every native entry of the Codex, Claude,
ACP and OpenCode adapters. Inside an instrumented `evaluate()` the entry joins that
run (and its spans); an emitter used outside one gets a mirror run of its own.
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Callable
from typing import Any, Final

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from transcript_otel.emitter import TranscriptEmitter
from transcript_otel.instrumentation._calls import argument, guarded
from transcript_otel.instrumentation._patching import Patch, Wrapper
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation
from transcript_otel.model import MAIN_SOURCE

TRANSCRIPT_MODULE: Final = "weakincentives.runtime.transcript"

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


def _mirror(state: WinkInstrumentation, native: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    entry_type = argument(args, kwargs, "entry_type", 0)
    source = kwargs.get("source", MAIN_SOURCE)
    detail = kwargs.get("detail")
    raw = kwargs.get("raw") if getattr(native, "_emit_raw", True) else None
    run = state.run()
    if run is not None:
        run.record(entry_type, source=source, detail=detail, raw=raw)
    elif is_instrumentation_enabled():
        _standalone_mirror(native).emit(entry_type, source=source, detail=detail, raw=raw)


def _emit(state: WinkInstrumentation) -> Wrapper:
    """`TranscriptEmitter.emit(entry_type, *, source, detail, raw)`."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if state.active:
            guarded("mirror of a native entry", _mirror, state, instance, args, kwargs)
        return wrapped(*args, **kwargs)

    return wrapper


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


def patches(state: WinkInstrumentation) -> list[Patch]:
    return [
        Patch(TRANSCRIPT_MODULE, "TranscriptEmitter.emit", _emit(state)),
        Patch(TRANSCRIPT_MODULE, "TranscriptEmitter.stop", _stop(state)),
    ]
