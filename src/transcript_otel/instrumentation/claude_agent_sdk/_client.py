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
from transcript_otel.instrumentation.claude_agent_sdk._prompts import record_prompt_argument
from transcript_otel.instrumentation.claude_agent_sdk._state import Connection, SdkInstrumentation
from transcript_otel.instrumentation.claude_agent_sdk._stream import TracedStream

CLIENT_MODULE: Final = "claude_agent_sdk.client"
# What `ClaudeSDKClient.query()` writes into a string prompt's message unless told otherwise.
SDK_DEFAULT_SESSION_ID: Final = "default"

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())


def _connection_of(state: SdkInstrumentation, client: Any) -> Connection | None:
    """The client's connection, if we capture it (never raises, e.g. for an unhashable client)."""
    if not state.active:
        return None
    try:
        return state.clients.get(client)
    except TypeError:
        return None


def _connect_wrapper(state: SdkInstrumentation) -> Wrapper:
    async def connect(
        wrapped: Callable[..., Coroutine[Any, Any, Any]],
        client: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Any:
        sdk_run = state.start_run(getattr(client, "options", None))
        if sdk_run is None:
            return await wrapped(*args, **kwargs)
        try:
            args, kwargs = record_prompt_argument(sdk_run, args, kwargs, 0)
            with sdk_run.step():
                result = await wrapped(*args, **kwargs)
        except BaseException as error:
            sdk_run.failed(error)
            sdk_run.finish(error)
            raise
        # Tracked once connected: a failing connect() disconnects itself, which must not end
        # this run first (as a success).
        try:
            previous = state.clients.pop(client, None)
            if previous is not None:  # connected again without disconnecting: that run is over
                previous.finalizer.detach()
                previous.sdk_run.finish()
            finalizer = weakref.finalize(client, sdk_run.finish)  # dropped while connected
            state.clients[client] = Connection(sdk_run, finalizer)
        except TypeError:  # not weakly referenceable, or unhashable: only the connection is captured
            _logger.debug("transcript-otel: cannot track a %r", type(client), exc_info=True)
            sdk_run.finish()
        return result

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        return connect(wrapped, instance, args, kwargs)

    return wrapper


Handler = Callable[[Connection, Callable[..., Any], Any, tuple[Any, ...], dict[str, Any]], Any]


def _when_connected(state: SdkInstrumentation, handle: Handler) -> Wrapper:
    """A wrapper that calls `handle(connection, wrapped, client, args, kwargs)` for a client we
    capture, and passes any other call straight through."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        connection = _connection_of(state, instance)
        if connection is None:
            return wrapped(*args, **kwargs)
        return handle(connection, wrapped, instance, args, kwargs)

    return wrapper


def _query(
    connection: Connection, wrapped: Callable[..., Any], client: Any, args: tuple[Any, ...], kwargs: Any
) -> Any:
    session_id = argument(args, kwargs, "session_id", 1)
    sent_as = session_id if isinstance(session_id, str) else SDK_DEFAULT_SESSION_ID
    args, kwargs = record_prompt_argument(connection.sdk_run, args, kwargs, 0, sent_as)
    return wrapped(*args, **kwargs)


def _receive_messages(
    connection: Connection, wrapped: Callable[..., Any], client: Any, args: tuple[Any, ...], kwargs: Any
) -> Any:
    return TracedStream(wrapped(*args, **kwargs), connection.sdk_run, owns_run=False)


def _disconnect_wrapper(state: SdkInstrumentation) -> Wrapper:
    async def disconnect(
        connection: Connection, wrapped: Callable[..., Any], args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        connection.finalizer.detach()
        try:
            with connection.sdk_run.step():
                return await wrapped(*args, **kwargs)
        finally:
            connection.sdk_run.finish()

    def handle(
        connection: Connection, wrapped: Callable[..., Any], client: Any, args: tuple[Any, ...], kwargs: Any
    ) -> Any:
        state.clients.pop(client, None)
        return disconnect(connection, wrapped, args, kwargs)

    return _when_connected(state, handle)


def patches(state: SdkInstrumentation) -> list[Patch]:
    return [
        Patch(CLIENT_MODULE, "ClaudeSDKClient.connect", _connect_wrapper(state)),
        Patch(CLIENT_MODULE, "ClaudeSDKClient.query", _when_connected(state, _query)),
        Patch(CLIENT_MODULE, "ClaudeSDKClient.receive_messages", _when_connected(state, _receive_messages)),
        Patch(CLIENT_MODULE, "ClaudeSDKClient.disconnect", _disconnect_wrapper(state)),
    ]
