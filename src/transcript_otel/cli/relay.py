"""The output relay of `transcript-otel run`: starts the command and copies its stdout.

It runs as its own small process (`python -I -S relay.py`, standard library only), so
the copy never waits for the interpreter lock of the process that maps and exports the
transcript. It starts the command and:

- copies every byte of the command's stdout to its own stdout (the caller's) as it
  comes, in large reads, with blocking writes: a slow reader slows the command exactly
  as a direct pipe would, and nothing is cut however slow the reader is;
- hands a copy to the capture side without ever waiting for it, on the data pipe
  (`DATA_FD`, the output as is): where both ends allow, the copy is made by the kernel
  (`tee(2)`, then `splice(2)` to our stdout: no byte passes through this process); what
  the capture side has not taken is held, up to `MAX_HELD_BYTES`; beyond that, output is
  dropped from the copy only, and reported as a gap at its offset in the copy;
- when its stdout is a terminal, runs the command on a pseudo-terminal (`pty` mode):
  the command sees a terminal of the same size (resized with ours), our terminal is put
  in raw mode while it runs and restored after (keystrokes pass through, so Ctrl-C and
  Ctrl-Z reach the command from its own terminal), and when the command stops (Ctrl-Z)
  our job stops too, for the shell to resume it with `fg`;
- reports on the report pipe (`REPORT_FD`): the command's pid, a failure to execute it,
  its exit status, the end of its output, and the gaps.

Reports are frames: a kind byte and a payload length (`HEADER`), then the payload. A gap's
report is written before any output that follows the gap, so the capture side, which reads
the reports it has before the output it reads, always knows of a gap before it reads past
it. The relay ignores the signals `transcript-otel run` forwards: the wrapper forwards each
to the command once.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import select
import signal
import struct
import sys
import termios
import time
import tty
from collections import deque
from typing import Any, Final

HEADER: Final = struct.Struct("!cI")
PID: Final = b"P"  # payload "!q": the command's pid
GAP: Final = b"G"  # payload `GAP_AT`: where in the copy, bytes and lines dropped, whether at a line's end
EXEC_FAILED: Final = b"E"  # payload "!i": the errno of the failed exec
EXITED: Final = b"X"  # payload "!i": the exit status, -N when killed by signal N
OUTPUT_DONE: Final = b"O"  # no payload: the command's output is over (all of it delivered)
NUMBER: Final = struct.Struct("!q")
GAP_AT: Final = struct.Struct("!QQQ?")
STATUS: Final = struct.Struct("!i")

PIPE_MODE: Final = "pipe"
PTY_MODE: Final = "pty"
# What the relay holds for the capture side beyond the pipe's own buffer.
MAX_HELD_BYTES: Final = 32 << 20
# After the command exits: how long a process it left behind may hold its output open
# without writing to it before the relay stops waiting (time spent writing to a slow
# reader does not count).
IDLE_GRACE_S: Final = 1.0
READ_BYTES: Final = 1 << 20
PIPE_BYTES: Final = 1 << 20
FORWARDED_BY_WRAPPER: Final = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
# What the relay (and Python) set for themselves is not the command's: a shell starts it clean.
_RESET_FOR_COMMAND: Final = (
    *FORWARDED_BY_WRAPPER,
    *(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGCHLD", "SIGWINCH", "SIGTTOU")),
)
_F_SETPIPE_SZ: Final = 1031
_SPLICE_F_NONBLOCK: Final = 2


def enlarge_pipe(fd: int) -> None:
    """A larger pipe buffer: fewer, larger reads and writes (best effort; the limit may refuse)."""
    with contextlib.suppress(OSError):
        fcntl.fcntl(fd, _F_SETPIPE_SZ, PIPE_BYTES)


class CaptureCopy:
    """The capture side's copy of the output and the reports, never waited for while the
    command runs: what a pipe does not take is held; output beyond the bound is dropped
    and reported as a gap."""

    def __init__(self, data_fd: int, report_fd: int) -> None:
        self.data_fd = data_fd
        self.report_fd = report_fd
        self.held: deque[memoryview] = deque()  # output the data pipe has not taken, in order
        self.held_bytes = 0
        self.reports = bytearray()  # framed reports the report pipe has not taken
        self.offset = 0  # bytes of output in the copy so far, sent or held
        self.gap_bytes = 0
        self.gap_lines = 0
        self.gap_ends_line = False
        self.broken = False  # the capture side is gone: only the command's output matters
        self._tee = _libc_tee()
        enlarge_pipe(data_fd)
        os.set_blocking(data_fd, False)
        os.set_blocking(report_fd, False)

    def tee(self, source: int) -> int:
        """Copy what the pipe `source` holds onto the data pipe without reading it (the
        kernel's `tee`): how many bytes; 0 when it cannot now (held output or reports go
        first, the data pipe is full, or `tee` is not available)."""
        if self._tee is None or self.broken or self.held or self.reports or self.gap_bytes:
            return 0
        copied = int(self._tee(source, self.data_fd, READ_BYTES, _SPLICE_F_NONBLOCK))
        if copied < 0:
            if ctypes.get_errno() not in (errno.EAGAIN, errno.EINTR):
                self._tee = None  # not pipes after all: copy by reading from now on
            return 0
        self.offset += copied
        return copied

    def add(self, data: bytes) -> None:
        """Output read by the relay: sent now if the data pipe takes it, else held or dropped."""
        if self.broken:
            return
        if self.held_bytes + len(data) > MAX_HELD_BYTES:
            self.gap_bytes += len(data)
            self.gap_lines += data.count(b"\n")
            self.gap_ends_line = data.endswith(b"\n")
            return
        self._report_gap()
        self.held.append(memoryview(data))
        self.held_bytes += len(data)
        self.offset += len(data)
        self.send()

    def report(self, kind: bytes, payload: bytes = b"") -> None:
        if not self.broken:
            self.reports += HEADER.pack(kind, len(payload)) + payload
            self.send()

    def waiting_fds(self) -> list[int]:
        """The pipes with something waiting to be written."""
        if self.broken:
            return []
        return [fd for fd, waiting in ((self.report_fd, self.reports), (self.data_fd, self.held)) if waiting]

    def send(self, *, wait: bool = False) -> None:
        """Write what the pipes take now (reports first: output after a gap waits for its
        report); with `wait`, everything, as the capture side reads it."""
        try:
            if wait:
                os.set_blocking(self.report_fd, True)
                os.set_blocking(self.data_fd, True)
            while self.reports:
                del self.reports[: os.write(self.report_fd, self.reports)]
            while self.held:
                first = self.held[0]
                written = os.write(self.data_fd, first)
                self.held_bytes -= written
                if written < first.nbytes:
                    self.held[0] = first[written:]
                    return  # the pipe is full
                self.held.popleft()
        except BlockingIOError:
            pass
        except OSError:  # the wrapper is gone: the command carries on uncaptured
            self.broken = True
            self.held.clear()
            self.reports.clear()

    def finish(self) -> None:
        """Everything still held, waiting for the capture side as long as it reads."""
        self._report_gap()
        self.send(wait=True)
        for fd in (self.data_fd, self.report_fd):
            with contextlib.suppress(OSError):
                os.close(fd)

    def _report_gap(self) -> None:
        if self.gap_bytes:
            gap = GAP_AT.pack(self.offset, self.gap_bytes, self.gap_lines, self.gap_ends_line)
            self.gap_bytes = self.gap_lines = 0
            self.report(GAP, gap)


def _libc_tee() -> Any:
    """The C library's `tee(2)` (Linux), or None."""
    try:
        tee = ctypes.CDLL(None, use_errno=True).tee
    except (OSError, AttributeError):
        return None
    tee.argtypes = (ctypes.c_int, ctypes.c_int, ctypes.c_size_t, ctypes.c_uint)
    tee.restype = ctypes.c_ssize_t
    return tee


