"""One instrumented agent run: its transcript emitter and its GenAI span tree.

An `AgentRun` lives for one `evaluate()`. Every canonical entry of the run goes
through `record()`, which places it in the span it belongs to and emits it with
that span's context, so its log record and span event land there:

* `invoke_agent {prompt}`: the root span (`gen_ai.agent.name` = prompt name,
  `gen_ai.conversation.id` = session id, provider, model, token totals);
* `chat {model}`: one per turn (the prompt sent to the model and everything until
  the turn completes), with the turn's model, response facts (`TurnFacts`) and token
  usage, ERROR and `error.type` when the turn failed;
* `execute_tool {name}`: from a `tool_use` entry to the `tool_result` with the same
  call id, ERROR when the result says the tool failed; a `Task`/`Agent` call is a
  transfer to the subagent it names;
* `invoke_agent {subagent type}`: a subagent's entries (source `subagent:<id>`),
  nested under the `Task`/`Agent` tool call that launched it.

Only the root span is made on the agent's thread (its context is current during
the run, for whatever the agent traces itself). Everything else happens on the
pipeline's writer thread, in queue order, so the agent pays for one `deque.append`
per entry (starting an SDK span alone costs far more): the run is the
`EntryPlacement` of its entries, and turns, session ids and the run's end are
deferred actions (`TranscriptEmitter.after_written()`). Spans keep the agent's
times: a span starts at the timestamp of the entry (or call) that opened it and
ends at that of the entry (or call) that ended it, once the span events of
everything emitted inside it are added.
Nothing here raises into the agent: failures become `transcript.error` records.

`AgentRun` is the facade of objects it holds, each owning its own state: the `SpanBook`
(`book`: the root span and the facts spans open with), the `TurnTracker` (`turns`), the
`ToolTracker` (`tools`: tool calls and subagents), the `UsageLedger` (`usage`), the
`ContentKeeper` (`content`), the `SpanEnder` (`completion`: each span ended once) and the
`EntryPlacer` (`placement`: where each entry goes, by the harness's `TurnPolicy`). `slots`
has one type per kind of open span, `details` the readers of entry details. The agent's
thread calls this module's methods; what they change is done on the writer, under the run's
lock.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.genai.content import AgentContent
from transcript_otel.instrumentation.span_tree.book import SUBAGENT_CALL_ID, TRANSCRIPT_ADAPTER, SpanBook
from transcript_otel.instrumentation.span_tree.completion import GEN_AI_USAGE_COST, USAGE_COST_USD, SpanEnder
from transcript_otel.instrumentation.span_tree.content import ContentKeeper
from transcript_otel.instrumentation.span_tree.details import (
    exception_type,
    failure_detail,
    message_of,
    starts_new_turn,
)
from transcript_otel.instrumentation.span_tree.exception_event import record_exception
from transcript_otel.instrumentation.span_tree.placement import TURN_REPORTS, EntryPlacer
from transcript_otel.instrumentation.span_tree.policy import TurnPolicy
from transcript_otel.instrumentation.span_tree.responses import note_subagent_model
from transcript_otel.instrumentation.span_tree.span_content import content_rules
from transcript_otel.instrumentation.span_tree.tools import (
    GEN_AI_TRANSFER_MODE,
    GEN_AI_TRANSFER_TARGET_NAME,
    TRANSFER_RETURNS_TO_CALLER,
    ToolTracker,
)
from transcript_otel.instrumentation.span_tree.turns import TurnTracker
from transcript_otel.instrumentation.span_tree.usage import UsageLedger
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.model.entries import MAIN_SOURCE, DetailInRaw, EntryType, RawJson
from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import TURN_NUMBER

__all__ = [
    "GEN_AI_TRANSFER_MODE",
    "GEN_AI_TRANSFER_TARGET_NAME",
    "GEN_AI_USAGE_COST",
    "SUBAGENT_CALL_ID",
    "TRANSCRIPT_ADAPTER",
    "TRANSFER_RETURNS_TO_CALLER",
    "TURN_CONTENT",
    "TURN_NUMBER",
    "TURN_REPORTS",
    "USAGE_COST_USD",
    "AgentRun",
    "TurnPolicy",
    "current_run",
    "message_of",
    "starts_new_turn",
]

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
        self._lock = threading.RLock()
        self._book = SpanBook(
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
        root = self._book.root
        self._content = ContentKeeper(content_rules(self.emitter.pipeline, root.span.is_recording()))
        if self._content.rules is not None:
            root.content = AgentContent()
        self._ender = SpanEnder(self.emitter, self._content, self._report)
        self._turns = TurnTracker(self._book, self._content)
        self._tools = ToolTracker(
            self._book, self._content, self._ender, named_by_call_id=policy.subagents_named_by_call_id
        )
        self._usage = UsageLedger(root)
        self._placer = EntryPlacer(
            policy, self._book, self._turns, self._tools, self._usage, self._content, self._lock, self._report
        )
        self._mapper: object | None = None
        self._finished = False
        # Agent side: `begin_turn()` was called since the last `end_turn()`.
        self._turn_asked = False
        # `transcript.start` belongs to the root span, like everything of the run.
        token = otel_context.attach(root.context)
        try:
            self.emitter.start(started_ns)
        finally:
            otel_context.detach(token)

    @contextmanager
    def activate(self) -> Iterator[AgentRun]:
        """Make this the current run, with its root span current, inside the block."""
        token = _CURRENT_RUN.set(self)
        context_token = otel_context.attach(self._book.root.context)
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
                "could not place an entry in its span", self._placer.place, entry_type, source, detail, at
            )

    def record_mapped(self, entries: Iterable[MappedEntry | None]) -> None:
        """`record()` each entry a mapping produced (None: the event was not transcript content)."""
        for entry in entries:
            if entry is not None:
                self.record(entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw)

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
            for entry in mapping(self, native):
                if entry is not None:
                    self.record(
                        entry.entry_type,
                        source=entry.source,
                        detail=entry.detail,
                        raw=entry.raw,
                        timestamp_ns=at_ns,
                    )
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
            self._on_writer("could not start a turn span", self._turns.begin, at_ns or time.time_ns())

    def turn_boundary(self, at_ns: int | None = None) -> None:
        """The harness announced a turn (Claude Code prints `init` as each of its turns begins,
        also the turns it starts itself when a background subagent ends). The open turn is
        this one if nothing announced it yet (a prompt opened it); else it waits for its
        result (results come in turn order, sometimes late) and a new turn opens."""
        self._turn_asked = True
        self._on_writer("could not start a turn span", self._turns.boundary, at_ns or time.time_ns())

    def end_turn(self, error: BaseException | None = None, at_ns: int | None = None) -> None:
        """End the open turn (and the tool and subagent spans still open in it)."""
        self._turn_asked = False
        self._on_writer("could not end a turn span", self._end_turn, error, at_ns or time.time_ns())

    def _end_turn(self, error: BaseException | None, end_ns: int) -> None:
        turn, was_open = self._turns.take_ending()
        if turn is None:
            return
        if was_open:  # the main thread's calls still open end with it
            self._tools.close_main(end_ns)
        self._content.pass_on_notifications(turn)
        if error is not None and turn.error_type is None:
            turn.error_type = exception_type(error)
        self._ender.end(turn, end_ns)

    # -- what the harness tells later -------------------------------------------------

    def set_session_id(self, session_id: str) -> None:
        """The harness told its session id after the run began: spans and later entries get it."""
        try:
            with self._lock:
                if session_id == self._book.session_id:
                    return
                self._book.session_id = session_id
            self._on_writer("could not set the session id", self._set_span_session_id, session_id)
            self.emitter.set_session_id(session_id)
        except Exception as exc:
            self._report("could not set the session id", exc)

    def _set_span_session_id(self, session_id: str) -> None:
        for slot in (self._book.root, *self._turns.open_turns(), *self._tools.open_slots()):
            slot.span.set_attribute(attr.GEN_AI_CONVERSATION_ID, session_id)

    @property
    def session_id(self) -> str | None:
        return self._book.session_id

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
            "could not describe the agent", self._content.describe, system_instructions, tool_definitions
        )

    def set_provider(self, provider: str) -> None:
        """The provider (`gen_ai.provider.name`), learned after the run began (`run` learns it
        from the lines the agent prints): the root's, and every span's opened from now on."""
        self._on_writer("could not set the provider", self._set_provider, provider)

    def _set_provider(self, provider: str) -> None:
        self._book.set_provider(provider, self._turns.open_turns())

    def describe(self, key: str, value: str | int | float | bool) -> None:
        """Add an attribute to the run's root span (what only the end of the run tells)."""
        try:
            self._book.root.span.set_attribute(key, value)
        except Exception as exc:
            self._report("could not set a root span attribute", exc)

    def note_model(self, model: str, source: str = MAIN_SOURCE) -> None:
        """The model the harness resolved for the session (Codex's `thread/start` answer): the
        request model where the run has none, and the response model of turns whose entries
        name none. For a subagent's `source`: its chat span's, where its entries name none (a
        Codex subagent's thread says its model in its own `turn_context`)."""
        self._on_writer("could not note the model", self._note_model, model, source)

    def _note_model(self, model: str, source: str) -> None:
        if source == MAIN_SOURCE:
            self._turns.note_harness_model(model)
        else:
            note_subagent_model(self._tools.subagents.get(source), model)

    def count_no_more(self, message_ids: Iterable[str]) -> None:
        """Messages another run counted (a session's run before this one): their lines that come
        here add nothing to this run's usage."""
        with self._lock:
            self._usage.count_no_more(message_ids)

    # -- the run's end ----------------------------------------------------------------

    def finish(self, error: BaseException | None = None, at_ns: int | None = None) -> None:
        """End the run: open spans, `transcript.stop`, then the root span (at `at_ns`, default
        now). Never raises."""
        if self._finished:
            return
        self._finished = True
        try:
            end_time = at_ns or time.time_ns()
            self._on_writer("could not end the run's spans", self._close_run_spans, error, end_time)
            root = self._book.root
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

    def _close_run_spans(self, error: BaseException | None, end_ns: int) -> None:
        """On the writer, where `finish()` was called: every span but the root's ends, the root gets
        its last attributes and `transcript.span` record, and what ends later keeps none."""
        try:
            while self._turns.any_open():
                self._end_turn(error, end_ns)
            self._tools.close_all(end_ns)
            root = self._book.root
            root.usage = self._usage.root_totals()
            if error is not None:
                root.error_type = exception_type(error)
                record_exception(self.emitter.pipeline, root.span, error, end_ns)
            self._ender.complete_when_written(root, end_ns, ends=False)
        finally:
            self._ender.spans_closed = True

    def unexported_usage(self) -> tuple[dict[str, int], dict[str, int]]:
        """What the root span and the open `chat` spans have counted so far, none of it exported
        until they end; asked once the writer has written all that was queued (a watch keeping
        its positions), so that a run taking the session over after a crash can report it."""
        with self._lock:
            root = self._usage.root_totals()
            chat: Counter[str] = Counter()
            chats = [*self._turns.open_turns(), *(s.chat for s in self._tools.subagents.values() if s.chat)]
            for slot in chats:
                chat.update(slot.usage)
        return dict(root), dict(chat)

    def take_over(self, root: Mapping[str, int], chat: Mapping[str, int]) -> None:
        """This run goes on from a run of the session that never ended (its process was killed)
        and had counted `root` on its root span and `chat` on its open `chat` spans, none of it
        exported: the root reports `root` too, the turn open now (the caller opens one) `chat`."""
        self._on_writer("could not take the run over", self._take_over, dict(root), dict(chat))

    def _take_over(self, root: dict[str, int], chat: dict[str, int]) -> None:
        self._usage.carry(root)
        turn = self._turns.current
        if turn is not None:
            for key, count in chat.items():
                turn.usage[key] += count

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
