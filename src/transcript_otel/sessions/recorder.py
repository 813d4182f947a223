"""One session's lines recorded as a run: the turns they open and end, their entries, at their times.

`SessionRecorder` owns the run's `AgentRun` (the span tree a live run gets) and applies each
line in the order `timeline` gives: a prompt of the main agent ends the open turn and opens
the next, a line that ends a turn ends it, every entry is recorded at the line's time
(never earlier than the line before it). Used for a whole file at once (`importer`), and for
lines as they are appended (`watch`).
"""

from __future__ import annotations

import hashlib
import os
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple, Protocol

from opentelemetry import context as otel_context
from opentelemetry import trace

from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.genai.attributes import usage_attributes
from transcript_otel.instrumentation.cli_logs import COST_STATE_MARKER
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.mappings._entry import COMPACTION, MappedEntry
from transcript_otel.mappings.claude_session import ClaudeSessionMapper
from transcript_otel.mappings.codex_rollout import CodexRolloutMapper
from transcript_otel.mappings.gemini_session import gemini_lines
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.model.entries import MAIN_SOURCE, EntryType
from transcript_otel.reading.text import entry_text
from transcript_otel.sessions.files import SessionFiles, SessionKind
from transcript_otel.sessions.forks import claude_fork
from transcript_otel.sessions.opencode import OpenCodeLines, database_timeline
from transcript_otel.sessions.recorded_spans import PlainResource, recording_tracer
from transcript_otel.sessions.timeline import MapLine, TimedLine, never_raising

# Run ids of recorded sessions: uuid5 of this namespace and `{kind}:{session id}[:{offset}]`.
_RUN_NAMESPACE: Final = uuid.UUID("8f3a7f4e-2b1c-5d6e-9a0b-1c2d3e4f5a6b")
_TRACER_NAME: Final = "transcript_otel.sessions"
# What the model's answer to a turn's request is made of, a failed request included.
_ANSWERS: Final = frozenset(
    {
        EntryType.ASSISTANT_MESSAGE.value,
        EntryType.THINKING.value,
        EntryType.TOOL_USE.value,
        EntryType.ERROR.value,
    }
)


class SessionFailedError(Exception):
    """The session's last turn ended in an error: its run's root span fails as a live run's
    does when the harness raises."""


def _answers(entry: MappedEntry) -> bool:
    """The model answered the turn's request: it said something, called a tool or failed, or
    (a request to compact) summarized the conversation, which the terminal UI logs without the
    call's usage: a prompt after `/compact` is a request of its own."""
    return entry.entry_type in _ANSWERS or (
        entry.entry_type == EntryType.SYSTEM_EVENT.value and entry.detail.get("subtype") == COMPACTION
    )


# What the main agent's lines that go on with a turn hold: its model's calls and their usage,
# and its tools' results.
_IN_A_TURN: Final = _ANSWERS | {EntryType.TOKEN_USAGE.value, EntryType.TOOL_RESULT.value}


def _in_a_turn(said: SessionLine) -> bool:
    """A line of the main agent that tells of a turn: one opens or ends, or its model or tools
    act in it (not the harness's own notes, which may come between turns)."""
    return said.opens_turn or said.ends_turn or any(entry.entry_type in _IN_A_TURN for entry in said.entries)


def _counts_tokens(said: SessionLine) -> bool:
    """A line holds a model call's tokens: an answer, or a usage report that counts some."""
    return any(
        _answers(entry)
        or (entry.entry_type == EntryType.TOKEN_USAGE.value and usage_attributes(entry.detail))
        for entry in said.entries
    )


class SessionMapping(Protocol):
    """A mapper of one session's lines that says what it counted, and goes on from what
    another one counted (a session's runs, one after the other: each counts its own)."""

    def __call__(self, line: bytes, source: str) -> SessionLine: ...

    def counted(self) -> dict[str, Any]:
        """What the lines mapped so far counted (JSON), to go on from."""
        ...

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        """Count only what comes after what `counted` says was; False where it cannot."""
        ...

    def counted_messages(self) -> list[str]:
        """The messages whose usage was counted before (`go_on`): a run counts them no more."""
        ...


