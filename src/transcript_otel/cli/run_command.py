"""`transcript-otel run -- CMD ARGS…`: run any agent command and capture its transcript.

The command's stdout passes through byte for byte as it comes; its stderr, stdin
and other inherited file descriptors are its own (never piped). The stdout is also
split into lines for a line adapter (`mappings.lines`) on a capture thread, whose
entries go through the same `AgentRun` as the instrumentors': an `invoke_agent` span
for the run (a child of the caller's `TRACEPARENT`, and passed on to the command as
its `TRACEPARENT`), `chat` spans for the turns the adapter reports, `execute_tool`
spans from each tool's start to its end, and every entry as a log record, span event
and JSONL line. Capture never slows the command down: lines it cannot keep up with
are dropped, counted and reported.

The wrapper exits with the command's exit status; when the command is killed by a
signal, the wrapper kills itself with the same signal. When our own stdout closes
(`| head`), the command's stdout is closed too, so it gets SIGPIPE as it would
directly. SIGTERM, SIGHUP, SIGQUIT and the user signals are forwarded to the
command; SIGINT (Ctrl-C) reaches it from the terminal, so the wrapper only waits.
Nothing here can stop the command: if capture cannot start, it runs uncaptured.
"""

from __future__ import annotations

import contextlib
import errno
import logging
import os
import signal
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Final

from opentelemetry import context as otel_context
from opentelemetry import propagate, trace

from transcript_otel.instrumentation._agent_run import TURN_CONTENT, TURN_REPORTS, AgentRun, starts_new_turn
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.codex_exec import ExecCommand
from transcript_otel.mappings.lines import (
    ADAPTER_VARIABLE,
    LineAdapter,
    capabilities_of,
    effective_name,
    select_adapter,
)
from transcript_otel.model import MAIN_SOURCE, EntryType

_logger = logging.getLogger(__name__)

