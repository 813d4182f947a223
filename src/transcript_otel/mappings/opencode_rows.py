"""OpenCode's database rows (`sessions.opencode_db`'s lines) to canonical entries.

A line is `{"table", "row"}`, a row of `session`, `message` or `part` with its JSON columns
parsed (docs/session-logs.md, OpenCode 1.18.33). One `session` row is one run:

* `session` → `system_event` `session_started` `{directory, version, parent_id, slug}`
  (once); its `id` is the session id, its `model.id` the model; a session with a `parent_id`
  (a subagent's, made by the `task` tool) is a run of its own, which that event names;
* a user `message` → nothing itself; its `text` part → `user_message` `{text}`, opening the
  turn: the text as stored, which `opencode run` wraps in double quotes when the prompt had a
  space;
* an assistant `message` (one per model step), once completed → `token_usage` `{usage,
  turn_cost_usd, finish_reason}` as `run`'s `opencode-json` makes it of the same step
  (`opencode_run.step_usage`: OpenCode's `input` leaves out the cache reads and writes, its
  `output` the reasoning) with the stored `cost`; with an `error`, an `error` entry `{exception,
  status_code, error}`; it ends its turn; `modelID` is the model;
* parts of an assistant message: `text` → `assistant_message` `{text}` and `reasoning` →
  `thinking` `{text}`, once finished (`time.end`); `tool` → `tool_use` `{tool_use_id (callID),
  tool_name, input}` once its input is known (running), and `tool_result` `{tool_use_id,
  tool_name, status, output, exit_code, is_error}` once it completed or failed (a shell command
  whose `metadata.exit` is not 0 failed); `step-start` / `step-finish` → `system_event`
  `step_started` / `step_finished` `{reason, tokens, cost}` (the usage is the message's), the
  former opening a turn: one turn, one `chat` span, per model step, as `run`'s `opencode-json`
  makes them (the prompt's turn is the first step's: prompts join a turn its model has not
  answered yet);
* any other part or table → `unknown`; a line that is not such an object → `unknown` with
  `detail.parse_error`.

A row is read again each time it is updated (`watch`): what a row gave is given once
(`OpenCodeRowMapper` keeps, per session, what it gave), and a part still being written (text
streaming, a tool pending) gives nothing until it is. `raw` is the row, on its first entry.
"""

from __future__ import annotations

import math
from typing import Any, Final, NamedTuple

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.opencode_run import step_usage
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.model.entries import EntryType
from transcript_otel.records.serialize import parse_json

_MS: Final = 1_000_000
# What a session row says from its start. (Not its title nor its agent, set later: OpenCode
# names a session "New session - <time>" first, the title request's answer after; the row as
# first read is the entry's `raw`.)
_SESSION_KEYS: Final = ("directory", "version", "parent_id", "slug")
# A tool part's states that say it ended.
_ENDED: Final = frozenset({"completed", "error"})

_Entries = list[tuple[EntryType, dict[str, Any]]]


class _Said(NamedTuple):
    entries: _Entries
    at_ms: int | None = None
    opens_turn: bool = False
    ends_turn: bool = False
    model: str | None = None
    session_id: str | None = None
    provider: str | None = None


