"""`transcript-otel import`: the session logs Claude Code and Codex wrote, as runs in the mirror."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import os
import signal
import sys
import textwrap
import warnings
from collections.abc import Generator, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import TYPE_CHECKING, Any, Final, NamedTuple, TextIO

from transcript_otel import environment_variables as env
from transcript_otel.cli.read_commands import number_at_least
from transcript_otel.sessions.files import SessionFiles, claude_code_root, codex_root, find_sessions
from transcript_otel.sinks.jsonl_files import default_directory

if TYPE_CHECKING:
    from concurrent.futures import Future

_DESCRIPTION: Final = (
    "Import the sessions Claude Code and Codex logged themselves (no wrapper needed): each "
    "becomes one run in the local JSONL mirror, with the times, tokens and models the files "
    "recorded, subagents as their own sources and spans, and ids derived from the session, so "
    "importing again replaces the run instead of adding a second. When an OTLP endpoint is set "
    "(--endpoint or OTEL_EXPORTER_OTLP_ENDPOINT) each run is also sent there, as `replay` sends it. "
    "Sessions are imported --jobs at a time in worker processes, and said in the order found. "
    "Exits 1 when a session could not be imported or sent (each said in one line), 2 for bad paths."
)
_WIDTH: Final = 88
_EPILOG: Final = """examples:
  transcript-otel import --claude-code --codex
  transcript-otel import ~/.claude/projects/-home-me-repo/0b6f...jsonl
  OTEL_EXPORTER_OTLP_ENDPOINT=http://localhost:4318 transcript-otel import --codex"""
_WORKER_DIED: Final = "not imported: a worker process died (killed? out of memory?), stopping the others"


def add_import(commands: Any) -> None:
    parser: argparse.ArgumentParser = commands.add_parser(
        "import",
        help="import the session logs Claude Code and Codex wrote",
        description=textwrap.fill(_DESCRIPTION, _WIDTH),
        epilog=_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", type=Path, metavar="PATH", help="session files or directories")
    parser.add_argument(
        "--claude-code",
        action="store_true",
        help="every Claude Code session ($CLAUDE_CONFIG_DIR or ~/.claude)",
    )
    parser.add_argument("--codex", action="store_true", help="every Codex session ($CODEX_HOME or ~/.codex)")
    parser.add_argument(
        "--jsonl-dir",
        type=Path,
        help=f"the mirror to import into (default: ${env.TRANSCRIPT_OTEL_JSONL_DIR})",
    )
    parser.add_argument("--endpoint", help="also send each run to this OTLP endpoint")
    parser.add_argument(
        "-j",
        "--jobs",
        type=number_at_least(1),
        metavar="N",
        help="sessions imported at once, each in a worker process (default: the CPUs this process "
        "may use; 1: all in this process)",
    )
    parser.set_defaults(handler=run_import)


def run_import(args: argparse.Namespace, out: TextIO) -> int:
    paths = list(args.paths)
    for wanted, root, name in (
        (args.claude_code, claude_code_root(), "Claude Code"),
        (args.codex, codex_root(), "Codex"),
    ):
        if wanted and root.is_dir():
            paths.append(root)
        elif wanted:
            print(f"transcript-otel import: no {name} sessions at {root}", file=sys.stderr)
    if not paths and not (args.claude_code or args.codex):
        raise ValueError("name session files or directories, or --claude-code / --codex")
    directory = args.jsonl_dir or Path(env.env_text(env.TRANSCRIPT_OTEL_JSONL_DIR) or default_directory())
    sends = args.endpoint is not None or bool(
        os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")
    )
    sessions = list(find_sessions(paths))
    if not sessions:
        print(f"transcript-otel import: no sessions in {', '.join(map(str, paths))}", file=sys.stderr)
        return 1
    jobs = min(args.jobs or _usable_cpus(), len(sessions))
    failed = 0
    with contextlib.closing(_outcomes(sessions, directory, jobs)) as outcomes:
        for session, outcome in zip(sessions, outcomes, strict=True):
            failed += not _say(session, outcome, args.endpoint, sends, out)
    return 1 if failed else 0


def _usable_cpus() -> int:
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
class _Outcome:
    """What is said of one session's import: a few numbers and texts, since a worker sends it."""

    warned: tuple[_Warned, ...]
    error: str = ""  # why the session was not imported, when `run` is None
    run: Path | None = None  # the run's file (a worker's: in its own directory until `_moved`)
    entries: int = 0
    subagents: int = 0


def _outcomes(
    sessions: Sequence[SessionFiles], directory: Path, jobs: int
) -> Generator[_Outcome, None, None]:
    """Each session's import, in the order of `sessions`: in this process with one job, else in
    `jobs` worker processes, each outcome given as soon as those before it are."""
    if jobs == 1:  # no worker to start
        for session in sessions:
            yield _import(session, directory)
        return
    # Imported here: every command loads this module (they take ~10 ms), few start a pool.
    import multiprocessing
    import shutil
    import tempfile
    from concurrent.futures import ProcessPoolExecutor

    # Each session is imported in a directory of its own, its run moved into the mirror here in
    # order: two copies of a session (one run id) must not write one file at once, and the
    # later replaces the earlier, as with one job. What an interrupted worker left goes with it.
    directory.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".importing-", dir=directory))
    # spawn, not fork: a fork would copy this process's threads' locks and its OTel state.
    # The workers inherit the environment, so they read the same variables.
    pool = ProcessPoolExecutor(
        jobs, mp_context=multiprocessing.get_context("spawn"), initializer=_start_worker
    )
    try:
        with _sigint_blocked():
            futures = [
                pool.submit(_import_in_worker, session, scratch / str(number))
                for number, session in enumerate(sessions)
            ]
        for future in futures:
            yield _moved(_outcome_of(future), directory)
    except BaseException:  # Ctrl-C, or the caller stopped reading: the imports under way stop too
        _interrupt_workers()
        raise
    finally:
        pool.shutdown(cancel_futures=True)
        shutil.rmtree(scratch, ignore_errors=True)


