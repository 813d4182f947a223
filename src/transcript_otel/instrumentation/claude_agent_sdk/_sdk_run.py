"""One instrumented claude-agent-sdk conversation: a `query()` call or a connected client.

`SdkRun` turns what the SDK shows us into canonical entries of an `AgentRun`:

* the prompts the program sends (`prompt()`): a string or the user-message dicts of
  a streamed prompt, as the message the SDK writes to the CLI;
* each message the CLI prints (`message()`), mapped by `ClaudeStreamMapper`.

A turn is a prompt and everything until its `result` message. The CLI tells its
session id in every message; a prompt sent before the first one is held until then
(recorded with its own timestamp) so that every entry of the run carries the id.
"""

from __future__ import annotations

import threading
import time
from collections.abc import AsyncIterable, AsyncIterator, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from transcript_otel.instrumentation._agent_run import AgentRun
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.model import MAIN_SOURCE, EntryType

# Main-thread entries that belong in a turn: one arriving after a result opens the next.
_TURN_CONTENT: Final = frozenset(
    {
        EntryType.USER_MESSAGE.value,
        EntryType.ASSISTANT_MESSAGE.value,
        EntryType.THINKING.value,
        EntryType.TOOL_USE.value,
        EntryType.TOOL_RESULT.value,
    }
)
# Prompts held while the session id is unknown; a CLI that never answers cannot grow this.
_MAX_HELD_PROMPTS: Final = 1_000

_CURRENT: ContextVar[SdkRun | None] = ContextVar("transcript_otel_claude_sdk_run", default=None)


def current_sdk_run() -> SdkRun | None:
    """The SDK run whose `query()` or client step is executing in this task, if any."""
    return _CURRENT.get()


def user_message(content: Any, session_id: str = "") -> dict[str, Any]:
    """The user message the SDK writes to the CLI for a string prompt."""
    return {
        "type": "user",
        "message": {"role": "user", "content": content},
        "parent_tool_use_id": None,
        "session_id": session_id,
    }


class SdkRun:
    """The `AgentRun` of one SDK conversation and the state its mapping needs. Never raises."""

    def __init__(self, run: AgentRun) -> None:
        self.run = run
        self._mapper = ClaudeStreamMapper()
        self._held: list[tuple[int, MappedEntry]] = []
        self._lock = threading.Lock()

    @contextmanager
    def step(self) -> Iterator[None]:
        """Run a step of the SDK with this run current and its root span active.

        The CLI is started inside such a step, so the SDK passes our span to it as
        `TRACEPARENT`; tasks the SDK starts inherit the run.
        """
        token = _CURRENT.set(self)
        try:
            with self.run.activate():
                yield
        finally:
            _CURRENT.reset(token)

    # -- what the program sends --------------------------------------------------------

    def prompt(self, message: Any) -> None:
        """Record a prompt: a user-message dict (a copy: the SDK may add keys as it sends it)."""
        try:
            sent = dict(message) if isinstance(message, dict) else message
            entries = self._mapper.message(sent)
            with self._lock:
                if self.run.session_id is None and len(self._held) < _MAX_HELD_PROMPTS:
                    now = time.time_ns()
                    self._held.extend((now, entry) for entry in entries)
                    return
            self._record(entries)
        except Exception as exc:
            self._report("could not record a prompt", exc)

    async def observed_prompts(self, prompts: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """Pass a streamed prompt through unchanged, recording each message as the SDK sends it."""
        async for message in prompts:
            self.prompt(message)
            yield message

    # -- what the CLI answers ----------------------------------------------------------

    def message(self, data: Any) -> None:
        """Record one message the CLI printed (what the SDK is about to parse)."""
        try:
            if isinstance(data, dict):
                session_id = data.get("session_id")
                if isinstance(session_id, str) and session_id:
                    self.run.set_session_id(session_id)
            self._release_held()
            entries = self._mapper.message(data)
            self._record(entries)
            if (
                isinstance(data, dict)
                and data.get("type") == "result"
                and data.get("parent_tool_use_id") is None
            ):
                self.run.end_turn()
        except Exception as exc:
            self._report("could not record a message", exc)

    # -- how it ends -------------------------------------------------------------------

    def failed(self, error: BaseException) -> None:
        """The SDK raised into the program: an `error` entry, and the turn ends with it."""
        try:
            self._release_held()
            detail = {"exception": {"type": type(error).__name__, "message": _message_of(error)}}
            self.run.record(EntryType.ERROR.value, detail=detail)
            self.run.end_turn(error)
        except Exception as exc:
            self._report("could not record an SDK failure", exc)

    def finish(self, error: BaseException | None = None) -> None:
        self._release_held()
        self.run.finish(error)

    # -- internals ---------------------------------------------------------------------

    def _record(self, entries: list[MappedEntry], timestamp_ns: int | None = None) -> None:
        for entry in entries:
            if entry.source == MAIN_SOURCE and entry.entry_type in _TURN_CONTENT:
                self.run.begin_turn()
            self.run.record(
                entry.entry_type,
                source=entry.source,
                detail=entry.detail,
                raw=entry.raw,
                timestamp_ns=timestamp_ns,
            )

    def _release_held(self) -> None:
        with self._lock:
            held, self._held = self._held, []
        for timestamp_ns, entry in held:
            self._record([entry], timestamp_ns)

    def _report(self, what: str, exc: Exception) -> None:
        self.run.emitter.error(f"{what}: {type(exc).__name__}: {_message_of(exc)}")


def _message_of(error: BaseException) -> str:
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} whose str() raised>"
