"""The recording side of `transcript-otel run`: the command's output lines mapped with a line
adapter (`mappings.lines`) and recorded as entries through the run's `AgentRun`.

`LineRecorder` opens a turn before main content and ends it at a turn's usage, names the
run's session and provider as the adapter learns them, and keeps capture at most
`MAX_LAG_ENTRIES` ahead of the writer (`LineRecorder.feed_lines` stops where the backlog
has no room; `LineRecorder.wait_for_room` waits for it). An adapter whose lines say when they
were printed (`timestamp_ns`) times its entries so, never before the run began nor before what
it recorded already.
`PrivateKeyBlocks` joins a private key printed across lines, so that redaction sees it whole.
`LineCounts` is the account of the lines the run did not record, reported at its end
(`LineRecorder.end`).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from transcript_otel.instrumentation.span_tree.agent_run import AgentRun
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.gemini_command import PROVIDER as GEMINI_PROVIDER
from transcript_otel.mappings.lines import (
    AutoAdapter,
    LineAdapter,
    capabilities_of,
    effective_name,
    resume_after,
)

LINE_ADAPTER_ATTRIBUTE: Final = "transcript.line_adapter"  # on the root span: which adapter read the output
# A writer that wrote nothing for this long is stuck: the run stops waiting for it.
WRITER_STALL_S: Final = 5.0
# How far capture may get ahead of the writer, in entries (besides half the backlog's bound):
# what is left to write once capture's time is up, a fraction of a second.
MAX_LAG_ENTRIES: Final = 4096


@dataclass
class LineCounts:
    """The command's output lines: how many there were and how many were not recorded."""

    lines: int = 0
    not_recorded: int = 0
    not_recorded_bytes: int = 0

    def summary(self) -> str | None:
        """One sentence for stderr and the run's `transcript.error`; None when all were recorded."""
        if not self.not_recorded:
            return None
        return (
            f"{self.not_recorded} of {self.lines} output lines ({self.not_recorded_bytes} bytes) were "
            "not recorded in the transcript: capture could not keep up (the output itself passed "
            "through whole)"
        )


class PrivateKeyBlocks:
    """Joins the lines of a private key (PEM, PGP) printed across lines into one, so that
    redaction, which reads one entry at a time, sees the whole block: a line that begins
    a block is held with the lines after it up to its END line (or `MAX_BLOCK_BYTES`)."""

    def __init__(self) -> None:
        self.held: list[bytes] = []
        self._size = 0

    def take(self, line: bytes) -> list[bytes]:
        """The lines to map now: `line`, none while a block is held, or the whole block."""
        if not self.held:
            if line.find(_BEGIN) >= 0 and _PRIVATE_KEY in line and _END not in line:
                self.held, self._size = [line], len(line)
                return []
            return [line]
        self.held.append(line)
        self._size += len(line)
        return self.flush() if _END in line or self._size >= MAX_BLOCK_BYTES else []

    def flush(self) -> list[bytes]:
        held, self.held, self._size = self.held, [], 0
        return [b"".join(held)] if held else []


# Looked for with `find`: `in` first tries the operand as an integer (a byte value) and
# formats the TypeError it gets, on every line.
_BEGIN: Final = b"-----BEGIN "
_PRIVATE_KEY: Final = b"PRIVATE KEY"
_END: Final = b"-----END "
MAX_BLOCK_BYTES: Final = 64 << 10
_TEXT_ADAPTERS: Final = frozenset({"plain", "rtf1"})  # JSON adapters' lines hold a block whole
# The provider (`gen_ai.provider.name`) of the agents whose output a line adapter reads.
ADAPTER_PROVIDERS: Final = {
    "claude-stream-json": "anthropic",
    "codex-json": "openai",
    "gemini-stream-json": GEMINI_PROVIDER,
    "gemini-json": GEMINI_PROVIDER,
}


