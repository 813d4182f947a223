"""What a file is, told from its first lines: a session a CLI wrote (Claude Code, Codex, Gemini CLI,
OpenCode), or what else.

A file's name says nothing certain (a rollout attached to a bug report, a session copied under
another name, a saved stdout named like a log), so `import` and `watch` ask its content:

- `CODEX`: rollout records, `timestamp`, `type` (`session_meta` first, `event_msg`, ...), `payload`;
- `CLAUDE_CODE`: session-log lines, a `type` (`user`, `assistant`, `queue-operation`, `mode`, ...)
  and `sessionId`; before them perhaps lines that name no session (`summary` with `leafUuid`,
  `file-history-snapshot`);
- `GEMINI`: a Gemini CLI session, its header `sessionId`, `projectHash`, `startTime`, ... first;
- `CLAUDE_STREAM_JSON`: `claude -p --output-format stream-json`, `system`/`init` ... with
  `session_id` (under claude-agent-sdk a `control_response` first: `mappings.lines.stream_adapter_for`);
- `CODEX_EXEC_JSON`: `codex exec --json`, `thread.started`, `turn.*`, `item.*` events;
- `TRANSCRIPT_RUN`: transcript-otel's own mirror, `event` `transcript.*` records with `context`.

The first line that is one of these decides (a damaged first line is passed over); lines of no
known format decide nothing until the head is read. Pure: `format_of` reads bytes, `read_head`
reads them from a file.
"""

from __future__ import annotations

from enum import Enum
from pathlib import Path
from typing import Any, Final

from transcript_otel.mappings.lines import stream_adapter_for
from transcript_otel.reading.escapes import visible_name
from transcript_otel.records.serialize import parse_json
from transcript_otel.sessions.regular import open_regular

# The head read: a rollout's first line carries the ~21 KB system prompt; a few lines decide.
MAX_HEAD_BYTES: Final = 1 << 20
MAX_HEAD_LINES: Final = 16
_SQLITE_MAGIC: Final = b"SQLite format 3\x00"
_ROLLOUT_KEYS: Final = frozenset({"timestamp", "type", "payload"})
_GEMINI_HEADER_KEYS: Final = frozenset({"sessionId", "projectHash", "startTime"})
# Claude Code session-log lines that name no session (by `type`: a key each has).
_CLAUDE_UNNAMED: Final = {"summary": "leafUuid", "file-history-snapshot": "snapshot"}


class Format(Enum):
    """What a file holds; the value is how a person is told."""

    CLAUDE_CODE = "a Claude Code session log"
    CODEX = "a Codex session log (rollout)"
    GEMINI = "a Gemini CLI session log"
    CLAUDE_STREAM_JSON = "Claude Code's stdout (`claude -p --output-format stream-json`)"
    CODEX_EXEC_JSON = "Codex's stdout (`codex exec --json`)"
    TRANSCRIPT_RUN = "a run of transcript-otel's mirror"
    SQLITE = "an SQLite database"
    BINARY = "a binary file"
    EMPTY = "an empty file"
    TEXT = "text that is not JSON lines"
    OTHER_JSON = "JSON lines of no format known here"
    UNSETTLED = "a file whose first line is not whole yet"
    UNREADABLE = "a file that cannot be read"  # (not `format_of`'s: its caller's, when reading fails)

    @property
    def is_session(self) -> bool:
        return self in (Format.CLAUDE_CODE, Format.CODEX, Format.GEMINI)

    @property
    def may_become_a_session(self) -> bool:
        """Whether a file being written may yet turn out a session (just made, its first line
        under way): asked again later, not refused."""
        return self in (Format.EMPTY, Format.UNSETTLED)


# What one whole line tells for the whole file (`_decided`): the others wait for more lines.
_DECISIVE: Final = frozenset(
    {
        Format.CODEX,
        Format.CLAUDE_CODE,
        Format.GEMINI,
        Format.CLAUDE_STREAM_JSON,
        Format.CODEX_EXEC_JSON,
        Format.TRANSCRIPT_RUN,
    }
)


