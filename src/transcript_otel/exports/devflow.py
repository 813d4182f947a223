"""A captured run as a devflow transcript (seed 003, ADR-011), and devflow transcripts read back.

The format: one JSON document `{runId, metadata, turns}`, pretty-printed like Go's
`json.MarshalIndent(t, "", "  ")`, keys in the order and with the `omitempty`
rules of the ADR's Go types (`tokensIn`, `toolCalls`, `output`… are left out when
empty or zero). A document of 100 KiB (102,400 bytes, the ADR's `100*1024`) or more
is stored gzipped: `transcript.json` below, `transcript.json.gz` at or above.

`write_devflow(source, target)` reads the run twice and never holds it whole: a
first pass feeds a `RunDigest` (metadata: times, status, token totals, cost,
errors, and how many entries each source has), a second writes the turns as they
come. Only the turns that cannot be written yet are held: an assistant turn while
it may still get tool calls or token usage, one with tool calls waiting for their
results, and the turns after it (written in order). A source's turn stops waiting
at that source's last entry (counted in the first pass), so a finished subagent
holds nothing back. At most `_MAX_HELD_TURNS` turns or `_MAX_HELD_CHARS`
characters are held: beyond, the oldest is written as it is (a call whose result
comes later keeps no `output`; its `tool_result` turn still follows). The file is
written to a temporary file in the target directory and moved into place with
`os.replace` (created 0600, like the mirror's files); the gzip decision is taken on
the encoded size, holding at most the first 100 KiB in memory. A source without any
record is a `ValueError`; a run without entries is a transcript with no turns.

Mapping of the canonical entries (in file order, which is capture order):

* `user_message` → a `user` turn; a `system` turn when the chat message's role is
  `system` or `developer` (the prompt the weakincentives OpenAI/LiteLLM adapters send).
* `assistant_message` → an `assistant` turn with its text; a Claude message's thinking
  blocks become a `[thinking]` turn just before it.
* `thinking` → an `assistant` turn whose content starts with `[thinking] `: devflow
  has no role for it, so it is kept, marked, in its place.
* `tool_use` → a tool call (`id`, `name`, `input`: an object, anything else wrapped as
  `{"value": …}`) on the source's open assistant turn (its latest turn, when that is
  an assistant turn), else on a new empty assistant turn: parallel calls share the
  turn of the message that made them; a call after a result opens a new turn.
* `tool_result` → fills the call of the same id and source (`output` = the result's
  text, or `error` when the result says the call failed), and is a `tool_result` turn
  with that text (`durationMs`: reported, else from the call to the result): the
  transcript keeps the order in which results came (between them, events and
  subagent turns), and a result of an unknown call is kept too.
* `token_usage` → `tokensIn`/`tokensOut` (input and output tokens) added to the
  source's open assistant turn (the response it counts); with none open, a `system`
  turn `[usage] tokens: …` carrying them. Runs without usage entries (Claude transcripts)
  count each assistant message's own usage once, on its turn. The turns' tokens add
  up to the metadata totals.
* `system_event` → a `system` turn `[event] <text>` (the subtype and its words).
* `error` → a `system` turn `[error] <text>`; the first error's text is `metadata.error`.
* `unknown` → a `system` turn `[unknown] <text>` (an unreadable line's reason, and the line).
* `subagent:<id>` sources → their turns in place, in capture order, content prefixed
  `[subagent:<id>] `; tool calls pair within their own source.

Any turn but a plain user, system-prompt or assistant message or tool result is
marked in its content, so a reader never mistakes an event for something said.

Metadata: `flowId` = the prompt name (else `transcript`), `nodeId` = the adapter,
`startedAt`/`endedAt` = the run's first and last record (`endedAt` left out while
`running`), `status` = `failed` when the run has an error entry, `completed` when it
stopped without one, `running` when there is no `transcript.stop` record (a
captured run never says `canceled`); token totals and `totalCost` as `summary`
counts them. `runId` = `devflow_run_id(start, flow, the first 8 characters of the
session id)` (of the run id when there is no session id).
Timestamps are RFC 3339 in UTC (`2025-01-15T10:30:00.123456Z`).
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import os
import re
import tempfile
import zlib
from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import islice
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import orjson

from transcript_otel.exports import destination
from transcript_otel.genai.attributes import RunningUsage, message_usage, tool_failed, tool_identity
from transcript_otel.model.entries import MAIN_SOURCE, TranscriptEntry, TranscriptEvent
from transcript_otel.otel.attributes import GEN_AI_USAGE_INPUT_TOKENS, GEN_AI_USAGE_OUTPUT_TOKENS
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.reconstruct import entry_from_context
from transcript_otel.reading.text import assistant_parts, entry_text, tool_input, tool_output

if TYPE_CHECKING:
    from transcript_otel.reading.sources import RecordSource

__all__ = [
    "GZIP_THRESHOLD",
    "RUN_STATUSES",
    "TURN_ROLES",
    "DevflowMetadata",
    "DevflowToolCall",
    "DevflowTranscript",
    "DevflowTurn",
    "devflow_run_id",
    "read_devflow",
    "write_devflow",
]

GZIP_THRESHOLD: Final = 100 * 1024
TURN_ROLES: Final = ("system", "user", "assistant", "tool_result")
RUN_STATUSES: Final = ("running", "completed", "failed", "canceled")
PLAIN_NAME: Final = "transcript.json"
GZIP_NAME: Final = "transcript.json.gz"

_MAX_HELD_TURNS: Final = 10_000
_MAX_HELD_CHARS: Final = 16 * 1024 * 1024
_DEFAULT_FLOW: Final = "transcript"
_SHORT_ID: Final = 8
_SYSTEM_ROLES: Final = ("system", "developer")
_SLUG_OUT: Final = re.compile(r"[^A-Za-z0-9_]+")
_GZIP_MAGIC: Final = b"\x1f\x8b"


# -- the devflow types (ADR-011's Go types; Go's zero values where a field is left out) ---


@dataclass(frozen=True, slots=True)
class DevflowToolCall:
    """`ToolCall`: one tool call of an assistant turn."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    id: str = ""
    output: str = ""
    error: str = ""


