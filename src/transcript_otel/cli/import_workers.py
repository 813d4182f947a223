"""How `transcript-otel import` imports sessions: in its own process, or several at once in worker
processes, each outcome given in the order of the sessions.

A worker imports into a directory of its own and the parent moves each run into the mirror in
order: two copies of one session (one run id) never write one file at once, and the later
replaces the earlier, as in one process. A worker sends back a few numbers and texts, and the
warnings its import gave, for the parent to say. Ctrl-C stops the imports under way and starts
no other; so do SIGTERM (systemd's, `kill`'s) and SIGHUP (a closed terminal), within
`stopped_by_signals`: the workers stopped, the files half-written removed.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import signal
import sys
import warnings
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Final, NamedTuple

from transcript_otel.sessions.files import SessionFiles

if TYPE_CHECKING:
    from concurrent.futures import Future
    from multiprocessing.context import BaseContext

# Imported before workers are forked: what a worker's first import would load (no SDK: an
# import records its spans without it, and a core install has none).
_WHAT_AN_IMPORT_LOADS: Final = ("transcript_otel.sessions.importer",)
_WORKER_DIED: Final = "not imported: a worker process died (killed? out of memory?), stopping the others"
# What stops an import as Ctrl-C does: systemd stops a service with SIGTERM, a closed terminal
# sends SIGHUP. The parent stops its workers with SIGINT (`_interrupt_workers`).
_STOPS: Final = tuple(
    getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)
)


class StoppedBySignalError(KeyboardInterrupt):
    """SIGTERM or SIGHUP came: what runs stops as on Ctrl-C, cleaning up on its way out."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


@contextlib.contextmanager
def stopped_by_signals() -> Iterator[None]:
    """SIGTERM and SIGHUP raise `StoppedBySignalError` in the block, as SIGINT raises
    KeyboardInterrupt: the imports under way stop, their workers and half-written files with
    them (by default either signal ended this process at once and left both behind). Once: the
    clean-up it starts is not cut short by another."""
    stopping = False

    def stop(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        if not stopping:
            stopping = True
            raise StoppedBySignalError(signum)

    previous = {stop_signal: signal.signal(stop_signal, stop) for stop_signal in _STOPS[1:]}
    try:
        yield
    finally:
        for stop_signal, handler in previous.items():
            signal.signal(stop_signal, handler)


def usable_cpus() -> int:
    """The CPUs this process may run on: its affinity where the system has one, else all."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


class _Warned(NamedTuple):
    """A warning an import gave, for the parent to show as its own (the CLI's format and limit)."""

    message: str
    category: type[Warning]
    filename: str
    lineno: int


@dataclass(frozen=True, slots=True)
class Outcome:
    """What is said of one session's import: a few numbers and texts, since a worker sends it."""

    warned: tuple[_Warned, ...]
    error: str = ""  # why the session was not imported, when `run` is None
    run: Path | None = None  # the run's file (a worker's: in its own directory until `_moved`)
    entries: int = 0
    subagents: int = 0


def imports(sessions: Sequence[SessionFiles], directory: Path, jobs: int) -> Generator[Outcome, None, None]:
    """Each session's import, in the order of `sessions`: in this process with one job, else in
    `jobs` worker processes, each outcome given as soon as those before it are."""
    if jobs == 1:  # no worker to start
        for session in sessions:
            yield _import(session, directory)
        return
    # Imported here: every command loads this module, few start a pool.
    import shutil
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    # Each session is imported in a directory of its own, its run moved into the mirror here in
    # order: two copies of a session (one run id) must not write one file at once, and the
    # later replaces the earlier, as with one job. What an interrupted worker left goes with it.
    directory.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".importing-", dir=directory))
    pool = ProcessPoolExecutor(jobs, mp_context=_worker_start(), initializer=_start_worker)
    try:
        with _stops_blocked():
            futures = [
                pool.submit(_import_in_worker, session, scratch / str(number))
                for number, session in enumerate(sessions)
            ]
        for future in futures:
            yield _moved(_outcome_of(future), directory)
    except BaseException:  # Ctrl-C, SIGTERM, or the caller stopped reading: the imports under way stop too
        _interrupt_workers()
        raise
    finally:
        pool.shutdown(cancel_futures=True)
        shutil.rmtree(scratch, ignore_errors=True)


