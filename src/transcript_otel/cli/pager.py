"""Output longer than the terminal's screen through a pager (`$PAGER`, else `less -R`), as git
pages its own: what is written is held until it would not fit on the screen, then the pager is
started and given it all; output that fits is printed as it is, with no pager to quit. Never
when stdout is no terminal, and never with `PAGER` set empty or to `cat`."""

from __future__ import annotations

import contextlib
import io
import os
import re
import subprocess
from collections.abc import Iterator
from typing import Final, TextIO

from transcript_otel.cli.terminal import is_terminal

DEFAULT_PAGER: Final = "less -R"  # -R: the colours pass through
# Colour codes take no room on the screen (what `show` writes besides text).
_COLOUR: Final = re.compile(r"\x1b\[[0-9;]*m")


def pager_command() -> str | None:
    """The pager to run (a shell command, as `$PAGER` is for git and man), or None for none."""
    command = os.environ.get("PAGER", DEFAULT_PAGER).strip()
    return None if command in ("", "cat") else command


@contextlib.contextmanager
def paged(out: TextIO, wanted: bool = True) -> Iterator[TextIO]:
    """A stream for what would be written to `out`: through the pager when `wanted`, `out` is a
    terminal and what is written does not fit on its screen; else `out` itself."""
    command = pager_command()
    if not wanted or command is None or not is_terminal(out):
        yield out
        return
    columns, rows = os.get_terminal_size(out.fileno())
    screen = _ScreenOrPager(out, command, columns, rows)
    stream = io.TextIOWrapper(screen, encoding=out.encoding, errors="backslashreplace", write_through=True)
    try:
        yield stream
    finally:
        with contextlib.suppress(BrokenPipeError):  # the pager was quit: what is left goes nowhere
            stream.close()  # closes `screen`: the pager waited for


class _ScreenOrPager(io.RawIOBase):
    """Holds what is written while it fits on a `columns` x `rows` screen (a line left for the
    prompt); past that, pipes it all to `command`. Closed, prints what it held to `out`, or
    closes the pager's input and waits for the person to quit it."""

    def __init__(self, out: TextIO, command: str, columns: int, rows: int) -> None:
        self._out = out
        self._command = command
        self._columns = max(columns, 1)
        self._rows = rows
        self._held: list[bytes] = []
        self._used = 0  # screen lines filled (the one being written counts when it has text)
        self._column = 0
        self._pager: subprocess.Popen[bytes] | None = None

    @property
    def name(self) -> str:  # (what TextIOWrapper tells of its stream)
        return self._command

    def writable(self) -> bool:
        return True

    def write(self, data: bytes | bytearray | memoryview) -> int:  # type: ignore[override]
        chunk = bytes(data)
        if self._pager is None:
            self._held.append(chunk)
            if not self._fits(chunk.decode(errors="replace")):
                self._start_pager()
            return len(chunk)
        assert self._pager.stdin is not None
        self._pager.stdin.write(chunk)
        return len(chunk)

    def _fits(self, text: str) -> bool:
        """Whether all held so far, `text` last, fits on the screen, long lines wrapped."""
        for character in _COLOUR.sub("", text):
            if character == "\n":
                self._used += 1 if self._column == 0 else 0
                self._column = 0
                continue
            if self._column == 0:
                self._used += 1
            self._column = (self._column + 1) % self._columns
        return self._used < self._rows

    def _start_pager(self) -> None:
        self._out.flush()
        # Through the shell, as git and man run $PAGER: it may hold options and quotes.
        self._pager = subprocess.Popen(self._command, shell=True, stdin=subprocess.PIPE)
        assert self._pager.stdin is not None
        self._pager.stdin.write(b"".join(self._held))
        self._held.clear()

    def close(self) -> None:
        if self.closed:
            return
        try:
            if self._pager is None:
                self._out.flush()
                self._out.buffer.write(b"".join(self._held))
                self._out.buffer.flush()
            else:
                self._finish_pager(self._pager)
        finally:
            super().close()

    @staticmethod
    def _finish_pager(pager: subprocess.Popen[bytes]) -> None:
        """Its input closed, the pager waited for: the person reads until they quit it. A Ctrl-C
        meant for the pager (less takes it itself) does not leave it behind on the terminal."""
        try:
            with contextlib.suppress(BrokenPipeError):
                assert pager.stdin is not None
                pager.stdin.close()
        finally:
            while True:
                try:
                    pager.wait()
                    break
                except KeyboardInterrupt:
                    continue