@dataclass(frozen=True, slots=True)
class DevflowTurn:
    """`Turn`: one message of the conversation (`role` is one of `TURN_ROLES`)."""

    id: int
    role: str
    content: str
    timestamp: datetime
    tokens_in: int = 0
    tokens_out: int = 0
    tool_calls: tuple[DevflowToolCall, ...] = ()
    duration_ms: int = 0


@dataclass(frozen=True, slots=True)
class DevflowMetadata:
    """`TranscriptMeta` (`status` is one of `RUN_STATUSES`; `ended_at` None when left out)."""

    flow_id: str
    started_at: datetime
    status: str
    total_tokens_in: int = 0
    total_tokens_out: int = 0
    total_cost: float = 0.0
    node_id: str = ""
    input: dict[str, Any] | None = None
    ended_at: datetime | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class DevflowTranscript:
    """`Transcript`: a whole devflow transcript."""

    run_id: str
    metadata: DevflowMetadata
    turns: tuple[DevflowTurn, ...]


# -- run ids ------------------------------------------------------------------------------


def _slug(value: str, what: str) -> str:
    slug = _SLUG_OUT.sub("-", value).strip("-")
    if not slug:
        raise ValueError(f"the run id's {what} {value!r} has no letter or digit")
    return slug


def devflow_run_id(started: datetime, flow: str, identifier: str, suffix: str | None = None) -> str:
    """`{date}-{flow}-{identifier}[-{suffix}]`, e.g. `2025-01-15-ticket-to-pr-TK421`.

    The date is the start's (in UTC when it has a time zone); each part is slugged:
    runs of anything but ASCII letters, digits and `_` become one `-`, none at the
    ends (case is kept). A part with no letter or digit is a `ValueError`.
    """
    if started.tzinfo is not None:
        started = started.astimezone(UTC)
    parts = [started.strftime("%Y-%m-%d"), _slug(flow, "flow"), _slug(identifier, "identifier")]
    if suffix is not None:
        parts.append(_slug(suffix, "suffix"))
    return "-".join(parts)