class Harness(NamedTuple):
    """How the runs of one CLI's sessions are named, and how its lines are read."""

    adapter: str
    prompt_name: str
    provider: str
    # A mapper of the lines of the session whose main file is the path; given the session's
    # last running-total report before the first line it will see (a session taken up
    # part-way), it counts from there.
    mapper: Callable[[bytes | None, Path], SessionMapping]
    # What marks a line of running totals (Claude's `cost-state`); None: the CLI writes none.
    report_marker: bytes | None
    # Prompts queued while the model was busy are sent together (Claude Code): a prompt while
    # the open turn's model has not answered yet joins that turn. (Codex starts each turn itself.)
    prompts_join_an_unanswered_turn: bool
    # A session's lines, mapped, in time order, where they are not its files' (OpenCode: its rows).
    lines: Callable[[SessionFiles, MapLine], Iterator[TimedLine]] | None = None

    def line_mapper(self, last_report: bytes | None, main_file: Path) -> MapLine:
        """A mapper of one session's lines, which never raises (`never_raising`)."""
        return never_raising(self.mapper(last_report, main_file))


class _CodexLines:
    """A mapper per file: the root thread's, and each subagent's (its entries under its source)."""

    def __init__(self, _last_report: bytes | None, _main_file: Path) -> None:
        self._mappers: dict[str, CodexRolloutMapper] = {}

    def __call__(self, line: bytes, source: str) -> SessionLine:
        mapper = self._mappers.get(source)
        if mapper is None:
            mapper = self._mappers[source] = CodexRolloutMapper()
        said = mapper.line(line)
        if source == MAIN_SOURCE:
            return said
        return said._replace(entries=[entry._replace(source=source) for entry in said.entries])

    def counted(self) -> dict[str, Any]:
        return {source: mapper.counted() for source, mapper in self._mappers.items()}

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        mappers = {source: CodexRolloutMapper() for source in counted}
        if not all(
            isinstance(said, Mapping) and mappers[source].go_on(said) for source, said in counted.items()
        ):
            return False
        self._mappers.update(mappers)
        return True

    def counted_messages(self) -> list[str]:
        return []  # each response's usage is a line of its own


class _ClaudeLines:
    """One mapper for the session's files (a message's usage is counted once across them)."""

    def __init__(self, last_report: bytes | None, main_file: Path) -> None:
        self._mapper = ClaudeSessionMapper()
        self._main_file = main_file
        self._went_on: list[str] | None = None  # the messages counted before, after `go_on`
        self._unread = last_report is None
        if last_report is not None:  # taken up part-way: past a fork's copy, if any
            self._mapper.resume_after(last_report)

    def __call__(self, line: bytes, source: str) -> SessionLine:
        if self._unread and source == MAIN_SOURCE and b'"uuid"' in line:
            # A fork's copy is written at once, after two lines of its own: read at its first
            # line, not when the file was first seen, the file holds what tells the fork.
            self._unread = False
            fork = claude_fork(self._main_file)
            if fork is not None:
                self._mapper.fork_of(fork.parent_session_id, fork.copied)
                if fork.carried_cost_state is not None and self._went_on is None:
                    self._mapper.resume_after(fork.carried_cost_state)
        return self._mapper.line(line, source)

    def counted(self) -> dict[str, Any]:
        return self._mapper.counted()

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        if not self._mapper.go_on(counted):
            return False
        self._went_on = self._mapper.counted()["messages"]
        return True

    def counted_messages(self) -> list[str]:
        return self._went_on or []


HARNESSES: Final = {
    SessionKind.CLAUDE_CODE: Harness(
        "claude_code_session", "claude-code", "anthropic", _ClaudeLines, COST_STATE_MARKER, True
    ),
    SessionKind.CODEX: Harness("codex_session", "codex", "openai", _CodexLines, None, False),
    SessionKind.GEMINI: Harness("gemini_session", "gemini", "gcp.gemini", gemini_lines, None, False),
    SessionKind.OPENCODE: Harness(
        "opencode_session", "opencode", "opencode", OpenCodeLines, None, True, database_timeline
    ),
}