def not_a_session(path: Path, found: Format) -> str:
    """The one line that says what `path` is and is not."""
    shown = visible_name(path)  # a folder's name may hold escape sequences or newlines
    if found is Format.UNREADABLE:
        return f"{shown}: {found.value}, so not known to be a session log"
    return f"{shown}: {found.value}, not a session Claude Code, Codex, Gemini CLI or OpenCode wrote"


def read_head(path: Path) -> tuple[bytes, bool]:
    """The first lines of the regular file `path`, to the first that decides its format (at most
    `MAX_HEAD_LINES`, `MAX_HEAD_BYTES`: a folder of big logs is not read through), and whether
    they are all of it. Raises `OSError` (a `NotRegularFileError` for a FIFO, a device)."""
    with open_regular(path) as stream:
        head = b"".join(_lines(stream.readline, MAX_HEAD_BYTES, MAX_HEAD_LINES))
        return head, not stream.read(1)


def format_of(head: bytes, whole_file: bool = False) -> Format:
    """The format of a file whose first bytes are `head` (`whole_file`: they are all of it, so a
    last line without its newline is whole too)."""
    if not head:
        return Format.EMPTY
    if head.startswith(_SQLITE_MAGIC):
        return Format.SQLITE
    if b"\x00" in head:
        return Format.BINARY
    lines = head.split(b"\n")
    last = lines.pop()  # after the last newline: a line not whole yet, unless the file ends there
    if whole_file and last:
        lines.append(last)
    return _decided(lines, unfinished=bool(last) and not whole_file)


def _decided(lines: list[bytes], unfinished: bool) -> Format:
    claude_hint = False
    first: Format | None = None  # what the first non-blank line is, if no line decides
    for raw in lines:
        if not raw.strip():
            continue
        found = _line_format(raw)
        if found is None:  # a Claude line that names no session: the next ones decide
            claude_hint = True
        elif found in _DECISIVE:
            return found
        else:
            first = first or found
    if claude_hint:
        return Format.CLAUDE_CODE
    if first is None:
        return Format.UNSETTLED if unfinished else Format.EMPTY
    return first


def _line_format(raw: bytes) -> Format | None:
    """What one line says: a format, or None for a Claude session-log line naming no session."""
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError:
        return Format.BINARY
    try:
        value: Any = parse_json(text)
    except (ValueError, RecursionError):
        return Format.TEXT
    if not isinstance(value, dict):
        return Format.OTHER_JSON
    kind, event = value.get("type"), value.get("event")
    if value.keys() >= _ROLLOUT_KEYS and isinstance(kind, str) and isinstance(value["timestamp"], str):
        return Format.CODEX
    if isinstance(kind, str) and isinstance(value.get("sessionId"), str):
        return Format.CLAUDE_CODE
    if value.keys() >= _GEMINI_HEADER_KEYS and isinstance(value["projectHash"], str):
        return Format.GEMINI
    if isinstance(kind, str) and _CLAUDE_UNNAMED.get(kind) in value:
        return None
    if isinstance(event, str) and event.startswith("transcript.") and "context" in value:
        return Format.TRANSCRIPT_RUN
    stream = stream_adapter_for(text)
    if stream == "claude-stream-json":
        return Format.CLAUDE_STREAM_JSON
    if stream == "codex-json":
        return Format.CODEX_EXEC_JSON
    return Format.OTHER_JSON


def _lines(readline: Any, max_bytes: int, max_lines: int) -> list[bytes]:
    read: list[bytes] = []
    left = max_bytes
    while left > 0 and len(read) < max_lines:
        line: bytes = readline(left)
        if not line:
            break
        read.append(line)
        left -= len(line)
        if line.endswith(b"\n") and _line_format(line) in _DECISIVE:
            break
    return read
