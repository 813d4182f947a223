"""A Claude Code session forked from another (`claude --resume <id> --fork-session`, the SDK's
`fork_session`): what of its file is the other session's history.

A fork's file begins with a copy of the session it was forked from: the same lines (the same
`uuid`s) under the fork's own `sessionId`, each assistant line naming the session whose
request made it (`requestSessionId`). Its `cost-state` goes on from the totals the other
session had reached. Those calls were the other session's: an import counting them again
would bill them twice (docs/session-logs.md, `claude_code/forked`). The other session's file,
beside the fork's, tells which lines were copied and the totals the fork went on from.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

from transcript_otel.instrumentation.cli_logs import COST_STATE_MARKER, is_session_id
from transcript_otel.reading.lines import LineReader
from transcript_otel.records.serialize import parse_json
from transcript_otel.sessions.regular import open_regular

# Lines read from a session's start for the answers its copy holds (which name the sessions copied).
_MAX_HEAD_LINES: Final = 10_000


@dataclass(frozen=True, slots=True)
class Fork:
    parent_session_id: str
    copied: frozenset[str]  # the uuids of the parent's lines (a fork's copy keeps them)
    carried_cost_state: bytes | None  # the parent's totals the fork went on from, as its line


def claude_fork(path: Path) -> Fork | None:
    """The fork `path` is, if its first assistant lines name other sessions' requests; None for
    a session of its own, or a file that cannot be read."""
    try:
        parent_id = _requesting_session(path)
        if parent_id is None:
            return None
        parent = path.with_name(f"{parent_id}.jsonl")
        if not parent.is_file():  # gone: its copied answers still tell themselves apart
            return Fork(parent_id, frozenset(), None)
        return _fork_of(path, parent, parent_id)
    except (OSError, ValueError, RecursionError):
        return None


def _requesting_session(path: Path) -> str | None:
    """The session the copy at the start of `path` was taken from: the one whose request made
    the copy's last answer (a fork of a fork copies answers of both, each naming its own)."""
    requester: str | None = None
    for number, line in enumerate(_lines(path), 1):
        if number > _MAX_HEAD_LINES:
            break
        if b'"type":"assistant"' not in line:
            continue
        entry = parse_json(line)
        if not isinstance(entry, dict) or entry.get("type") != "assistant":
            continue
        named = entry.get("requestSessionId")
        if not isinstance(named, str) or named == entry.get("sessionId") or not is_session_id(named):
            break  # the session's own first answer: the copy, if any, is over
        requester = named
    return requester


def _fork_of(path: Path, parent: Path, parent_id: str) -> Fork:
    """The parent's line uuids, and its `cost-state` that follows the last line the fork copied."""
    uuids: dict[str, int] = {}  # uuid -> its line's index in the parent's file
    cost_states: list[tuple[int, bytes]] = []
    for index, line in enumerate(_lines(parent)):
        if COST_STATE_MARKER in line:
            cost_states.append((index, line.rstrip(b"\r\n")))
            continue
        uuid = _uuid(line)
        if uuid is not None:
            uuids[uuid] = index
    last_copied = -1
    for line in _lines(path):
        uuid = _uuid(line)
        if uuid is None:
            continue
        if uuid not in uuids:
            break  # the fork's own lines begin
        last_copied = uuids[uuid]
    carried = next((line for index, line in cost_states if index > last_copied), None)
    return Fork(parent_id, frozenset(uuids), carried if last_copied >= 0 else None)


def _lines(path: Path) -> Iterator[bytes]:
    with open_regular(path) as stream:  # never a FIFO or a device named like the other session
        for _, line in LineReader(str(path)).lines(stream):
            yield line


def _uuid(line: bytes) -> str | None:
    if b'"uuid"' not in line:
        return None
    entry = parse_json(line)
    uuid = entry.get("uuid") if isinstance(entry, dict) else None
    return uuid if isinstance(uuid, str) else None