class Terminal:
    """Our terminal (stdin) in raw mode while the command has its own, restored around stops."""

    def __init__(self) -> None:
        self.saved = termios.tcgetattr(0)

    def raw(self) -> None:
        with contextlib.suppress(termios.error):
            tty.setraw(0, termios.TCSANOW)

    def restore(self) -> None:
        with contextlib.suppress(termios.error):
            termios.tcsetattr(0, termios.TCSADRAIN, self.saved)


def copy_window_size(to_fd: int) -> None:
    """Our terminal's size (stdout's) onto the pty: the kernel tells the command (SIGWINCH)."""
    with contextlib.suppress(OSError):
        fcntl.ioctl(to_fd, termios.TIOCSWINSZ, fcntl.ioctl(1, termios.TIOCGWINSZ, b"\0" * 8))


def _write_stdout(data: bytes) -> None:
    """All of `data` to our stdout, waiting for a slow reader as a direct pipe would."""
    view = memoryview(data)
    while view:
        view = view[os.write(1, view) :]


class ExecFailed(Exception):
    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.errno = number


def start_command(command: list[str], mode: str) -> tuple[int, int, int]:
    """Fork and exec `command`: the pid to wait for, the command's own pid, and the fd its
    output is read from. Raises `ExecFailed` when it cannot be executed.

    In `pty` mode the command runs on a pseudo-terminal set up like ours (settings and
    size), which is its stdout, and its stdin when ours is a terminal too; its stderr is
    ours in both modes. There, the process waited for is a session leader between us and
    the command (`_lead_session`), as a shell is at a terminal: a command that led its
    session itself would be an orphaned process group, which Ctrl-Z cannot stop.
    """
    if mode == PTY_MODE:
        source, sink = os.openpty()
        with contextlib.suppress(termios.error):
            termios.tcsetattr(sink, termios.TCSANOW, termios.tcgetattr(1))
        copy_window_size(sink)
    else:
        source, sink = os.pipe()
        enlarge_pipe(sink)
    # Close-on-exec: the command's pid, then an errno only if its exec failed.
    started_read, started_write = os.pipe()
    pid = os.fork()
    if pid == 0:
        if mode == PTY_MODE:
            _lead_session(command, sink, started_write)
        os.dup2(sink, 1)
        os.write(started_write, NUMBER.pack(os.getpid()))
        _exec(command, started_write)
    os.close(sink)
    os.close(started_write)
    with os.fdopen(started_read, "rb") as started:
        reported = started.read()
    if len(reported) != NUMBER.size:
        os.waitpid(pid, 0)
        os.close(source)
        failed = reported[NUMBER.size :]
        raise ExecFailed(STATUS.unpack(failed)[0] if len(failed) == STATUS.size else errno.ECHILD)
    os.set_blocking(source, False)
    return pid, NUMBER.unpack(reported)[0], source


