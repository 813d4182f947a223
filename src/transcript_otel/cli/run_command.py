"""`transcript-otel run -- CMD ARGS…`: run any agent command and capture its transcript.

The command runs as if the wrapper were not there. A relay process (`cli.relay`) starts
it and copies its stdout to ours byte for byte, as fast as the slower of the command and
our reader (backpressure reaches the command as through a direct pipe), and the wrapper
does not end before every byte is delivered. When our stdout is a terminal, the command
runs on a pseudo-terminal of the same size instead of a pipe (colours, line buffering and
interactive agents behave as at the terminal). Its stderr, its stdin (unless it is the
terminal) and other inherited file descriptors are its own.

The capture side (`cli.capture`) reads the relay's copy of the output on a thread of its
own, at a lower CPU priority than the command while its output goes on (at the wrapper's
once it is over), splits it into lines for a line adapter (`mappings.lines`), and records
the entries through the same `AgentRun` as the instrumentors': an `invoke_agent` span for
the run (a child of the caller's `TRACEPARENT`, passed on to the command as its
`TRACEPARENT`), `chat` spans for the turns the adapter reports, `execute_tool` spans, every
entry as a JSONL line, and as a log record and span event where an exporter takes them
(`configure()` makes those only then). What capture could not keep up with is counted and reported once: one
`transcript.error` in the transcript and one line on stderr after the command's output.
The command line tells the run what the output does not: `codex exec`'s prompt and model
(`ExecCommand`), `claude`'s prompt and system prompt (`ClaudeCommand`), `opencode run`'s prompt,
model, provider and output format (`OpenCodeCommand`), `gemini`'s prompt where its format does
not print it, its model and, by its output format, the adapter that reads it (`GeminiCommand`);
the line adapter that reads the output tells its provider (`line_recorder.ADAPTER_PROVIDERS`).

The wrapper exits with the command's exit status; when the command is killed by a
signal, the wrapper kills itself with the same signal. When our stdout closes
(`| head`), the command's stdout is closed too, so it gets SIGPIPE as it would directly.
SIGINT, SIGTERM, SIGHUP, SIGQUIT and the user signals sent to the wrapper are forwarded
to the command once; the ones a terminal sends to the whole foreground job (Ctrl-C with
a pipe) reach the command from the terminal and are not sent again. Nothing here can stop
the command: if capture cannot start, it runs uncaptured.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Final, TypeVar

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from transcript_otel.cli import relay
from transcript_otel.cli.capture import OutputCapture
from transcript_otel.cli.claude_command import ClaudeCommand
from transcript_otel.cli.line_recorder import LineCounts, LineRecorder
from transcript_otel.cli.opencode_command import OpenCodeCommand
from transcript_otel.cli.relay import protocol
from transcript_otel.instrumentation.cli_logs import resumed_cost_state, resumed_thread_usage
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.codex_exec import ExecCommand
from transcript_otel.mappings.gemini_command import GeminiCommand
from transcript_otel.mappings.lines import (
    ADAPTER_VARIABLE,
    LineAdapter,
    resume_after,
    select_adapter,
)
from transcript_otel.model.entries import EntryType
from transcript_otel.version import SEMCONV_SCHEMA_URL, __version__

_logger = logging.getLogger(__name__)

FORWARDED_SIGNALS: Final = protocol.FORWARDED_BY_WRAPPER
ADAPTER: Final = "cli"
EXIT_CANNOT_EXECUTE: Final = 126
EXIT_NOT_FOUND: Final = 127
# Capture's CPU priority (nice) while the command's output goes on: a command printing at full
# speed keeps the CPUs; capture catches up when the command waits, as agents mostly do, and
# at the wrapper's own priority once the output is over (at nice 19 beside a busy loop it
# would record a trickle, and the wrapper would take tens of seconds to exit: NOTES.md).
CAPTURE_NICENESS: Final = 19
_SI_KERNEL: Final = 0x80  # Linux's si_code of a signal the kernel sent (a terminal's Ctrl-C)
_LOOK_S: Final = 0.1
_WAITED: Final = frozenset({*FORWARDED_SIGNALS, signal.SIGCHLD})
# Sent to the wrapper once the command is over: stop waiting for the transcript to be written.
_STOPPING: Final = frozenset({signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT})
# The relay's program: its package (standard library only) imported on its own, from the
# directory that holds it: the one path the isolated interpreter gets besides the standard library.
_RELAY_PROGRAM: Final = (
    f"import sys; sys.path.append({str(Path(relay.__file__).resolve().parent.parent)!r}); "
    "from relay.copy_loop import main; sys.exit(main(sys.argv))"
)


class CommandFailed(Exception):
    """The agent command exited with a non-zero status or was killed by a signal."""


def block_forwarded_signals() -> None:
    """Hold the signals the wrapper forwards (before any thread starts, so that every thread
    holds them): the wrapper's main thread takes them with their sender (`sigtimedwait`)."""
    if hasattr(signal, "sigtimedwait"):
        signal.pthread_sigmask(signal.SIG_BLOCK, _WAITED)


