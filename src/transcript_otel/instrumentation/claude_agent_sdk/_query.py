"""`query()`: one run per call, from the first step of its stream to its end.

`claude_agent_sdk.query()` delegates to `InternalClient.process_query()`; patching that
method catches every `query()`, however the program imported it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from transcript_otel.instrumentation._calls import argument
from transcript_otel.instrumentation._patching import Patch, Wrapper
from transcript_otel.instrumentation.claude_agent_sdk._prompts import record_prompt_argument
from transcript_otel.instrumentation.claude_agent_sdk._state import SdkInstrumentation
from transcript_otel.instrumentation.claude_agent_sdk._stream import TracedStream

INTERNAL_CLIENT_MODULE: Final = "claude_agent_sdk._internal.client"


def _process_query_wrapper(state: SdkInstrumentation) -> Wrapper:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        sdk_run = state.start_run(argument(args, kwargs, "options", 1))
        if sdk_run is None:
            return wrapped(*args, **kwargs)
        args, kwargs = record_prompt_argument(sdk_run, args, kwargs, 0)
        try:
            stream = wrapped(*args, **kwargs)
        except BaseException as error:
            sdk_run.finish(error)
            raise
        return TracedStream(stream, sdk_run, owns_run=True)

    return wrapper


def patches(state: SdkInstrumentation) -> list[Patch]:
    return [Patch(INTERNAL_CLIENT_MODULE, "InternalClient.process_query", _process_query_wrapper(state))]