def _lead_session(command: list[str], terminal: int, started_write: int) -> None:
    """In the child: lead a new session on `terminal`, run the command in the foreground
    process group of its own, stop when it stops and end as it ends."""
    try:
        signal.set_wakeup_fd(-1)  # the relay's: its children's news is not ours
        for signum in (signal.SIGCHLD, signal.SIGWINCH):
            signal.signal(signum, signal.SIG_DFL)
        os.setsid()
        fcntl.ioctl(terminal, termios.TIOCSCTTY, 0)
        if os.isatty(0):
            os.dup2(terminal, 0)
        os.dup2(terminal, 1)
        command_pid = os.fork()
        if command_pid == 0:
            os.setpgid(0, 0)
            signal.signal(signal.SIGTTOU, signal.SIG_IGN)  # taking the terminal from the background
            os.tcsetpgrp(terminal, os.getpid())
            _exec(command, started_write)
        os.write(started_write, NUMBER.pack(command_pid))
        os.close(started_write)
        while True:
            wait_status = os.waitpid(command_pid, os.WUNTRACED)[1]
            if not os.WIFSTOPPED(wait_status):
                break
            os.kill(os.getpid(), signal.SIGSTOP)  # the relay sees it and stops our job; then:
            with contextlib.suppress(OSError):
                os.killpg(command_pid, signal.SIGCONT)
        status = os.waitstatus_to_exitcode(wait_status)
        if status < 0:  # end as the command did, killed by the same signal
            signal.signal(-status, signal.SIG_DFL)
            signal.pthread_sigmask(signal.SIG_UNBLOCK, {-status})
            os.kill(os.getpid(), -status)
        os._exit(status & 0xFF)
    finally:
        os._exit(127)


