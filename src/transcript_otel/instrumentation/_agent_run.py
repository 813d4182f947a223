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
per entry (starting an SDK span alone costs it 10-20 µs): the run is the
`EntryPlacement` of its entries, and turns, session ids and the run's end are
deferred actions (`TranscriptEmitter.after_written()`). Spans keep the agent's
times: a span starts at the timestamp of the entry (or call) that opened it and
ends at that of the entry (or call) that ended it, once the span events of
everything emitted inside it are added.
Nothing here raises into the agent: failures become `transcript.error` records.
"""

from __future__ import annotations

import functools
import logging
import threading
import time
import traceback
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, Final, NamedTuple, Self, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.context import Context
from opentelemetry.semconv.attributes.exception_attributes import (
    EXCEPTION_MESSAGE,
    EXCEPTION_STACKTRACE,
    EXCEPTION_TYPE,
)
from opentelemetry.trace import Span, SpanKind, Status, StatusCode

from transcript_otel import attributes as attr
from transcript_otel._genai import (
    RunningUsage,
    cost_usd,
    message_usage,
    run_totals,
    session_usage,
    tool_failed,
    tool_identity,
    usage_attributes,
)
from transcript_otel._genai_content import AgentContent, ChatContent, ToolContent
from transcript_otel._genai_facts import init_model, response_facts, subagent_agent_id, task_notification
from transcript_otel._genai_metrics import record_span_end
from transcript_otel._records import EntryPlacement
from transcript_otel._span_records import span_fields
from transcript_otel.attributes import (
    ERROR_TYPE,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_FINISH_REASONS,
    GEN_AI_TOOL_TYPE,
    TOOL_RESULT_MISSING,
)
from transcript_otel.content import text_digest
from transcript_otel.emitter import TranscriptEmitter
from transcript_otel.instrumentation._span_content import (
    OPERATION_DETAILS_EVENT,
    AgentDescription,
    SpanContent,
    add_content,
    content_rules,
    operation_details,
    span_content,
)
from transcript_otel.instrumentation._turn_facts import CHAT_OPERATION, TurnFacts, chat_span_name
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_stream import result_error_type
from transcript_otel.model import MAIN_SOURCE, SUBAGENT_SOURCE_PREFIX, DetailInRaw, EntryType, RawJson

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())

TURN_NUMBER: Final = "transcript.turn"
TRANSCRIPT_ADAPTER: Final = "transcript.adapter"
# Ours, in US dollars as the harness reports it (kept beside the conventions' newer name).
USAGE_COST_USD: Final = "transcript.usage.cost_usd"
GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"
# A stream-json subagent's span is named by the call that launched it: that call's id.
SUBAGENT_CALL_ID: Final = "transcript.subagent.call_id"
# semantic-conventions-genai's agent-as-a-tool refinement of `execute_tool` (a `Task`/`Agent`
# call names the subagent type it starts, and waits for its answer).
GEN_AI_TRANSFER_MODE: Final = "gen_ai.transfer.mode"
GEN_AI_TRANSFER_TARGET_NAME: Final = "gen_ai.transfer.target.name"
TRANSFER_RETURNS_TO_CALLER: Final = "return_to_caller"

# Tools that start a Claude subagent.
_SUBAGENT_TOOLS: Final = frozenset({"Task", "Agent"})
_MAX_ENDED_LAUNCHERS: Final = 64
_MAX_KNOWN_LAUNCHERS: Final = 1024
_MAX_CAUSES: Final = 8
_ENTRY_TOOL_USE: Final = EntryType.TOOL_USE.value
_ENTRY_TOOL_RESULT: Final = EntryType.TOOL_RESULT.value
_ENTRY_SYSTEM_EVENT: Final = EntryType.SYSTEM_EVENT.value
_ENTRY_ASSISTANT_MESSAGE: Final = EntryType.ASSISTANT_MESSAGE.value
_ENTRY_TOKEN_USAGE: Final = EntryType.TOKEN_USAGE.value
# Entries that may tell the model that answered, its response id and why it stopped.
_RESPONSE_ENTRIES: Final = frozenset({_ENTRY_ASSISTANT_MESSAGE, _ENTRY_TOKEN_USAGE})
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


def current_run() -> AgentRun | None:
    """The run of the `evaluate()` this code runs inside, if it is instrumented."""
    return _CURRENT_RUN.get()


@dataclass(slots=True)
class _SpanSlot:
    span: Span
    context: Context
    usage: Counter[str] = field(default_factory=Counter)
    cost_usd: float = 0.0
    error_type: str | None = None
    # A turn: the harness announced it (Claude Code's `init`), so its next announcement is another turn.
    announced: bool = False
    # A turn: what its entries say about its model responses (None for other spans).
    facts: TurnFacts | None = None
    # The root and subagents: the `gen_ai.agent.name` of the tools they call.
    agent_name: str | None = None
    # A subagent named by its launching call id: its real agent id is known (set on the span).
    agent_id_learned: bool = False
    # A subagent: the `chat` span of its model calls (its tokens, model and conversation).
    chat: _SpanSlot | None = None
    # What the span's entries said, where content goes onto spans (`_span_content`).
    content: SpanContent | None = None
    # The root and the main turns: they carry the system prompt and tool definitions.
    described: bool = False
    # A main turn: the task notifications it began with, and whether the model answered in it.
    notified: dict[str, str] | None = None
    answered: bool = False

    @classmethod
    def open(
        cls,
        tracer: trace.Tracer,
        name: str,
        parent: Context,
        kind: SpanKind,
        attributes: Mapping[str, Any],
        start_ns: int | None = None,
    ) -> Self:
        span = tracer.start_span(
            name,
            context=parent,
            kind=kind,
            attributes={key: value for key, value in attributes.items() if value is not None},
            start_time=start_ns,
        )
        return cls(span, trace.set_span_in_context(span, parent))


class _FinalState(NamedTuple):
    """What a span ends with, read in queue order as it ends (later entries may change the slot)."""

    usage: dict[str, int]
    cost_usd: float
    error_type: str | None
    keeps_record: bool
    # A turn's response facts (`TurnFacts.final_attributes`); empty for other spans.
    attributes: dict[str, Any]
    # Its content attributes (`_span_content`), for the span and the operation-details event.
    content: dict[str, Any]


@dataclass(slots=True)
class _ToolSlot(_SpanSlot):
    name: str = ""
    call_id: str = ""
    subagent_prompt: str | None = None
    subagent_type: str | None = None
    subagent_source: str | None = None


class AgentRun(EntryPlacement):
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
    ) -> None:
        self.adapter = adapter
        self._tracer = tracer
        self._provider = provider
        self._model = model
        self._session_id = session_id
        self._turns_start_with_user_message = turns_start_with_user_message
        # Off where the harness reports each turn's usage itself (Claude's result message).
        self._count_message_usage = count_message_usage
        # Claude's stream-json names a subagent's messages after the `Task` call that launched
        # it (`subagent:{call id}`): its parent is then known exactly, never guessed.
        self._subagents_named_by_call_id = subagents_named_by_call_id
        self._launchers: dict[str, _ToolSlot] = {}
        self._lock = threading.RLock()
        self._turn: _SpanSlot | None = None
        # Turns the harness began anew while their result was still to come (Claude Code prints
        # a turn's `result` after the turns a background subagent's end starts): results end
        # them first, oldest first.
        self._turns_awaiting_result: deque[_SpanSlot] = deque()
        self._turn_count = 0
        self._tools: dict[tuple[str, str], _ToolSlot] = {}
        # Calls whose result said they go on in the background (a background subagent): they
        # end when the harness says the work ended, or with the run.
        self._background_calls: dict[str, _ToolSlot] = {}
        # The session's own running token totals (subagents included), where the harness tells
        # them: the root span reports them rather than the sum of what the run recorded.
        self._session_usage: dict[str, int] | None = None
        self._running_usage = RunningUsage()
        self._subagents: dict[str, _SpanSlot] = {}
        # Subagent launchers whose result came first: transcript files are read by polling,
        # so a subagent's file may be read after its `Task` call's result.
        self._ended_launchers: deque[_ToolSlot] = deque(maxlen=_MAX_ENDED_LAUNCHERS)
        self._usage_by_message: dict[str, dict[str, int]] = {}
        # Real agent ids learned (stream-json's `task_started`) before their subagent spoke.
        self._agent_ids_by_call: dict[str, str] = {}
        # What the harness told the model before the conversation (`describe_agent()`).
        self._description = AgentDescription()
        # The model the harness resolved (`note_model()`): a turn's response model until one answers.
        # Background tasks' notifications no model call has read yet (content only).
        self._unread_notifications: dict[str, str] = {}
        self._harness_model: str | None = None
        self._finished = False
        # Agent side: `begin_turn()` was called since the last `end_turn()`.
        self._turn_asked = False
        # Writer side: the run's end was processed; spans ending later keep no record.
        self._spans_closed = False
        self._mapper: object | None = None
        self.emitter = TranscriptEmitter(prompt_name=prompt_name, adapter=adapter, session_id=session_id)
        # The harness's own entries (`record()` of what it emitted with a `raw` string) keep
        # their detail as `native_detail(detail)` returns it: a `DetailInRaw` where `raw`
        # holds it all. Only where the writer gets `raw`.
        self.native_detail = native_detail if self.emitter.enabled and self.emitter.emits_raw else None
        self._root = _SpanSlot.open(
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
        )
        self._root.agent_name = prompt_name
        self._root.described = True
        # Content on spans, where the settings and the policy let it (None: none is kept).
        self._content_rules = content_rules(self.emitter.pipeline, self._root.span.is_recording())
        if self._content_rules is not None:
            self._root.content = AgentContent()
        # `transcript.start` belongs to the root span, like everything of the run.
        token = otel_context.attach(self._root.context)
        try:
            self.emitter.start()
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
            if entry_type == _ENTRY_TOOL_RESULT and isinstance(slot, _ToolSlot):
                if _says(detail, "background_launch"):
                    self._go_on_in_background(slot)
                else:
                    self._end_tool(slot, failed=tool_failed(detail), end_ns=timestamp_ns)
            ended_call = (
                detail.get("background_call_ended")
                if entry_type == _ENTRY_SYSTEM_EVENT and isinstance(detail, Mapping)
                else None
            )
            if isinstance(ended_call, str):
                with self._lock:
                    call = self._background_calls.pop(ended_call, None)
                if call is not None:
                    self._end_tool(call, failed=_says(detail, "is_error"), end_ns=timestamp_ns)
        except Exception as exc:
            self._report("could not end a tool span", exc)
        return slot.context

    def record_mapped(self, entries: Iterable[MappedEntry | None]) -> None:
        """`record()` each entry a mapping produced (None: the event was not transcript content)."""
        for entry in entries:
            if entry is not None:
                self.record(entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw)

    def record_failure(self, error: BaseException) -> None:
        """The harness raised: an `error` entry with the exception's type and message, and
        those of what caused it (harnesses wrap the provider's error in their own)."""
        exception: dict[str, Any] = {"type": type(error).__name__, "message": message_of(error)}
        causes: list[dict[str, str]] = []
        cause = error.__cause__ or error.__context__
        while cause is not None and len(causes) < _MAX_CAUSES:
            causes.append({"type": type(cause).__name__, "message": message_of(cause)})
            cause = cause.__cause__ or cause.__context__
        if causes:
            exception["causes"] = causes
        self.record(EntryType.ERROR.value, detail={"exception": exception})

    def mapper(self, kind: type[_M]) -> _M:
        """This run's mapping state of `kind` (deltas being folded, tool names seen), made on first use."""
        if not isinstance(self._mapper, kind):
            self._mapper = kind()
        return self._mapper

    def _place(self, entry_type: Any, source: Any, detail: Any, timestamp_ns: int) -> _SpanSlot:
        if (
            self._turns_start_with_user_message
            and self._turn is None
            and source == MAIN_SOURCE
            and entry_type == EntryType.USER_MESSAGE.value
        ):
            self._open_turn(timestamp_ns)
        subagent = self._subagent_slot(source, entry_type, detail, timestamp_ns)
        if subagent is not None and isinstance(detail, Mapping):
            usage = usage_attributes({"usage": detail.get("message_usage")})
            if usage:  # a subagent's model call: its own spans and the run's totals, not the turn's
                self._count_usage(subagent, usage, turn=None)
        if self._subagents_named_by_call_id and (
            entry_type == _ENTRY_SYSTEM_EVENT or (subagent is not None and not subagent.agent_id_learned)
        ):
            self._learn_agent_id(detail)
        turn = self._turn
        if source == MAIN_SOURCE and entry_type in TURN_REPORTS and self._turns_awaiting_result:
            turn = self._turns_awaiting_result[0]  # the oldest turn still waits for its result
        if subagent is None:  # the main thread's model: the turn's (a subagent's stays its own)
            self._note_turn_facts(entry_type, detail, turn)
        elif entry_type != _ENTRY_SYSTEM_EVENT:
            self._note_turn_facts(entry_type, detail, subagent.chat)
        base = subagent or turn or self._root
        if self._content_rules is not None:
            self._keep_content(entry_type, detail, subagent, turn)
        if entry_type == _ENTRY_TOOL_USE:
            caller = subagent or self._root  # the agent that called the tool
            return self._open_tool(source, detail, base, timestamp_ns, caller.agent_name)
        if entry_type == _ENTRY_TOOL_RESULT:
            call_id, _ = tool_identity(detail)
            tool = self._tools.pop((source, call_id), None) if call_id is not None else None
            if tool is None:
                return base
            add_content(entry_type, detail, tool)
            return tool
        if entry_type == EntryType.TOKEN_USAGE.value:
            self._count_usage(base, self._running_usage.added(detail), turn, cost_usd(detail))
            self._session_usage = session_usage(detail) or self._session_usage
        elif entry_type == EntryType.ASSISTANT_MESSAGE.value and self._count_message_usage:
            self._add_message_usage(base, detail)
        elif entry_type == EntryType.ERROR.value:
            base.error_type = _error_type(detail)
        return base

    def _keep_content(
        self, entry_type: Any, detail: Any, subagent: _SpanSlot | None, turn: _SpanSlot | None
    ) -> None:
        """The entry in what its spans will say: a subagent's or the root's, and its chat's.

        A background task's notification is what Claude Code starts its next turn with: that
        turn's input. A task whose call's result comes after it ran in the foreground: the
        result tells the model its answer, the notification nothing more."""
        if subagent is not None:
            add_content(entry_type, detail, subagent, subagent.chat)
            return
        if entry_type == _ENTRY_SYSTEM_EVENT:
            notification = task_notification(detail)
            # Its summary is the subagent's answer: kept where assistant text may be.
            keeps = self._keeps(_ENTRY_ASSISTANT_MESSAGE)
            if notification is not None and keeps and len(self._unread_notifications) < _MAX_KNOWN_LAUNCHERS:
                call_id, summary = notification
                if call_id is None:
                    self._unread_notifications[str(len(self._unread_notifications))] = summary
                elif call_id in self._background_calls or (MAIN_SOURCE, call_id) in self._tools:
                    self._unread_notifications[call_id] = summary  # else: its result told it already
            return
        if entry_type == _ENTRY_TOOL_RESULT and self._unread_notifications:
            call_id, _ = tool_identity(detail)
            self._unread_notifications.pop(call_id or "", None)
        if entry_type == _ENTRY_ASSISTANT_MESSAGE and turn is not None:
            turn.answered = True
        add_content(entry_type, detail, self._root, turn)

    def _keeps(self, entry_type: str) -> bool:
        """Whether content of `entry_type`'s category may go on spans (a text taken from one entry
        into another's place keeps its own category's rule)."""
        rules = self._content_rules
        return rules is not None and rules.policy.mode_for(entry_type) == "full"

    def _deliver_notifications(self, turn: _SpanSlot) -> None:
        if self._unread_notifications:
            turn.notified, self._unread_notifications = self._unread_notifications, {}
            for summary in turn.notified.values():
                add_content(EntryType.USER_MESSAGE.value, {"text": summary}, turn)

    def _pass_on_notifications(self, turn: _SpanSlot) -> None:
        """A turn that ends without the model answering (Claude Code's `num_turns: 0`) leaves its
        notifications to the next turn, which calls the model with them."""
        if turn.notified and not turn.answered:
            self._unread_notifications = {**turn.notified, **self._unread_notifications}

    def _note_turn_facts(self, entry_type: Any, detail: Any, turn: _SpanSlot | None) -> None:
        """An entry's facts about the model: the init message's model (the run's request model when
        it has none), a response's model, id and finish reason (the turn's, or a subagent's chat)."""
        if entry_type == _ENTRY_SYSTEM_EVENT:
            model = init_model(detail) if self._model is None else None
            if model is not None:
                self._set_request_model(model)
            return
        facts = turn.facts if turn is not None else None
        if facts is None:
            return
        if entry_type == _ENTRY_TOOL_USE:
            facts.last_output_was_tool_call = True
            return
        if entry_type not in _RESPONSE_ENTRIES:
            return
        if entry_type == _ENTRY_ASSISTANT_MESSAGE:
            facts.last_output_was_tool_call = False
        response = response_facts(entry_type, detail)
        if response.model is None and response.response_id is None and response.finish_reason is None:
            return
        reports_turn = entry_type == _ENTRY_TOKEN_USAGE
        if facts.note_response(response, reports_turn=reports_turn) and turn is not None:
            _name_chat(turn, facts.request_model)

    def _set_request_model(self, model: str) -> None:
        """The run's model, learned from its entries: the root's and every open turn's request model."""
        self._model = model
        self._root.span.set_attribute(GEN_AI_REQUEST_MODEL, model)
        for turn in (self._turn, *self._turns_awaiting_result):
            if turn is not None and turn.facts is not None and turn.facts.request_model is None:
                turn.facts.request_model = model
                _name_chat(turn, model)

    def _learn_agent_id(self, detail: Any) -> None:
        """A stream-json subagent's real agent id (`task_started`, or its messages' `agent_id`):
        its span, named by the launching call id, gets it as `gen_ai.agent.id`."""
        identity = subagent_agent_id(detail)
        if identity is None or identity.call_id is None:
            return
        slot = self._subagents.get(SUBAGENT_SOURCE_PREFIX + identity.call_id)
        if slot is None:  # it has not spoken yet: its span gets the id as it opens
            if len(self._agent_ids_by_call) >= _MAX_KNOWN_LAUNCHERS:
                del self._agent_ids_by_call[next(iter(self._agent_ids_by_call))]
            self._agent_ids_by_call[identity.call_id] = identity.agent_id
        elif not slot.agent_id_learned:
            slot.span.set_attribute(GEN_AI_AGENT_ID, identity.agent_id)
            slot.agent_id_learned = True

    def set_session_id(self, session_id: str) -> None:
        """The harness told its session id after the run began: spans and later entries get it."""
        try:
            with self._lock:
                if session_id == self._session_id:
                    return
                self._session_id = session_id
            self._on_writer("could not set the session id", self._set_span_session_id, session_id)
            self.emitter.set_session_id(session_id)
        except Exception as exc:
            self._report("could not set the session id", exc)

    def _set_span_session_id(self, session_id: str) -> None:
        with self._lock:
            slots: list[_SpanSlot | None] = [self._root, self._turn, *self._turns_awaiting_result]
            slots += [*self._tools.values(), *self._background_calls.values(), *self._subagents.values()]
            slots += [subagent.chat for subagent in self._subagents.values()]
            for slot in slots:
                if slot is not None:
                    slot.span.set_attribute(attr.GEN_AI_CONVERSATION_ID, session_id)

    @property
    def session_id(self) -> str | None:
        return self._session_id

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
            "could not describe the agent", self._set_agent_description, system_instructions, tool_definitions
        )

    def _set_agent_description(
        self, system_instructions: str | None, tool_definitions: Sequence[Mapping[str, Any]] | None
    ) -> None:
        with self._lock:
            if system_instructions is not None:
                self._description.system_instructions = system_instructions
            if tool_definitions is not None:
                self._description.tool_definitions = tuple(tool_definitions)

    def set_provider(self, provider: str) -> None:
        """The provider (`gen_ai.provider.name`), learned after the run began (`run` learns it
        from the lines the agent prints): the root's, and every span's opened from now on."""
        self._on_writer("could not set the provider", self._set_provider, provider)

    def _set_provider(self, provider: str) -> None:
        with self._lock:
            self._provider = provider
            for slot in (self._root, self._turn, *self._turns_awaiting_result):
                if slot is not None:
                    slot.span.set_attribute(GEN_AI_PROVIDER_NAME, provider)

    def note_model(self, model: str) -> None:
        """The model the harness resolved for the session (Codex's `thread/start` answer): the
        request model where the run has none, and the response model of turns whose entries
        name none."""
        self._on_writer("could not note the model", self._note_model, model)

    def _note_model(self, model: str) -> None:
        with self._lock:
            self._harness_model = model
            if self._model is None:
                self._set_request_model(model)
            for turn in (self._turn, *self._turns_awaiting_result):
                if turn is not None and turn.facts is not None and turn.facts.response_model is None:
                    turn.facts.response_model = model

    def describe(self, key: str, value: str | int | float | bool) -> None:
        """Add an attribute to the run's root span (what only the end of the run tells)."""
        try:
            self._root.span.set_attribute(key, value)
        except Exception as exc:
            self._report("could not set a root span attribute", exc)

    # -- turns ------------------------------------------------------------------------

    def begin_turn(self) -> None:
        """Open a turn span unless one is open (the prompt may already have opened it)."""
        # Harnesses call this before every entry of a turn: only the first since the last
        # `end_turn()` is worth a deferred action (each one also cuts the writer's batch).
        if not self._turn_asked:
            self._turn_asked = True
            self._on_writer("could not start a turn span", self._begin_turn, time.time_ns())

    def _begin_turn(self, start_ns: int) -> None:
        with self._lock:
            if self._turn is None:
                self._open_turn(start_ns)

    def turn_boundary(self) -> None:
        """The harness announced a turn (Claude Code prints `init` as each of its turns begins,
        also the turns it starts itself when a background subagent ends). The open turn is
        this one if nothing announced it yet (a prompt opened it); else it waits for its
        result (results come in turn order, sometimes late) and a new turn opens."""
        self._turn_asked = True
        self._on_writer("could not start a turn span", self._turn_boundary, time.time_ns())

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
        self._turn = _SpanSlot.open(
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

    def end_turn(self, error: BaseException | None = None) -> None:
        """End the open turn (and the tool and subagent spans still open in it)."""
        self._turn_asked = False
        self._on_writer("could not end a turn span", self._end_turn, error, time.time_ns())

    def _end_turn(self, error: BaseException | None, end_ns: int) -> None:
        with self._lock:
            if self._turns_awaiting_result:
                turn: _SpanSlot | None = self._turns_awaiting_result.popleft()
            else:
                turn, self._turn = self._turn, None
                if turn is not None:
                    self._close_open_tools(end_ns)
            if turn is None:
                return
            self._pass_on_notifications(turn)
        if error is not None and turn.error_type is None:
            turn.error_type = _exception_type(error)
        self._end(turn, end_ns)

    def _on_writer(self, what: str, action: Callable[..., object], *arguments: Any) -> None:
        """Run `action(*arguments)` on the writer, in queue order; a failure is reported."""
        self.emitter.after_written(functools.partial(self._reporting, what, action, *arguments))

    def _reporting(self, what: str, action: Callable[..., object], *arguments: Any) -> None:
        try:
            action(*arguments)
        except Exception as exc:
            self._report(what, exc)

    # -- tools and subagents ----------------------------------------------------------

    def _open_tool(
        self, source: str, detail: Any, parent: _SpanSlot, start_ns: int, agent_name: str | None
    ) -> _SpanSlot:
        call_id, name = tool_identity(detail)
        if call_id is None:
            return parent  # a call without an id cannot be matched with its result
        name = name or "tool"
        arguments = _tool_input(detail)
        tool = _ToolSlot.open(
            self._tracer,
            f"execute_tool {name}",
            parent.context,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "execute_tool",
                attr.GEN_AI_TOOL_NAME: name,
                attr.GEN_AI_TOOL_CALL_ID: call_id,
                GEN_AI_TOOL_TYPE: "function" if _is_bridged_tool(detail) else "extension",
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                GEN_AI_AGENT_NAME: agent_name,
            },
            start_ns,
        )
        tool.name = name
        tool.call_id = call_id
        if self._content_rules is not None:
            tool.content = ToolContent()
            add_content(_ENTRY_TOOL_USE, detail, tool)
        if name in _SUBAGENT_TOOLS and self._subagents_named_by_call_id:
            _keep_bounded(self._launchers, call_id, tool)
        if name in _SUBAGENT_TOOLS and isinstance(arguments, Mapping):
            prompt, subagent_type = arguments.get("prompt"), arguments.get("subagent_type")
            tool.subagent_prompt = prompt if isinstance(prompt, str) else None
            tool.subagent_type = subagent_type if isinstance(subagent_type, str) else None
            if tool.subagent_type:  # the call names the agent it starts, and waits for its answer
                tool.span.set_attributes(
                    {
                        GEN_AI_TRANSFER_MODE: TRANSFER_RETURNS_TO_CALLER,
                        GEN_AI_TRANSFER_TARGET_NAME: tool.subagent_type,
                    }
                )
        self._tools[(source, call_id)] = tool
        return tool

    def _go_on_in_background(self, tool: _ToolSlot) -> None:
        with self._lock:
            _keep_bounded(self._background_calls, tool.call_id, tool)

    def _end_tool(self, tool: _ToolSlot, *, failed: bool, end_ns: int) -> None:
        with self._lock:
            subagent = self._subagents.pop(tool.subagent_source, None) if tool.subagent_source else None
            if tool.name in _SUBAGENT_TOOLS and tool.subagent_source is None:
                self._ended_launchers.append(tool)
        if subagent is not None:
            self._end(subagent, end_ns)
        if failed:
            tool.error_type = "tool_error"
        self._end(tool, end_ns)

    def _subagent_slot(self, source: str, entry_type: Any, detail: Any, start_ns: int) -> _SpanSlot | None:
        if not source.startswith(SUBAGENT_SOURCE_PREFIX):
            return None
        slot = self._subagents.get(source)
        if slot is not None:
            return slot
        agent_id = source[len(SUBAGENT_SOURCE_PREFIX) :]
        if self._subagents_named_by_call_id:
            launcher = self._launchers.get(agent_id)
        else:
            launcher = self._launcher_of(detail)
        parent = launcher or self._turn or self._root
        subagent_type = launcher.subagent_type if launcher is not None else None
        # Named by its launching call (stream-json): the real agent id, where already told.
        call_id = agent_id if self._subagents_named_by_call_id else None
        learned_id = self._agent_ids_by_call.pop(call_id, None) if call_id is not None else None
        slot = _SpanSlot.open(
            self._tracer,
            f"invoke_agent {subagent_type or 'subagent'}",
            parent.context,
            SpanKind.INTERNAL,
            {
                GEN_AI_OPERATION_NAME: "invoke_agent",
                GEN_AI_AGENT_NAME: subagent_type or agent_id,
                GEN_AI_AGENT_ID: learned_id or agent_id,
                GEN_AI_PROVIDER_NAME: self._provider,
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                SUBAGENT_CALL_ID: call_id,
            },
            start_ns,
        )
        slot.agent_name = subagent_type or agent_id
        slot.agent_id_learned = learned_id is not None or call_id is None
        # Its model calls: a `chat` span of its own, so that its tokens are counted once, on a chat
        # span (never on the main turn), and priced at its own model.
        slot.chat = _SpanSlot.open(
            self._tracer,
            chat_span_name(None),
            slot.context,
            SpanKind.CLIENT,
            {
                GEN_AI_OPERATION_NAME: CHAT_OPERATION,
                GEN_AI_PROVIDER_NAME: self._provider,
                attr.GEN_AI_CONVERSATION_ID: self._session_id,
                GEN_AI_AGENT_NAME: slot.agent_name,
            },
            start_ns,
        )
        slot.chat.facts = TurnFacts()
        if self._content_rules is not None:
            slot.content, slot.chat.content = AgentContent(), ChatContent()
            prompt = launcher.subagent_prompt if launcher is not None else None
            if (
                prompt is not None
                and entry_type != EntryType.USER_MESSAGE.value
                and self._keeps(_ENTRY_TOOL_USE)
            ):
                # Its stream does not say its prompt (stream-json): the launching call does.
                add_content(EntryType.USER_MESSAGE.value, {"text": prompt}, slot, slot.chat)
        if launcher is not None:
            launcher.subagent_source = source
        self._subagents[source] = slot
        return slot

    def _launcher_of(self, detail: dict[str, Any] | None) -> _ToolSlot | None:
        """The `Task`/`Agent` call that started this subagent: same prompt, else the oldest waiting.

        Open calls come first; then calls whose result was read before the subagent's file.
        """
        open_calls = [
            tool
            for (source, _), tool in self._tools.items()
            if source == MAIN_SOURCE and tool.name in _SUBAGENT_TOOLS and tool.subagent_source is None
        ]
        ended_calls = [tool for tool in self._ended_launchers if tool.subagent_source is None]
        prompt = _first_user_text(detail)
        for tool in (*open_calls, *ended_calls):
            if prompt is not None and tool.subagent_prompt == prompt:
                return tool
        waiting = open_calls or ended_calls
        return waiting[0] if waiting else None

    # -- usage ------------------------------------------------------------------------

    def _count_usage(
        self, base: _SpanSlot, usage: Mapping[str, int], turn: _SpanSlot | None, cost_usd: float = 0.0
    ) -> None:
        """Count usage where `base` holds it: a subagent on its chat span and itself, never on the
        main turn; anything else on `base`, on `turn` and on the root (each once)."""
        if base.chat is not None:
            self._add_usage((base.chat, base), usage, cost_usd)
        else:
            self._add_usage((base, turn), usage, cost_usd)

    def _add_usage(
        self, slots: Iterable[_SpanSlot | None], usage: Mapping[str, int], cost_usd: float
    ) -> None:
        for target in {id(s): s for s in (*slots, self._root) if s is not None}.values():
            target.usage.update(usage)
            target.cost_usd += cost_usd

    def _add_message_usage(self, slot: _SpanSlot, detail: dict[str, Any] | None) -> None:
        """Claude writes a message's usage on each of its lines: count each message once."""
        counted = message_usage(detail)
        if counted is None or counted[0] in self._usage_by_message:
            return
        message_id, usage = counted
        self._usage_by_message[message_id] = usage
        self._count_usage(slot, usage, self._turn)

    # -- ending -----------------------------------------------------------------------

    def finish(self, error: BaseException | None = None) -> None:
        """End the run: open spans, `transcript.stop`, then the root span. Never raises."""
        if self._finished:
            return
        self._finished = True
        try:
            end_time = time.time_ns()
            self._on_writer("could not end the run's spans", self._close_run_spans, error, end_time)
            root = self._root
            # The root's `transcript.span` record comes before `transcript.stop`, the run's last,
            # and the root span ends after it: `transcript.stop` is one of its events.
            token = otel_context.attach(root.context)
            try:
                self.emitter.stop(wait=False)
            finally:
                otel_context.detach(token)
            self.emitter.after_written(functools.partial(root.span.end, end_time=end_time))
        except Exception as exc:
            self._report("could not end the run's spans", exc)

    def _close_run_spans(self, error: BaseException | None, end_ns: int) -> None:
        """On the writer, where `finish()` was called: every span but the root's ends, the root gets
        its last attributes and `transcript.span` record, and what ends later keeps none."""
        try:
            while self._turns_awaiting_result or self._turn is not None:
                self._end_turn(error, end_ns)
            with self._lock:
                self._close_open_spans(end_ns)
            root = self._root
            if self._session_usage:
                root.usage = Counter(self._session_usage)
            if error is not None:
                root.error_type = _exception_type(error)
                self._record_exception(root.span, error)
            self._complete_when_written(root, end_ns, ends=False)
        finally:
            self._spans_closed = True

    def _record_exception(self, span: Span, error: BaseException) -> None:
        """The span's `exception` event, redacted like every entry: messages and stack traces
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
            stack_trace += f"{_exception_type(error)}: {message}\n"
        span.add_event(
            "exception",
            {
                EXCEPTION_TYPE: _exception_type(error),
                EXCEPTION_MESSAGE: pipeline.redactor.text(message),
                EXCEPTION_STACKTRACE: pipeline.redactor.text(stack_trace),
            },
        )

    def _close_open_tools(self, end_ns: int) -> None:
        """At a turn's end: end the main thread's tool spans still open (their result never came).
        Subagents and calls that go on in the background may outlive the turn; caller holds the lock."""
        for key in [key for key in self._tools if key[0] == MAIN_SOURCE]:
            self._end_missing(self._tools.pop(key), end_ns)

    def _close_open_spans(self, end_ns: int) -> None:
        """At the run's end: end every tool and subagent span still open; caller holds the lock."""
        tools, self._tools = list(self._tools.values()), {}
        subagents, self._subagents = list(self._subagents.values()), {}
        background, self._background_calls = list(self._background_calls.values()), {}
        for slot in subagents:
            self._end(slot, end_ns)
        for tool in [*tools, *background]:
            self._end_missing(tool, end_ns)

    def _end_missing(self, tool: _ToolSlot, end_ns: int) -> None:
        tool.span.set_attribute(TOOL_RESULT_MISSING, True)
        self._end(tool, end_ns)

    def _end(self, slot: _SpanSlot, end_ns: int) -> None:
        """End the span at `end_ns` (a subagent's chat span first), once what was emitted inside
        it is written."""
        if slot.chat is not None:
            self._complete_when_written(slot.chat, end_ns, ends=True)
        self._complete_when_written(slot, end_ns, ends=True)

    def _complete_when_written(self, slot: _SpanSlot, end_time: int, *, ends: bool) -> None:
        # Decided and read now, in queue order as the span ends: later entries may still
        # count usage on the root before the span's events are written.
        keeps_record = not self._spans_closed and self.emitter.keeps_span_records()
        failed = slot.error_type is not None
        attributes = slot.facts.final_attributes(failed) if slot.facts is not None else {}
        content: dict[str, Any] = {}
        if slot.content is not None and self._content_rules is not None:
            reasons = attributes.get(GEN_AI_RESPONSE_FINISH_REASONS)
            description = self._description if slot.described else None
            content = span_content(
                slot.content, self._content_rules, reasons[0] if reasons else None, description
            )
        final = _FinalState(
            dict(slot.usage), slot.cost_usd, slot.error_type, keeps_record, attributes, content
        )
        self.emitter.after_written(functools.partial(self._complete, slot, end_time, final, ends))

    def _complete(self, slot: _SpanSlot, end_time: int, final: _FinalState, ends: bool) -> None:
        """On the writer: the span's last attributes and status, its `transcript.span` record
        (queued where the span ended), then its end. Off the agent's thread: it costs ~10 µs."""
        span = slot.span
        try:
            if final.attributes:
                span.set_attributes(final.attributes)
            settings = self.emitter.pipeline.genai_content
            if final.content and settings.on_spans:
                span.set_attributes(final.content)
            if final.usage:  # tokens are counted once: on chat spans; the others say the totals
                span.set_attributes(final.usage if slot.facts is not None else run_totals(final.usage))
            if final.content and settings.in_events and slot.facts is not None:
                event = operation_details(
                    getattr(span, "attributes", None), {**final.attributes, **final.usage}, final.content
                )
                self.emitter.pipeline.emit_genai_event(OPERATION_DETAILS_EVENT, event, slot.context, end_time)
            if final.cost_usd:
                span.set_attribute(USAGE_COST_USD, final.cost_usd)
                if slot.facts is not None:  # a turn: the model calls the cost is for
                    span.set_attribute(GEN_AI_USAGE_COST, final.cost_usd)
            if final.error_type is not None:
                span.set_attribute(ERROR_TYPE, final.error_type)
                span.set_status(Status(StatusCode.ERROR, final.error_type))
            fields = span_fields(span, end_time, final.error_type) if final.keeps_record else None
            if fields is not None:
                self.emitter.span_ended(fields, slot.context, end_time)
            # Last: it reads the attributes set above. Only with a MeterProvider; never raises.
            record_span_end(span, end_time, final.usage, final.error_type)
        except Exception as exc:
            self._report("could not complete a span", exc)
        finally:
            if ends:
                span.end(end_time=end_time)

    def _report(self, what: str, exc: Exception) -> None:
        _logger.debug("transcript-otel: %s", what, exc_info=exc)
        self.emitter.error(f"{what}: {type(exc).__name__}: {exc}")


