"""Gemini CLI session lines (`~/.gemini/tmp/<project>/chats/session-*.jsonl`) to canonical entries.

The file is an append log (docs/session-logs.md, Gemini CLI 0.61): a header
`{sessionId, projectHash, startTime, lastUpdated, kind}`, message records `{id, timestamp, type,
content, ...}` and patches `{"$set": {...}}` / `{"$rewindTo": id}`. The CLI writes a message
again whenever it changes (a model message once its tool calls ran, with `toolCalls`): the last
record per id is the message. Each record is mapped as it comes, giving only what the records of
its id before did not (so an import and a watch that reads the file as it grows give the same
entries, none twice):

* the header → `system_event` `session_started` `{session_id, kind, project_hash}`; its
  `sessionId` is the session's id;
* a `user` message with text → `user_message` `{text, message_id}`, opening a turn; the hidden
  `<session_context>` message the CLI writes first (what it tells the model of the workspace)
  → nothing; a `user` message of `functionResponse` parts (what the model got back from a
  tool) → nothing where its call's `toolCalls` entry gave the result, else that `tool_result`;
* a `gemini` message → `thinking` `{text, subjects}` (its `thoughts`, one per streamed chunk,
  joined), `assistant_message` `{text, message_id}` (not for empty content), `token_usage`
  `{usage, tokens, message_id, model}` (`tokens` in the conventions' names: `input` is the
  whole prompt, cached tokens included; `thoughts` are reasoning tokens), and for each
  `toolCalls` entry `tool_use` `{tool_use_id, tool_name, input, description}` and, once it
  ended, `tool_result` `{tool_use_id, tool_name, is_error, status, text, display,
  completed_at}` (`is_error` also for a command that exited non-zero: the CLI says `success`);
  its `model` is the turn's model;
* `$set` → nothing for metadata (`lastUpdated`, `summary`, ...); a `messages` list replaces the
  message list: its messages not seen before are mapped as above, and messages it leaves out
  are said: a prompt not answered yet (the CLI takes the prompt of a failed request out of
  the session, and records no error) → `error` `{text, message_id, prompt}`; others →
  `system_event` `messages_removed` `{message_ids}`;
* `$rewindTo` → `system_event` `rewound` `{message_id, message_ids}` (the messages from that
  one on are gone from the session);
* a message of another `type`, any other record → `unknown`; a line that is not a JSON object
  → `unknown` with `detail.parse_error`; a blank line → nothing.

`raw` is the line, on its first entry; every entry's source is `main` (a subagent's session is
a file of its own, `chats/<parent session>/<id>.jsonl`, mapped as a session of its own).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final, NamedTuple, TypeGuard

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.mappings._entry import MappedEntry, latest
from transcript_otel.mappings._gemini_parts import (
    SESSION_CONTEXT,
    call_id,
    function_responses,
    has_outcome,
    message_text,
    response_result_detail,
    thinking_detail,
    tool_result_detail,
    tool_use_detail,
    usage_detail,
)
from transcript_otel.mappings.session_lines import SessionLine, timestamp_ns, utf8_text
from transcript_otel.model.entries import EntryType
from transcript_otel.records.serialize import parse_json

_HEADER_KEYS: Final = ("sessionId", "projectHash")
_MAX_REMEMBERED: Final = 10_000
# What `counted()` hands on: the latest messages and calls (a turn's, and more).
_HANDED_ON: Final = 256
_WITHDRAWN: Final = (
    "no answer: the Gemini CLI took this prompt out of the session without answering it (it does "
    "so when the request failed); the session file records no error"
)

_Entries = list[tuple[EntryType, dict[str, Any]]]


class _Said(NamedTuple):
    entries: _Entries
    opens_turn: bool = False
    model: str | None = None
    session_id: str | None = None


def _remember(remembered: dict[str, Any], key: str, value: Any) -> None:
    """Keep `key`, dropping the oldest beyond `_MAX_REMEMBERED` (a session of endless messages
    cannot grow it)."""
    remembered.pop(key, None)
    remembered[key] = value
    if len(remembered) > _MAX_REMEMBERED:
        del remembered[next(iter(remembered))]


class GeminiSessionMapper:
    """Maps the lines of one Gemini CLI session file, in file order (one mapper per file)."""

    __slots__ = ("_given", "_listed", "_results", "_unanswered")

    def __init__(self) -> None:
        # message id -> what its records gave: "message" (its text, thoughts), "usage", call ids
        self._given: dict[str, list[str]] = {}
        self._listed: dict[str, None] = {}  # the session's message list, as the records left it
        self._unanswered: dict[str, str] = {}  # prompts the model has not answered yet: their text
        self._results: dict[str, None] = {}  # the calls whose result was given

    def counted(self) -> dict[str, Any]:
        """What the lines mapped so far leave to go on from (JSON): the latest messages and
        what they gave, the message list, the calls answered."""
        return {
            "given": [[key, self._given[key]] for key in latest(self._given, _HANDED_ON)],
            "listed": latest(self._listed, _HANDED_ON),
            "unanswered": [[key, self._unanswered[key]] for key in latest(self._unanswered, _HANDED_ON)],
            "results": latest(self._results, _HANDED_ON),
        }

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        """Go on from what another mapper of the file `counted()`. False, and nothing changed,
        for what no mapper said."""
        given, unanswered = counted.get("given"), counted.get("unanswered")
        listed, results = counted.get("listed"), counted.get("results")
        if not (_pairs(given, list) and _pairs(unanswered, str) and _texts(listed) and _texts(results)):
            return False
        self._given = {key: [str(part) for part in value] for key, value in given}
        self._listed = dict.fromkeys(listed)
        self._unanswered = dict(unanswered)
        self._results = dict.fromkeys(results)
        return True

    def counted_messages(self) -> list[str]:
        return []  # each message's usage is given once, by its first record that holds it

    def __call__(self, line: bytes, source: str) -> SessionLine:
        """A session mapper (`sessions.recorder.SessionMapping`): a session is one file."""
        return self.line(line)

    def line(self, line: str | bytes) -> SessionLine:
        """One line's entries and facts; never raises."""
        text, repaired = utf8_text(line) if isinstance(line, bytes) else (line, None)
        if not text.strip():
            return SessionLine([])
        try:
            record = parse_json(text)
        except (ValueError, RecursionError) as exc:
            entry = MappedEntry(EntryType.UNKNOWN.value, {"parse_error": f"invalid JSON: {exc}"}, text)
            return SessionLine([entry], repaired=repaired)
        if not isinstance(record, dict):
            reason = "a Gemini CLI session line must be a JSON object"
            entry = MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason, "line": record}, text)
            return SessionLine([entry], repaired=repaired)
        said, at = self._record(record)
        entries = [
            MappedEntry(entry_type.value, detail, text if index == 0 else None)
            for index, (entry_type, detail) in enumerate(said.entries)
        ]
        return SessionLine(
            entries,
            timestamp_ns(at),
            opens_turn=said.opens_turn,
            model=said.model,
            session_id=said.session_id,
            repaired=repaired,
        )

    def _record(self, record: dict[str, Any]) -> tuple[_Said, Any]:
        """What a record says, and the time it tells."""
        if isinstance(record.get("$rewindTo"), str):
            return _Said(self._rewound(record["$rewindTo"])), None
        patch = record.get("$set")
        if isinstance(patch, dict):
            messages = patch.get("messages")
            said = self._messages(messages) if isinstance(messages, list) else _Said([])
            return said, patch.get("lastUpdated")
        if all(isinstance(record.get(key), str) for key in _HEADER_KEYS):
            session = record["sessionId"]
            detail = {"subtype": "session_started", "session_id": session, "kind": record.get("kind")}
            detail["project_hash"] = record["projectHash"]
            return _Said([(EntryType.SYSTEM_EVENT, detail)], session_id=nonempty_text(session)), record.get(
                "startTime"
            )
        if isinstance(record.get("id"), str):
            said = self._message(record)
            # A record that adds a call's result is written as the call completes: its time is
            # the call's end (the message's own `timestamp` is when the model's answer came).
            ended = [detail["completed_at"] for _, detail in said.entries if "completed_at" in detail]
            return said, max([*ended, record.get("timestamp")], key=_sort_key)
        return _Said([(EntryType.UNKNOWN, {"line_type": "record", "keys": sorted(record)[:16]})]), None

    def _message(self, message: dict[str, Any]) -> _Said:
        message_id, kind = message["id"], message.get("type")
        content = message.get("content")
        if message_id not in self._listed:  # (a message written again keeps its place)
            _remember(self._listed, message_id, None)
        if kind == "gemini":
            self._unanswered.clear()
            model = nonempty_text(message.get("model"))
            return _Said(self._model_message(message_id, message, model), model=model)
        if kind != "user":
            return _Said(
                [(EntryType.UNKNOWN, {"line_type": "message", "message_type": kind, "message": message})]
            )
        responses = function_responses(content)
        if responses:
            return _Said(self._responses(responses))
        text = message_text(content)
        if text.startswith(SESSION_CONTEXT) or message_id in self._given:
            return _Said([])
        _remember(self._given, message_id, ["message"])
        _remember(self._unanswered, message_id, text)
        return _Said([(EntryType.USER_MESSAGE, {"text": text, "message_id": message_id})], opens_turn=True)

    def _model_message(self, message_id: str, message: dict[str, Any], model: str | None) -> _Entries:
        """What a model message's record holds that its records before did not."""
        given = self._given.get(message_id)
        entries: _Entries = []
        if given is None:
            given = ["message"]
            thinking = thinking_detail(message.get("thoughts"))
            if thinking is not None:
                entries.append((EntryType.THINKING, thinking))
            text = message_text(message.get("content"))
            if text:
                entries.append((EntryType.ASSISTANT_MESSAGE, {"text": text, "message_id": message_id}))
        usage = usage_detail(message.get("tokens"), message_id, model) if "usage" not in given else None
        if usage is not None:  # (the CLI may write a message before its tokens, then again with them)
            given.append("usage")
            entries.append((EntryType.TOKEN_USAGE, usage))
        calls = message.get("toolCalls")
        for call in calls if isinstance(calls, list) else ():
            if isinstance(call, dict):
                entries += self._call(call, given)
        _remember(self._given, message_id, given)
        return entries

    def _call(self, call: dict[str, Any], given: list[str]) -> _Entries:
        """A `toolCalls` entry's `tool_use`, and its `tool_result` once it ended, each once."""
        found = call_id(call)
        entries: _Entries = []
        if found is None or found not in given:
            entries.append((EntryType.TOOL_USE, tool_use_detail(call)))
            if found is not None:
                given.append(found)
        if has_outcome(call) and (found is None or found not in self._results):
            entries.append((EntryType.TOOL_RESULT, tool_result_detail(call)))
            if found is not None:
                _remember(self._results, found, None)
        return entries

    def _responses(self, responses: list[dict[str, Any]]) -> _Entries:
        """Tool results as the model got them: given where no `toolCalls` entry gave them."""
        entries: _Entries = []
        for response in responses:
            found = nonempty_text(response.get("id"))
            if found is not None and found in self._results:
                continue
            entries.append((EntryType.TOOL_RESULT, response_result_detail(response)))
            if found is not None:
                _remember(self._results, found, None)
        return entries

    def _messages(self, messages: list[Any]) -> _Said:
        """A `$set` of the whole message list: what it leaves out is said, what is new mapped."""
        kept = {
            message["id"]
            for message in messages
            if isinstance(message, dict) and isinstance(message.get("id"), str)
        }
        entries = self._removed([key for key in self._listed if key not in kept])
        opens_turn, model = False, None
        for message in messages:
            if isinstance(message, dict) and isinstance(message.get("id"), str):
                said = self._message(message)
                entries += said.entries
                opens_turn, model = opens_turn or said.opens_turn, said.model or model
        return _Said(entries, opens_turn=opens_turn, model=model)

    def _removed(self, removed: list[str]) -> _Entries:
        """Messages gone from the session's list: a prompt not answered is a failed turn."""
        entries: _Entries = []
        others: list[str] = []
        for key in removed:
            del self._listed[key]
            prompt = self._unanswered.pop(key, None)
            if prompt is None:
                others.append(key)
            else:
                entries.append((EntryType.ERROR, {"text": _WITHDRAWN, "message_id": key, "prompt": prompt}))
        if others:
            entries.append((EntryType.SYSTEM_EVENT, {"subtype": "messages_removed", "message_ids": others}))
        return entries

    def _rewound(self, message_id: str) -> _Entries:
        """`/rewind`: the messages from `message_id` on are gone (all, where it is not listed)."""
        keys = list(self._listed)
        gone = keys[keys.index(message_id) :] if message_id in self._listed else keys
        for key in gone:
            del self._listed[key]
            self._unanswered.pop(key, None)
        return [
            (EntryType.SYSTEM_EVENT, {"subtype": "rewound", "message_id": message_id, "message_ids": gone})
        ]


def _pairs(value: Any, second: type | tuple[type, ...]) -> TypeGuard[list[list[Any]]]:
    """A list of `[str, second]` pairs (as `counted()` writes them)."""
    return isinstance(value, list) and all(
        isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], str) and isinstance(pair[1], second)
        for pair in value
    )


def _sort_key(value: Any) -> int:
    return timestamp_ns(value) or 0


def _texts(value: Any) -> TypeGuard[list[str]]:
    return isinstance(value, list) and all(isinstance(item, str) for item in value)


def gemini_lines(_last_report: bytes | None, _main_file: Path) -> GeminiSessionMapper:
    """The mapper of one session (`sessions.recorder.Harness.mapper`): the CLI writes no running
    totals to take a session up from, and a session is one file."""
    return GeminiSessionMapper()
