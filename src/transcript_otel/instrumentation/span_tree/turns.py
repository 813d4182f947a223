"""The turns of an `AgentRun`: one `chat` span each.

A harness opens a turn (`begin_turn()`), announces one (`turn_boundary()`: Claude Code's
`init`, also for the turns it starts itself) or lets the prompt open it, and ends it
(`end_turn()`). A turn ends with the main thread's tool calls still open in it; turns begun
anew before their result came wait for it, oldest first.
"""

from __future__ import annotations

import time

from opentelemetry.trace import SpanKind

from transcript_otel.genai.chat_content import ChatContent
from transcript_otel.instrumentation.span_tree.completion import SpanCompletion
from transcript_otel.instrumentation.span_tree.content import ContentKeeping
from transcript_otel.instrumentation.span_tree.details import exception_type
from transcript_otel.instrumentation.span_tree.span_slot import SpanSlot
from transcript_otel.instrumentation.span_tree.turn_facts import CHAT_OPERATION, TurnFacts, chat_span_name
from transcript_otel.model.entries import MAIN_SOURCE
from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import (
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    TURN_NUMBER,
)


class TurnSpans(SpanCompletion, ContentKeeping):
    """Opening and ending turn spans, on the writer, in queue order."""

    def begin_turn(self, at_ns: int | None = None) -> None:
        """Open a turn span unless one is open (the prompt may already have opened it); at
        `at_ns` (default now) for a run recorded after the fact."""
        # Harnesses call this before every entry of a turn: only the first since the last
        # `end_turn()` is worth a deferred action (each one also cuts the writer's batch).
        if not self._turn_asked:
            self._turn_asked = True
            self._on_writer("could not start a turn span", self._begin_turn, at_ns or time.time_ns())

    def _begin_turn(self, start_ns: int) -> None:
        with self._lock:
            if self._turn is None:
                self._open_turn(start_ns)

    def turn_boundary(self, at_ns: int | None = None) -> None:
        """The harness announced a turn (Claude Code prints `init` as each of its turns begins,
        also the turns it starts itself when a background subagent ends). The open turn is
        this one if nothing announced it yet (a prompt opened it); else it waits for its
        result (results come in turn order, sometimes late) and a new turn opens."""
        self._turn_asked = True
        self._on_writer("could not start a turn span", self._turn_boundary, at_ns or time.time_ns())

    def _turn_boundary(self, start_ns: int) -> None:
        with self._lock:
            if self._turn is not None and self._turn.announced:
                self._turns_awaiting_result.append(self._turn)
                self._turn = None
            if self._turn is None:
                self._open_turn(start_ns)
            if self._turn is not None:  # opened above; the check is for the type checker
                self._turn.announced = True

    def _open_turn(self, start_ns: int) -> None:
        self._turn_count += 1
        self._turn = SpanSlot.open(
            self._tracer,
            chat_span_name(self._model),
            self._root.context,
            SpanKind.CLIENT,
            {
                GEN_AI_OPERATION_NAME: CHAT_OPERATION,
                GEN_AI_PROVIDER_NAME: self._provider,
                GEN_AI_REQUEST_MODEL: self._model,
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                TURN_NUMBER: self._turn_count,
            },
            start_ns,
        )
        self._turn.facts = TurnFacts(request_model=self._model, response_model=self._harness_model)
        self._turn.described = True
        if self._content_rules is not None:
            self._turn.content = ChatContent()
            self._deliver_notifications(self._turn)

    def end_turn(self, error: BaseException | None = None, at_ns: int | None = None) -> None:
        """End the open turn (and the tool and subagent spans still open in it)."""
        self._turn_asked = False
        self._on_writer("could not end a turn span", self._end_turn, error, at_ns or time.time_ns())

    def _end_turn(self, error: BaseException | None, end_ns: int) -> None:
        with self._lock:
            if self._turns_awaiting_result:
                turn: SpanSlot | None = self._turns_awaiting_result.popleft()
            else:
                turn, self._turn = self._turn, None
                if turn is not None:
                    self._close_open_tools(end_ns)
            if turn is None:
                return
            self._pass_on_notifications(turn)
        if error is not None and turn.error_type is None:
            turn.error_type = exception_type(error)
        self._end(turn, end_ns)

    def _close_open_tools(self, end_ns: int) -> None:
        """At a turn's end: end the main thread's tool spans still open (their result never came).
        Subagents and calls that go on in the background may outlive the turn; caller holds the lock."""
        for key in [key for key in self._tools if key[0] == MAIN_SOURCE]:
            self._end_missing(self._tools.pop(key), end_ns)