def _caller_context() -> otel_context.Context:
    """The trace the caller put us in (`TRACEPARENT`/`TRACESTATE`), else the current context."""
    carrier = {key.lower(): os.environ[key] for key in ("TRACEPARENT", "TRACESTATE") if key in os.environ}
    return propagate.extract(carrier) if carrier else otel_context.get_current()


def _with_trace_context(run: AgentRun) -> dict[str, str]:
    """This environment, with the run's span as `TRACEPARENT`: an agent that reads it (as
    Claude Code and OTel SDKs do) puts its own telemetry in the same trace."""
    environment = dict(os.environ)
    carrier: dict[str, str] = {}
    with run.activate():
        propagate.inject(carrier)
    if "traceparent" in carrier:
        for key in ("TRACEPARENT", "TRACESTATE"):
            environment.pop(key, None)
        environment.update({key.upper(): value for key, value in carrier.items()})
    return environment


def _adapter(adapter_name: str | None, default: str | None = None) -> LineAdapter:
    try:
        return select_adapter(adapter_name, dict(os.environ), default)
    except ValueError as exc:  # only a bad variable can get here: the flag is checked by argparse
        print(f"transcript-otel run: {ADAPTER_VARIABLE}: {exc}; using auto", file=sys.stderr)
        return select_adapter("auto")


_Facts = TypeVar("_Facts")


def _read_command(read: Callable[[], _Facts | None], agent: str) -> _Facts | None:
    """What `read()` finds on the command line, None where it finds nothing or fails."""
    try:
        return read()
    except Exception:  # a command line we misread must not stop the capture
        _logger.debug("transcript-otel: could not read the %s command line", agent, exc_info=True)
        return None


def _start_run(prompt_name: str, adapter_name: str | None, command: Sequence[str]) -> LineRecorder | None:
    try:
        codex_exec = _read_command(lambda: ExecCommand.of(command, os.environ), "codex exec")
        claude = _read_command(lambda: ClaudeCommand.of(command), "claude")
        opencode = _read_command(lambda: OpenCodeCommand.of(command), "opencode run")
        gemini = _read_command(lambda: GeminiCommand.of(command), "gemini")
        named = opencode or gemini  # the one of them that names its adapter, provider and model
        adapter = _adapter(adapter_name, None if named is None else named.adapter)
        tracer = trace.get_tracer("transcript_otel.cli", __version__, schema_url=SEMCONV_SCHEMA_URL)
        token = otel_context.attach(_caller_context())
        try:
            run = AgentRun(
                tracer,
                prompt_name=prompt_name,
                adapter=ADAPTER,
                session_id=None,
                # Formats with usage report it per turn; claude-stream-json names subagents
                # `subagent:{call id}`.
                policy=TurnPolicy.STREAM_JSON,
                provider="openai" if codex_exec is not None else named.provider if named else None,
                model=codex_exec.model if codex_exec is not None else named.model if named else None,
            )
        finally:
            otel_context.detach(token)
        # The agent is another process: no thread here needs the GIL back at once (the relay
        # holds what capture has not read), so the writer does not let go of it on its own
        # (each let-go costs it the kernel's timer slack); the switch interval hands it over.
        run.emitter.pipeline.yield_every_s = math.inf
        recorder = LineRecorder(run, adapter, provider_known=codex_exec is not None or named is not None)
        if claude is not None and claude.system_instructions is not None:
            run.describe_agent(system_instructions=claude.system_instructions)
        _go_on_from_resumed(recorder, claude, codex_exec)
        said = codex_exec or claude or named  # the one of them that `command` runs, if any
        prompt = None if said is None else said.prompt
        if prompt is not None:  # the agent's output does not repeat it
            recorder.record([MappedEntry(EntryType.USER_MESSAGE.value, {"text": prompt})])
        return recorder
    except Exception:
        _logger.warning("transcript-otel: capture could not start; running uncaptured", exc_info=True)
        return None


