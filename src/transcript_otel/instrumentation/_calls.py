"""Reading a wrapped call's arguments, and running telemetry steps that must never raise."""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())


def argument(args: tuple[Any, ...], kwargs: dict[str, Any], name: str, position: int | None = None) -> Any:
    """A call's argument by name, else by position (wrapped methods are bound: no `self`)."""
    if name in kwargs:
        return kwargs[name]
    if position is not None and position < len(args):
        return args[position]
    return None


def guarded(what: str, action: Callable[..., object], *arguments: Any) -> None:
    """Run a telemetry step; a failure is logged, never raised into the agent."""
    try:
        action(*arguments)
    except Exception:
        _logger.debug("transcript-otel: %s failed", what, exc_info=True)


def with_argument(
    args: tuple[Any, ...], kwargs: dict[str, Any], name: str, position: int, value: Any
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """The call's arguments with `name` (passed by name or at `position`) replaced by `value`."""
    if name in kwargs:
        return args, {**kwargs, name: value}
    if position < len(args):
        return (*args[:position], value, *args[position + 1 :]), kwargs
    return args, kwargs
