"""The state an `AgentRun` shares between its parts, declared once.

Each part of `AgentRun` (a mixin in a module of `span_tree/`) derives from `RunState`, where the
attributes they read and write are declared with their types (`AgentRun.__init__` sets
them), and which runs their deferred actions on the writer and reports what fails there.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections import deque
from collections.abc import Callable
from typing import Any

from opentelemetry import trace

from transcript_otel.capture.emitter import TranscriptEmitter
from transcript_otel.genai.attributes import RunningUsage, SessionTotals
from transcript_otel.genai.rules import ContentRules
from transcript_otel.instrumentation.span_tree.span_content import AgentDescription
from transcript_otel.instrumentation.span_tree.span_slot import SpanSlot, ToolSlot

# One logger for the whole run, whichever of its parts reports: the module of `AgentRun`'s.
_logger = logging.getLogger("transcript_otel.instrumentation.span_tree.agent_run")
_logger.addHandler(logging.NullHandler())


class RunState:
    """What every part of an `AgentRun` shares: the run's state, declared here once and set by
    `AgentRun.__init__`, the deferred actions it runs on the writer, and its failure reports."""

    adapter: str
    emitter: TranscriptEmitter
    # The harness's own entries (`record()` of what it emitted with a `raw` string) keep
    # their detail as `native_detail(detail)` returns it: a `DetailInRaw` where `raw`
    # holds it all. Only where the writer gets `raw`.
    native_detail: Callable[[Any], Any] | None
    _tracer: trace.Tracer
    _provider: str | None
    _model: str | None
    _session_id: str | None
    _turns_start_with_user_message: bool
    # Off where the harness reports each turn's usage itself (Claude's result message).
    _count_message_usage: bool
    # Claude's stream-json names a subagent's messages after the `Task` call that launched
    # it (`subagent:{call id}`): its parent is then known exactly, never guessed.
    _subagents_named_by_call_id: bool
    _launchers: dict[str, ToolSlot]
    _lock: threading.RLock
    _turn: SpanSlot | None
    # Turns the harness began anew while their result was still to come (Claude Code prints
    # a turn's `result` after the turns a background subagent's end starts): results end
    # them first, oldest first.
    _turns_awaiting_result: deque[SpanSlot]
    _turn_count: int
    _tools: dict[tuple[str, str], ToolSlot]
    # A script still running, by source (Codex code mode): the tools called meanwhile are its own.
    _running_scripts: dict[str, ToolSlot]
    # Calls whose result said they go on in the background (a background subagent): they
    # end when the harness says the work ended, or with the run.
    _background_calls: dict[str, ToolSlot]
    # The session's own token totals, where the harness tells them: the root span reports
    # them rather than the sum of what the run recorded.
    _session_totals: SessionTotals
    # What the root of a run this one took a session over from had counted (its process was
    # killed: that root was never exported); this root reports it too.
    _carried_root: dict[str, int]
    _running_usage: RunningUsage
    _subagents: dict[str, SpanSlot]
    # Subagent launchers whose result came first: transcript files are read by polling,
    # so a subagent's file may be read after its `Task` call's result.
    _ended_launchers: deque[ToolSlot]
    _usage_by_message: dict[str, dict[str, int]]
    # Real agent ids learned (stream-json's `task_started`) before their subagent spoke.
    _agent_ids_by_call: dict[str, str]
    # What the harness told the model before the conversation (`describe_agent()`).
    _description: AgentDescription
    # Background tasks' notifications no model call has read yet (content only).
    _unread_notifications: dict[str, str]
    # The model the harness resolved (`note_model()`): a turn's response model until one answers.
    _harness_model: str | None
    _finished: bool
    # Agent side: `begin_turn()` was called since the last `end_turn()`.
    _turn_asked: bool
    # Writer side: the run's end was processed; spans ending later keep no record.
    _spans_closed: bool
    _mapper: object | None
    _root: SpanSlot
    # Content on spans, where the settings and the policy let it (None: none is kept).
    _content_rules: ContentRules | None

    def _on_writer(self, what: str, action: Callable[..., object], *arguments: Any) -> None:
        """Run `action(*arguments)` on the writer, in queue order; a failure is reported."""
        self.emitter.after_written(functools.partial(self._reporting, what, action, *arguments))

    def _reporting(self, what: str, action: Callable[..., object], *arguments: Any) -> None:
        try:
            action(*arguments)
        except Exception as exc:
            self._report(what, exc)

    def _report(self, what: str, exc: Exception) -> None:
        _logger.debug("transcript-otel: %s", what, exc_info=exc)
        self.emitter.error(f"{what}: {type(exc).__name__}: {exc}")