def _go_on_from_resumed(
    recorder: LineRecorder, claude: ClaudeCommand | None, codex: ExecCommand | None
) -> None:
    """A command that resumes a session (`claude --resume`/`--continue`, `codex exec resume`)
    prints the session's running totals, the runs' before it included: the session's totals
    before this run are where its count begins. Claude's session is read before it starts;
    Codex's thread once the output's first line names it: `--last`, a thread's name, `--all`
    and `-C` leave the choice to Codex (`--last` takes the working folder's latest)."""
    if claude is not None and (claude.resumes or claude.continues):
        totals = resumed_cost_state(claude.resumes, os.getcwd())
        if totals is not None:
            resume_after(recorder.adapter, totals)
    elif codex is not None and codex.resumes:
        started_ns = time.time_ns()
        recorder.go_on_from(lambda thread_id: resumed_thread_usage(thread_id, started_ns))


def _spawn_relay(
    command: Sequence[str], environment: dict[str, str] | None, fds: tuple[int, int, int], terminal: bool
) -> subprocess.Popen[bytes]:
    """The relay, which starts the command (`cli.relay`); it inherits what the command will,
    and `fds`: the write ends of the copy's pipe and of the reports' pipe, and the read end of
    the lifeline, whose write end only we hold (closed when we end, however we end)."""
    job = os.getpgrp() == os.getpid()  # we lead a job of a shell's: Ctrl-Z on the pty stops the job
    mode = protocol.PTY_MODE if terminal else protocol.PIPE_MODE
    relay_arguments = [*map(str, fds), mode, "1" if job else "0", "--"]
    arguments = [sys.executable, "-I", "-S", "-c", _RELAY_PROGRAM, *relay_arguments]
    try:
        for fd in fds:
            os.set_inheritable(fd, True)
        return subprocess.Popen([*arguments, *command], env=environment, close_fds=False)
    finally:
        for fd in fds:
            os.close(fd)


def _release_stdout() -> None:
    """Our own copy of stdout points elsewhere: a reader sees the end of the output when
    the relay is done with it, not when capture is."""
    with contextlib.suppress(OSError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 1)
        os.close(devnull)


class _Forwarder:
    """Sends the signals the wrapper receives to the command, once each."""

    def __init__(self, capture: OutputCapture, terminal: bool) -> None:
        self.capture = capture
        self.terminal = terminal
        self.held: list[int] = []  # received before the command's pid was known

    def wait(self, relay_process: subprocess.Popen[bytes]) -> None:
        """Until the relay and capture are done, forwarding what arrives."""
        if not hasattr(signal, "sigtimedwait"):  # no sender to tell: every signal is forwarded
            self._wait_with_handlers()
            return
        while not (self.capture.done.is_set() and relay_process.poll() is not None):
            self.capture.go_on()  # at our priority, once the output is over
            received = signal.sigtimedwait(_WAITED, _LOOK_S)
            # On a pipe the command is in our process group: a terminal's signal reached it too.
            if (
                received is not None
                and received.si_signo != signal.SIGCHLD
                and (self.terminal or received.si_code != _SI_KERNEL)
            ):
                self.held.append(received.si_signo)
            self._send_held()
        self._discard_pending()

    def _send_held(self) -> None:
        pid = self.capture.pid
        if pid is None or not self.held:
            return
        signals, self.held = self.held, []
        if self.capture.status is not None:
            return  # it has exited: its pid may be another process's by now
        for signum in signals:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signum)

    def _wait_with_handlers(self) -> None:
        def forward(signum: int, _frame: object) -> None:
            self.held.append(signum)
            self._send_held()

        previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
        try:
            while not self.capture.wait(_LOOK_S):
                self.capture.go_on()
                self._send_held()
        finally:
            for signum, handler in previous.items():
                signal.signal(signum, handler)

    @staticmethod
    def _discard_pending() -> None:
        """Signals that came after the command ended are not ours to act on."""
        while signal.sigtimedwait(_WAITED, 0) is not None:
            pass