def run_id_of(kind: SessionKind, session_id: str, part: str | None = None) -> str:
    """The run id of a session's record: the same every time. `part`: which part of the session
    a run records, when not all of it (`watch`: from where it took the session up)."""
    name = f"{kind.value}:{session_id}" + (f":{part}" if part else "")
    return uuid.uuid5(_RUN_NAMESPACE, name).hex


class Unexported(NamedTuple):
    """What a run that never ended (its watch was killed) had counted on its root span and on
    its open `chat` spans, never exported, and the time of its last line."""

    root: Mapping[str, int]
    chat: Mapping[str, int]
    at_ns: int


class WentBefore(NamedTuple):
    """What the session's run before this one left (`watch`: a run ended on idle, a watch
    stopped): a turn still open (its model answered or not), the main agent's model, the
    messages whose usage it counted (their last lines may come in this run), and, where it
    never ended, what its spans had counted and never exported."""

    turn_open: bool = False
    turn_answered: bool = False
    model: str | None = None
    messages: Collection[str] = ()
    unexported: Unexported | None = None


# A session's first run (an import's, a watch's first).
_NOTHING_BEFORE: Final = WentBefore()


class SessionRecorder:
    """The run of one session, fed its lines in time order; never raises into its caller."""

    def __init__(
        self,
        harness: Harness,
        *,
        session_id: str,
        run_id: str,
        started_ns: int,
        pipeline: TranscriptPipeline | None = None,
        tracer: trace.Tracer | None = None,
        went_before: WentBefore = _NOTHING_BEFORE,
    ) -> None:
        """`tracer`: the live tracer provider's (`watch`); by default one whose spans record
        under ids derived from `run_id`, exported by nothing (an import: `replay` sends them).
        `went_before`: the session's run before this one left a turn open (it goes on here, at
        the first line of the main agent that is no prompt) and counted those messages."""
        # A run of its own: no span current in the calling code is its parent.
        token = otel_context.attach(otel_context.Context())
        try:
            self.run = AgentRun(
                tracer or derived_id_tracer(run_id, harness.prompt_name),
                prompt_name=harness.prompt_name,
                adapter=harness.adapter,
                session_id=session_id,
                provider=harness.provider,
                policy=TurnPolicy.SESSION_LOG,
                run_id=run_id,
                started_ns=started_ns,
                pipeline=pipeline,
            )
        finally:
            otel_context.detach(token)
        self.run.count_no_more(went_before.messages)
        if went_before.model:
            self.run.note_model(went_before.model, MAIN_SOURCE)
        self.last_ns = started_ns
        self._prompts_join = harness.prompts_join_an_unanswered_turn
        self._turn_open = False
        self._turn_answered = False  # the open turn's model answered (or failed) since it opened
        self._before = went_before  # its open turn goes on at this run's first line in it
        self._model = went_before.model  # the main agent's, as the lines name it
        # The main agent's last error since its last turn opened, unless its model answered after.
        self._failure: str | None = None
        if went_before.unexported is not None:
            self._take_over(went_before.unexported, started_ns)

    def _take_over(self, unexported: Unexported, at: int) -> None:
        """The run before never ended: this one reports what its root and open `chat` spans had
        counted, the latter on a `chat` span of this run: the turn left open, which goes on here,
        else one of its own, ended at once."""
        if unexported.chat:
            self.run.begin_turn(at_ns=at)
            if self._before.turn_open:
                self._turn_open, self._turn_answered = True, self._before.turn_answered
                self._before = self._before._replace(turn_open=False)
        self.run.take_over(unexported.root, unexported.chat)
        if unexported.chat and not self._turn_open:
            self.run.end_turn(at_ns=at)

    def goes_on_as(self) -> WentBefore:
        """What this run leaves the session's next one, after the lines applied (asked before
        `finish`, which ends the open turn)."""
        if self._before.turn_open:  # not gone on with yet
            return self._before._replace(messages=(), model=self._model, unexported=None)
        return WentBefore(self._turn_open, self._turn_answered, self._model)

    def apply(self, timed: TimedLine) -> None:
        run, said = self.run, timed.said
        self.last_ns = at = max(self.last_ns, timed.at_ns)
        main = timed.source == MAIN_SOURCE
        if self._before.turn_open and main and _in_a_turn(said):
            self._go_on_with_turn(said, at)
        if said.provider and main:
            run.set_provider(said.provider)
        if said.model:
            run.note_model(said.model, timed.source)
            self._model = said.model if main else self._model
        if said.opens_turn and main and not self._joins_open_turn():
            if self._turn_open:
                run.end_turn(at_ns=at)
            run.begin_turn(at_ns=at)
            self._turn_open, self._turn_answered = True, False
            self._failure = None
        if said.failure:
            run.emitter.error(said.failure)
        if said.repaired:  # its text kept, and the loss said where the run is read
            run.emitter.error(f"a line of {timed.source}: {said.repaired}, the rest of it read as written")
        entries = said.entries
        for entry in entries:
            run.record(
                entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw, timestamp_ns=at
            )
        if self._prompts_join and main and entries and not self._turn_answered:
            self._turn_answered = any(map(_answers, entries))
        for entry in entries if main else ():
            if entry.entry_type == EntryType.ERROR.value:
                self._failure = entry_text(entry.entry_type, entry.detail)
            elif _answers(entry):
                self._failure = None  # answered after all (a request retried)
        if said.ends_turn and self._turn_open and main:
            run.end_turn(at_ns=at)
            self._turn_open = False

    def _go_on_with_turn(self, said: SessionLine, at: int) -> None:
        """The turn the run before left open goes on here (its model's calls on a chat span of
        this run), unless this run's first line of it opens a turn of its own, or ends it with
        no tokens of its own (a line that ends the turn holding its tokens, as a cost line after
        a compaction does, counts them on that turn's chat span)."""
        answered, self._before = self._before.turn_answered, self._before._replace(turn_open=False)
        if not said.opens_turn and (not said.ends_turn or _counts_tokens(said)):
            self.run.begin_turn(at_ns=at)
            self._turn_open, self._turn_answered = True, answered

    def _joins_open_turn(self) -> bool:
        """Prompts queued while the model was busy (a person's, subagents' notifications) go to
        it together, in one request: one turn, not one each with no model call in it."""
        return self._prompts_join and self._turn_open and not self._turn_answered

    def finish(self) -> None:
        """End the open turn and the run at the time of the last line."""
        if self._turn_open:
            self.run.end_turn(at_ns=self.last_ns)
            self._turn_open = False
        failed = SessionFailedError(self._failure) if self._failure is not None else None
        self.run.finish(failed, at_ns=self.last_ns)


def derived_id_tracer(run_id: str, prompt_name: str) -> trace.Tracer:
    """A tracer whose spans record (for their `transcript.span` records) under ids derived from
    `run_id`, in the order they open: the same spans at every import. No SDK needed."""
    # As a live run names its service: OTEL_SERVICE_NAME, else the run's name. (A record keeps
    # the resource's service.name only: what `Resource.create` would add is not read.)
    service = os.environ.get("OTEL_SERVICE_NAME") or prompt_name
    return recording_tracer(_DerivedIds(run_id), PlainResource({_SERVICE_NAME: service}), _TRACER_NAME)


_SERVICE_NAME: Final = "service.name"


class _DerivedIds:
    """The ids of a run's spans, derived from its run id and the order they open."""

    def __init__(self, run_id: str) -> None:
        self._run_id = run_id
        self._count = 0

    def generate_span_id(self) -> int:
        self._count += 1
        return _derived(f"{self._run_id}:span:{self._count}", 8)

    def generate_trace_id(self) -> int:
        return _derived(f"{self._run_id}:trace", 16)


def _derived(identity: str, size: int) -> int:
    return int.from_bytes(hashlib.sha256(identity.encode()).digest()[:size], "big") or 1
