"""One instrumented claude-agent-sdk conversation: a `query()` call or a connected client.

`SdkRun` turns what the SDK shows us into canonical entries of an `AgentRun`:

* the prompts the program sends (`prompt()`): a string or the user-message dicts of
  a streamed prompt, as the message the SDK writes to the CLI;
* each message the CLI prints (`message()`), mapped by `ClaudeStreamMapper`; its `init`
  message names the tools the CLI offers the model (`AgentRun.describe_agent()`; the
  options' system prompt is told as the run starts, `SdkInstrumentation.start_run()`).

A turn is one prompt and everything until its `result` message. The CLI answers
prompts one after another, so a prompt sent while a turn is under way waits (in
`_prompts`) until the turn's result, then opens the next turn. The CLI tells its
session id in every message: the first prompt waits for the first message too, so
that every entry of the run carries the id; it keeps the time it was sent.

The agent's thread only notes the time and queues what it saw: the mapping, the turns and
the entries are made on the writer, in queue order, at the times noted (the program gets
each message as soon as it would without us).
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final

from transcript_otel.instrumentation.span_tree.agent_run import (
    AgentRun,
    message_of,
)
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper, source_of
from transcript_otel.model.entries import MAIN_SOURCE

# Prompts waiting for their turn; a CLI that never answers cannot grow this further.
_MAX_WAITING_PROMPTS: Final = 1_000

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
    """The `AgentRun` of one SDK conversation and the state its mapping needs.

    Its methods never raise: a failure becomes a `transcript.error` record.
    """

    def __init__(self, run: AgentRun, resumed_cost_state: bytes | None = None) -> None:
        """`resumed_cost_state`: the last totals of the session it resumes, where its count begins."""
        self.run = run
        self._mapper = ClaudeStreamMapper()
        if resumed_cost_state is not None:
            self._mapper.resume_after(resumed_cost_state)
        self._lock = threading.Lock()
        self._prompts: deque[tuple[int, list[MappedEntry]]] = deque()
        self._awaiting_result = False
        self._first_message_seen = False
        self._recorded_main = False
        # The tool names of the last `init` message, as the run was told them.
        self._described_tools: tuple[str, ...] | None = None

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
        """A prompt was sent: a user-message dict (copied: the SDK may add keys as it sends it)."""
        sent = dict(message) if isinstance(message, dict) else message
        self._on_writer(self._prompt, sent, time.time_ns())

    def _prompt(self, sent: Any, sent_ns: int) -> None:
        try:
            with self._lock:
                if len(self._prompts) < _MAX_WAITING_PROMPTS:
                    self._prompts.append((sent_ns, self._mapper.message(sent)))
            self._next_turn(sent_ns)
        except Exception as exc:
            self._report("could not record a prompt", exc)

    async def recording_prompts(self, prompts: AsyncIterable[Any]) -> AsyncIterator[Any]:
        """Pass a streamed prompt through unchanged, recording each message as the SDK sends it."""
        async for message in prompts:
            self.prompt(message)
            yield message

    # -- what the CLI answers ----------------------------------------------------------

    def message(self, data: Any) -> None:
        """Record one message the CLI printed (what the SDK is about to parse; it reads the
        dict and leaves it as it is)."""
        self.run.emitter.map_on_writer(functools.partial(self._message, data, time.time_ns()), data)

    def _message(self, data: Any, received_ns: int) -> None:
        try:
            if isinstance(data, dict):
                session_id = data.get("session_id")
                if isinstance(session_id, str) and session_id:
                    self.run.set_session_id(session_id)
            with self._lock:
                self._first_message_seen = True
            self._next_turn(received_ns)
            self._describe_tools(data)
            entries = self._mapper.message(data)
            ends_turn = (
                isinstance(data, dict) and data.get("type") == "result" and source_of(data) == MAIN_SOURCE
            )
            self._record(entries, received_ns)
            if ends_turn:
                self.run.end_turn(at_ns=received_ns)
                with self._lock:
                    self._awaiting_result = False
                self._next_turn(received_ns)
        except Exception as exc:
            self._report("could not record a message", exc)

    # -- how it ends -------------------------------------------------------------------

    def failed(self, error: BaseException) -> None:
        """The SDK raised into the program: an `error` entry, and the turn ends with it."""
        self._on_writer(self._failed, error, time.time_ns())

    def _failed(self, error: BaseException, failed_ns: int) -> None:
        try:
            self._release_prompts(failed_ns)
            self.run.record_failure(error, timestamp_ns=failed_ns)
            self.run.end_turn(error, at_ns=failed_ns)
            with self._lock:
                self._awaiting_result = False
        except Exception as exc:
            self._report("could not record an SDK failure", exc)

    def finish(self, error: BaseException | None = None) -> None:
        """The conversation is over: what the mapping holds back and the prompts left are
        recorded, then the run ends (on the writer, after the messages queued before)."""
        self._on_writer(self._finish, error, time.time_ns())

    def _finish(self, error: BaseException | None, finished_ns: int) -> None:
        try:
            self._record(self._mapper.flush(), finished_ns)
            self._release_prompts(finished_ns)
            self._say_what_went_on_unread()
        except Exception as exc:
            self._report("could not record the prompts left", exc)
        self.run.finish(error, at_ns=finished_ns)

    # -- internals ---------------------------------------------------------------------

    def _describe_tools(self, data: Any) -> None:
        """The tools the CLI offers the model, as its `init` message names them (every turn
        prints one; the run is told when the list changes): tool definitions by name."""
        if not (isinstance(data, dict) and data.get("type") == "system" and data.get("subtype") == "init"):
            return
        tools = data.get("tools")
        if not isinstance(tools, list) or source_of(data) != MAIN_SOURCE:
            return
        names = tuple(name for name in tools if isinstance(name, str) and name)
        with self._lock:
            if names == self._described_tools:
                return
            self._described_tools = names
        self.run.describe_agent(tool_definitions=[{"name": name} for name in names])

    def _on_writer(self, action: Callable[..., None], *arguments: Any) -> None:
        self.run.emitter.after_written(functools.partial(action, *arguments))

    def _next_turn(self, now_ns: int) -> None:
        """Record the next waiting prompt, opening its turn, if its turn has come (`now_ns`:
        the time of what brought it, where it is recorded if it had to wait)."""
        with self._lock:
            if self._awaiting_result or not self._prompts:
                return
            if self.run.session_id is None and not self._first_message_seen:
                return  # the first prompt waits for the CLI to tell the session id
            sent_ns, entries = self._prompts.popleft()
            self._awaiting_result = True
            # The first entry keeps the time it was sent; a prompt that waited for a turn to
            # end is recorded at that end, after the turn's entries (times stay in order).
            keeps_time = not self._recorded_main
        self._record(entries, sent_ns if keeps_time else now_ns)

    def _release_prompts(self, now_ns: int) -> None:
        """The conversation is over: record the prompts still waiting (never answered)."""
        with self._lock:
            waiting, self._prompts = list(self._prompts), deque()
        for _, entries in waiting:
            self._record(entries, now_ns)

    def _record(self, entries: list[MappedEntry], timestamp_ns: int) -> None:
        # Each turn's `result` ends it (`_message`), not the entries' usage reports.
        self.run.record_in_turns(entries, timestamp_ns, reports_end_turns=False)
        if not self._recorded_main:
            self._recorded_main = any(entry.source == MAIN_SOURCE for entry in entries)

    def _say_what_went_on_unread(self) -> None:
        """A client that stops reading while calls run in the background (it left the `async
        with` after its first result): whatever the CLI does after that (recent SDKs let it
        finish: its subagents' work, the turn that follows) is not read, so the run's totals
        stop at the last message read. Said in the run, with where the rest is: the CLI's
        session log."""
        running = self._mapper.background_calls_running()
        if not running:
            return
        calls = "1 call was" if len(running) == 1 else f"{len(running)} calls were"
        session = self.run.session_id
        where = f" ({session}.jsonl under ~/.claude/projects)" if session else ""
        self.run.emitter.error(
            f"the program stopped reading the CLI while {calls} still running in the background "
            f"({', '.join(running)}): this run's tokens and cost stop at the last message read; "
            f"what the CLI did after that is in its session log{where}: `transcript-otel import` "
            "it for the whole session",
            background_calls_unread=running,
        )

    def _report(self, what: str, exc: Exception) -> None:
        self.run.emitter.error(f"{what}: {type(exc).__name__}: {message_of(exc)}")
