"""A devflow transcript read back (`.json`, or gzipped whatever its name) into the format's types.

Every field is checked against ADR-011's Go types, so malformed content is a
`ValueError` that names the file and the field (`…/transcript.json: turns[3].role:
'robot' is not one of …`); Go's zero values stand where a field is left out.
"""

from __future__ import annotations

import gzip
import json
import os
import zlib
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any, Final

from transcript_otel.exports.devflow.format import (
    RUN_STATUSES,
    TURN_ROLES,
    DevflowMetadata,
    DevflowToolCall,
    DevflowTranscript,
    DevflowTurn,
)

__all__ = ["read_devflow"]

_GZIP_MAGIC: Final = b"\x1f\x8b"


class _Reader:
    """Typed access to a parsed document; every error names the file and the field."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def fail(self, where: str, problem: str) -> ValueError:
        return ValueError(f"{self.path}: {where}: {problem}")

    @staticmethod
    def _kind(value: Any) -> str:
        return "null" if value is None else type(value).__name__

    def get(self, obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> Any:
        if key not in obj:
            if required:
                raise self.fail(f"{where}{key}", "missing")
            return None
        return obj[key]

    def object(self, value: Any, where: str) -> Mapping[str, Any]:
        if not isinstance(value, Mapping):
            raise self.fail(where, f"expected an object, got {self._kind(value)}")
        return value

    def string(self, obj: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> str:
        value = self.get(obj, key, where, required=required)
        if value is None and not required:
            return ""
        if not isinstance(value, str):
            raise self.fail(f"{where}{key}", f"expected a string, got {self._kind(value)}")
        return value

    def integer(self, obj: Mapping[str, Any], key: str, where: str, *, required: bool = False) -> int:
        value = self.get(obj, key, where, required=required)
        if value is None and not required:
            return 0
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.fail(f"{where}{key}", f"expected an integer, got {self._kind(value)} {value!r}")
        return value

    def number(self, obj: Mapping[str, Any], key: str, where: str) -> float:
        value = self.get(obj, key, where, required=False)
        if value is None:
            return 0.0
        if not isinstance(value, int | float) or isinstance(value, bool):
            raise self.fail(f"{where}{key}", f"expected a number, got {self._kind(value)} {value!r}")
        return float(value)

    def time(self, obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> datetime | None:
        text = self.string(obj, key, where, required=required)
        if not text and not required:
            return None
        try:
            moment = datetime.fromisoformat(text)
        except ValueError:
            raise self.fail(f"{where}{key}", f"not an RFC 3339 time: {text!r}") from None
        if moment.tzinfo is None:
            raise self.fail(f"{where}{key}", f"an RFC 3339 time needs a time zone: {text!r}")
        if moment.year == 1 and not required:
            return None  # Go's zero time.Time, which `omitempty` does not leave out
        return moment

    def choice(self, obj: Mapping[str, Any], key: str, where: str, choices: tuple[str, ...]) -> str:
        value = self.string(obj, key, where, required=True)
        if value not in choices:
            raise self.fail(f"{where}{key}", f"{value!r} is not one of {', '.join(choices)}")
        return value

    def optional_object(self, obj: Mapping[str, Any], key: str, where: str) -> dict[str, Any] | None:
        value = self.get(obj, key, where, required=False)
        if value is None:
            return None
        return dict(self.object(value, f"{where}{key}"))

    def array(self, obj: Mapping[str, Any], key: str, where: str, *, required: bool) -> list[Any]:
        value = self.get(obj, key, where, required=required)
        if value is None:
            return []  # Go writes a nil slice as null
        if not isinstance(value, list):
            raise self.fail(f"{where}{key}", f"expected an array, got {self._kind(value)}")
        return value


def _load(path: Path) -> Any:
    with open(path, "rb") as handle:
        data = handle.read()
    if data[:2] == _GZIP_MAGIC:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise ValueError(f"{path}: not a readable gzip file ({exc})") from None
    try:
        return json.loads(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise ValueError(f"{path}: not UTF-8 text ({exc})") from None
    except json.JSONDecodeError as exc:
        raise ValueError(f"{path}: not JSON ({exc})") from None


def _tool_call(read: _Reader, value: Any, where: str) -> DevflowToolCall:
    call = read.object(value, where)
    where += "."
    return DevflowToolCall(
        name=read.string(call, "name", where, required=True),
        input=read.optional_object(call, "input", where) or {},
        id=read.string(call, "id", where),
        output=read.string(call, "output", where),
        error=read.string(call, "error", where),
    )


def _turn(read: _Reader, value: Any, where: str) -> DevflowTurn:
    turn = read.object(value, where)
    prefix = where + "."
    calls = read.array(turn, "toolCalls", prefix, required=False)
    timestamp = read.time(turn, "timestamp", prefix, required=True)
    assert timestamp is not None
    return DevflowTurn(
        id=read.integer(turn, "id", prefix, required=True),
        role=read.choice(turn, "role", prefix, TURN_ROLES),
        content=read.string(turn, "content", prefix, required=True),
        timestamp=timestamp,
        tokens_in=read.integer(turn, "tokensIn", prefix),
        tokens_out=read.integer(turn, "tokensOut", prefix),
        tool_calls=tuple(_tool_call(read, call, f"{prefix}toolCalls[{n}]") for n, call in enumerate(calls)),
        duration_ms=read.integer(turn, "durationMs", prefix),
    )


def read_devflow(path: str | os.PathLike[str]) -> DevflowTranscript:
    """Read a devflow transcript (`.json`, or gzipped whatever its name).

    Malformed content is a `ValueError` naming the file and the field
    (`…/transcript.json: turns[3].role: 'robot' is not one of …`).
    """
    read = _Reader(Path(path))
    document = read.object(_load(read.path), "the document")
    meta = read.object(read.get(document, "metadata", "", required=True), "metadata")
    started = read.time(meta, "startedAt", "metadata.", required=True)
    assert started is not None
    metadata = DevflowMetadata(
        flow_id=read.string(meta, "flowId", "metadata.", required=True),
        started_at=started,
        status=read.choice(meta, "status", "metadata.", RUN_STATUSES),
        total_tokens_in=read.integer(meta, "totalTokensIn", "metadata."),
        total_tokens_out=read.integer(meta, "totalTokensOut", "metadata."),
        total_cost=read.number(meta, "totalCost", "metadata."),
        node_id=read.string(meta, "nodeId", "metadata."),
        input=read.optional_object(meta, "input", "metadata."),
        ended_at=read.time(meta, "endedAt", "metadata.", required=False),
        error=read.string(meta, "error", "metadata."),
    )
    turns = read.array(document, "turns", "", required=True)
    return DevflowTranscript(
        run_id=read.string(document, "runId", "", required=True),
        metadata=metadata,
        turns=tuple(_turn(read, turn, f"turns[{n}]") for n, turn in enumerate(turns)),
    )