def _short_identifier(digest: RunDigest) -> str:
    for candidate in (digest.session_id, digest.run_id):
        if candidate and _SLUG_OUT.sub("", candidate):
            return _slug(candidate, "identifier")[:_SHORT_ID].strip("-")
    assert digest.started is not None
    return digest.started.astimezone(UTC).strftime("%H%M%S")


# -- writing ------------------------------------------------------------------------------


def _time(moment: datetime) -> str:
    """RFC 3339 in UTC, as Go writes a `time.Time` (`Z`, no trailing zero microseconds)."""
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return moment.isoformat().replace("+00:00", "Z")


def _json(value: Any, level: int) -> bytes:
    """`value` as MarshalIndent writes it at nesting `level`, UTF-8 (JSON strings hold no newline)."""
    try:
        encoded = orjson.dumps(value, option=orjson.OPT_INDENT_2, default=repr)
    except (orjson.JSONEncodeError, TypeError):  # lone surrogates, integers beyond 64 bits
        text = json.dumps(value, indent=2, ensure_ascii=False, default=repr)
        encoded = text.encode("utf-8", "backslashreplace")  # a lone surrogate as its \\udXXXX escape
    return encoded.replace(b"\n", b"\n" + b"  " * level) if level else encoded


def _mapping(value: Any, key: str) -> Mapping[str, Any]:
    found = value.get(key) if isinstance(value, Mapping) else None
    return found if isinstance(found, Mapping) else {}


def _call_input(detail: Mapping[str, Any]) -> dict[str, Any]:
    arguments = tool_input(detail)
    if arguments is None:
        return {}
    if isinstance(arguments, Mapping):
        return {str(key): value for key, value in arguments.items()}
    return {"value": arguments}


def _duration_ms(detail: Mapping[str, Any]) -> float | None:
    item = _mapping(_mapping(detail, "notification"), "item")
    for reported in (detail.get("duration_ms"), item.get("durationMs")):
        if isinstance(reported, int | float) and not isinstance(reported, bool) and reported >= 0:
            return float(reported)
    return None


@dataclass(slots=True, eq=False)
class _Call:
    turn: _Turn
    key: tuple[str, str] | None
    name: str
    input: dict[str, Any]
    started: datetime
    output: str = ""
    error: str = ""


@dataclass(slots=True, eq=False)
class _Turn:
    id: int
    role: str
    source: str
    content: str
    timestamp: datetime
    tokens_in: int = 0
    tokens_out: int = 0
    calls: list[_Call] = field(default_factory=list)
    duration_ms: int = 0
    open: bool = False  # an assistant turn that may still get tool calls and token usage
    waiting: int = 0  # its calls still waiting for their result
    size: int = 0  # characters held for it

    def as_json(self) -> dict[str, Any]:
        content = self.content
        if self.source != MAIN_SOURCE:
            content = f"[{self.source}] {content}" if content else f"[{self.source}]"
        turn: dict[str, Any] = {"id": self.id, "role": self.role, "content": content}
        if self.tokens_in:
            turn["tokensIn"] = self.tokens_in
        if self.tokens_out:
            turn["tokensOut"] = self.tokens_out
        turn["timestamp"] = _time(self.timestamp)
        if self.calls:
            turn["toolCalls"] = [_call_json(call) for call in self.calls]
        if self.duration_ms:
            turn["durationMs"] = self.duration_ms
        return turn


def _call_json(call: _Call) -> dict[str, Any]:
    encoded: dict[str, Any] = {}
    if call.key is not None:
        encoded["id"] = call.key[1]
    encoded["name"] = call.name
    encoded["input"] = call.input
    if call.output:
        encoded["output"] = call.output
    if call.error:
        encoded["error"] = call.error
    return encoded


