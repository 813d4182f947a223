"""The `invoke_agent` root span and transcript of each adapter's `evaluate()`."""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from transcript_otel.instrumentation._calls import argument
from transcript_otel.instrumentation._patching import Wrapper
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())


@dataclass(frozen=True, slots=True)
class AdapterSpec:
    """How to read one adapter class: its name, provider and model."""

    default_name: str
    provider: str | None
    model: Callable[[Any], Any]
    # How its entries make turns (Codex sends one prompt per turn: the prompt opens the turn).
    policy: TurnPolicy = TurnPolicy.SESSION_LOG
    # Where the provider depends on the adapter's configuration (LiteLLM), read from it.
    provider_of: Callable[[Any], str | None] | None = None
    # Where the adapter's own entries carry their detail in `raw` too (see `AgentRun`).
    native_detail: Callable[[Any], Any] | None = None


def adapter_name(adapter: Any, default: str) -> str:
    """`adapter_name` (0.27), `_adapter_name()` (ACP, 0.26+), else the adapter's constant."""
    name = getattr(adapter, "adapter_name", None)
    if isinstance(name, str) and name:
        return name
    method = getattr(adapter, "_adapter_name", None)
    if callable(method):
        name = method()
        if isinstance(name, str) and name:
            return name
    return default


def prompt_name(prompt: Any) -> str:
    """The name weakincentives gives a prompt: its `name`, else `ns:key`."""
    name = getattr(prompt, "name", None)
    if isinstance(name, str) and name:
        return name
    return f"{getattr(prompt, 'ns', '')}:{getattr(prompt, 'key', '')}"


def _start_run(
    state: WinkInstrumentation, spec: AdapterSpec, instance: Any, args: Any, kwargs: Any
) -> AgentRun:
    session = argument(args, kwargs, "session")
    session_id = getattr(session, "session_id", None)
    model = spec.model(instance)
    return AgentRun(
        state.tracer,
        prompt_name=prompt_name(argument(args, kwargs, "prompt", 0)),
        adapter=adapter_name(instance, spec.default_name),
        session_id=None if session_id is None else str(session_id),
        provider=spec.provider if spec.provider_of is None else spec.provider_of(instance),
        model=model if isinstance(model, str) and model else None,
        policy=spec.policy,
        native_detail=spec.native_detail,
    )


def evaluate_wrapper(state: WinkInstrumentation, spec: AdapterSpec) -> Wrapper:
    """Wrap a sync `evaluate()`: a run with its root span current, finished however it ends."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        if not state.active or not is_instrumentation_enabled():
            return wrapped(*args, **kwargs)
        try:
            run = _start_run(state, spec, instance, args, kwargs)
        except Exception:
            _logger.debug("transcript-otel: could not start a run", exc_info=True)
            return wrapped(*args, **kwargs)
        with run.activate():
            try:
                result = wrapped(*args, **kwargs)
            except BaseException as error:
                run.finish(error)
                raise
            run.finish()
            return result

    return wrapper


def nested_model(*path: str) -> Callable[[Any], Any]:
    """Read a model name at `instance.<path...>`, or None where any step is missing."""

    def read(instance: Any) -> Any:
        value = instance
        for name in path:
            value = getattr(value, name, None)
        return value

    return read
