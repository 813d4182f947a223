#!/usr/bin/env python3
"""An interactive program for the pseudo-terminal tests of `transcript-otel run` (stdlib only).

    python tests/agents/terminal_agent.py

It prints `AGENT-TTY stdin=B stdout=B stderr=B` (`os.isatty` of each), `AGENT-SIZE COLSxROWS`
and `AGENT-READY`, each on its own line; then, until it is interrupted (or 120 s pass):

- on SIGWINCH, `AGENT-RESIZED COLSxROWS`;
- on SIGCONT (after a stop), `AGENT-CONTINUED`;
- for each line typed on stdin, `AGENT-HEARD <line>`;
- on SIGINT, `AGENT-INTERRUPTED`, and it exits with status 130.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from typing import Final

LIFETIME_S: Final = 120.0


def say(text: str) -> None:
    print(text, flush=True)


def size() -> str:
    columns, lines = os.get_terminal_size(sys.stdout.fileno())
    return f"{columns}x{lines}"


class Interrupted(Exception):
    pass


def interrupted(_signum: int, _frame: object) -> None:
    raise Interrupted


def main() -> int:
    signal.signal(signal.SIGWINCH, lambda *_: say(f"AGENT-RESIZED {size()}"))
    signal.signal(signal.SIGCONT, lambda *_: say("AGENT-CONTINUED"))
    signal.signal(signal.SIGINT, interrupted)
    ttys = " ".join(f"{name}={os.isatty(fd)}" for fd, name in enumerate(("stdin", "stdout", "stderr")))
    say(f"AGENT-TTY {ttys}")
    say(f"AGENT-SIZE {size()}")
    say("AGENT-READY")
    deadline = time.monotonic() + LIFETIME_S
    try:
        while time.monotonic() < deadline:
            readable, _, _ = select.select([sys.stdin], [], [], 0.5)
            if readable:
                line = sys.stdin.readline()
                if not line:
                    return 0
                say(f"AGENT-HEARD {line.strip()}")
    except Interrupted:
        say("AGENT-INTERRUPTED")
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