# -- reading details (tolerant of any shape) ---------------------------------------------


def _sdk_message(detail: Any) -> Mapping[str, Any] | None:
    if isinstance(detail, Mapping):
        entry = detail.get("sdk_entry")
        if isinstance(entry, Mapping):
            message = entry.get("message")
            if isinstance(message, Mapping):
                return message
    return None


def _first_user_text(detail: Any) -> str | None:
    message = _sdk_message(detail)
    content = message.get("content") if message is not None else None
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        for block in content:
            if (
                isinstance(block, Mapping)
                and block.get("type") == "text"
                and isinstance(block.get("text"), str)
            ):
                text: str = block["text"]
                return text
    return None


def _tool_input(detail: Any) -> Any:
    if isinstance(detail, Mapping):
        entry = detail.get("sdk_entry")
        if isinstance(entry, Mapping):
            return entry.get("input")
        notification = detail.get("notification")
        if isinstance(notification, Mapping):
            return notification.get("arguments")
    return None


def _name_chat(turn: _SpanSlot, model: str | None) -> None:
    """The turn's model is known: its request model and its span's name `chat {model}`."""
    if model:
        turn.span.set_attribute(GEN_AI_REQUEST_MODEL, model)
        turn.span.update_name(chat_span_name(model))


def _keep_bounded(calls: dict[str, _ToolSlot], call_id: str, tool: _ToolSlot) -> None:
    """`calls[call_id] = tool`, forgetting the oldest call beyond `_MAX_KNOWN_LAUNCHERS`."""
    if len(calls) >= _MAX_KNOWN_LAUNCHERS:
        del calls[next(iter(calls))]
    calls[call_id] = tool


