"""What every weakincentives wrapper shares: the tracer, an on/off switch, `observing`, `in_run`
and `in_run_async`."""

from __future__ import annotations

import logging
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from opentelemetry import trace

from transcript_otel.instrumentation._calls import guarded
from transcript_otel.instrumentation._patching import Wrapper
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, current_run

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
        """The current instrumented run, unless capture is off.

        Suppression (`suppress_instrumentation()`) is checked once, when `evaluate()` is
        called: a run that started records everything its harness does.
        """
        return current_run() if self.active else None


Observer = Callable[[AgentRun, tuple[Any, ...], dict[str, Any]], None]


def observing(state: WinkInstrumentation, what: str, observe: Observer) -> Wrapper:
    """A wrapper that records what a call shows (`observe(run, args, kwargs)`), then makes it.

    The call itself is returned untouched, so this fits sync methods and coroutine
    functions alike: for an `async def` the arguments are observed when it is called.
    """

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        run = state.run()
        if run is not None:
            guarded(what, observe, run, args, kwargs)
        return wrapped(*args, **kwargs)

    return wrapper


Hook = Callable[[AgentRun, Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def in_run(state: WinkInstrumentation, hook: Hook) -> Wrapper:
    """A wrapper that makes the call through `hook(run, wrapped, instance, args, kwargs)`
    inside an instrumented run, and untouched outside one."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        run = state.run()
        if run is None:
            return wrapped(*args, **kwargs)
        return hook(run, wrapped, instance, args, kwargs)

    return wrapper


AsyncHook = Callable[
    [AgentRun, Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Coroutine[Any, Any, Any]
]


def in_run_async(state: WinkInstrumentation, hook: AsyncHook) -> Wrapper:
    """`in_run` for an `async def`: the coroutine awaits the call through `hook(run, wrapped,
    instance, args, kwargs)` when it starts inside an instrumented run, untouched outside one."""

    def wrapper(
        wrapped: Callable[..., Coroutine[Any, Any, Any]],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Coroutine[Any, Any, Any]:
        async def traced() -> Any:
            run = state.run()
            if run is None:
                return await wrapped(*args, **kwargs)
            return await hook(run, wrapped, instance, args, kwargs)

        return traced()

    return wrapper