def run_command(command: Sequence[str], *, prompt_name: str, adapter_name: str | None = None) -> int:
    """Run `command` with its transcript captured; returns the exit status to exit with.

    A negative status `-N` means the command was killed by signal N.
    """
    recorder = _start_run(prompt_name, adapter_name, command)
    environment = None if recorder is None else _with_trace_context(recorder.run)
    terminal = os.isatty(1)
    data_read, data_write = os.pipe()
    report_read, report_write = os.pipe()
    # Held open until we exit, also by SIGKILL: then the relay hears it close, and ends the
    # command and restores the terminal (non-inheritable: nothing else holds it open).
    lifeline_read, lifeline_write = os.pipe()
    try:
        relay_fds = (data_write, report_write, lifeline_read)
        relay_process = _spawn_relay(command, environment, relay_fds, terminal)
    except OSError as exc:
        os.close(data_read)
        os.close(report_read)
        os.close(lifeline_write)
        print(f"transcript-otel run: cannot start the output relay: {exc}", file=sys.stderr)
        if recorder is not None:
            recorder.end(exc)
        return EXIT_CANNOT_EXECUTE
    _release_stdout()
    capture = OutputCapture(data_read, report_read, recorder, terminal=terminal, niceness=CAPTURE_NICENESS)
    _Forwarder(capture, terminal).wait(relay_process)
    status, error = _outcome(command, capture, relay_process)
    if recorder is not None:
        end_run(recorder, capture.counts, error)
    return status


def end_run(recorder: LineRecorder, counts: LineCounts, error: BaseException | None) -> None:
    """The run's end, with what capture could not record, written whole before the shutdown's
    deadline starts: every line is then in the transcript or in its report. The writer is
    waited for while it writes (`LineRecorder.wait_until_written`); a signal to stop, sent to
    the wrapper meanwhile, cuts the wait short (the shutdown then gives up the entries left and
    says how many). Then stderr says what the transcript says it lost, from the same counts:
    the lines capture could not record and the entries the backlog dropped."""
    recorder.end(error, counts)
    recorder.wait_until_written(_told_to_stop)
    not_recorded = counts.summary()
    if not_recorded is not None:
        print(f"transcript-otel run: {not_recorded}", file=sys.stderr)
    dropped = recorder.run.emitter.dropped_entries
    if dropped:
        print(
            f"transcript-otel run: {dropped} transcript entries were dropped: the backlog exceeded its "
            "bound while the sinks fell behind (the transcript's dropped_entries)",
            file=sys.stderr,
        )


def _told_to_stop() -> bool:
    return not _STOPPING.isdisjoint(signal.sigpending())


def _outcome(
    command: Sequence[str], capture: OutputCapture, relay_process: subprocess.Popen[bytes]
) -> tuple[int, BaseException | None]:
    """The status to exit with, and the run's error."""
    if capture.exec_errno is not None:
        failure = OSError(capture.exec_errno, os.strerror(capture.exec_errno))
        print(f"transcript-otel run: cannot run {command[0]!r}: {failure.strerror}", file=sys.stderr)
        return (EXIT_NOT_FOUND if isinstance(failure, FileNotFoundError) else EXIT_CANNOT_EXECUTE), failure
    status = capture.status
    if status is None:  # the relay died before it could tell (killed with the command, say)
        status = relay_process.returncode if relay_process.returncode < 0 else 1
        print(f"transcript-otel run: the output relay ended: {_describe(status)}", file=sys.stderr)
    return status, None if status == 0 else CommandFailed(_describe(status))


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"
