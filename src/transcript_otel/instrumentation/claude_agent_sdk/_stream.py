"""The message streams of the SDK, passed through with their run current in every step.

`traced()` wraps an async generator of the SDK (`InternalClient.process_query`,
`ClaudeSDKClient.receive_messages`). Each step of the SDK (`__anext__`) runs with
the run current, so the CLI starts under our span and each message is recorded in
its run; the program's own loop body runs in its own context, as before. However
the stream ends (exhausted, raising, closed early by `break` and `aclose()`, or
cancelled) the SDK's generator is closed as the SDK itself would close it, and the
run learns how it ended.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator
from typing import TypeVar

from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun

_T = TypeVar("_T")


async def traced(inner: AsyncIterator[_T], sdk_run: SdkRun, *, owns_run: bool) -> AsyncGenerator[_T, None]:
    """`inner`, item for item. `owns_run`: the stream is the whole run (`query()`), so its end
    finishes the run; otherwise (a client's stream) an exception only fails the current turn."""
    error: BaseException | None = None
    try:
        while True:
            with sdk_run.step():
                try:
                    item = await inner.__anext__()
                except StopAsyncIteration:
                    return
                except BaseException as exc:  # the agent failed, or was cancelled, in the SDK's step
                    error = exc
                    sdk_run.failed(exc)
                    raise
            # What is thrown in here (GeneratorExit, or the CancelledError of a program being torn
            # down) comes from the program while it holds a message: it stopped reading early.
            yield item
    finally:
        try:
            aclose = getattr(inner, "aclose", None)
            if aclose is not None:
                with sdk_run.step():
                    await aclose()
        finally:
            if owns_run:
                sdk_run.finish(error)
