"""One instrumented agent run: its transcript emitter and its GenAI span tree.

An `AgentRun` lives for one `evaluate()`. Every canonical entry of the run goes through
`record()`, which emits it with the span it belongs to as its context, so its log record and
span event land there (the spans: this package's docstring). Only the root span is made on
the agent's thread (its context is current during the run, for whatever the agent traces
itself); the agent pays for one `deque.append` per entry, and the run's `SpanTree` (`tree`)
places each entry and does what turns, session ids and the run's end ask, on the writer, in
queue order (`TranscriptEmitter.after_written()`). Nothing here raises into the agent:
failures become `transcript.error` records.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.instrumentation.span_tree.book import SpanBook
from transcript_otel.instrumentation.span_tree.details import (
    failure_detail,
    message_of,
    starts_new_turn,
)
from transcript_otel.instrumentation.span_tree.placement import TURN_REPORTS
from transcript_otel.instrumentation.span_tree.policy import TurnPolicy
from transcript_otel.instrumentation.span_tree.tree import SpanTree
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.model.entries import MAIN_SOURCE, DetailInRaw, EntryType, RawJson

__all__ = ["AgentRun", "TurnPolicy", "current_run", "message_of"]

# Entries of the main thread that belong in a turn: a harness without turn events opens
# one for the first of them (and its usage report, or the run's end, closes it).
TURN_CONTENT: Final = frozenset(
    {
        EntryType.USER_MESSAGE.value,
        EntryType.ASSISTANT_MESSAGE.value,
        EntryType.THINKING.value,
        EntryType.TOOL_USE.value,
        EntryType.TOOL_RESULT.value,
    }
)

_M = TypeVar("_M")

_CURRENT_RUN: ContextVar[AgentRun | None] = ContextVar("transcript_otel_agent_run", default=None)

# The run of the `evaluate()` this code runs inside, if it is instrumented. The context
# variable's own `get`: asked for every native event, with no Python call of ours.
current_run: Final[Callable[[], AgentRun | None]] = _CURRENT_RUN.get

# One logger for the whole run, whichever of its parts reports.
_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())


class AgentRun:
    """The transcript and spans of one `evaluate()`; thread-safe, never raising."""

    def __init__(
        self,
        tracer: trace.Tracer,
        *,
        prompt_name: str,
        adapter: str,
        session_id: str | None,
        provider: str | None = None,
        model: str | None = None,
        policy: TurnPolicy = TurnPolicy.SESSION_LOG,
        native_detail: Callable[[Any], Any] | None = None,
        run_id: str | None = None,
        started_ns: int | None = None,
        pipeline: TranscriptPipeline | None = None,
    ) -> None:
        """`policy`: how the harness's entries make turns and count usage; `run_id` and
        `started_ns`: a run recorded after the fact (an import of a session log) keeps the id
        derived from its session and the time the log says it began; `pipeline`: where its
        records go (default: the process's)."""
        self.adapter = adapter
        self.emitter = TranscriptEmitter(
            prompt_name=prompt_name,
            adapter=adapter,
            session_id=session_id,
            pipeline=pipeline,
            run_id=run_id,
            started_ns=started_ns,
        )
        # The harness's own entries (`record()` of what it emitted with a `raw` string) keep
        # their detail as `native_detail(detail)` returns it: a `DetailInRaw` where `raw`
        # holds it all. Only where the writer gets `raw`.
        self.native_detail = native_detail if self.emitter.enabled and self.emitter.emits_raw else None
        book = SpanBook(
            tracer,
            otel_context.get_current(),
            prompt_name=prompt_name,
            adapter=adapter,
            run_id=self.emitter.run_id,
            session_id=session_id,
            provider=provider,
            model=model,
            started_ns=started_ns,
        )
        self._lock = threading.RLock()
        self._tree = SpanTree(book, self.emitter, policy, self._lock, self._report)
        self._root = book.root
        self._placer = self._tree.placer
        self._mapper: object | None = None
        self._finished = False
        # Agent side: `begin_turn()` was called since the last `end_turn()`.
        self._turn_asked = False
        # `transcript.start` belongs to the root span, like everything of the run.
        token = otel_context.attach(self._root.context)
        try:
            self.emitter.start(started_ns)
        finally:
            otel_context.detach(token)

    @contextmanager
    def activate(self) -> Iterator[AgentRun]:
        """Make this the current run, with its root span current, inside the block."""
        token = _CURRENT_RUN.set(self)
        context_token = otel_context.attach(self._root.context)
        try:
            yield self
        finally:
            otel_context.detach(context_token)
            _CURRENT_RUN.reset(token)

    # -- entries ----------------------------------------------------------------------

    def record(
        self,
        entry_type: str,
        *,
        source: str = MAIN_SOURCE,
        detail: dict[str, Any] | DetailInRaw | None = None,
        raw: str | RawJson | None = None,
        timestamp_ns: int | None = None,
    ) -> None:
        """Emit one entry; the writer places it in its span (`EntryPlacer.place()`).

        `timestamp_ns`: when it happened, for an entry recorded after the fact.
        """
        emitter = self.emitter
        if emitter.enabled:
            emitter.emit(
                entry_type,
                source=source,
                detail=detail,
                raw=raw,
                context=self._placer,
                timestamp_ns=timestamp_ns,
            )
        else:  # nothing is recorded, but the spans are made all the same, in the same order
            at = time.time_ns() if timestamp_ns is None else timestamp_ns
            self._on_writer(
                "could not place an entry in its span",
                self._tree.placer.place,
                entry_type,
                source,
                detail,
                at,
            )

    def record_mapped(self, entries: Iterable[MappedEntry | None], timestamp_ns: int | None = None) -> None:
        """`record()` each entry a mapping produced (None: the event was not transcript content)."""
        for entry in entries:
            if entry is not None:
                detail, raw = entry.detail, entry.raw
                self.record(
                    entry.entry_type, source=entry.source, detail=detail, raw=raw, timestamp_ns=timestamp_ns
                )

    def record_in_turns(
        self, entries: Iterable[MappedEntry], timestamp_ns: int | None = None, *, reports_end_turns: bool
    ) -> None:
        """`record()` each entry in the turns it implies: an entry that begins a turn (Claude
        Code's `init`, `turn_started`) announces one, the main thread's content opens one. With
        `reports_end_turns`, a turn's report (usage, error) opens one too (a turn may fail
        before the model said anything) and ends it after the last of `entries` (an error that
        follows the usage fails the turn)."""
        ends_turn = False
        for entry in entries:
            if starts_new_turn(entry):
                self.turn_boundary(timestamp_ns)
            if entry.source == MAIN_SOURCE:
                reports_turn = reports_end_turns and entry.entry_type in TURN_REPORTS
                if reports_turn or entry.entry_type in TURN_CONTENT:
                    self.begin_turn(timestamp_ns)
                ends_turn |= reports_turn
            self.record(
                entry.entry_type,
                source=entry.source,
                detail=entry.detail,
                raw=entry.raw,
                timestamp_ns=timestamp_ns,
            )
        if ends_turn:
            self.end_turn(at_ns=timestamp_ns)

    def record_later(
        self, mapping: Callable[[AgentRun, Any], Iterable[MappedEntry | None]], native: Any
    ) -> None:
        """Record what `mapping(self, native)` gives, mapped on the writer in queue order and
        timestamped now. For an instrumentor's work on every native event: the agent's thread
        only notes the time and queues `native` (`map_on_writer`), so a mapping that keeps state
        must be used only this way. Never raises."""
        self.emitter.map_on_writer(
            functools.partial(self._record_at, time.time_ns(), mapping, native), native
        )

    def _record_at(
        self, at_ns: int, mapping: Callable[[AgentRun, Any], Iterable[MappedEntry | None]], native: Any
    ) -> None:
        try:
            self.record_mapped(mapping(self, native), at_ns)
        except Exception as exc:
            self._report("could not map a native event", exc)

    def record_failure(self, error: BaseException, timestamp_ns: int | None = None) -> None:
        """The harness raised: an `error` entry with the exception's type and message, and
        those of what caused it; `timestamp_ns` as for `record()`."""
        self.record(EntryType.ERROR.value, detail=failure_detail(error), timestamp_ns=timestamp_ns)

    def mapper(self, kind: type[_M]) -> _M:
        """This run's mapping state of `kind` (deltas being folded, tool names seen), made on first use."""
        if not isinstance(self._mapper, kind):
            self._mapper = kind()
        return self._mapper

    # -- turns ------------------------------------------------------------------------

    def begin_turn(self, at_ns: int | None = None) -> None:
        """Open a turn span unless one is open (the prompt may already have opened it); at
        `at_ns` (default now) for a run recorded after the fact."""
        # Harnesses call this before every entry of a turn: only the first since the last
        # `end_turn()` is worth a deferred action (each one also cuts the writer's batch).
        if not self._turn_asked:
            self._turn_asked = True
            self._on_writer("could not start a turn span", self._tree.turns.begin, at_ns or time.time_ns())

    def turn_boundary(self, at_ns: int | None = None) -> None:
        """The harness announced a turn (Claude Code prints `init` as each of its turns begins,
        also the turns it starts itself when a background subagent ends). The open turn is
        this one if nothing announced it yet (a prompt opened it); else it waits for its
        result (results come in turn order, sometimes late) and a new turn opens."""
        self._turn_asked = True
        self._on_writer("could not start a turn span", self._tree.turns.boundary, at_ns or time.time_ns())

    def end_turn(self, error: BaseException | None = None, at_ns: int | None = None) -> None:
        """End the open turn (and the tool and subagent spans still open in it)."""
        self._turn_asked = False
        self._on_writer("could not end a turn span", self._tree.end_turn, error, at_ns or time.time_ns())

    # -- what the harness tells later -------------------------------------------------

    def set_session_id(self, session_id: str) -> None:
        """The harness told its session id after the run began: spans and later entries get it."""
        try:
            book = self._tree.book
            with self._lock:
                if session_id == book.session_id:
                    return
                book.session_id = session_id
            self._on_writer("could not set the session id", self._tree.set_session_id, session_id)
            self.emitter.set_session_id(session_id)
        except Exception as exc:
            self._report("could not set the session id", exc)

    @property
    def session_id(self) -> str | None:
        return self._tree.book.session_id

    def describe_agent(
        self,
        *,
        system_instructions: str | None = None,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """What the harness told the model before the conversation: its system prompt and the
        tools it may call (`{"name", "description"?, "parameters"?}`). Content: the root and
        every chat span carry them where the content settings let them. Never raises."""
        self._on_writer(
            "could not describe the agent", self._tree.describe_agent, system_instructions, tool_definitions
        )

    def set_provider(self, provider: str) -> None:
        """The provider (`gen_ai.provider.name`), learned after the run began (`run` learns it
        from the lines the agent prints): the root's, and every span's opened from now on."""
        self._on_writer("could not set the provider", self._tree.set_provider, provider)

    def describe(self, key: str, value: str | int | float | bool) -> None:
        """Add an attribute to the run's root span (what only the end of the run tells)."""
        try:
            self._root.span.set_attribute(key, value)
        except Exception as exc:
            self._report("could not set a root span attribute", exc)

    def note_model(self, model: str, source: str = MAIN_SOURCE) -> None:
        """The model the harness resolved for the session (Codex's `thread/start` answer): the
        request model where the run has none, and the response model of turns whose entries
        name none. For a subagent's `source`: its chat span's, where its entries name none (a
        Codex subagent's thread says its model in its own `turn_context`)."""
        self._on_writer("could not note the model", self._tree.note_model, model, source)

    def count_no_more(self, message_ids: Iterable[str]) -> None:
        """Messages another run counted (a session's run before this one): their lines that come
        here add nothing to this run's usage."""
        self._tree.count_no_more(message_ids)

    # -- the run's end ----------------------------------------------------------------

    def finish(self, error: BaseException | None = None, at_ns: int | None = None) -> None:
        """End the run: open spans, `transcript.stop`, then the root span (at `at_ns`, default
        now). Never raises."""
        if self._finished:
            return
        self._finished = True
        try:
            end_time = at_ns or time.time_ns()
            self._on_writer("could not end the run's spans", self._tree.close, error, end_time)
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
        return self._tree.unexported_usage()

    def take_over(self, root: Mapping[str, int], chat: Mapping[str, int]) -> None:
        """This run goes on from a run of the session that never ended (its process was killed)
        and had counted `root` on its root span and `chat` on its open `chat` spans, none of it
        exported: the root reports `root` too, the turn open now (the caller opens one) `chat`."""
        self._on_writer("could not take the run over", self._tree.take_over, dict(root), dict(chat))

    # -- on the writer ----------------------------------------------------------------

    def _on_writer(self, what: str, action: Callable[..., object], *arguments: Any) -> None:
        """Run `action(*arguments)` on the writer, in queue order, under the run's lock; a
        failure is reported."""
        self.emitter.after_written(functools.partial(self._reporting, what, action, *arguments))

    def _reporting(self, what: str, action: Callable[..., object], *arguments: Any) -> None:
        try:
            with self._lock:
                action(*arguments)
        except Exception as exc:
            self._report(what, exc)

    def _report(self, what: str, exc: Exception) -> None:
        _logger.debug("transcript-otel: %s", what, exc_info=exc)
        self.emitter.error(f"{what}: {type(exc).__name__}: {exc}")
