"""What the wrapper (`cli.run_command`, `cli.capture`) and the relay agree on.

The relay's modes (its command line's `MODE`), the signals the wrapper forwards to the
command (the relay ignores them), and the frames of the report pipe: a kind byte and a
payload length (`HEADER`), then the payload.
"""

from __future__ import annotations

import signal
import struct
from typing import Final

HEADER: Final = struct.Struct("!cI")
PID: Final = b"P"  # payload "!q": the command's pid
GAP: Final = b"G"  # payload `GAP_AT`: where in the copy, bytes and lines dropped, whether at a line's end
EXEC_FAILED: Final = b"E"  # payload "!i": the errno of the failed exec
EXITED: Final = b"X"  # payload "!i": the exit status, -N when killed by signal N
OUTPUT_DONE: Final = b"O"  # no payload: the command's output is over (all of it delivered)
# payload "!q": the offset in the copy from which its output never reached our reader (gone, `| head`)
UNREAD: Final = b"U"
NUMBER: Final = struct.Struct("!q")
GAP_AT: Final = struct.Struct("!QQQ?")
STATUS: Final = struct.Struct("!i")

PIPE_MODE: Final = "pipe"
PTY_MODE: Final = "pty"
FORWARDED_BY_WRAPPER: Final = tuple(
    getattr(signal, name)
    for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2")
    if hasattr(signal, name)
)