def _says(detail: Any, flag: str) -> bool:
    """Whether a mapping set `flag` in an entry's detail."""
    return isinstance(detail, Mapping) and detail.get(flag) is True


# System events a harness prints as each of its turns begins: Claude Code's `system/init`,
# `codex exec`'s `turn.started`.
_TURN_STARTS: Final = frozenset({"init", "turn_started"})


def starts_new_turn(entry: MappedEntry) -> bool:
    """A main system event that begins a turn (`_TURN_STARTS`): a `turn_boundary()`."""
    detail = entry.detail
    return (
        entry.source == MAIN_SOURCE
        and entry.entry_type == _ENTRY_SYSTEM_EVENT
        and isinstance(detail, Mapping)
        and detail.get("subtype") in _TURN_STARTS
    )


def _is_bridged_tool(detail: Any) -> bool:
    """A WINK tool served to the agent (Codex `item/tool/call`), rather than the agent's own."""
    if isinstance(detail, Mapping):
        notification = detail.get("notification")
        return isinstance(notification, Mapping) and "callId" in notification and "item" not in notification
    return False


def _error_type(detail: Any) -> str:
    """`error.type` of an `error` entry: the exception's type, Claude's result subtype, Codex's
    `codexErrorInfo`."""
    if isinstance(detail, Mapping):
        exception = detail.get("exception")
        if isinstance(exception, Mapping) and isinstance(exception.get("type"), str):
            return str(exception["type"])
        entry = detail.get("sdk_entry")
        if isinstance(entry, Mapping) and entry.get("type") == "result":
            return result_error_type(entry)
        event = detail.get("event")
        if isinstance(event, Mapping) and event.get("type") == "turn.failed":
            return "turn_failed"  # `codex exec --json` says no more of why
        notification = detail.get("notification")
        turn = notification.get("turn") if isinstance(notification, Mapping) else None
        error = turn.get("error") if isinstance(turn, Mapping) else None
        if isinstance(error, Mapping):
            info = error.get("codexErrorInfo")
            if isinstance(info, str) and info:
                return info
            if isinstance(info, Mapping) and info:
                return str(next(iter(info)))
    return "_OTHER"


def message_of(error: BaseException) -> str:
    """`str(error)`, or a stand-in where that raises."""
    try:
        return str(error)
    except Exception:
        return f"<{type(error).__name__} whose str() raised>"


def _exception_type(error: BaseException) -> str:
    cls = type(error)
    return cls.__qualname__ if cls.__module__ == "builtins" else f"{cls.__module__}.{cls.__qualname__}"
