"""The span tree of one `AgentRun` on the writer: `SpanTree`, the objects it is made of.

`AgentRun` is what the agent's thread calls; everything it asks of the spans is done here, on
the writer, in queue order, under the run's lock: turns begun and ended, the run closed, the
facts the harness tells late. The tree holds the `SpanBook` (root span, facts spans open
with), the `TurnTracker`, the `ToolTracker` (tool calls, subagents), the `UsageLedger`, the
`ContentKeeper`, the `SpanEnder` (each span ended once) and the `EntryPlacer` (each entry's
span, by the harness's `TurnPolicy`).
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.genai.content import AgentContent
from transcript_otel.instrumentation.span_tree.book import SpanBook
from transcript_otel.instrumentation.span_tree.completion import SpanEnder
from transcript_otel.instrumentation.span_tree.content import ContentKeeper
from transcript_otel.instrumentation.span_tree.details import exception_type
from transcript_otel.instrumentation.span_tree.exception_event import record_exception
from transcript_otel.instrumentation.span_tree.placement import EntryPlacer
from transcript_otel.instrumentation.span_tree.policy import TurnPolicy
from transcript_otel.instrumentation.span_tree.responses import note_subagent_model
from transcript_otel.instrumentation.span_tree.span_content import content_rules
from transcript_otel.instrumentation.span_tree.tools import ToolTracker
from transcript_otel.instrumentation.span_tree.turns import TurnTracker
from transcript_otel.instrumentation.span_tree.usage import UsageLedger
from transcript_otel.model.entries import MAIN_SOURCE
from transcript_otel.otel import attributes as attr


class SpanTree:
    """A run's spans and what they end with; its methods run on the writer, under `lock`."""

    def __init__(
        self,
        book: SpanBook,
        emitter: TranscriptEmitter,
        policy: TurnPolicy,
        lock: threading.RLock,
        report: Callable[[str, Exception], None],
    ) -> None:
        self.book = book
        self._emitter = emitter
        self._lock = lock
        root = book.root
        self.content = ContentKeeper(content_rules(emitter.pipeline, root.span.is_recording()))
        if self.content.rules is not None:
            root.content = AgentContent()
        self._ender = SpanEnder(emitter, self.content, report)
        self.turns = TurnTracker(book, self.content)
        self._tools = ToolTracker(
            book, self.content, self._ender, named_by_call_id=policy.subagents_named_by_call_id
        )
        self._usage = UsageLedger(root)
        self.placer = EntryPlacer(
            policy, book, self.turns, self._tools, self._usage, self.content, lock, report
        )

    def end_turn(self, error: BaseException | None, end_ns: int) -> None:
        """The turn `end_turn()` ends: the oldest awaiting its result, else the open one, with
        the main thread's calls still open in it."""
        turn, was_open = self.turns.take_ending()
        if turn is None:
            return
        if was_open:
            self._tools.close_main(end_ns)
        self.content.pass_on_notifications(turn)
        if error is not None and turn.error_type is None:
            turn.error_type = exception_type(error)
        self._ender.end(turn, end_ns)

    def close(self, error: BaseException | None, end_ns: int) -> None:
        """The run's end: every span but the root's ends, the root gets its last attributes and
        `transcript.span` record (its end follows `transcript.stop`), and what ends later keeps
        none."""
        try:
            while self.turns.any_open():
                self.end_turn(error, end_ns)
            self._tools.close_all(end_ns)
            root = self.book.root
            root.usage = self._usage.root_totals()
            if error is not None:
                root.error_type = exception_type(error)
                record_exception(self._emitter.pipeline, root.span, error, end_ns)
            self._ender.complete_when_written(root, end_ns, ends=False)
        finally:
            self._ender.spans_closed = True

    def unexported_usage(self) -> tuple[dict[str, int], dict[str, int]]:
        """What the root and the open `chat` spans have counted so far (see `AgentRun`)."""
        with self._lock:
            root = self._usage.root_totals()
            chat: Counter[str] = Counter()
            subagents = self._tools.subagents.values()
            for slot in (*self.turns.open_turns(), *(s.chat for s in subagents if s.chat is not None)):
                chat.update(slot.usage)
        return dict(root), dict(chat)

    def take_over(self, root: dict[str, int], chat: dict[str, int]) -> None:
        """What a killed run of the session had counted: the root's, and the open turn's."""
        self._usage.carry(root)
        turn = self.turns.current
        if turn is not None:
            for key, count in chat.items():
                turn.usage[key] += count

    def set_session_id(self, session_id: str) -> None:
        """Every open span says the session id the harness told late."""
        for slot in (self.book.root, *self.turns.open_turns(), *self._tools.open_slots()):
            slot.span.set_attribute(attr.GEN_AI_CONVERSATION_ID, session_id)

    def set_provider(self, provider: str) -> None:
        self.book.set_provider(provider, self.turns.open_turns())

    def describe_agent(
        self, system_instructions: str | None, tool_definitions: Sequence[Mapping[str, Any]] | None
    ) -> None:
        self.content.describe(system_instructions, tool_definitions)

    def note_model(self, model: str, source: str) -> None:
        """The model the harness resolved: the main turns', or a subagent's chat span's."""
        if source == MAIN_SOURCE:
            self.turns.note_harness_model(model)
        else:
            note_subagent_model(self._tools.subagents.get(source), model)

    def count_no_more(self, message_ids: Iterable[str]) -> None:
        with self._lock:
            self._usage.count_no_more(message_ids)
