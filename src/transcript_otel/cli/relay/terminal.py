"""Our terminal while the command runs on a pseudo-terminal of its own (the relay's `pty` mode)."""

from __future__ import annotations

import contextlib
import fcntl
import termios
import tty


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
