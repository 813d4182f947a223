"""`TranscriptEmitter`: the one call instrumentors make per transcript entry.

`emit()` runs on the agent's thread, so it does the least possible: a timestamp,
the current OTel context, and one `deque.append` of a tuple, with no lock. Numbering,
formatting, validation, encoding and I/O happen on the pipeline's writer thread, in queue
order. `emit()` never raises and never blocks; `detail` is kept by reference, so it must not
be mutated after `emit()`.
"""

from __future__ import annotations

import functools
import os
import time
import weakref
from collections.abc import Callable
from types import TracebackType
from typing import Any, Self

from opentelemetry.context import Context, get_current

from transcript_otel import environment_variables as env
from transcript_otel.capture.defaults import get_pipeline
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.capture.shared import WAKE_THRESHOLD
from transcript_otel.model.entries import (
    MAIN_SOURCE,
    DetailInRaw,
    RawJson,
    TranscriptEvent,
    TranscriptSummary,
)
from transcript_otel.records.queued import EntryPlacement, QueuedItem
from transcript_otel.records.run import RunInfo
from transcript_otel.records.serialize import safe_text

_ENTRY = TranscriptEvent.ENTRY


class TranscriptEmitter:
    """Emit the transcript of one run (one `evaluate()`): thread- and asyncio-safe.

    Sequence numbers start at 1 and increase by one per `source` with no gaps, in the
    order the entries were emitted (the writer numbers them).
    `emission=False` (or `TRANSCRIPT_OTEL_EMISSION=false`) turns the emitter into
    a no-op; `emit_raw=False` (or `TRANSCRIPT_OTEL_EMIT_RAW=false`) drops `raw`.
    """

    __slots__ = (
        "__weakref__",
        "_agent",
        "_backlog",
        "_emit_raw",
        "_enabled",
        "_pipeline",
        "_queue",
        "_run",
        "_started",
        "_stopped",
        "_writer",
    )

    def __init__(
        self,
        *,
        prompt_name: str,
        adapter: str,
        session_id: str | None = None,
        emit_raw: bool | None = None,
        emission: bool | None = None,
        pipeline: TranscriptPipeline | None = None,
        run_id: str | None = None,
        started_ns: int | None = None,
    ) -> None:
        """`run_id` and `started_ns` are for a run recorded after the fact (an import): its own
        stable id, and when it began; by default a new id and now."""
        self._enabled = env.env_flag(env.TRANSCRIPT_OTEL_EMISSION, True) if emission is None else emission
        self._emit_raw = env.env_flag(env.TRANSCRIPT_OTEL_EMIT_RAW, True) if emit_raw is None else emit_raw
        identity = {"prompt_name": prompt_name, "adapter": adapter, "session_id": session_id}
        problems: list[str] = []
        for field, value in identity.items():
            if value is not None:
                identity[field], problem = safe_text(value)
                if problem:
                    problems.append(f"{field}: {problem}")
        self._run = RunInfo(
            prompt_name=str(identity["prompt_name"]),
            adapter=str(identity["adapter"]),
            session_id=identity["session_id"],
            started_ns=time.time_ns() if started_ns is None else started_ns,
        )
        if run_id is not None:
            self._run.run_id = run_id
        self._pipeline = pipeline if pipeline is not None else get_pipeline()
        # The parts the hot path reads (the backlog's `limit`, the writer's `acting`), held here:
        # an attribute each, no call.
        agent = self._agent = self._pipeline.agent_side
        self._backlog, self._queue, self._writer = agent.backlog, agent.backlog.items, agent.writer
        self._started = self._stopped = False
        if self._enabled:
            self._agent.register_run(self._run)
            if problems:
                self._report("; ".join(problems))
        _EMITTERS.add(self)

    # -- identity ----------------------------------------------------------------------

    @property
    def enabled(self) -> bool:
        return self._enabled

    @property
    def emits_raw(self) -> bool:
        """Whether entries keep their `raw` (`emit_raw`)."""
        return self._emit_raw

    @property
    def pipeline(self) -> TranscriptPipeline:
        """Where this run's records go (its redactor and content policy apply to them)."""
        return self._pipeline

    @property
    def run_id(self) -> str:
        return self._run.run_id

    @property
    def jsonl_path(self) -> str | None:
        """Where the JSONL mirror writes this run (None without a mirror, or with capture off).

        Named at the first ask (see `JsonlMirror.local_path`), which may look at the directory."""
        return self._pipeline.local_path(self._run) if self._enabled else None

    @property
    def dropped_entries(self) -> int:
        """Entries dropped because the backlog was full (each reported by an error record)."""
        return self._run.dropped

    # -- the hot path ------------------------------------------------------------------

    def emit(
        self,
        entry_type: str,
        *,
        source: str = MAIN_SOURCE,
        detail: dict[str, Any] | DetailInRaw | None = None,
        raw: str | RawJson | None = None,
        context: Context | EntryPlacement | None = None,
        timestamp_ns: int | None = None,
    ) -> None:
        """Emit one transcript entry. Thread-safe; never raises; never waits for I/O.

        `context` is the OTel context the entry belongs to (its span); by default the
        current one; an `EntryPlacement` decides it later, on the writer, in queue order.
        `raw` may be a `RawJson`, encoded later on the writer thread; `detail` a `DetailInRaw`,
        taken out of `raw` there.
        `timestamp_ns` is when the entry happened, if that was earlier than now; it is
        raised to the time of the source's previous entry if earlier (invariant 7).
        """
        if not self._enabled:
            return
        try:
            # Emitted by a deferred action on the writer (`map_on_writer`): written in its place,
            # within the bound that admitted the action, and before `transcript.stop` if the
            # action was queued before `stop()`.
            in_action = self._writer.acting and self._writer.acts_here()
            if self._stopped and (self._run.stop_reached or not in_action):
                self._report(f"a {entry_type!r} entry emitted after stop() was refused: the run has ended")
                return
            queue = self._queue
            if not in_action and len(queue) >= self._backlog.limit:
                self._run.note_drop()
                self._agent.wake_and_sample()  # the backlog's measure may have changed too
                return
            item = (
                _ENTRY,
                self._run,
                entry_type,
                source,
                time.time_ns() if timestamp_ns is None else timestamp_ns,
                detail,
                raw if self._emit_raw else None,
                get_current() if context is None else context,
            )
            if in_action:
                self._agent.submit_next(item)
                return
            # One append, atomic under the GIL: queue order is the order of the sequence
            # numbers the writer gives, for entries of one source from any thread or task.
            queue.append(item)
            if len(queue) >= WAKE_THRESHOLD:
                self._agent.wake_and_sample()
        except Exception as exc:  # non-blocking invariant: report, skip the entry
            self._report_exception("emit failed", exc)

    # -- lifecycle ---------------------------------------------------------------------

    def start(self, timestamp_ns: int | None = None) -> None:
        """Record `transcript.start` (at `timestamp_ns`, default now). Idempotent; never raises."""
        if self._enabled and self._stopped:
            self._report(
                "start() after stop() does nothing: an emitter records one run; make another for the next"
            )
        elif self._enabled and not self._started:
            self._started = True
            self._submit(TranscriptEvent.START, None, timestamp_ns=timestamp_ns)

    def stop(
        self, timeout_s: float | None = None, *, wait: bool = True, timestamp_ns: int | None = None
    ) -> TranscriptSummary:
        """Record `transcript.stop` with the counts, and wait until the run is on disk.

        The wait is bounded by `timeout_s` (default: the pipeline's shutdown
        timeout); `wait=False` (what instrumentors use: the agent must not wait)
        only queues the record. Returns the summary of what the writer has processed.
        `timestamp_ns`: when the run ended, for a run recorded after the fact.
        """
        if self._enabled and not self._stopped:
            self._stopped = True
            if self._writer.acting and self._writer.acts_here():
                self._run.stop_reached = True  # the record goes next: nothing after it
            self._submit(TranscriptEvent.STOP, None, timestamp_ns=timestamp_ns)
            if not wait:
                return self._run.summary()
            try:
                self._agent.flush(timeout_s)
            except Exception as exc:
                self._report_exception("flush at stop failed", exc)
        return self._run.summary()

    def flush(self, timeout_s: float | None = None) -> bool:
        """Wait (bounded) until everything emitted so far is written by every sink.

        Call it before ending a span you own, so the entries emitted inside it
        become its span events. Returns False on timeout.
        """
        try:
            return self._agent.flush(timeout_s)
        except Exception as exc:
            self._report_exception("flush failed", exc)
            return False

    def after_written(self, action: Callable[[], None]) -> None:
        """Run `action` on the writer once everything emitted so far is written.

        Ending a span this way lets the entries emitted inside it land as its span
        events without the agent waiting for the writer. Never raises.
        """
        try:
            self._agent.after_pending(action)
        except Exception as exc:
            self._report_exception("could not defer an action", exc)

    def map_on_writer(self, action: Callable[[], None], native: object) -> None:
        """`after_written(action)` for an action that maps `native` (a harness's event) and
        records its entries there: queued like an entry, within the backlog's bound and
        measured for it (`native` stays in memory until the writer runs it); past the bound
        it is dropped and counted as one dropped entry. Never raises."""
        try:
            if self._stopped:
                self._report("an event queued for mapping after stop() was refused: the run has ended")
                return
            if len(self._queue) >= self._backlog.limit:
                self._run.note_drop()
                self._agent.wake_and_sample()
                return
            self._agent.defer_mapping(action, native)
        except Exception as exc:
            self._report_exception("could not defer an action", exc)

    def set_session_id(self, session_id: str) -> None:
        """Set the run's session id once the harness reveals it (Claude tells it in its stream).

        Applied by the writer in queue order: every record emitted from now on carries it,
        records emitted before keep what they had. Never raises.
        """
        try:
            text, problem = safe_text(session_id)
            self.after_written(functools.partial(setattr, self._run, "session_id", text))
            if problem:
                self._report(f"session_id: {problem}")
        except Exception as exc:
            self._report_exception("could not set the session id", exc)

    def keeps_span_records(self) -> bool:
        """Whether a span ending now may get a `transcript.span` record: within the backlog's
        bound, like entries (a stuck sink must not make them pile up); past it the record is
        counted as dropped, and the transcript says so. Spans end on the writer in queue
        order, after `stop()` was called: the caller knows whether its run's
        `transcript.stop` came before the span's end (then it does not ask)."""
        if not self._enabled:
            return False
        if len(self._queue) < self._backlog.limit:
            return True
        self._run.note_span_record_drop()
        return False

    def span_ended(self, fields: dict[str, Any], context: Context, end_time_ns: int) -> None:
        """Keep a `transcript.span` record of a span of this run (`context` is the span's own),
        timestamped when the span ended.

        Called from an `after_written()` action, it takes that action's place in the
        transcript, ahead of what was emitted since. Check `keeps_span_records()` first.
        """
        try:
            self._agent.submit_next(self._item(TranscriptEvent.SPAN, fields, context, end_time_ns))
        except Exception as exc:
            self._report_exception("could not record a span", exc)

    def error(self, message: str, **fields: Any) -> None:
        """Record a non-fatal `transcript.error` (WARNING) for this run."""
        if self._enabled:
            self._report(message, **fields)

    def _report_exception(self, what: str, exc: Exception) -> None:
        try:
            message = f"{what}: {type(exc).__name__}: {exc}"
        except Exception:  # an exception whose str() raises
            message = f"{what}: {type(exc).__name__}"
        self._report(message)

    def _report(self, message: str, **fields: Any) -> None:
        try:
            self._submit(TranscriptEvent.ERROR, {"error": message, **fields})
        except Exception:
            self._writer.internal_errors += 1

    def _submit(
        self,
        event: TranscriptEvent,
        extra: dict[str, Any] | None,
        context: Context | None = None,
        *,
        timestamp_ns: int | None = None,
    ) -> None:
        self._agent.submit(self._item(event, extra, context, timestamp_ns))

    def _item(
        self,
        event: TranscriptEvent,
        extra: dict[str, Any] | None,
        context: Context | None,
        timestamp_ns: int | None = None,
    ) -> QueuedItem:
        return (
            event,
            self._run,
            None,
            None,
            time.time_ns() if timestamp_ns is None else timestamp_ns,
            extra,
            None,
            get_current() if context is None else context,
        )

    def _after_fork_in_child(self) -> None:
        """Continue as a new run in the child: own numbers, own file.

        The parent keeps writing its run; sharing it would put two processes'
        sequence numbers into one transcript. The child's `transcript.start` waits for
        its first record: a worker that records nothing (a forked pool's, most of them)
        leaves no file behind.
        """
        old = self._run
        self._run = RunInfo(
            prompt_name=old.prompt_name,
            adapter=old.adapter,
            session_id=old.session_id,
            started_ns=time.time_ns(),
            forked_from_run_id=old.run_id,
        )
        if self._enabled:
            self._agent.register_run(self._run)
            if self._started and not self._stopped:
                self._run.held_start = self._item(
                    TranscriptEvent.START, {"forked_from_run_id": old.run_id}, None
                )

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.stop()


_EMITTERS: weakref.WeakSet[TranscriptEmitter] = weakref.WeakSet()


def _renew_runs_after_fork() -> None:
    for emitter in list(_EMITTERS):
        emitter._after_fork_in_child()


# Registered after the pipeline's own hook (imported first), which resets the backlog.
os.register_at_fork(after_in_child=_renew_runs_after_fork)