class _TurnWriter:
    """Canonical entries in, devflow turns out in order, holding only what must wait."""

    def __init__(self, out: _Output, entries_by_source: Mapping[str, int], message_usage: bool) -> None:
        self._out = out
        self._remaining = Counter(entries_by_source)
        self._message_usage = message_usage
        self._held: deque[_Turn] = deque()
        self._held_chars = 0
        self._open: dict[str, _Turn] = {}
        self._calls: dict[tuple[str, str], _Call] = {}
        self._last_message: dict[str, str] = {}
        self._next_id = 1
        # Codex repeats its running total: each report counts what the total grew by.
        self._usage = RunningUsage()
        self.written = 0

    # -- entries --------------------------------------------------------------------------

    def add(self, entry: TranscriptEntry) -> None:
        kind, source, detail, at = entry.entry_type, entry.source, entry.detail, entry.timestamp
        if kind == "user_message":
            role = _mapping(detail, "message").get("role")
            self._turn(source, "system" if role in _SYSTEM_ROLES else "user", entry_text(kind, detail), at)
        elif kind == "assistant_message":
            self._assistant(source, detail, at)
        elif kind == "thinking":
            self._turn(source, "assistant", f"[thinking] {entry_text(kind, detail)}", at, open_=True)
        elif kind == "tool_use":
            self._tool_use(source, detail, at)
        elif kind == "tool_result":
            self._tool_result(source, detail, at)
        elif kind == "token_usage":
            self._token_usage(source, detail, at)
        elif kind == "system_event":
            self._turn(source, "system", f"[event] {entry_text(kind, detail)}", at)
        elif kind == "error":
            self._turn(source, "system", f"[error] {entry_text(kind, detail)}", at)
        else:
            text = entry_text(kind, detail)
            line = detail.get("line")
            if isinstance(line, str) and line:
                text = f"{text}\n{line}"
            self._turn(source, "system", f"[{kind}] {text}", at)
        self._remaining[source] -= 1
        if self._remaining[source] == 0:
            self._end_source(source)
        self._flush()

    def _turn(self, source: str, role: str, content: str, at: datetime, *, open_: bool = False) -> _Turn:
        self._close(source)
        turn = _Turn(self._next_id, role, source, content, at, open=open_, size=len(content))
        self._next_id += 1
        self._held.append(turn)
        self._held_chars += turn.size
        if open_:
            self._open[source] = turn
        return turn

    def _grow(self, turn: _Turn, chars: int) -> None:
        turn.size += chars
        self._held_chars += chars

    def _assistant(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        thinking, text = assistant_parts(detail)
        if thinking is not None:
            self._turn(source, "assistant", f"[thinking] {thinking}", at)
        turn = self._turn(source, "assistant", text, at, open_=True)
        if not self._message_usage:
            return
        usage = message_usage(detail)
        if usage is not None and self._last_message.get(source) != usage[0]:
            self._last_message[source] = usage[0]
            turn.tokens_in += usage[1].get(GEN_AI_USAGE_INPUT_TOKENS, 0)
            turn.tokens_out += usage[1].get(GEN_AI_USAGE_OUTPUT_TOKENS, 0)

    def _tool_use(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        turn = self._open.get(source) or self._turn(source, "assistant", "", at, open_=True)
        call_id, name = tool_identity(detail)
        key = (source, call_id) if call_id is not None else None
        call = _Call(turn, key, name or "tool", _call_input(detail), at)
        turn.calls.append(call)
        self._grow(turn, len(call.name) + len(_json(call.input, 0)))
        if key is not None:
            replaced = self._calls.pop(key, None)
            if replaced is not None:  # the same id again: the first call gets no result
                replaced.turn.waiting -= 1
            self._calls[key] = call
            turn.waiting += 1

    def _tool_result(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        text = tool_output(detail)
        call_id, _ = tool_identity(detail)
        call = self._calls.pop((source, call_id), None) if call_id is not None else None
        duration = _duration_ms(detail)
        if call is not None:
            if tool_failed(detail):
                call.error = text
            else:
                call.output = text
            call.turn.waiting -= 1
            self._grow(call.turn, len(text))
            if duration is None:
                duration = max((at - call.started).total_seconds() * 1000, 0.0)
        turn = self._turn(source, "tool_result", text, at)
        turn.duration_ms = round(duration) if duration is not None else 0

    def _token_usage(self, source: str, detail: Mapping[str, Any], at: datetime) -> None:
        usage = self._usage.added(detail)
        tokens_in = usage.get(GEN_AI_USAGE_INPUT_TOKENS, 0)
        tokens_out = usage.get(GEN_AI_USAGE_OUTPUT_TOKENS, 0)
        if not (tokens_in or tokens_out):
            return  # nothing devflow can hold (cost is in the metadata)
        turn = self._open.get(source)
        if turn is None:
            turn = self._turn(source, "system", f"[usage] {entry_text('token_usage', detail)}", at)
        turn.tokens_in += tokens_in
        turn.tokens_out += tokens_out

    # -- holding and writing --------------------------------------------------------------

    def _close(self, source: str) -> None:
        turn = self._open.pop(source, None)
        if turn is not None:
            turn.open = False

    def _end_source(self, source: str) -> None:
        """The source's last entry was read: its open turn and waiting calls wait no more."""
        self._close(source)
        for key in [key for key in self._calls if key[0] == source]:
            self._calls.pop(key).turn.waiting -= 1

    def _let_go(self, turn: _Turn) -> None:
        """Write `turn` as it is, whatever it waits for."""
        if self._open.get(turn.source) is turn:
            self._close(turn.source)
        for call in turn.calls:
            if call.key is not None and self._calls.get(call.key) is call:
                del self._calls[call.key]
        turn.waiting = 0

    def _flush(self) -> None:
        held = self._held
        while held:
            head = held[0]
            if head.open or head.waiting:
                if len(held) <= _MAX_HELD_TURNS and self._held_chars <= _MAX_HELD_CHARS:
                    return
                self._let_go(head)
            held.popleft()
            self._held_chars -= head.size
            self._write(head)

    def _write(self, turn: _Turn) -> None:
        self._out.write((b",\n    " if self.written else b"\n    ") + _json(turn.as_json(), 2))
        self.written += 1

    def finish(self) -> None:
        for source in list(self._open):
            self._close(source)
        for call in self._calls.values():
            call.turn.waiting -= 1
        self._calls.clear()
        self._flush()


# -- the output file ----------------------------------------------------------------------


class _Output:
    """A transcript file written atomically; with `compress=None`, gzipped once it reaches the threshold.

    Until then (automatic mode) the bytes are held in memory, so at most
    `GZIP_THRESHOLD` bytes are ever held.
    """

    def __init__(self, directory: Path, name: str | None, compress: bool | None) -> None:
        self._directory = directory
        self._name = name
        self._compress = compress
        self._pending: bytearray | None = bytearray() if compress is None else None
        self._temp: Path | None = None
        self._raw: io.BufferedWriter | None = None
        self._stream: io.BufferedIOBase | None = None
        if compress is not None:
            self._open(compress)

    def _open(self, compress: bool) -> None:
        scratch = destination.scratch_directory(self._directory / (self._name or PLAIN_NAME))
        handle, temp = tempfile.mkstemp(dir=scratch, prefix=".transcript-", suffix=".tmp")
        self._temp = Path(temp)
        self._raw = os.fdopen(handle, "wb")
        self._compress = compress
        if compress:
            inner = (self._name or GZIP_NAME).removesuffix(".gz")
            self._stream = gzip.GzipFile(
                filename=inner, mode="wb", fileobj=self._raw, compresslevel=6, mtime=0
            )
        else:
            self._stream = self._raw

    def write(self, data: bytes) -> None:
        if self._pending is None:
            assert self._stream is not None
            self._stream.write(data)
            return
        self._pending += data
        if len(self._pending) >= GZIP_THRESHOLD:
            self._open(compress=True)
            assert self._stream is not None
            self._stream.write(self._pending)
            self._pending = None

    def commit(self) -> Path:
        if self._pending is not None:
            self._open(compress=False)
            assert self._stream is not None
            self._stream.write(self._pending)
            self._pending = None
        assert self._stream is not None
        assert self._raw is not None
        assert self._temp is not None
        if self._stream is not self._raw:
            self._stream.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        named = self._directory / (self._name or (GZIP_NAME if self._compress else PLAIN_NAME))
        final = destination.put_in_place(self._temp, named)
        self._temp = None
        if self._name is None:  # a stale other form would be read instead of this one
            other = self._directory / (PLAIN_NAME if self._compress else GZIP_NAME)
            with contextlib.suppress(FileNotFoundError):
                other.unlink()
        return final

    def discard(self) -> None:
        for stream in (self._stream, self._raw):
            if stream is not None:
                with contextlib.suppress(OSError, ValueError):
                    stream.close()
        if self._temp is not None:
            with contextlib.suppress(FileNotFoundError):
                self._temp.unlink()
            self._temp = None


def _destination(target: str | os.PathLike[str]) -> tuple[Path, str | None, bool | None]:
    """(directory, file name or None for automatic, gzip or None for automatic)."""
    path = Path(target)
    if path.is_dir() or (not path.exists() and not path.name.endswith((".json", ".gz"))):
        path.mkdir(parents=True, exist_ok=True)
        return path, None, None
    path.parent.mkdir(parents=True, exist_ok=True)
    real = destination.real_path(path)  # through a symlink: the file it names is written
    return real.parent, real.name, path.name.endswith(".gz")


def _metadata(digest: RunDigest, flow_id: str, node_id: str) -> dict[str, Any]:
    assert digest.started is not None
    status = {"failed": "failed", "completed": "completed"}.get(digest.status, "running")
    tokens = digest.tokens
    metadata: dict[str, Any] = {"flowId": flow_id}
    if node_id:
        metadata["nodeId"] = node_id
    metadata["startedAt"] = _time(digest.started)
    if status != "running" and digest.ended is not None:
        metadata["endedAt"] = _time(digest.ended)
    metadata["status"] = status
    metadata["totalTokensIn"] = tokens.get("input", 0)
    metadata["totalTokensOut"] = tokens.get("output", 0)
    metadata["totalCost"] = round(digest.cost_usd, 6)
    if digest.errors:
        metadata["error"] = digest.errors[0]
    return metadata


def write_devflow(
    source: RecordSource,
    target: str | os.PathLike[str],
    *,
    flow_id: str | None = None,
    run_id: str | None = None,
    node_id: str | None = None,
) -> Path:
    """Write the run `source` reads as a devflow transcript; returns the file written.

    `target` is a directory (existing, or a path whose name ends in neither `.json`
    nor `.gz`, created): `transcript.json` is written there, or `transcript.json.gz`
    when the document is 100 KiB or more (the other one, left by an earlier export,
    is removed). Otherwise `target` is the file, gzipped when its name ends in `.gz`.
    `flow_id` (default: the prompt name), `run_id` (default: `devflow_run_id` of the
    start, the flow and the run's id) and `node_id` (default: the adapter; `""`
    leaves it out) override the defaults. A source with no records at all is a
    `ValueError`; a run with no entries gives a transcript without turns.
    """
    digest = RunDigest.of(source.records())
    if digest.started is None:
        raise ValueError("nothing to export: the run has no transcript records")
    flow = flow_id if flow_id is not None else (digest.prompt_name or _DEFAULT_FLOW)
    if run_id is None:
        run_id = devflow_run_id(digest.started, flow, _short_identifier(digest))
    elif not run_id:
        raise ValueError("the run id is empty")
    metadata = _metadata(digest, flow, node_id if node_id is not None else digest.adapter)

    directory, name, compress = _destination(target)
    out = _Output(directory, name, compress)
    try:
        out.write(
            b'{\n  "runId": %s,\n  "metadata": %s,\n  "turns": [' % (_json(run_id, 0), _json(metadata, 1))
        )
        turns = _TurnWriter(out, digest.by_source, message_usage=not digest.by_type["token_usage"])
        records = source.records()
        try:
            # As many records as the first pass read: a run still being written gains some.
            for record in islice(records, digest.records):
                if record.get("event") != TranscriptEvent.ENTRY.value:
                    continue
                context = record.get("context")
                try:
                    entry = entry_from_context(context if isinstance(context, Mapping) else {})
                except ValueError:
                    continue  # malformed: `validate` says what is wrong with it
                turns.add(entry)
        finally:
            close = getattr(records, "close", None)
            if callable(close):
                close()  # the file under a generator stopped early
        turns.finish()
        out.write(b"\n  ]\n}\n" if turns.written else b"]\n}\n")
        return out.commit()
    except BaseException:
        out.discard()
        raise


# -- reading ------------------------------------------------------------------------------


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