FORWARDED_SIGNALS: Final = tuple(
    getattr(signal, name)
    for name in ("SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
ADAPTER: Final = "cli"
LINE_ADAPTER_ATTRIBUTE: Final = "transcript.line_adapter"  # on the root span: which adapter read the output
# A line longer than this is recorded in pieces (it still passes through whole).
MAX_LINE_BYTES: Final = 1 << 20
# Lines waiting for the capture thread; beyond this they are dropped (and counted).
MAX_PENDING_BYTES: Final = 64 << 20
# After the command exits: how long a process it left behind may keep its stdout open,
# and how long the capture thread may take to record what is pending.
OUTPUT_GRACE_S: Final = 1.0
CAPTURE_GRACE_S: Final = 5.0
_CHUNK_BYTES: Final = 1 << 16
EXIT_CANNOT_EXECUTE: Final = 126
EXIT_NOT_FOUND: Final = 127


class CommandFailed(Exception):
    """The agent command exited with a non-zero status or was killed by a signal."""


class LineRecorder:
    """Maps the command's stdout lines on its own thread and records the entries.

    `put()` never blocks the pass-through: when `MAX_PENDING_BYTES` wait already, the
    line is dropped and counted.
    """

    def __init__(self, run: AgentRun, adapter: LineAdapter) -> None:
        self.run = run
        self.adapter = adapter
        self.dropped = 0
        self._pending: deque[bytes] = deque()
        self._pending_bytes = 0
        self._closed = False
        self._ready = threading.Condition()
        self._thread = threading.Thread(target=self._work, name="transcript-otel-capture", daemon=True)
        self._thread.start()

    def put(self, line: bytes) -> None:
        with self._ready:
            if self._pending_bytes + len(line) > MAX_PENDING_BYTES:
                self.dropped += 1
                return
            self._pending.append(line)
            self._pending_bytes += len(line)
            self._ready.notify()

    def end(self, error: BaseException | None) -> None:
        """Record what is pending (bounded in time), the adapter's last entries, and finish the run."""
        with self._ready:
            self._closed = True
            self._ready.notify()
        self._thread.join(CAPTURE_GRACE_S)
        with self._ready:
            self.dropped += len(self._pending)
            self._pending.clear()
        if not self._thread.is_alive():
            self._guarded("map the end of the output", self.adapter.flush)
        if self.dropped:
            self.run.emitter.error(
                f"{self.dropped} output lines were not recorded: capture could not keep up"
            )
        self.run.describe(LINE_ADAPTER_ATTRIBUTE, effective_name(self.adapter))
        if error is not None:  # in the transcript too, not only on the span: `summary` reads it
            self.run.record_failure(error)
        self.run.finish(error)

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._pending and not self._closed:
                    self._ready.wait()
                if not self._pending:
                    return
                line = self._pending.popleft()
                self._pending_bytes -= len(line)
            self._guarded("map a line", self.adapter.feed, line.decode("utf-8", "backslashreplace"))

    def record(self, entries: Sequence[MappedEntry]) -> None:
        """Entries known before the command prints anything (its prompt, from its command line)."""
        self.run.record_mapped(self._in_turns(entries))

    def _guarded(self, what: str, mapping: Any, *arguments: str) -> None:
        try:
            self.run.record_mapped(self._in_turns(mapping(*arguments)))
        except Exception as exc:  # adapters never raise; a bug here must not stop the capture
            self.run.emitter.error(f"could not {what}: {type(exc).__name__}: {exc}")

    def _in_turns(self, entries: Sequence[Any]) -> Iterator[Any]:
        """The entries, opening a turn before main content and ending it at a turn's usage."""
        session_id = getattr(self.adapter, "session_id", None)
        if isinstance(session_id, str) and session_id:
            self.run.set_session_id(session_id)
        turns = capabilities_of(self.adapter).turns
        ends_turn = False
        for entry in entries:
            if turns and starts_new_turn(entry):
                self.run.turn_boundary()
            reports_turn = entry.source == MAIN_SOURCE and entry.entry_type in TURN_REPORTS
            # A turn's report opens it too: a turn may fail before the model said anything.
            if entry.source == MAIN_SOURCE and (entry.entry_type in TURN_CONTENT or (turns and reports_turn)):
                self.run.begin_turn()
            yield entry
            ends_turn |= reports_turn
        if turns and ends_turn:  # after the whole report: an error that follows the usage fails the turn
            self.run.end_turn()


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _pump_stdout(source: int, recorder: LineRecorder | None) -> None:
    """Copy the command's stdout to ours as it comes; hand each line to the recorder.

    When ours is gone (a closed pipe), the command's is closed too: its next write gets
    SIGPIPE (or EPIPE), as it would without us.
    """
    pending = bytearray()
    try:
        while chunk := os.read(source, _CHUNK_BYTES):
            try:
                _write_all(1, chunk)
            except OSError:
                return
            if recorder is None:
                continue
            pending += chunk
            while (end := pending.find(b"\n")) >= 0 or len(pending) >= MAX_LINE_BYTES:
                cut = end + 1 if end >= 0 else MAX_LINE_BYTES
                recorder.put(bytes(pending[:cut]))
                del pending[:cut]
    finally:
        os.close(source)
        if recorder is not None and pending:
            recorder.put(bytes(pending))


@contextmanager
def _forwarding_signals(process: subprocess.Popen[bytes]) -> Iterator[None]:
    def forward(signum: int, _frame: Any) -> None:
        with contextlib.suppress(ProcessLookupError):  # it has exited already
            process.send_signal(signum)

    previous = {signum: signal.signal(signum, forward) for signum in FORWARDED_SIGNALS}
    previous[signal.SIGINT] = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


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


def _adapter(adapter_name: str | None) -> LineAdapter:
    try:
        return select_adapter(adapter_name, dict(os.environ))
    except ValueError as exc:  # only a bad variable can get here: the flag is checked by argparse
        print(f"transcript-otel run: {ADAPTER_VARIABLE}: {exc}; using auto", file=sys.stderr)
        return select_adapter("auto")


def _exec_command(command: Sequence[str]) -> ExecCommand | None:
    try:
        return ExecCommand.of(command, os.environ)
    except Exception:  # a command line we misread must not stop the capture
        _logger.debug("transcript-otel: could not read the codex exec command line", exc_info=True)
        return None


def _start_run(prompt_name: str, adapter_name: str | None, command: Sequence[str]) -> LineRecorder | None:
    try:
        adapter = _adapter(adapter_name)
        codex_exec = _exec_command(command)
        tracer = trace.get_tracer("transcript_otel.cli")
        token = otel_context.attach(_caller_context())
        try:
            run = AgentRun(
                tracer,
                prompt_name=prompt_name,
                adapter=ADAPTER,
                session_id=None,
                count_message_usage=False,  # formats with usage report it per turn
                subagents_named_by_call_id=True,  # claude-stream-json's `subagent:{call id}`
                provider=None if codex_exec is None else "openai",
                model=None if codex_exec is None else codex_exec.model,
            )
        finally:
            otel_context.detach(token)
        recorder = LineRecorder(run, adapter)
        if codex_exec is not None and codex_exec.prompt is not None:
            recorder.record([MappedEntry(EntryType.USER_MESSAGE.value, {"text": codex_exec.prompt})])
        return recorder
    except Exception:
        _logger.warning("transcript-otel: capture could not start; running uncaptured", exc_info=True)
        return None


def _spawn(command: list[str], environment: dict[str, str] | None) -> subprocess.Popen[bytes]:
    """Start the command as a shell would: inherited descriptors kept, a script without `#!` run by sh."""
    try:
        return subprocess.Popen(command, stdout=subprocess.PIPE, env=environment, close_fds=False)
    except OSError as exc:
        if exc.errno != errno.ENOEXEC:
            raise
        return subprocess.Popen(
            ["/bin/sh", *command], stdout=subprocess.PIPE, env=environment, close_fds=False
        )


def run_command(command: Sequence[str], *, prompt_name: str, adapter_name: str | None = None) -> int:
    """Run `command` with its transcript captured; returns the exit status to exit with.

    A negative status `-N` means the command was killed by signal N.
    """
    recorder = _start_run(prompt_name, adapter_name, command)
    environment = None if recorder is None else _with_trace_context(recorder.run)
    try:
        process = _spawn(list(command), environment)
    except OSError as exc:
        status = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_EXECUTE
        print(f"transcript-otel run: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        if recorder is not None:
            recorder.end(exc)
        return status
    if process.stdout is None:  # never: it is a pipe
        raise RuntimeError("the command's stdout is not piped")
    # The pump owns the read end from here on (and closes it).
    source = os.dup(process.stdout.fileno())
    process.stdout.close()
    with _forwarding_signals(process):
        pump = threading.Thread(target=_pump_stdout, args=(source, recorder), daemon=True)
        pump.start()
        status = process.wait()
        # A process the command left behind may hold its stdout open: not for ever.
        pump.join(OUTPUT_GRACE_S)
    if recorder is not None:
        recorder.end(None if status == 0 else CommandFailed(_describe(status)))
    return status


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"
