"""The relay's copy loop, and its `main`: the command's output to our stdout and the capture
copy, keystrokes to the command's terminal, and the command's stops and exit.

After the command exits, a process it left holding its output is waited for while it
writes, and for `IDLE_GRACE_S` of silence, then hung up; our stdout is closed as soon as
the output is over, so a reader sees the end before capture has finished.
"""

from __future__ import annotations

import contextlib
import errno
import os
import select
import signal
import time
from typing import Final

from .capture_copy import READ_BYTES, CaptureCopy
from .command import ExecFailed, start_command
from .protocol import (
    EXEC_FAILED,
    EXITED,
    FORWARDED_BY_WRAPPER,
    NUMBER,
    OUTPUT_DONE,
    PID,
    PIPE_MODE,
    PTY_MODE,
    STATUS,
    UNREAD,
)
from .terminal import Terminal, copy_window_size

# After the command exits: how long a process it left behind may hold its output open
# without writing to it before the relay stops waiting (time spent writing to a slow
# reader does not count).
IDLE_GRACE_S: Final = 1.0


def _write_stdout(data: bytes) -> int:
    """All of `data` to our stdout, waiting for a slow reader as a direct pipe would: how many
    bytes of it our reader did not take because it went away (`| head`), 0 when it took all."""
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(1, view) :]
    except OSError:
        return len(view)
    return 0


class Relay:
    """The copy loop: the command's output to our stdout and the capture copy; keystrokes
    to the command's terminal; the command's stops and exit."""

    def __init__(self, capture: CaptureCopy, mode: str, job: bool, lifeline: int) -> None:
        self.capture = capture
        self.lifeline = lifeline  # hangs up when the wrapper ends, however it ends (SIGKILL)
        self.mode = mode
        self.job = job  # we lead a job of a shell: a stopped command stops the job
        self.terminal = Terminal() if mode == PTY_MODE and os.isatty(0) else None
        self.status: int | None = None
        self.pid = 0
        self.command_pid = 0
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
            self.pid, self.command_pid, self.output = start_command(command, self.mode)
        except ExecFailed as failed:
            self.capture.report(EXEC_FAILED, STATUS.pack(failed.errno))
            return
        self.output_open = True
        self.capture.report(PID, NUMBER.pack(self.command_pid))
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
        self._wait_for_exit()

    def _wait_for_exit(self) -> None:
        """Until the command exits; if the wrapper ends first, the command ends with it."""
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)  # SIGCHLD
        poller.register(self.lifeline, select.POLLIN)
        while self.status is None:
            pid, wait_status = os.waitpid(self.pid, os.WNOHANG)
            if pid:
                self._reap(wait_status)
                return
            for fd, _ in poller.poll():
                if fd == self.lifeline:
                    poller.unregister(fd)
                    self._wrapper_gone()
                else:
                    self._drain_wakeups()

    def _wrapper_gone(self) -> None:
        """The wrapper ended before the command (killed with SIGKILL): so does the command, as a
        command ends with a shell's job killed whole, with nobody left to capture its output."""
        self.capture.abandon()
        kill = os.killpg if self.mode == PTY_MODE else os.kill  # on a pty it leads a process group
        with contextlib.suppress(OSError):
            kill(self.command_pid, signal.SIGKILL)

    def _drain_wakeups(self) -> None:
        with contextlib.suppress(BlockingIOError):
            while os.read(self._wake_read, 256):
                pass

    def _copy(self) -> None:
        poller = select.poll()
        poller.register(self._wake_read, select.POLLIN)
        poller.register(self.lifeline, select.POLLIN)
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
                elif fd == self.lifeline:
                    self._wrapper_gone()
                    return
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
        if not self.stdout_open:  # on a pty whose terminal is gone: the command runs on
            self.capture.add(chunk)
            return True
        # Passed on first: the copy gets what our reader took, not what it never read.
        unread = _write_stdout(chunk)
        if unread < len(chunk):
            self.capture.add(chunk[: len(chunk) - unread] if unread else chunk)
        return self._reader_gone() if unread else True

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
                return self._reader_gone(unread=size)
            self.splicing = False  # our stdout cannot take it (a terminal, an append-only file)
            while size:
                chunk = os.read(self.output, size)
                size -= len(chunk)
                unread = _write_stdout(chunk)
                if unread:
                    return self._reader_gone(unread=unread + size)
        return True

    def _reader_gone(self, *, unread: int = 0) -> bool:
        """Our reader went away (`| head`): the copy has `unread` bytes at its end that it never
        read, which capture leaves out, as a direct pipe's reader never sees what is left in it;
        on a pipe the command's output is closed, so its next write fails as it would directly."""
        if unread:
            self.capture.report(UNREAD, NUMBER.pack(self.capture.offset - unread))
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
        self._drain_wakeups()
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
    """The relay's command line, after the program's name: `DATA_FD REPORT_FD LIFELINE_FD MODE
    JOB -- COMMAND...` (JOB: 1 when the wrapper leads a shell's job)."""
    data_fd, report_fd, lifeline = int(argv[1]), int(argv[2]), int(argv[3])
    mode, job = argv[4], argv[5] == "1"
    command = argv[7:]
    for fd in (data_fd, report_fd, lifeline):
        os.set_inheritable(fd, False)  # the command's descriptors are the wrapper's, not ours
    for signum in FORWARDED_BY_WRAPPER:
        signal.signal(signum, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_SETMASK, ())  # the wrapper blocks the signals it waits for
    capture = CaptureCopy(data_fd, report_fd)
    try:
        Relay(capture, mode, job, lifeline).run(command)
    finally:
        capture.finish()
    return 0
