"""`ClaudeSDKClient`: one run per connection, a turn per prompt.

`connect()` starts the run (and the CLI, under the run's span); `query()` records
each prompt; `receive_messages()` (which `receive_response()` reads) passes the
CLI's messages through with the run current; `disconnect()` ends the run, as does
the client being garbage-collected while still connected.
"""

from __future__ import annotations

import logging
import weakref
from collections.abc import Callable, Coroutine
from typing import Any, Final

from transcript_otel.instrumentation._calls import argument
from transcript_otel.instrumentation._patching import Patch, Wrapper
from transcript_otel.instrumentation.claude_agent_sdk._prompts import observe_prompt
from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun
from transcript_otel.instrumentation.claude_agent_sdk._state import SdkInstrumentation
from transcript_otel.instrumentation.claude_agent_sdk._stream import traced

CLIENT_MODULE: Final = "claude_agent_sdk.client"

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())


def _connect_wrapper(state: SdkInstrumentation) -> Wrapper:
    async def connect(
        wrapped: Callable[..., Coroutine[Any, Any, Any]],
        client: Any,
        sdk_run: SdkRun,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        try:
            with sdk_run.step():
                return await wrapped(*args, **kwargs)
        except BaseException as error:
            if state.clients.get(client) is sdk_run:
                del state.clients[client]
            sdk_run.finish(error)
            raise

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        sdk_run = state.start_run(getattr(instance, "options", None))
        if sdk_run is None:
            return wrapped(*args, **kwargs)
        try:
            previous = state.clients.get(instance)
            if previous is not None:
                previous.finish()  # connected again without disconnecting: the old run is over
            state.clients[instance] = sdk_run
            weakref.finalize(instance, sdk_run.finish)  # a client dropped while connected
        except TypeError:  # a client class that cannot be weakly referenced: not captured
            _logger.debug("transcript-otel: cannot track %r", type(instance), exc_info=True)
            sdk_run.finish()
            return wrapped(*args, **kwargs)
        args, kwargs = observe_prompt(sdk_run, args, kwargs, 0)
        return connect(wrapped, instance, sdk_run, args, kwargs)

    return wrapper


def _query_wrapper(state: SdkInstrumentation) -> Wrapper:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        sdk_run = state.clients.get(instance) if state.active else None
        if sdk_run is not None:
            session_id = argument(args, kwargs, "session_id", 1)
            args, kwargs = observe_prompt(
                sdk_run, args, kwargs, 0, "default" if session_id is None else session_id
            )
        return wrapped(*args, **kwargs)

    return wrapper


def _receive_messages_wrapper(state: SdkInstrumentation) -> Wrapper:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        sdk_run = state.clients.get(instance) if state.active else None
        if sdk_run is None:
            return wrapped(*args, **kwargs)
        return traced(wrapped(*args, **kwargs), sdk_run, owns_run=False)

    return wrapper


def _disconnect_wrapper(state: SdkInstrumentation) -> Wrapper:
    async def disconnect(wrapped: Callable[..., Coroutine[Any, Any, Any]], sdk_run: SdkRun) -> Any:
        try:
            with sdk_run.step():
                return await wrapped()
        finally:
            sdk_run.finish()

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        sdk_run = state.clients.pop(instance, None)
        if sdk_run is None:
            return wrapped(*args, **kwargs)
        return disconnect(lambda: wrapped(*args, **kwargs), sdk_run)

    return wrapper


def patches(state: SdkInstrumentation) -> list[Patch]:
    return [
        Patch(CLIENT_MODULE, "ClaudeSDKClient.connect", _connect_wrapper(state)),
        Patch(CLIENT_MODULE, "ClaudeSDKClient.query", _query_wrapper(state)),
        Patch(CLIENT_MODULE, "ClaudeSDKClient.receive_messages", _receive_messages_wrapper(state)),
        Patch(CLIENT_MODULE, "ClaudeSDKClient.disconnect", _disconnect_wrapper(state)),
    ]
