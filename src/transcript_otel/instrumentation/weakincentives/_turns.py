"""Turn spans: opened when the prompt is sent, ended when the adapter's turn coroutine returns."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from transcript_otel.instrumentation._patching import Wrapper
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation, in_run_async


def turn_wrapper(state: WinkInstrumentation, *, opens: bool, closes: bool) -> Wrapper:
    """Wrap an `async def` turn step: open the turn span before it, end it after it."""

    async def turn(
        run: AgentRun,
        wrapped: Callable[..., Any],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        if opens:
            run.begin_turn()
        try:
            result = await wrapped(*args, **kwargs)
        except BaseException as error:
            if closes:
                run.end_turn(error)
            raise
        if closes:
            run.end_turn()
        return result

    return in_run_async(state, turn)
