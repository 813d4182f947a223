"""Every pipeline of the process: shut down together at exit, reset in a forked child, told
of failed exports.

`shutdown_all` drains every backlog before it releases any sink or provider, against one
deadline; it runs at exit, registered when the first writer starts. A forked child inherits
the parent's pipelines but not their writer threads: they start afresh, with empty backlogs.
"""

from __future__ import annotations

import atexit
import functools
import logging
import os
import threading
import time
import weakref
from collections.abc import Callable, Mapping
from typing import NamedTuple, Protocol

from transcript_otel.capture.shared import logger
from transcript_otel.otel.export_drops import run_before, set_failed_export_handler


class ShutdownAction(NamedTuple):
    """What a shutdown runs once the backlogs are drained: a sink's shutdown, or a callback."""

    name: str
    run: Callable[[], None]
    essential: bool  # the mirror: worth a warning when cut short (the OTLP side reports its own losses)


class RegisteredPipeline(Protocol):
    """What the registry asks of a pipeline (`TranscriptPipeline` is the one there is)."""

    shutdown_timeout_s: float

    def drain_and_stop(self, deadline: float) -> float: ...

    def release_actions(self, deadline: float) -> list[ShutdownAction]: ...

    def after_fork_in_child(self) -> None: ...

    def report_failed_export(self, lost: Mapping[str, int], reason: str) -> None: ...


def run_all_before(actions: list[ShutdownAction], deadline: float) -> None:
    """Run `actions` concurrently on daemon threads; stop waiting at `deadline`."""
    workers = []
    for action in actions:
        target = _logged(action.name, functools.partial(run_before, deadline, action.run))
        worker = threading.Thread(target=target, name="transcript-otel-shutdown", daemon=True)
        worker.start()
        workers.append((action, worker))
    for action, worker in workers:
        worker.join(max(0.0, deadline - time.monotonic()))
        if worker.is_alive():
            level = logging.WARNING if action.essential else logging.DEBUG
            logger.log(level, "transcript-otel: %s did not finish before the shutdown deadline", action.name)


def _logged(name: str, action: Callable[[], None]) -> Callable[[], None]:
    def run() -> None:
        try:
            action()
        except Exception as exc:
            logger.warning("transcript-otel: %s failed at shutdown: %r", name, exc)

    return run


# Every pipeline made in this process, held weakly: one nothing else holds has nothing to drain.
PIPELINES: weakref.WeakSet[RegisteredPipeline] = weakref.WeakSet()


def _reset_pipelines_after_fork() -> None:
    for pipeline in list(PIPELINES):
        pipeline.after_fork_in_child()


def shutdown_all(timeout_s: float | None = None) -> None:
    """Shut every pipeline down against one deadline (the longest shutdown timeout).

    All backlogs are drained before any sink or provider is released, so no
    pipeline writes into an OTel provider another pipeline has shut down.
    """
    pipelines = list(PIPELINES)
    if not pipelines:
        return
    timeout = timeout_s if timeout_s is not None else max(p.shutdown_timeout_s for p in pipelines)
    deadline = time.monotonic() + timeout
    for pipeline in pipelines:  # one that gave up entries has its stops written past the deadline
        deadline = max(deadline, pipeline.drain_and_stop(deadline))
    actions = [action for pipeline in pipelines for action in pipeline.release_actions(deadline)]
    run_all_before(actions, deadline)


_exit_handler_registered = False


def register_exit_handler() -> None:
    """Run `shutdown_all` at exit; called as each writer starts, registers it once."""
    # Registered when the first writer starts, so it runs before the exit handlers
    # of OTel providers created earlier (atexit is last-in, first-out) and the final
    # records still reach them.
    global _exit_handler_registered
    if not _exit_handler_registered:
        _exit_handler_registered = True
        atexit.register(shutdown_all)


os.register_at_fork(after_in_child=_reset_pipelines_after_fork)


def _report_failed_export(lost: Mapping[str, int], reason: str) -> None:
    for pipeline in list(PIPELINES):
        pipeline.report_failed_export(lost, reason)


set_failed_export_handler(_report_failed_export)
