"""The turns of an `AgentRun`: `TurnTracker`, one `chat` span each.

A harness opens a turn (`begin_turn()`), announces one (`turn_boundary()`: Claude Code's
`init`, also for the turns it starts itself) or lets the prompt open it, and ends it
(`end_turn()`). Turns begun anew before their result came wait for it, oldest first: a
harness's report of a turn (its usage, its error) belongs to the oldest waiting.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator

from transcript_otel.genai.chat_content import ChatContent
from transcript_otel.instrumentation.span_tree.book import SpanBook
from transcript_otel.instrumentation.span_tree.content import ContentKeeper
from transcript_otel.instrumentation.span_tree.slots import ChatSlot


class TurnTracker:
    """The open turn, the turns awaiting their result, and the models they answer with."""

    def __init__(self, book: SpanBook, content: ContentKeeper) -> None:
        self._book = book
        self._content = content
        self.current: ChatSlot | None = None
        # Turns the harness began anew while their result was still to come (Claude Code prints
        # a turn's `result` after the turns a background subagent's end starts): results end
        # them first, oldest first.
        self._awaiting_result: deque[ChatSlot] = deque()
        self._count = 0

    def open(self, start_ns: int) -> ChatSlot:
        """A new turn becomes the open one."""
        self._count += 1
        turn = self.current = self._book.open_turn(self._count, start_ns)
        if self._content.rules is not None:
            turn.content = ChatContent()
            self._content.deliver_notifications(turn)
        return turn

    def begin(self, start_ns: int) -> None:
        """Open a turn unless one is open (the prompt may already have opened it)."""
        if self.current is None:
            self.open(start_ns)

    def boundary(self, start_ns: int) -> None:
        """The harness announced a turn: the open turn is this one if nothing announced it yet
        (a prompt opened it); else it waits for its result and a new turn opens."""
        if self.current is not None and self.current.announced:
            self._awaiting_result.append(self.current)
            self.current = None
        turn = self.current or self.open(start_ns)
        turn.announced = True

    def reported(self) -> ChatSlot | None:
        """The turn a harness's report (usage, error) is about: the oldest awaiting its result."""
        return self._awaiting_result[0] if self._awaiting_result else self.current

    def take_ending(self) -> tuple[ChatSlot | None, bool]:
        """The turn `end_turn()` ends, no longer tracked: the oldest awaiting its result, else
        the open one (True: its tool calls still open end with it)."""
        if self._awaiting_result:
            return self._awaiting_result.popleft(), False
        turn, self.current = self.current, None
        return turn, turn is not None

    def any_open(self) -> bool:
        return self.current is not None or bool(self._awaiting_result)

    def open_turns(self) -> Iterator[ChatSlot]:
        if self.current is not None:
            yield self.current
        yield from self._awaiting_result

    def set_request_model(self, model: str) -> None:
        """The run's model, learned from its entries: the root's and every open turn's request model."""
        self._book.set_model(model)
        for turn in self.open_turns():
            if turn.facts.request_model is None:
                turn.facts.request_model = model
                turn.name_model(model)

    def note_harness_model(self, model: str) -> None:
        """The model the harness resolved for the session: the request model where the run has
        none, and the response model of open turns whose entries name none."""
        self._book.harness_model = model
        if self._book.model is None:
            self.set_request_model(model)
        for turn in self.open_turns():
            if turn.facts.response_model is None:
                turn.facts.response_model = model
