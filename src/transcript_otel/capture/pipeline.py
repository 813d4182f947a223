"""`TranscriptPipeline`: the backlog between the agent's thread and the sinks, and its writer.

The agent's thread only appends a tuple to a deque (see `TranscriptEmitter.emit`). One daemon
thread, the writer, does everything else: formatting, validation, JSON encoding, file I/O and
OTel calls. A pipeline is made of parts it holds, each owning its own state:

- `Backlog` (`backlog.py`): the queue and its bound in bytes, kept as a limit in entries;
- `SinkWriting` (`sink_writing.py`): the sinks, and what a failing one costs;
- `BackgroundWriter` (`writer.py`): the thread that prepares the records and hands them to
  the sinks, pausing for the agent (`GilPacing`, `gil_pacing.py`: when it lets go of the GIL);
- `AgentSide` (`agent_side.py`): what the agent's thread and other producers call; an
  emitter holds it.

This module puts the parts together and shuts a pipeline down; `registry.py` does it for
every pipeline of the process at exit.
"""

from __future__ import annotations

import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING, Any, Final

from transcript_otel.capture.agent_side import AgentSide
from transcript_otel.capture.backlog import DEFAULT_MAX_BACKLOG_BYTES, Backlog
from transcript_otel.capture.gil_pacing import GilPacing
from transcript_otel.capture.registry import PIPELINES, ShutdownAction, run_all_before
from transcript_otel.capture.shared import DeferredAction, FlushRequest, logger
from transcript_otel.capture.sink_writing import SinkWriting
from transcript_otel.capture.writer import DEFAULT_FLUSH_INTERVAL_S, BackgroundWriter
from transcript_otel.records.content import ContentPolicy, GenAiContent
from transcript_otel.records.queued import QueuedItem
from transcript_otel.records.redaction import Redactor
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks.base import Sink

if TYPE_CHECKING:
    from opentelemetry.context import Context

DEFAULT_SHUTDOWN_TIMEOUT_S: Final = 5.0
# Past the shutdown deadline, with the entries left given up: how long the writer may take to
# write the runs' stops and the counts of what they lost (a few records, unless a sink hangs).
STOP_GRACE_S: Final = 1.0


