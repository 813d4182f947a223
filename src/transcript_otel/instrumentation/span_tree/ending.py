"""The end of an `AgentRun` (`finish()`): every span of the run ends, the root span last.

Its turns, tools and subagents end (a tool whose result never came says so), the root span
gets its last attributes (the session's usage, the exception that ended the run, redacted),
and the root's `transcript.span` record and `transcript.stop` come before the root span ends.
"""

from __future__ import annotations

import functools
import time
import traceback
from collections import Counter
from collections.abc import Mapping

from opentelemetry import context as otel_context
from opentelemetry.semconv.attributes.exception_attributes import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
)
from opentelemetry.trace import Span

from transcript_otel.instrumentation.span_tree.details import exception_type, message_of
from transcript_otel.instrumentation.span_tree.tools import ToolSpans
from transcript_otel.instrumentation.span_tree.turns import TurnSpans
from transcript_otel.model.entries import EntryType
from transcript_otel.records.content import text_digest


class RunEnding(TurnSpans, ToolSpans):
    """Ending the run: on the agent's thread, then on the writer."""

    def finish(self, error: BaseException | None = None, at_ns: int | None = None) -> None:
        """End the run: open spans, `transcript.stop`, then the root span (at `at_ns`, default
        now). Never raises."""
        if self._finished:
            return
        self._finished = True
        try:
            end_time = at_ns or time.time_ns()
            self._on_writer("could not end the run's spans", self._close_run_spans, error, end_time)
            root = self._root
            # The root's `transcript.span` record comes before `transcript.stop`, the run's last,
            # and the root span ends after it: `transcript.stop` is one of its events.
            token = otel_context.attach(root.context)
            try:
                self.emitter.stop(wait=False, timestamp_ns=at_ns)
            finally:
                otel_context.detach(token)
            self.emitter.after_written(functools.partial(root.span.end, end_time=end_time))
        except Exception as exc:
            self._report("could not end the run's spans", exc)

    def unexported_usage(self) -> tuple[dict[str, int], dict[str, int]]:
        """What the root span and the open `chat` spans have counted so far, none of it exported
        until they end; asked once the writer has written all that was queued (a watch keeping
        its positions), so that a run taking the session over after a crash can report it."""
        with self._lock:
            root = self._session_totals.totals()
            if root is None:
                root = Counter(self._root.usage)
            root.update(self._carried_root)
            chat: Counter[str] = Counter()
            subagent_chats = [subagent.chat for subagent in self._subagents.values()]
            for slot in (self._turn, *self._turns_awaiting_result, *subagent_chats):
                if slot is not None:
                    chat.update(slot.usage)
        return dict(root), dict(chat)

    def take_over(self, root: Mapping[str, int], chat: Mapping[str, int]) -> None:
        """This run goes on from a run of the session that never ended (its process was killed)
        and had counted `root` on its root span and `chat` on its open `chat` spans, none of it
        exported: the root reports `root` too, the turn open now (the caller opens one) `chat`."""
        self._on_writer("could not take the run over", self._take_over, dict(root), dict(chat))

    def _take_over(self, root: dict[str, int], chat: dict[str, int]) -> None:
        with self._lock:
            self._carried_root = root
            if self._turn is not None:
                usage = self._turn.usage
                for key, count in chat.items():
                    usage[key] += count

    def _close_run_spans(self, error: BaseException | None, end_ns: int) -> None:
        """On the writer, where `finish()` was called: every span but the root's ends, the root gets
        its last attributes and `transcript.span` record, and what ends later keeps none."""
        try:
            while self._turns_awaiting_result or self._turn is not None:
                self._end_turn(error, end_ns)
            with self._lock:
                self._close_open_spans(end_ns)
            root = self._root
            session_totals = self._session_totals.totals()
            if session_totals is not None:
                root.usage = session_totals
            for key, count in self._carried_root.items():
                root.usage[key] += count
            if error is not None:
                root.error_type = exception_type(error)
                self._record_exception(root.span, error, end_ns)
            self._complete_when_written(root, end_ns, ends=False)
        finally:
            self._spans_closed = True

    def _record_exception(self, span: Span, error: BaseException, at_ns: int) -> None:
        """The span's `exception` event at `at_ns` (the run's end: an import's is the session's,
        the same at every import), redacted like every entry: messages and stack traces
        carry what the agent saw (keys in a failing request's headers, a prompt). The message
        is kept only where the content policy keeps error text."""
        pipeline = self.emitter.pipeline
        message = message_of(error)
        if pipeline.content_policy.mode_for(EntryType.ERROR.value) == "full":
            stack_trace = "".join(traceback.format_exception(error))
        else:  # the frames only: the messages of the error and its causes are content
            message = text_digest(message)
            frames = traceback.TracebackException.from_exception(error).stack.format()
            stack_trace = "".join(["Traceback (most recent call last):\n", *frames])
            stack_trace += f"{exception_type(error)}: {message}\n"
        span.add_event(
            "exception",
            {
                EXCEPTION_TYPE: exception_type(error),
                EXCEPTION_MESSAGE: pipeline.redactor.text(message),
                EXCEPTION_STACKTRACE: pipeline.redactor.text(stack_trace),
            },
            timestamp=at_ns,
        )

    def _close_open_spans(self, end_ns: int) -> None:
        """At the run's end: end every tool and subagent span still open; caller holds the lock."""
        tools, self._tools = list(self._tools.values()), {}
        subagents, self._subagents = list(self._subagents.values()), {}
        background, self._background_calls = list(self._background_calls.values()), {}
        for slot in subagents:
            self._end(slot, end_ns)
        for tool in [*tools, *background]:
            self._end_missing(tool, end_ns)
