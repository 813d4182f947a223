"""Starting the command for the relay, as a shell would, on a pipe or on a pseudo-terminal.

`start_command` forks and execs the command with clean signals (and `/bin/sh` for a
script without `#!`), reports its pid or the errno of a failed exec through a
close-on-exec pipe, and hands back the fd its output is read from. On a pseudo-terminal,
a forked session leader sits between the relay and the command, as a shell does, so
that Ctrl-Z can stop the command and the relay can stop its own job in turn.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import os
import signal
import sys
import termios
from collections.abc import Callable
from typing import Final

from .capture_copy import enlarge_pipe
from .protocol import FORWARDED_BY_WRAPPER, NUMBER, PTY_MODE, STATUS
from .terminal import copy_window_size

# What the relay (and Python) set for themselves is not the command's: a shell starts it clean.
_RESET_FOR_COMMAND: Final = (
    *FORWARDED_BY_WRAPPER,
    *(getattr(signal, name) for name in ("SIGPIPE", "SIGXFSZ", "SIGCHLD", "SIGWINCH", "SIGTTOU")),
)


_PR_SET_PDEATHSIG: Final = 1


def _death_signal_setter() -> Callable[[int], None] | None:
    """Linux's `prctl(PR_SET_PDEATHSIG, signum)`: the calling process gets `signum` when the
    process that forked it ends. None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    prctl.argtypes = (ctypes.c_int, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong, ctypes.c_ulong)
    prctl.restype = ctypes.c_int

    def set_death_signal(signum: int) -> None:
        prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)

    return set_death_signal


def _die_with(parent: int, set_death_signal: Callable[[int], None] | None) -> None:
    """In a child of `parent`: killed when `parent` ends. The relay and the session leader end
    only after the command, unless killed: a relay killed with SIGKILL leaves no command behind."""
    if set_death_signal is None:
        return
    set_death_signal(signal.SIGKILL)
    if os.getppid() != parent:  # it ended before we asked
        os.kill(os.getpid(), signal.SIGKILL)


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
    set_death_signal = _death_signal_setter()  # looked up before the fork: the child only calls it
    relay = os.getpid()
    pid = os.fork()
    if pid == 0:
        _die_with(relay, set_death_signal)
        if mode == PTY_MODE:
            _lead_session(command, sink, started_write, set_death_signal)
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


def _lead_session(
    command: list[str], terminal: int, started_write: int, set_death_signal: Callable[[int], None] | None
) -> None:
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
        leader = os.getpid()
        command_pid = os.fork()
        if command_pid == 0:
            _die_with(leader, set_death_signal)
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