class TranscriptPipeline:
    """A byte-bounded backlog drained into `sinks` by one background thread (or by its caller)."""

    def __init__(
        self,
        sinks: Iterable[Sink],
        *,
        max_backlog_bytes: int = DEFAULT_MAX_BACKLOG_BYTES,
        flush_interval_s: float = DEFAULT_FLUSH_INTERVAL_S,
        shutdown_timeout_s: float = DEFAULT_SHUTDOWN_TIMEOUT_S,
        redactor: Redactor | None = None,
        content_policy: ContentPolicy | None = None,
        genai_content: GenAiContent | None = None,
        drained_by_caller: bool = False,
    ) -> None:
        """`drained_by_caller`: no writer thread; the one thread that queues records writes
        them by calling `drain_here()` (an import, which has nothing else to do meanwhile: no
        GIL shared between two threads, no backlog to measure, since the caller's own pace
        bounds it), and nothing is ever dropped."""
        # Secrets go before any sink sees an entry (`redaction.py`); on by default. The writer
        # reads this and `content_policy` here as it prepares each record (they may be replaced
        # while it runs). Plain attributes, not the writer's behind a property: the span wiring
        # reads them on the agent's thread, where a property would be a call.
        self.redactor = Redactor() if redactor is None else redactor
        # How much content every sink gets (`content.py`); everything by default.
        self.content_policy = ContentPolicy() if content_policy is None else content_policy
        # Where GenAI content goes beside the transcript (spans, events), read by the span
        # wiring; only what `content_policy` keeps `full` goes anywhere.
        self.genai_content = GenAiContent() if genai_content is None else genai_content
        pacing = GilPacing()
        self._pacing = pacing
        self._backlog = Backlog(max_backlog_bytes, unbounded=drained_by_caller)
        self._sink_writing = SinkWriting(sinks, pacing, flush_each_batch=not drained_by_caller)
        self._writer = BackgroundWriter(
            self._backlog,
            self._sink_writing,
            pacing,
            self,
            flush_interval_s=flush_interval_s,
            drained_by_caller=drained_by_caller,
        )
        # Internal: what the agent's thread calls; each emitter holds it.
        self.agent_side = AgentSide(
            self._backlog,
            self._writer,
            shutdown_timeout_s=shutdown_timeout_s,
            drained_by_caller=drained_by_caller,
        )
        self._on_shutdown: list[Callable[[], None]] = []
        PIPELINES.add(self)

    # -- what the parts own, read (and a few set) here -----------------------------------

    @property
    def sinks(self) -> list[Sink]:
        return self._sink_writing.sinks

    @property
    def sink_failures(self) -> Counter[str]:
        """Failures of each sink, by its name (each also a `transcript.error` for the others)."""
        return self._sink_writing.failures

    @property
    def internal_errors(self) -> int:
        """Failures of our own (a record that could not be built, a deferred action that raised)."""
        return self._writer.internal_errors

    @property
    def backlog(self) -> deque[QueuedItem | FlushRequest | DeferredAction]:
        """The queue between the producers and the writer (`len()` of it is cheap)."""
        return self._backlog.items

    @property
    def backlog_limit(self) -> int:
        """The backlog's bound in entries, following what an entry holds (`Backlog`)."""
        return self._backlog.limit

    @backlog_limit.setter
    def backlog_limit(self, limit: int) -> None:
        self._backlog.limit = limit

    @property
    def max_backlog_bytes(self) -> int:
        return self._backlog.max_bytes

    @property
    def flush_interval_s(self) -> float:
        return self._writer.flush_interval_s

    @property
    def shutdown_timeout_s(self) -> float:
        """How long a flush waits by default, and a shutdown in all."""
        return self.agent_side.shutdown_timeout_s

    @shutdown_timeout_s.setter
    def shutdown_timeout_s(self, timeout_s: float) -> None:
        self.agent_side.shutdown_timeout_s = timeout_s

    @property
    def yield_every_s(self) -> float:
        """How often the writer lets an agent's thread have the GIL; a process with no agent
        thread in it (`transcript-otel run`, an import) sets it longer, or infinite."""
        return self._pacing.every_s

    @yield_every_s.setter
    def yield_every_s(self, every_s: float) -> None:
        self._pacing.every_s = every_s

    @property
    def closed(self) -> bool:
        """Shut down: what is queued from now on is not written."""
        return self._writer.closed

    # -- what producers call: the agent side's, for callers that hold the pipeline ---------

    def submit(self, item: QueuedItem) -> None:
        """Queue a lifecycle record (`AgentSide.submit`)."""
        self.agent_side.submit(item)

    def flush(self, timeout_s: float | None = None, *, deep: bool = False) -> bool:
        """Wait until every record queued before this call is written (`AgentSide.flush`)."""
        return self.agent_side.flush(timeout_s, deep=deep)

    def flush_while_writing(self, stall_s: float, stop: Callable[[], bool], look_s: float = 0.1) -> bool:
        """`flush()` bounded by the writer's progress (`AgentSide.flush_while_writing`)."""
        return self.agent_side.flush_while_writing(stall_s, stop, look_s)

    def wait_for_room(self, timeout_s: float, at_most: int | None = None) -> bool:
        """Wait until the backlog is at most half full (`AgentSide.wait_for_room`)."""
        return self.agent_side.wait_for_room(timeout_s, at_most)

    def after_pending(self, action: Callable[[], None]) -> None:
        """Run `action` on the writer once everything queued before it is written
        (`AgentSide.after_pending`)."""
        self.agent_side.after_pending(action)

    def report_failed_export(self, lost: Mapping[str, int], reason: str) -> None:
        """Say in each run's transcript that an export of its records failed (`AgentSide`)."""
        self.agent_side.report_failed_export(lost, reason)

    def ensure_running(self) -> None:
        """Start the writer thread, unless it runs already or the pipeline is closed."""
        self._writer.ensure_running()

    def drain_here(self) -> None:
        """Write everything queued, on this thread (`BackgroundWriter.drain_here`)."""
        self._writer.drain_here()

    def local_path(self, run: RunInfo) -> str | None:
        """The local file `run` is written to (the JSONL mirror's), if a sink writes one."""
        return self._sink_writing.local_path(run)

    def emit_genai_event(
        self, name: str, attributes: Mapping[str, Any], context: Context, timestamp_ns: int
    ) -> None:
        """One OTel event through every OTel log sink, on the writer (`SinkWriting.emit_genai_event`)."""
        self._sink_writing.emit_genai_event(name, attributes, context, timestamp_ns)

    # -- shutting down -------------------------------------------------------------------

    def add_shutdown_callback(self, callback: Callable[[], None]) -> None:
        """Run `callback()` after the final drain at shutdown, bounded by its deadline."""
        self._on_shutdown.append(callback)

    def adopt_shutdown_callbacks(self, other: TranscriptPipeline) -> None:
        """Take over `other`'s shutdown callbacks (this pipeline replaces it as the default)."""
        self._on_shutdown.extend(other._on_shutdown)
        other._on_shutdown.clear()

    def shutdown(self, timeout_s: float | None = None) -> None:
        """Drain everything, stop the writer and release the sinks; bounded in time."""
        timeout = self.shutdown_timeout_s if timeout_s is None else timeout_s
        deadline = self.drain_and_stop(time.monotonic() + timeout)
        run_all_before(self.release_actions(deadline), deadline)

    def drain_and_stop(self, deadline: float) -> float:
        """Drain the backlog and stop the writer, completing the local mirror first; the
        deadline the sinks' release has (later by `STOP_GRACE_S` when entries were given up).

        Past 80% of the time left, the writer stops feeding the OTel sinks and only
        finishes the mirror, which is fast: a dead or slow backend must not cost
        the local copy. At the deadline the entries left are given up, never the runs'
        stops: each is written with the count of its run's entries lost (`dropped_entries`).
        """
        if self._writer.closed:
            return deadline
        remaining = max(0.0, deadline - time.monotonic())
        given_up = 0
        if not self.flush(remaining * 0.8):
            self._sink_writing.mirror_only = True
            if not self.flush(max(0.0, deadline - time.monotonic())):
                given_up = self._backlog.give_up_entries()
                if self._backlog.records_left():  # the stops and the counts, past the deadline
                    deadline = time.monotonic() + STOP_GRACE_S
                    self.flush(STOP_GRACE_S)
        self._backlog.close()  # anything emitted from now on is dropped and counted
        self._writer.close(deadline)
        left = self._backlog.records_left()
        if given_up:
            logger.warning(
                "transcript-otel: %d transcript entries were not written before the shutdown deadline; "
                "each run's transcript.stop counts its own (dropped_entries)",
                given_up,
            )
        if left:
            logger.warning(
                "transcript-otel: %d queued records were not written before the shutdown deadline", left
            )
        return deadline

    def release_actions(self, deadline: float) -> list[ShutdownAction]:
        """What releases the sinks and providers: once (a second shutdown has nothing to do)."""
        if self._sink_writing.released:
            return []
        actions = self._sink_writing.release_actions(max(0.0, deadline - time.monotonic()))
        actions += [
            ShutdownAction(getattr(callback, "__qualname__", repr(callback)), callback, essential=False)
            for callback in self._on_shutdown
        ]
        return actions

    def after_fork_in_child(self) -> None:
        """The child inherits the parent's backlog and files but not its thread."""
        self._backlog.items.clear()
        self._writer.after_fork_in_child()
        self._sink_writing.after_fork_in_child()