class OpenCodeRowMapper:
    """Maps the rows of one session, read and read again as they change (one mapper per session)."""

    __slots__ = ("_given", "_roles")

    def __init__(self) -> None:
        self._roles: dict[str, str] = {}  # message id -> role
        self._given: set[str] = set()  # what each row gave already (`row id:what`)

    def counted(self) -> list[str]:
        """What the rows mapped so far gave (JSON): a mapper told it (`go_on`) gives none again."""
        return sorted(self._given)

    def go_on(self, given: list[str]) -> None:
        self._given.update(given)

    def line(self, line: bytes) -> SessionLine:
        """One row's entries and facts; never raises."""
        try:
            record = parse_json(line)
        except (ValueError, RecursionError) as exc:
            text = line.decode("utf-8", "replace")
            return SessionLine(
                [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": f"invalid JSON: {exc}"}, text)]
            )
        row = record.get("row") if isinstance(record, dict) else None
        table = record.get("table") if isinstance(record, dict) else None
        if not isinstance(row, dict) or not isinstance(row.get("id"), str) or not isinstance(table, str):
            reason = "an OpenCode row must be a JSON object with a 'table' and a 'row' with an 'id'"
            detail = {"parse_error": reason, "line": record}
            return SessionLine(
                [MappedEntry(EntryType.UNKNOWN.value, detail, line.decode("utf-8", "replace"))]
            )
        said = self._row(table, row, started_only=record.get("until") == "start")
        text = line.decode("utf-8", "replace")
        entries = [
            MappedEntry(kind.value, detail, text if index == 0 else None)
            for index, (kind, detail) in enumerate(said.entries)
        ]
        at = said.at_ms * _MS if said.at_ms is not None else None
        return SessionLine(
            entries, at, said.opens_turn, said.ends_turn, said.model, said.session_id, provider=said.provider
        )

    def _row(self, table: str, row: dict[str, Any], started_only: bool) -> _Said:
        data = _object(row.get("data"))
        if table == "session":
            return self._session(row)
        if table == "message":
            return self._message(row, data)
        if table == "part":
            return self._part(row, data, started_only)
        return _Said([(EntryType.UNKNOWN, {"line_type": table})], _ms(row.get("time_created")))

    def _once(self, key: str) -> bool:
        """True the first time `key` is asked."""
        if key in self._given:
            return False
        self._given.add(key)
        return True

    def _session(self, row: dict[str, Any]) -> _Said:
        model = _object(row.get("model"))
        entries: _Entries = []
        if self._once(f"{row['id']}:started"):
            detail = {"subtype": "session_started", **{key: row.get(key) for key in _SESSION_KEYS}}
            entries.append((EntryType.SYSTEM_EVENT, detail))
        return _Said(
            entries,
            _ms(row.get("time_created")),
            model=nonempty_text(model.get("id")),
            session_id=row["id"],
            provider=nonempty_text(model.get("providerID")),
        )

    def _message(self, row: dict[str, Any], data: dict[str, Any]) -> _Said:
        role = data.get("role")
        if isinstance(role, str):
            self._roles[row["id"]] = role
        if role == "user":
            return _Said([], _ms(row.get("time_created")))
        if role != "assistant":
            return _Said(
                [(EntryType.UNKNOWN, {"line_type": "message", "role": role})], _ms(row.get("time_created"))
            )
        time = _object(data.get("time"))
        error = data.get("error")
        if time.get("completed") is None and error is None:
            return _Said([])  # a step under way: its usage comes when it completes
        if not self._once(f"{row['id']}:completed"):
            return _Said([])
        entries: _Entries = []
        usage = step_usage(data.get("tokens"))
        cost = data.get("cost")
        cost = (
            cost
            if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost)
            else 0
        )
        if any(usage.values()) or cost:  # (a failed step counted nothing)
            detail = {"usage": usage, "turn_cost_usd": cost, "finish_reason": data.get("finish")}
            entries.append((EntryType.TOKEN_USAGE, {**detail, "message_id": row["id"]}))
        if error is not None:
            entries.append((EntryType.ERROR, {**_error(error), "message_id": row["id"]}))
        at = _ms(time.get("completed")) or _ms(row.get("time_updated"))
        model, provider = nonempty_text(data.get("modelID")), nonempty_text(data.get("providerID"))
        return _Said(entries, at, ends_turn=True, model=model, provider=provider)

    def _part(self, row: dict[str, Any], data: dict[str, Any], started_only: bool) -> _Said:
        kind = data.get("type")
        at = _ms(row.get("time_created"))
        user = self._roles.get(str(row.get("message_id"))) == "user"
        if kind == "text" and user:
            if not self._once(f"{row['id']}:prompt"):
                return _Said([])
            return _Said([(EntryType.USER_MESSAGE, {"text": data.get("text")})], at, opens_turn=True)
        if kind in ("text", "reasoning"):
            time = _object(data.get("time"))
            if time.get("end") is None or not self._once(f"{row['id']}:{kind}"):
                return _Said([])  # still streaming, or given
            entry_type = EntryType.ASSISTANT_MESSAGE if kind == "text" else EntryType.THINKING
            return _Said([(entry_type, {"text": data.get("text")})], _ms(time.get("end")) or at)
        if kind == "tool":
            return self._tool(row, data, at, started_only)
        if kind in ("step-start", "step-finish"):
            if not self._once(str(row["id"])):
                return _Said([])
            subtype = "step_started" if kind == "step-start" else "step_finished"
            detail: dict[str, Any] = {"subtype": subtype}
            detail.update((key, data[key]) for key in ("reason", "tokens", "cost") if key in data)
            return _Said([(EntryType.SYSTEM_EVENT, detail)], at, opens_turn=kind == "step-start")
        if not self._once(str(row["id"])):
            return _Said([])
        return _Said([(EntryType.UNKNOWN, {"line_type": "part", "part_type": kind})], at)

    def _tool(self, row: dict[str, Any], data: dict[str, Any], at: int | None, started_only: bool) -> _Said:
        state = _object(data.get("state"))
        status = state.get("status")
        times = _object(state.get("time"))
        call, name = data.get("callID"), data.get("tool")
        entries: _Entries = []
        if status in ("running", *_ENDED) and self._once(f"{row['id']}:use"):
            entries.append(
                (EntryType.TOOL_USE, {"tool_use_id": call, "tool_name": name, "input": state.get("input")})
            )
            at = _ms(times.get("start")) or at
        if status in _ENDED and not started_only and self._once(f"{row['id']}:result"):
            metadata = _object(state.get("metadata"))
            exit_status = metadata.get("exit")
            failed = status == "error" or (isinstance(exit_status, int) and exit_status != 0)
            output = state.get("output") if status == "completed" else state.get("error")
            detail = {"tool_use_id": call, "tool_name": name, "status": status, "output": output}
            if isinstance(exit_status, int):
                detail["exit_code"] = exit_status
            detail["is_error"] = failed
            entries.append((EntryType.TOOL_RESULT, detail))
            at = _ms(times.get("end")) or at
        return _Said(entries, at)


def _object(value: Any) -> dict[str, Any]:
    """`value` if it is a JSON object, else an empty one."""
    return value if isinstance(value, dict) else {}


def _ms(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else None


def _error(error: Any) -> dict[str, Any]:
    """A failed step's `error` (`{name, data: {message, statusCode, ...}}`) as `run`'s
    `opencode-json` says it: an exception named after the error's class, the API's message."""
    data = _object(error.get("data")) if isinstance(error, dict) else {}
    name = error.get("name") if isinstance(error, dict) else None
    message = data.get("message")
    detail: dict[str, Any] = {
        "exception": {
            "type": name if isinstance(name, str) and name else "Error",
            "message": message if isinstance(message, str) else "",
        },
        "error": error,
    }
    if isinstance(data.get("statusCode"), int):
        detail["status_code"] = data["statusCode"]
    return detail