@contextlib.contextmanager
def _sigint_blocked() -> Iterator[None]:
    """SIGINT held while the pool starts its workers, which inherit the signal mask: a Ctrl-C
    meanwhile waits in each until its handler is in place (`_start_worker`) instead of ending
    its start-up in a traceback; this process takes it at the end of the block."""
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, held)


def _outcome_of(future: Future[_Outcome]) -> _Outcome:
    from concurrent.futures.process import BrokenProcessPool

    try:
        return future.result()
    except BrokenProcessPool:  # said for each session the dead worker took down with the pool
        return _Outcome((), error=_WORKER_DIED)
    except Exception as exc:  # a failure the import does not expect: said, the others go on
        return _Outcome((), error=f"not imported: {type(exc).__name__}: {exc}")


def _moved(outcome: _Outcome, directory: Path) -> _Outcome:
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


def _say(session: SessionFiles, outcome: _Outcome, endpoint: str | None, sends: bool, out: TextIO) -> bool:
    for warned in outcome.warned:
        warnings.showwarning(*warned)
    if outcome.run is None:
        print(f"transcript-otel import: {session.path}: {outcome.error}", file=sys.stderr)
        return False
    print(
        f"{session.path} -> {outcome.run} ({outcome.entries} entries"
        + (f", {outcome.subagents} subagents" if outcome.subagents > 0 else "")
        + ")",
        file=out,
    )
    return _send(outcome.run, endpoint) if sends else True


def _import(session: SessionFiles, directory: Path) -> _Outcome:
    """One session imported, in this process or a worker; its warnings kept for the parent."""
    from transcript_otel.sessions.importer import EmptySessionError, import_session

    with warnings.catch_warnings(record=True) as caught:
        try:
            imported = import_session(session, directory)
        except (EmptySessionError, OSError) as exc:
            return _Outcome(_warned(caught), error=str(exc))
        summary = imported.summary
        return _Outcome(
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
    under way, as in the parent, and the worker starts no other; idle, it waits quietly."""
    signal.signal(signal.SIGINT, _on_sigint)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})  # held since the parent spawned it


def _on_sigint(signum: int, frame: FrameType | None) -> None:
    global _interrupted
    first = not _interrupted
    _interrupted = True
    if _importing and first:  # once: the parent's SIGINT must not cut the first's clean-up short
        raise KeyboardInterrupt


def _import_in_worker(session: SessionFiles, directory: Path) -> _Outcome:
    global _importing
    try:
        _importing = True
        if _interrupted:
            raise KeyboardInterrupt
        return _import(session, directory)
    finally:
        _importing = False


def _send(path: Path, endpoint: str | None) -> bool:
    from transcript_otel.exports.replay.run import ReplayError, replay
    from transcript_otel.reading.sources import open_run

    try:
        result = replay(open_run(path), endpoint=endpoint)
    except (ReplayError, ValueError) as exc:
        print(f"transcript-otel import: {path}: not sent: {exc}", file=sys.stderr)
        return False
    print(f"  sent {result.spans} spans and {result.records} log records", file=sys.stderr)
    return True
