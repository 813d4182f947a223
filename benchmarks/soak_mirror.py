"""What the watch soak's mirror holds (`soak_watch.py`), session by session: each entry's key as
the template's (`soak_sessions.Copy.back`), which watch process wrote it, and the tokens of the
session's runs. A record's writer is told by where it lies in its run file: the mirror's sizes
were taken as each process ended, and a process only appends."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

from soak_sessions import INPUT, OUTPUT, RUN_INPUT, RUN_OUTPUT, Copy, entry_key
from transcript_otel.model.entries import TranscriptEvent


@dataclass
class SessionFound:
    keys: Counter[bytes] = field(default_factory=Counter)
    writers: dict[bytes, list[int]] = field(default_factory=dict)  # key -> the processes that wrote it
    chat: list[int] = field(default_factory=lambda: [0, 0])  # input, output of its `chat` spans
    runs: list[int] = field(default_factory=lambda: [0, 0])  # of its runs' root spans
    run_files: set[str] = field(default_factory=set)
    processes: set[int] = field(default_factory=set)  # the processes that wrote any record of it
    stops: int = 0  # runs ended (`transcript.stop`)


@dataclass
class MirrorRead:
    sessions: dict[str, SessionFound]
    files: int = 0
    bytes: int = 0
    records: int = 0
    torn: int = 0  # lines that are no whole record (a process killed while writing one)
    errors: Counter[str] = field(default_factory=Counter)  # `transcript.error` records, by what they say
    strangers: int = 0  # records of no session copied


def sizes(runs: Path) -> dict[str, int]:
    """Each run file's size now."""
    return {path.name: path.stat().st_size for path in runs.glob("*.jsonl")} if runs.is_dir() else {}


def read_mirror(runs: Path, copies: dict[str, Copy], ends: list[dict[str, int]]) -> MirrorRead:
    """Every run file of `runs`; `ends`: the mirror's sizes as each watch process ended, in order."""
    read = MirrorRead({session: SessionFound() for session in copies})
    for path in sorted(runs.glob("*.jsonl")):
        read.files += 1
        bounds = [end.get(path.name, 0) for end in ends]
        offset = 0
        with path.open("rb") as stream:
            for line in stream:
                at, offset = offset, offset + len(line)
                writer = next((number for number, bound in enumerate(bounds) if at < bound), len(bounds))
                _record(read, line, writer, path.name, copies)
        read.bytes += offset
    return read


def _record(read: MirrorRead, line: bytes, writer: int, name: str, copies: dict[str, Copy]) -> None:
    try:
        record = json.loads(line)
        context = record["context"]
        event = record["event"]
    except (ValueError, KeyError, TypeError):
        read.torn += 1
        return
    read.records += 1
    if event == TranscriptEvent.ERROR.value:
        read.errors[str(context.get("error"))[:160]] += 1
    copy = copies.get(str(context.get("session_id")))
    if copy is None:
        read.strangers += 1
        return
    found = read.sessions[copy.session_id]
    found.run_files.add(name)
    found.processes.add(writer)
    if event == TranscriptEvent.ENTRY.value:
        raw, source, kind = (
            context.get("raw"),
            copy.back(str(context.get("source"))),
            str(context.get("entry_type")),
        )
        if isinstance(raw, str):
            key = entry_key(source, kind, copy.back(raw), None)
        else:  # (the detail, as the template's)
            key = entry_key(source, kind, None, json.loads(copy.back(json.dumps(context.get("detail")))))
        found.keys[key] += 1
        found.writers.setdefault(key, []).append(writer)
    elif event == TranscriptEvent.SPAN.value:
        attributes = context.get("attributes") or {}
        if str(context.get("name", "")).startswith("chat"):
            found.chat[0] += attributes.get(INPUT, 0)
            found.chat[1] += attributes.get(OUTPUT, 0)
        if not context.get("parent_span_id"):
            found.runs[0] += attributes.get(RUN_INPUT, 0)
            found.runs[1] += attributes.get(RUN_OUTPUT, 0)
    elif event == TranscriptEvent.STOP.value:
        found.stops += 1
