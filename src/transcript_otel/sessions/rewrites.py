"""Telling a session file written on from one written anew, for `watch` (`SessionFollower`).

A file the watch read to some byte is, at its next poll, the same file written on (its bytes
up to there unchanged), the same log rewritten (another inode holding the lines read:
`codex migrate-rollouts`), or another record: truncated and written again, or replaced by
another session's file. Its size and inode do not tell all of it: a file truncated and
written longer has the same inode and more bytes. So the bytes just before where it was read
to are kept (`fingerprint`, with the position, in the state too) and compared, and a log's
session is what its first lines say (`head_session_id`), not its name.
"""

from __future__ import annotations

import hashlib
import os
from typing import IO, Final

from transcript_otel.records.serialize import parse_json

# The bytes kept from before a file's offset: enough to tell a rewrite from the file written on.
TAIL_BYTES: Final = 64
# The first lines looked at for the session's id (a Claude log may open with lines naming none).
_HEAD_LINES: Final = 16
_HEAD_LINE_BYTES: Final = 1 << 20


def fingerprint(stream: IO[bytes], offset: int) -> str:
    """What the last `TAIL_BYTES` (at most) before `offset` in the open file `stream` are, in
    16 hex digits (kept for each file in the state: short)."""
    start = max(0, offset - TAIL_BYTES)
    before = os.pread(stream.fileno(), offset - start, start)
    return hashlib.blake2b(before, digest_size=8).hexdigest()


def head_session_id(stream: IO[bytes]) -> str | None:
    """The session id the open log's first lines name: a Claude line's `sessionId`, a rollout's
    `session_meta` id; "" where its first `_HEAD_LINES` name none, None where they are not all
    written yet (asked again later). Its position in `stream` is lost."""
    stream.seek(0)
    for _ in range(_HEAD_LINES):
        line = stream.readline(_HEAD_LINE_BYTES)
        if len(line) == _HEAD_LINE_BYTES:
            return ""  # a line this long names no session (the first lines that do are short)
        if not line.endswith(b"\n"):
            return None  # the end, or a line not whole yet
        try:
            said = parse_json(line)
        except (ValueError, RecursionError):
            continue
        if not isinstance(said, dict):
            continue
        if isinstance(said.get("sessionId"), str):
            return str(said["sessionId"])
        payload = said.get("payload")
        if said.get("type") == "session_meta" and isinstance(payload, dict):
            found = payload.get("id", payload.get("session_id"))
            return found if isinstance(found, str) else ""
    return ""