class LineRecorder:
    """Maps lines of the command's output and records the entries, turns included."""

    def __init__(self, run: AgentRun, adapter: LineAdapter, *, provider_known: bool = False) -> None:
        self.run = run
        self.adapter = adapter
        self._blocks = PrivateKeyBlocks()
        # Whether the run's provider is settled: known from the command line, or learned
        # from the adapter (`auto`'s once it chose one).
        self._provider_settled = provider_known
        self._totals_of: Callable[[str], bytes | Mapping[str, Any] | None] | None = None
        # The adapter that reads the lines (`auto`'s choice once made, fed directly) and what
        # it is: whether its lines may hold a private key across lines, whether it reports
        # turns, whether it may name a session. Looked up for each line only until `auto` chose.
        self._reader: LineAdapter = adapter
        self._decided = False
        self._text = True
        self._turns = False
        self._names_sessions = True
        self._timed = False  # its lines say when they were printed (`timestamp_ns`)
        # No entry is timed before this: the run's start, what was recorded since (the prompt, a
        # line that said no time; a replayed stream's old times are not the run's).
        self._not_before_ns = time.time_ns()
        self._decide()

    def _decide(self) -> None:
        adapter = self.adapter
        chosen = adapter.chosen if isinstance(adapter, AutoAdapter) else adapter
        self._decided = chosen is not None
        self._reader = adapter if chosen is None else chosen
        self._text = effective_name(adapter) in _TEXT_ADAPTERS
        self._turns = capabilities_of(adapter).turns
        # The text adapters name no session (`auto` asks its choice, so it may until it chose).
        self._names_sessions = chosen is None or hasattr(chosen, "session_id")
        self._timed = hasattr(chosen, "timestamp_ns")

    def go_on_from(self, totals_of: Callable[[str], bytes | Mapping[str, Any] | None]) -> None:
        """The command resumes a session its output names (`codex exec resume --last` says which
        only there): once it does, `totals_of(its id)` is where this run's count begins."""
        self._totals_of = totals_of

    def feed(self, line: bytes) -> None:
        if not self._decided:
            self._decide()
        lines = self._blocks.take(line) if self._text else [line]
        for one in lines:
            self._map(one)

    def feed_lines(self, lines: Sequence[bytes], start: int, stop: int) -> int:
        """`feed()` `lines[start:stop]` in order while the backlog has room (`wait_for_room`:
        past its bound, entries would be dropped); the index of the first line not taken."""
        # The Backlog itself, not the pipeline's properties: its `limit` is read at every line.
        bound = self.run.emitter.pipeline.agent_side.backlog
        backlog = bound.items
        blocks = self._blocks
        for index in range(start, stop):
            if len(backlog) > min(MAX_LAG_ENTRIES, bound.limit // 2):
                return index
            line = lines[index]
            if not self._decided or (self._text and (line.find(_BEGIN) >= 0 or blocks.held)):
                self.feed(line)
            else:
                self._map(line)
        return stop

    def record(self, entries: Sequence[MappedEntry]) -> None:
        """Entries known before the command prints anything (its prompt, from its command line)."""
        self._record(entries)
        self._not_before_ns = time.time_ns()

    def wait_for_room(self, timeout_s: float) -> bool:
        """Wait, up to `timeout_s`, until the backlog is at most half full and capture at most
        `MAX_LAG_ENTRIES` ahead of the writer: whether it is."""
        return self.run.emitter.pipeline.wait_for_room(timeout_s, MAX_LAG_ENTRIES)

    @property
    def closed(self) -> bool:
        """The pipeline is shut down: nothing recorded from now on would be written."""
        return self.run.emitter.pipeline.closed

    def wait_until_written(self, stop: Callable[[], bool]) -> bool:
        """Wait until everything recorded so far is written, for as long as the writer makes
        progress (`WRITER_STALL_S`) and `stop()` is false: the JSONL mirror, a local file, is
        completed however long the backlog, where a shutdown's deadline would leave what is
        queued unwritten and uncounted. False when it stopped waiting."""
        return self.run.emitter.pipeline.flush_while_writing(WRITER_STALL_S, stop)

    def end(self, error: BaseException | None, counts: LineCounts | None = None) -> None:
        """The adapter's last entries, what could not be recorded, and the end of the run."""
        for block in self._blocks.flush():  # a key cut short: redaction takes it to the end
            self._map(block)
        self._guarded("map the end of the output", self.adapter.flush)
        summary = None if counts is None else counts.summary()
        if counts is not None and summary is not None:
            self.run.emitter.error(
                summary,
                output_lines=counts.lines,
                unrecorded_lines=counts.not_recorded,
                unrecorded_bytes=counts.not_recorded_bytes,
            )
        self.run.describe(LINE_ADAPTER_ATTRIBUTE, effective_name(self.adapter))
        if error is not None:  # in the transcript too, not only on the span: `summary` reads it
            self.run.record_failure(error)
        self.run.finish(error)

    def _map(self, line: bytes) -> None:
        try:
            entries = self._reader.feed(line.decode("utf-8", "backslashreplace"))
            if not self._decided:  # `auto` chose by this line: whether its lines are timed
                self._decide()
            self._record(entries, getattr(self._reader, "timestamp_ns", None) if self._timed else None)
        except Exception as exc:  # adapters never raise; a bug here must not stop the capture
            self.run.emitter.error(f"could not map a line: {type(exc).__name__}: {exc}")
        if self._totals_of is not None:
            self._go_on_from_resumed(self._totals_of)

    def _go_on_from_resumed(self, totals_of: Callable[[str], bytes | Mapping[str, Any] | None]) -> None:
        """Before the line after the one that named the session: its totals before this run."""
        session_id = getattr(self.adapter, "session_id", None)
        if not isinstance(session_id, str) or not session_id:
            return
        self._totals_of = None
        try:
            totals = totals_of(session_id)
        except Exception as exc:  # the run is recorded still, with the session's totals
            self.run.emitter.error(
                f"could not read the resumed session's totals: {type(exc).__name__}: {exc}"
            )
            return
        if totals is not None:
            resume_after(self.adapter, totals)

    def _guarded(self, what: str, mapping: Callable[[], Sequence[MappedEntry]]) -> None:
        try:
            self._record(mapping())
        except Exception as exc:  # adapters never raise; a bug here must not stop the capture
            self.run.emitter.error(f"could not {what}: {type(exc).__name__}: {exc}")

    def _record(self, entries: Sequence[MappedEntry], at_ns: int | None = None) -> None:
        """Record the entries (at `at_ns`, else now), opening a turn before main content and
        ending it at a turn's usage; first the session the adapter named and the provider it
        tells, if new."""
        run = self.run
        if self._names_sessions:
            session_id = getattr(self.adapter, "session_id", None)
            if isinstance(session_id, str) and session_id:
                run.set_session_id(session_id)
        if not self._provider_settled:
            self._learn_provider()
        if not self._decided:
            self._decide()
        if at_ns is not None:
            at_ns = self._not_before_ns = max(at_ns, self._not_before_ns)
        run.record_in_turns(entries, at_ns, reports_end_turns=self._turns)
        if at_ns is None and self._timed and entries:
            self._not_before_ns = time.time_ns()

    def _learn_provider(self) -> None:
        """The run's provider from the adapter that reads the output (`auto`'s choice, once it
        made one): the agents that print `claude-stream-json` and `codex-json` are known."""
        if isinstance(self.adapter, AutoAdapter) and self.adapter.chosen is None:
            return
        self._provider_settled = True
        provider = ADAPTER_PROVIDERS.get(effective_name(self.adapter))
        if provider is not None:
            self.run.set_provider(provider)
