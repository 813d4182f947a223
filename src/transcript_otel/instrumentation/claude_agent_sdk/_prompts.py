"""The prompt argument of `query()`, `connect()` and `client.query()`, recorded as it is sent."""

from __future__ import annotations

from collections.abc import AsyncIterable
from typing import Any

from transcript_otel.instrumentation._calls import argument, with_argument
from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun, user_message


def record_prompt_argument(
    sdk_run: SdkRun, args: tuple[Any, ...], kwargs: dict[str, Any], position: int, session_id: str = ""
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """Record a string prompt now; pass a streamed one through `SdkRun.recording_prompts()`.

    `session_id` is what the SDK writes into a string prompt's message. Returns the
    arguments to call the SDK with (the same ones for a string prompt).
    """
    prompt = argument(args, kwargs, "prompt", position)
    if isinstance(prompt, str):
        sdk_run.prompt(user_message(prompt, session_id))
        return args, kwargs
    if isinstance(prompt, AsyncIterable):
        return with_argument(args, kwargs, "prompt", position, sdk_run.recording_prompts(prompt))
    return args, kwargs
