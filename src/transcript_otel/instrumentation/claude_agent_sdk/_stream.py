"""The message streams of the SDK, passed through with their run current in every step.

`TracedStream` stands in for an async generator of the SDK
(`InternalClient.process_query`, `ClaudeSDKClient.receive_messages`). Each step of
the SDK (`__anext__`) runs with the run current, so the CLI starts under our span
and each message is recorded in its run; the program's own loop body runs in its
own context, as it would without us.

It is deliberately not an async generator itself: the event loop then tracks and
closes only the SDK's generators, exactly as it would without us (closing a
generator twice at once, when a loop shuts down, breaks the SDK's cleanup). We
close the SDK's generator only when the program closes ours. A stream that is
`query()`'s whole run ends the run however the stream ends: exhausted, raising,
closed by `aclose()`, or dropped unfinished (`break`, a cancelled task: then when it
is garbage-collected).
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import AsyncIterator
from typing import Any

from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun


class TracedStream:
    """An SDK message stream, item for item.

    `owns_run`: the stream is the whole run (`query()`), so its end finishes the run;
    otherwise (a client's stream) an exception only fails the current turn.
    """

    __slots__ = ("__weakref__", "_finalizer", "_inner", "_sdk_run")

    def __init__(self, inner: AsyncIterator[Any], sdk_run: SdkRun, *, owns_run: bool) -> None:
        self._inner = inner
        self._sdk_run = sdk_run
        self._finalizer = weakref.finalize(self, sdk_run.finish) if owns_run else None

    def __aiter__(self) -> TracedStream:
        return self

    async def __anext__(self) -> Any:
        with self._sdk_run.step():
            try:
                return await self._inner.__anext__()
            except StopAsyncIteration:
                self._end()
                raise
            except BaseException as exc:
                # A cancelled wait (a timeout, a task cancelled) is the program's doing: a
                # client's turn stays open, a `query()` run ends when the stream is dropped.
                if not _is_cancellation(exc):
                    self._sdk_run.failed(exc)
                    self._end(exc)
                raise

    async def asend(self, value: Any) -> Any:
        with self._sdk_run.step():
            return await self._inner.asend(value)  # type: ignore[attr-defined]

    async def athrow(self, *args: Any) -> Any:
        with self._sdk_run.step():
            return await self._inner.athrow(*args)  # type: ignore[attr-defined]

    async def aclose(self) -> None:
        """The program closed the stream: the run ends (without an error), then the SDK's stream."""
        self._end()
        aclose = getattr(self._inner, "aclose", None)
        if aclose is not None:
            with self._sdk_run.step():
                await aclose()

    def _end(self, error: BaseException | None = None) -> None:
        """Finish the run once (the stream's end, or the garbage collector, whichever comes first)."""
        if self._finalizer is not None and self._finalizer.detach() is not None:
            self._sdk_run.finish(error)


def _is_cancellation(error: BaseException) -> bool:
    """asyncio's `CancelledError`, trio's `Cancelled` (anyio runs on either), or `GeneratorExit`."""
    if isinstance(error, asyncio.CancelledError | GeneratorExit):
        return True
    kind = type(error)
    return kind.__name__ == "Cancelled" and kind.__module__.startswith("trio")