def _worker_start() -> BaseContext:
    """How workers start: forked from this process on Linux, with what an import needs imported
    once here, while it has no other thread (the pool forks them all at its first task, before
    its own thread starts); else spawned, each importing it all again (a share of a large
    import's CPU, benchmarks/NOTES.md). A fork copies this process's state: nothing of an import's
    is set up here, and the registry gives a forked child fresh pipelines."""
    import importlib
    import multiprocessing
    import threading

    # Linux only: macOS's own libraries may run threads a fork would break (spawn is its default).
    if not sys.platform.startswith("linux") or threading.active_count() > 1:
        return multiprocessing.get_context("spawn")  # a fork would copy other threads' locks
    for module in _WHAT_AN_IMPORT_LOADS:
        importlib.import_module(module)
    return multiprocessing.get_context("fork")


@contextlib.contextmanager
def _stops_blocked() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP held while the pool starts its workers, which inherit the
    signal mask (and, forked, this process's handlers): one meanwhile waits in each until its
    handler is in place (`_start_worker`) instead of ending its start-up in a traceback, or
    leaving it to run on; this process takes it at the end of the block."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, set(_STOPS))
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _outcome_of(future: Future[Outcome]) -> Outcome:
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:  # said for each session the dead worker took down with the pool
        return Outcome((), error=_WORKER_DIED)
    except Exception as exc:  # a failure the import does not expect: said, the others go on
        return Outcome((), error=f"not imported: {type(exc).__name__}: {exc}")


def _moved(outcome: Outcome, directory: Path) -> Outcome:
    """`outcome` with its run moved from where a worker imported it into the mirror `directory`."""
    if outcome.run is None:
        return outcome
    final = directory / outcome.run.name
    try:
        os.replace(outcome.run, final)
    except OSError as exc:
        return dataclasses.replace(outcome, run=None, error=str(exc))
    return dataclasses.replace(outcome, run=final)


def _interrupt_workers() -> None:
    """SIGINT to the workers, which a Ctrl-C sent to this process alone did not reach."""
    import multiprocessing

    for child in multiprocessing.active_children():
        if child.pid is not None:
            with contextlib.suppress(ProcessLookupError):  # ended meanwhile
                os.kill(child.pid, signal.SIGINT)


def _import(session: SessionFiles, directory: Path) -> Outcome:
    """One session imported, in this process or a worker; its warnings kept for the parent."""
    from transcript_otel.sessions.importer import EmptySessionError, import_session

    with warnings.catch_warnings(record=True) as caught:
        try:
            imported = import_session(session, directory)
        except (EmptySessionError, OSError) as exc:
            return Outcome(_warned(caught), error=str(exc))
        summary = imported.summary
        return Outcome(
            _warned(caught),
            run=imported.path,
            entries=summary.total_entries,
            subagents=len(summary.sources) - 1 if summary.sources else 0,
        )


def _warned(caught: list[warnings.WarningMessage]) -> tuple[_Warned, ...]:
    return tuple(_Warned(str(w.message), w.category, w.filename, w.lineno) for w in caught)


# A worker's state: whether it is importing a session, and whether SIGINT came.
_importing = False
_interrupted = False


def _start_worker() -> None:
    """A worker's start: SIGINT (a Ctrl-C reaches the whole process group) interrupts the import
    under way, as in the parent, and the worker starts no other; idle, it waits quietly. SIGTERM
    and SIGHUP end it as they end any process (a forked worker had the parent's handlers): the
    pool ends its workers so when one died, and what a worker leaves half-written is in the
    parent's scratch directory, which the parent removes."""
    signal.signal(signal.SIGINT, _on_stop)
    for stop in _STOPS[1:]:
        signal.signal(stop, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_STOPS))  # held since the parent started it


def _on_stop(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    first = not _interrupted
    _interrupted = True
    if _importing and first:  # once: the parent's SIGINT must not cut the first's clean-up short
        raise KeyboardInterrupt


def _import_in_worker(session: SessionFiles, directory: Path) -> Outcome:
    global _importing
    try:
        _importing = True
        if _interrupted:
            raise KeyboardInterrupt
        return _import(session, directory)
    finally:
        _importing = False
