"""`transcript-otel run -- CMD ARGS…`: run any agent command and capture its transcript.

The command's stdout and stderr pass through byte for byte, as they come (the user
must not notice the wrapper); stdin is the command's own. Its stdout is also split
into lines for a line adapter (`mappings.lines`), whose entries go through the same
`AgentRun` as the instrumentors': an `invoke_agent` span for the run, `chat` spans
for the turns the adapter reports, `execute_tool` spans from each tool's start to its
end, usage on the spans, and every entry as a log record, span event and JSONL line.

The wrapper exits with the command's exit status; when the command is killed by a
signal, the wrapper kills itself with the same signal. SIGTERM, SIGHUP, SIGQUIT and
the user signals are forwarded to the command; SIGINT (Ctrl-C) reaches the command
from the terminal directly, so the wrapper only waits for it. Nothing here can stop
the command: if capture cannot start, the command runs uncaptured.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import IO, Any, Final

from opentelemetry import propagate, trace

from transcript_otel.instrumentation._agent_run import AgentRun
from transcript_otel.mappings.lines import LineAdapter, capabilities_of, effective_name, select_adapter
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
MAX_LINE_BYTES: Final = 16 << 20
_CHUNK_BYTES: Final = 1 << 16
_TURN_CONTENT: Final = frozenset(
    {
        EntryType.USER_MESSAGE.value,
        EntryType.ASSISTANT_MESSAGE.value,
        EntryType.THINKING.value,
        EntryType.TOOL_USE.value,
        EntryType.TOOL_RESULT.value,
    }
)
EXIT_CANNOT_EXECUTE: Final = 126
EXIT_NOT_FOUND: Final = 127


class CommandFailed(Exception):
    """The agent command exited with a non-zero status or was killed by a signal."""


@dataclass(slots=True)
class LineRecorder:
    """Feeds the command's stdout lines to the adapter and records what it maps."""

    run: AgentRun
    adapter: LineAdapter

    def line(self, data: bytes) -> None:
        try:
            self._record(self.adapter.feed(data.decode("utf-8", "backslashreplace")))
        except Exception as exc:  # adapters never raise; a bug here must not stop the pass-through
            self.run.emitter.error(f"could not map a line: {type(exc).__name__}: {exc}")

    def end(self) -> None:
        try:
            self._record(self.adapter.flush())
        except Exception as exc:
            self.run.emitter.error(f"could not map the end of the output: {type(exc).__name__}: {exc}")
        self.run.describe(LINE_ADAPTER_ATTRIBUTE, effective_name(self.adapter))

    def _record(self, entries: Sequence[Any]) -> None:
        session_id = getattr(self.adapter, "session_id", None)
        if isinstance(session_id, str) and session_id:
            self.run.set_session_id(session_id)
        turns = capabilities_of(self.adapter).turns
        for entry in entries:
            if entry.source == MAIN_SOURCE and entry.entry_type in _TURN_CONTENT:
                self.run.begin_turn()
            self.run.record(entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw)
            if turns and entry.source == MAIN_SOURCE and entry.entry_type == EntryType.TOKEN_USAGE.value:
                self.run.end_turn()


def _pump(source: IO[bytes], sink: IO[bytes], on_line: Callable[[bytes], None] | None) -> None:
    """Copy `source` to `sink` as it comes; hand each complete line to `on_line`."""
    pending = bytearray()
    fd = source.fileno()
    while chunk := os.read(fd, _CHUNK_BYTES):
        try:
            sink.write(chunk)
            sink.flush()
        except (BrokenPipeError, ValueError, OSError):
            pass  # our own output is gone (a closed pipe): keep draining the command
        if on_line is None:
            continue
        pending += chunk
        while (end := pending.find(b"\n")) >= 0 or len(pending) >= MAX_LINE_BYTES:
            cut = end + 1 if end >= 0 else MAX_LINE_BYTES
            on_line(bytes(pending[:cut]))
            del pending[:cut]
    if on_line is not None and pending:
        on_line(bytes(pending))


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


def _start_run(prompt_name: str, adapter_name: str | None) -> LineRecorder | None:
    try:
        adapter = select_adapter(adapter_name, dict(os.environ))
        tracer = trace.get_tracer("transcript_otel.cli")
        run = AgentRun(tracer, prompt_name=prompt_name, adapter=ADAPTER, session_id=None)
        return LineRecorder(run, adapter)
    except ValueError:
        raise  # an unknown adapter name: the user's mistake, reported before anything runs
    except Exception:
        _logger.warning("transcript-otel: capture could not start; running uncaptured", exc_info=True)
        return None


def run_command(command: Sequence[str], *, prompt_name: str, adapter_name: str | None = None) -> int:
    """Run `command` with its transcript captured; returns the exit status to exit with.

    A negative status `-N` means the command was killed by signal N.
    """
    recorder = _start_run(prompt_name, adapter_name)
    environment = None if recorder is None else _with_trace_context(recorder.run)
    try:
        process = subprocess.Popen(
            list(command), stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=environment
        )
    except (FileNotFoundError, PermissionError, OSError) as exc:
        status = EXIT_NOT_FOUND if isinstance(exc, FileNotFoundError) else EXIT_CANNOT_EXECUTE
        print(f"transcript-otel run: cannot run {command[0]!r}: {exc.strerror or exc}", file=sys.stderr)
        if recorder is not None:
            recorder.run.finish(exc)
        return status
    stdout, stderr = process.stdout, process.stderr
    if stdout is None or stderr is None:  # never: both are pipes
        raise RuntimeError("the command's output is not piped")
    with _forwarding_signals(process):
        pumps = [
            threading.Thread(
                target=_pump,
                args=(stdout, sys.stdout.buffer, None if recorder is None else recorder.line),
                daemon=True,
            ),
            threading.Thread(target=_pump, args=(stderr, sys.stderr.buffer, None), daemon=True),
        ]
        for pump in pumps:
            pump.start()
        status = process.wait()
        for pump in pumps:
            pump.join()
    if recorder is not None:
        recorder.end()
        failure = None if status == 0 else CommandFailed(_describe(status))
        recorder.run.finish(failure)
    return status


def _describe(status: int) -> str:
    if status < 0:
        try:
            return f"killed by {signal.Signals(-status).name}"
        except ValueError:
            return f"killed by signal {-status}"
    return f"exited with status {status}"
