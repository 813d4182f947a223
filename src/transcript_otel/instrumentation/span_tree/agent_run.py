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

`AgentRun` is made of one mixin per responsibility, each in a module of its own and all
deriving from `RunState` (`state`: the state they share, declared once): how spans end
(`completion`), the content they carry (`content`), what model responses tell
(`responses`), what the harness tells later (`harness`), turns (`turns`), tools and
subagents (`tools`) and the run's end (`ending`). `span_slot` has the slots of open spans,
`details` the readers of entry details; this module builds the run and places its entries.
"""

from __future__ import annotations

import functools
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any, Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.trace import SpanKind

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.genai.attributes import (
    RunningUsage,
    SessionTotals,
    cost_usd,
    tool_failed,
    tool_identity,
    usage_attributes,
)
from transcript_otel.genai.content import AgentContent
from transcript_otel.instrumentation.span_tree.completion import GEN_AI_USAGE_COST, USAGE_COST_USD
from transcript_otel.instrumentation.span_tree.details import (
    ENTRY_ERROR,
    ENTRY_SYSTEM_EVENT,
    ENTRY_TOKEN_USAGE,
    ENTRY_TOOL_RESULT,
    ENTRY_TOOL_USE,
    ENTRY_USER_MESSAGE,
    error_type,
    message_of,
    says,
    starts_new_turn,
)
from transcript_otel.instrumentation.span_tree.ending import RunEnding
from transcript_otel.instrumentation.span_tree.harness import HarnessFacts
from transcript_otel.instrumentation.span_tree.responses import ResponseNoting
from transcript_otel.instrumentation.span_tree.span_content import (
    AgentDescription,
    add_content,
    content_rules,
)
from transcript_otel.instrumentation.span_tree.span_slot import SpanSlot, ToolSlot
from transcript_otel.instrumentation.span_tree.tools import (
    GEN_AI_TRANSFER_MODE,
    GEN_AI_TRANSFER_TARGET_NAME,
    SUBAGENT_CALL_ID,
    TRANSFER_RETURNS_TO_CALLER,
)
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.model.entries import MAIN_SOURCE, DetailInRaw, EntryType, RawJson
from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import (
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    TURN_NUMBER,
)
from transcript_otel.records.queued import EntryPlacement

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
    "current_run",
    "message_of",
    "starts_new_turn",
]

TRANSCRIPT_ADAPTER: Final = "transcript.adapter"

_MAX_ENDED_LAUNCHERS: Final = 64
_MAX_CAUSES: Final = 8
# The entries a Claude message's lines become, each carrying the message's id and usage.
_MESSAGE_ENTRIES: Final = frozenset(
    {EntryType.ASSISTANT_MESSAGE.value, EntryType.THINKING.value, EntryType.TOOL_USE.value}
)
# What a harness reports as its turn ends: its usage, or why it failed.
TURN_REPORTS: Final = frozenset({EntryType.TOKEN_USAGE.value, EntryType.ERROR.value})

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


class AgentRun(RunEnding, ResponseNoting, HarnessFacts, EntryPlacement):
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
        turns_start_with_user_message: bool = False,
        count_message_usage: bool = True,
        subagents_named_by_call_id: bool = False,
        native_detail: Callable[[Any], Any] | None = None,
        run_id: str | None = None,
        started_ns: int | None = None,
        pipeline: TranscriptPipeline | None = None,
    ) -> None:
        """`run_id` and `started_ns`: a run recorded after the fact (an import of a session log)
        keeps the id derived from its session and the time the log says it began; `pipeline`:
        where its records go (default: the process's)."""
        # Each attribute is declared, with what it is for, on `RunState`.
        self.adapter = adapter
        self._tracer = tracer
        self._provider = provider
        self._model = model
        self._session_id = session_id
        self._turns_start_with_user_message = turns_start_with_user_message
        self._count_message_usage = count_message_usage
        self._subagents_named_by_call_id = subagents_named_by_call_id
        self._launchers = {}
        self._lock = threading.RLock()
        self._turn = None
        self._turns_awaiting_result = deque()
        self._turn_count = 0
        self._tools = {}
        self._running_scripts = {}
        self._background_calls = {}
        self._session_totals = SessionTotals()
        self._carried_root = {}
        self._running_usage = RunningUsage()
        self._subagents = {}
        self._ended_launchers = deque(maxlen=_MAX_ENDED_LAUNCHERS)
        self._usage_by_message = {}
        self._agent_ids_by_call = {}
        self._description = AgentDescription()
        self._unread_notifications = {}
        self._harness_model = None
        self._finished = False
        self._turn_asked = False
        self._spans_closed = False
        self._mapper = None
        self.emitter = TranscriptEmitter(
            prompt_name=prompt_name,
            adapter=adapter,
            session_id=session_id,
            pipeline=pipeline,
            run_id=run_id,
            started_ns=started_ns,
        )
        self.native_detail = native_detail if self.emitter.enabled and self.emitter.emits_raw else None
        self._root = SpanSlot.open(
            tracer,
            f"invoke_agent {prompt_name}",
            otel_context.get_current(),
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "invoke_agent",
                GEN_AI_AGENT_NAME: prompt_name,
                attr.GEN_AI_CONVERSATION_ID: session_id,
                GEN_AI_PROVIDER_NAME: provider,
                GEN_AI_REQUEST_MODEL: model,
                TRANSCRIPT_ADAPTER: adapter,
                attr.RUN_ID: self.emitter.run_id,
            },
            started_ns,
        )
        self._root.agent_name = prompt_name
        self._root.described = True
        self._content_rules = content_rules(self.emitter.pipeline, self._root.span.is_recording())
        if self._content_rules is not None:
            self._root.content = AgentContent()
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
        """Emit one entry; the writer places it in its span (`place()`).

        `timestamp_ns`: when it happened, for an entry recorded after the fact.
        """
        emitter = self.emitter
        if emitter.enabled:
            emitter.emit(
                entry_type, source=source, detail=detail, raw=raw, context=self, timestamp_ns=timestamp_ns
            )
        else:  # nothing is recorded, but the spans are made all the same, in the same order
            at = time.time_ns() if timestamp_ns is None else timestamp_ns
            self._on_writer(
                "could not place an entry in its span", self.place, entry_type, source, detail, at
            )

    def place(self, entry_type: Any, source: Any, detail: Any, timestamp_ns: int) -> Context:
        """On the writer, in queue order: the span an entry belongs to, opening or ending
        spans as it implies (at the entry's time). Never raises."""
        try:
            with self._lock:
                slot = self._place(entry_type, source, detail, timestamp_ns)
        except Exception as exc:
            self._report("could not place an entry in its span", exc)
            return self._root.context
        try:
            if entry_type == ENTRY_TOOL_RESULT and isinstance(slot, ToolSlot):
                if says(detail, "background_launch"):
                    self._go_on_in_background(slot)
                else:
                    self._end_tool(slot, failed=tool_failed(detail), end_ns=timestamp_ns)
            ended_call = (
                detail.get("background_call_ended")
                if entry_type == ENTRY_SYSTEM_EVENT and isinstance(detail, Mapping)
                else None
            )
            if isinstance(ended_call, str):
                with self._lock:
                    call = self._background_calls.pop(ended_call, None)
                if call is not None:
                    self._end_tool(call, failed=says(detail, "is_error"), end_ns=timestamp_ns)
            if entry_type == ENTRY_SYSTEM_EVENT and isinstance(detail, Mapping):
                self._end_completed_subagent(detail, timestamp_ns)
        except Exception as exc:
            self._report("could not end a tool span", exc)
        return slot.context

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
        those of what caused it (harnesses wrap the provider's error in their own);
        `timestamp_ns` as for `record()`."""
        exception: dict[str, Any] = {"type": type(error).__name__, "message": message_of(error)}
        causes: list[dict[str, str]] = []
        cause = error.__cause__ or error.__context__
        while cause is not None and len(causes) < _MAX_CAUSES:
            causes.append({"type": type(cause).__name__, "message": message_of(cause)})
            cause = cause.__cause__ or cause.__context__
        if causes:
            exception["causes"] = causes
        self.record(EntryType.ERROR.value, detail={"exception": exception}, timestamp_ns=timestamp_ns)

    def mapper(self, kind: type[_M]) -> _M:
        """This run's mapping state of `kind` (deltas being folded, tool names seen), made on first use."""
        if not isinstance(self._mapper, kind):
            self._mapper = kind()
        return self._mapper

    def _place(self, entry_type: Any, source: Any, detail: Any, timestamp_ns: int) -> SpanSlot:
        if (
            self._turns_start_with_user_message
            and self._turn is None
            and source == MAIN_SOURCE
            and entry_type == ENTRY_USER_MESSAGE
        ):
            self._open_turn(timestamp_ns)
        subagent = self._subagent_slot(source, entry_type, detail, timestamp_ns)
        if subagent is not None and isinstance(detail, Mapping):
            usage = usage_attributes({"usage": detail.get("message_usage")})
            if usage:  # a subagent's model call: its own spans and the run's totals, not the turn's
                self._count_usage(subagent, usage, turn=None)
        if self._subagents_named_by_call_id and (
            entry_type == ENTRY_SYSTEM_EVENT or (subagent is not None and not subagent.agent_id_learned)
        ):
            self._learn_agent_id(detail)
        turn = self._turn
        if source == MAIN_SOURCE and entry_type in TURN_REPORTS and self._turns_awaiting_result:
            turn = self._turns_awaiting_result[0]  # the oldest turn still waits for its result
        if subagent is None:  # the main thread's model: the turn's (a subagent's stays its own)
            self._note_turn_facts(entry_type, detail, turn)
        elif entry_type != ENTRY_SYSTEM_EVENT:
            self._note_turn_facts(entry_type, detail, subagent.chat)
        base = subagent or turn or self._root
        if self._count_message_usage and entry_type in _MESSAGE_ENTRIES:
            # Any line of a message may be its first: one that holds only tool calls too.
            self._add_message_usage(base, detail)
        if self._content_rules is not None:
            self._keep_content(entry_type, detail, subagent, turn)
        if entry_type == ENTRY_TOOL_USE:
            caller = subagent or self._root  # the agent that called the tool
            parent = self._running_scripts.get(source) or base
            return self._open_tool(source, detail, parent, timestamp_ns, caller.agent_name)
        if entry_type == ENTRY_TOOL_RESULT:
            call_id, _ = tool_identity(detail)
            tool = self._tools.pop((source, call_id), None) if call_id is not None else None
            if tool is None:
                return base
            last_call = detail.get("subagent_last_call") if isinstance(detail, Mapping) else None
            if isinstance(last_call, Mapping) and call_id is not None:
                self._count_subagent_last_call(call_id, last_call)
            add_content(entry_type, detail, tool)
            return tool
        if entry_type == ENTRY_TOKEN_USAGE:
            self._count_usage(base, self._running_usage.added(detail), turn, cost_usd(detail))
            self._session_totals.report(detail)
        elif entry_type == ENTRY_ERROR:
            base.error_type = error_type(detail)
        return base