def _exec(command: list[str], started_write: int) -> None:
    """In the child: exec the command as a shell would, with clean signals; never returns."""
    try:
        for signum in _RESET_FOR_COMMAND:
            signal.signal(signum, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_SETMASK, ())
        try:
            os.execvp(command[0], command)
        except OSError as exc:
            if exc.errno != errno.ENOEXEC:  # a script without `#!`: run by sh, as a shell would
                raise
            os.execv("/bin/sh", ["/bin/sh", *command])
    except OSError as exc:
        with contextlib.suppress(OSError):
            os.write(started_write, STATUS.pack(exc.errno or errno.ENOEXEC))
    finally:
        os._exit(127)


class Relay:
    """The copy loop: the command's output to our stdout and the capture copy; keystrokes
    to the command's terminal; the command's stops and exit."""

    def __init__(self, capture: CaptureCopy, mode: str, job: bool) -> None:
        self.capture = capture
        self.mode = mode
        self.job = job  # we lead a job of a shell: a stopped command stops the job
        self.terminal = Terminal() if mode == PTY_MODE and os.isatty(0) else None
        self.status: int | None = None
        self.pid = 0
        self.output = -1
        self.output_open = False
        self.stdout_open = True
        self.splicing = mode == PIPE_MODE  # output moved by the kernel (`CaptureCopy.tee`, `splice`)
        self._stdout_ready = select.poll()  # waits until our stdout takes more, as a blocking write does
        self._stdout_ready.register(1, select.POLLOUT)
        self.keystrokes = bytearray()  # typed, not yet taken by the command's terminal
        self._wake_read, wake_write = os.pipe()
        os.set_blocking(self._wake_read, False)
        os.set_blocking(wake_write, False)
        signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
        for signum in (signal.SIGCHLD, signal.SIGWINCH):
            signal.signal(signum, lambda *_: None)  # a Python handler: the wakeup fd hears it

    def run(self, command: list[str]) -> None:
        try:
            self.pid, command_pid, self.output = start_command(command, self.mode)
        except ExecFailed as failed:
            self.capture.report(EXEC_FAILED, STATUS.pack(failed.errno))
            return
        self.output_open = True
        self.capture.report(PID, NUMBER.pack(command_pid))
        if self.terminal is not None:
            self.terminal.raw()
        try:
            self._copy()
        finally:
            if self.terminal is not None:
                self.terminal.restore()
        if self.output_open:  # left open by a process the command left behind: it is hung up
            self._close_output()
        self._close_stdout()  # a reader waiting for the end gets it now, before capture finishes
        self.capture.report(OUTPUT_DONE)
        if self.status is None:  # the output is over but the command runs on
            self.capture.send(wait=True)  # capture need not wait for it to end
        while self.status is None:
            self._reap(os.waitpid(self.pid, 0)[1])

    def _copy(self) -> None:
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        if self.terminal is not None:
            poller.register(0, select.POLLIN)
        last_output = time.monotonic()
        while True:
            output_events = select.POLLIN | (select.POLLOUT if self.keystrokes else 0)
            poller.register(self.output, output_events)
            waiting = self.capture.waiting_fds()
            for fd in (self.capture.data_fd, self.capture.report_fd):
                if fd in waiting:
                    poller.register(fd, select.POLLOUT)
                else:
                    with contextlib.suppress(KeyError):
                        poller.unregister(fd)
            timeout_ms = None
            if self.status is not None:
                idle_s = time.monotonic() - last_output
                if idle_s >= IDLE_GRACE_S:
                    return  # a process the command left behind holds its output, silent
                timeout_ms = int((IDLE_GRACE_S - idle_s) * 1000) + 1
            for fd, events in poller.poll(timeout_ms):
                if fd == self.output:
                    if events & select.POLLOUT:
                        self._type()
                    if events & ~select.POLLOUT:
                        if not self._read_output():
                            return
                        last_output = time.monotonic()
                elif fd == self._wake_read:
                    self._on_signals()
                elif fd == 0:
                    self._read_keystrokes(poller)
                elif fd in (self.capture.data_fd, self.capture.report_fd):
                    self.capture.send()

    def _read_output(self) -> bool:
        """Pass on what the command printed; False at the end of its output."""
        if self.splicing and self.stdout_open:
            copied = self.capture.tee(self.output)
            if copied:
                return self._splice_out(copied)
        try:
            chunk = os.read(self.output, READ_BYTES)
        except BlockingIOError:
            return True
        except OSError:  # EIO: the pty's other side is closed
            chunk = b""
        if not chunk:
            self._close_output()
            return False
        self.capture.add(chunk)
        if self.stdout_open:
            try:
                _write_stdout(chunk)
            except OSError:  # our reader is gone (`| head`): the command's next write fails too
                return self._reader_gone()
        return True

    def _splice_out(self, size: int) -> bool:
        """Move `size` bytes the capture copy has from the command's pipe to our stdout."""
        try:
            while size:
                try:
                    size -= os.splice(self.output, 1, size)
                except BlockingIOError:  # our stdout is full (the command's pipe is non-blocking)
                    self._stdout_ready.poll()
        except OSError as exc:
            if exc.errno != errno.EINVAL:
                return self._reader_gone()
            self.splicing = False  # our stdout cannot take it (a terminal, an append-only file)
            while size:
                chunk = os.read(self.output, size)
                size -= len(chunk)
                _write_stdout(chunk)
        return True

    def _reader_gone(self) -> bool:
        self._close_stdout()
        if self.mode == PIPE_MODE:
            self._close_output()
            return False
        return True

    def _close_output(self) -> None:
        self.output_open = False
        os.close(self.output)

    def _read_keystrokes(self, poller: select.poll) -> None:
        try:
            typed = os.read(0, 1 << 16)
        except OSError:
            typed = b""
        if not typed or self.status is not None:
            poller.unregister(0)
            return
        self.keystrokes += typed
        self._type()

    def _type(self) -> None:
        with contextlib.suppress(BlockingIOError):
            del self.keystrokes[: os.write(self.output, self.keystrokes)]

    def _on_signals(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 256):
                pass
        if self.mode == PTY_MODE and self.output_open:
            copy_window_size(self.output)
        while self.status is None:
            options = os.WNOHANG | (os.WUNTRACED if self.mode == PTY_MODE else 0)
            try:
                pid, wait_status = os.waitpid(self.pid, options)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._reap(wait_status)

    def _reap(self, wait_status: int) -> None:
        if os.WIFSTOPPED(wait_status):
            self._command_stopped()
            return
        self.status = os.waitstatus_to_exitcode(wait_status)
        self.capture.report(EXITED, STATUS.pack(self.status))

    def _command_stopped(self) -> None:
        """Ctrl-Z on its terminal: stop our job as the command stopped, and on `fg` continue both."""
        if self.terminal is not None:
            self.terminal.restore()
        if self.job:
            os.killpg(os.getpgrp(), signal.SIGSTOP)  # returns when the shell continues the job
        if self.terminal is not None:
            self.terminal.raw()
        if self.output_open:
            copy_window_size(self.output)
        with contextlib.suppress(OSError):
            os.kill(self.pid, signal.SIGCONT)  # the session's leader, which continues the command

    def _close_stdout(self) -> None:
        if self.stdout_open:
            self.stdout_open = False
            with contextlib.suppress(OSError):
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                os.close(devnull)


def main(argv: list[str]) -> int:
    """`relay.py DATA_FD REPORT_FD MODE JOB -- COMMAND...` (JOB: 1 when the wrapper leads a shell's job)."""
    data_fd, report_fd, mode, job = int(argv[1]), int(argv[2]), argv[3], argv[4] == "1"
    command = argv[6:]
    for fd in (data_fd, report_fd):
        os.set_inheritable(fd, False)  # the command's descriptors are the wrapper's, not ours
    for signum in FORWARDED_BY_WRAPPER:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # the wrapper blocks the signals it waits for
    capture = CaptureCopy(data_fd, report_fd)
    try:
        Relay(capture, mode, job).run(command)
    finally:
        capture.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
