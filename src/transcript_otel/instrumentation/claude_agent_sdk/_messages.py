"""Each message the CLI prints, as the SDK is about to parse it.

The SDK parses every message of both `query()` and `ClaudeSDKClient` with
`parse_message(data)`. We record the raw dict first: it holds everything the CLI
said, including message types this SDK version skips and messages it fails to
parse (the `MessageParseError` still reaches the program, unchanged).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from transcript_otel.instrumentation._calls import argument
from transcript_otel.instrumentation._patching import Patch, Wrapper
from transcript_otel.instrumentation.claude_agent_sdk._query import INTERNAL_CLIENT_MODULE
from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import current_sdk_run
from transcript_otel.instrumentation.claude_agent_sdk._state import SdkInstrumentation
from transcript_otel.instrumentation.span_tree.agent_run import current_run

PARSER_MODULE: Final = "claude_agent_sdk._internal.message_parser"


def _parse_message_wrapper(state: SdkInstrumentation) -> Wrapper:
    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        sdk_run = current_sdk_run() if state.active else None
        # The innermost run must be this one: an agent run inside one of its tools may parse too.
        if sdk_run is not None and current_run() is sdk_run.run:
            sdk_run.message(argument(args, kwargs, "data", 0))
        return wrapped(*args, **kwargs)

    return wrapper


def patches(state: SdkInstrumentation) -> list[Patch]:
    # `InternalClient` imports `parse_message` by name, `ClaudeSDKClient` looks it up in the
    # parser module. One wrapper for both: the name imported from a patched module is skipped.
    wrapper = _parse_message_wrapper(state)
    return [
        Patch(PARSER_MODULE, "parse_message", wrapper),
        Patch(INTERNAL_CLIENT_MODULE, "parse_message", wrapper),
    ]
