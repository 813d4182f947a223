"""Claude Code 2.1.332 session log lines to canonical entries (an import after the fact), as
`claude -p` and the terminal UI a person uses write them.

One line of `~/.claude/projects/<project>/<session>.jsonl` (source `main`) or of
`<session>/subagents/agent-<agentId>.jsonl` (source `subagent:<agentId>`), as measured in
docs/session-logs.md, becomes a `SessionLine`. The entries are those `ClaudeStreamMapper` gives
for the same conversation on stdout (`claude -p --output-format stream-json`), where both say it:

| line | entries (and what else the line tells) |
|---|---|
| `assistant` (one content block a line) | `thinking` per thinking block, `assistant_message` for text, |
| | `tool_use` per call; `model` |
| `assistant`, `model: "<synthetic>"` | `error`, `detail.exception` = `api_error` + the CLI's text |
| `user` with `tool_result` blocks | `tool_result` per block, named after its call; `background_launch` |
| | when `toolUseResult.status` is `async_launched` |
| `user` prompt (string, or no results) | `user_message`; `opens_turn` (main) |
| `user`, `origin.kind: task-notification` | `system_event` `task_notification`, `background_call_ended`, |
| | `text` = its `<result>`; `opens_turn` (main) |
| `user`, `isMeta` | `system_event` `meta` (harness text the model sees) |
| `user`, `isCompactSummary` | `system_event` `compaction`, the summary as `detail.text` |
| `user`, `/compact` or command output echo | `user_message` (no new turn) |
| `system` `api_error` | `system_event` `api_retry` (stdout's name for the retried attempt) |
| `system` `compact_boundary` | `system_event` `compaction`; a manual one `opens_turn` (main) |
| `system` `turn_duration` (terminal UI) | `system_event` `turn_duration`; `ends_turn` (main) |
| `system`, other subtype | `system_event` with that subtype |
| `attachment` `max_turns_reached` | `error`, `detail.exception` = `error_max_turns` |
| `attachment` `queued_command`, a prompt | `user_message`, `text` = what the person typed while the |
| | agent worked (terminal UI): handed to the model with its next request, in the same turn |
| `attachment`, context (`_claude_session_entries`) | nothing: what the CLI injects before a request |
| `attachment`, another kind | `system_event` `attachment`, `detail.attachment_type` |
| `cost-state` | `token_usage`: `turn_cost_usd`, `session_usage` (main); `ends_turn`; nothing |
| | more for one repeating the last one's totals (the terminal UI writes it again on leaving) |
| `permission-mode` (terminal UI) | `system_event` `permission_mode`, `detail.mode`, when it changed |
| other bookkeeping (`_BOOKKEEPING`) | nothing |
| `summary` (older versions) | `system_event` `compaction` |
| a fork's copy of its parent's lines (`fork_of`) | the first: `system_event` `forked`, |
| | `detail.forked_from`; the others nothing, their tokens not counted |
| any other type | `unknown`, the line kept whole |
| not JSON, not an object | `unknown` with `detail.parse_error` |

Every line: `timestamp_ns` from `timestamp`, `session_id` from `sessionId`. The run's cost comes
as on stdout: a `token_usage` with the cost since the last report and the session's token
totals (`modelUsage` summed, subagents and `/compact`'s model call included; since where the
run went on from, after `resume_after`), but no `usage`:
each message's tokens are on its `assistant_message` (`sdk_entry.message.usage`, repeated on
every line of the message, counted once per `message.id`; a line of thinking or of tool calls
only keeps them in `detail.claude_message`). `detail.sdk_entry` is the line (or
the block split out of it); the first entry of a line carries the line as `raw`.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.mappings._claude_blocks import content_blocks, type_of
from transcript_otel.mappings._claude_session_entries import (
    attachment_entries,
    error_entry,
    is_text,
    manual_compaction,
    notification_detail,
    thinking_first,
)
from transcript_otel.mappings._entry import COMPACTION, MappedEntry, latest
from transcript_otel.mappings.claude_cost import RunningCost
from transcript_otel.mappings.claude_transcript import ClaudeTranscriptMapper
from transcript_otel.mappings.session_lines import SessionLine, timestamp_ns, utf8_text
from transcript_otel.model.entries import MAIN_SOURCE, EntryType
from transcript_otel.records.serialize import parse_json

# A message's usage keys, as the session's totals (`cost-state`) give them too.
_USAGE_KEYS: Final = (
    "input_tokens",
    "output_tokens",
    "cache_read_input_tokens",
    "cache_creation_input_tokens",
)
# Message ids remembered to count each message once (its lines repeat its usage); the oldest go.
_MAX_COUNTED_MESSAGES: Final = 10_000
# The latest message ids `counted()` hands on: a message's lines come together, so a run that
# goes on from it may see the rest of the last few (the main agent's, each subagent's).
_MESSAGES_HANDED_ON: Final = 16
# The latest calls with no result yet `counted()` hands on, per source: a run that goes on
# names their results.
_CALLS_HANDED_ON: Final = 64
# Lines that say nothing of the conversation (docs/session-logs.md, "Bookkeeping lines"): the
# CLI's own state. `file-history-snapshot`: the terminal UI's file backups (not in `-p` files).
_BOOKKEEPING: Final = frozenset(
    {
        "queue-operation",
        "api-request",
        "api-request-shape",
        "api-request-blob",
        "cost-state",
        "atis-latch",
        "tools-used",
        "mode",
        "last-prompt",
        "file-history-snapshot",
    }
)
_SYNTHETIC_MODEL: Final = "<synthetic>"
_SYSTEM_SUBTYPES: Final = {"api_error": "api_retry", "compact_boundary": COMPACTION}
_TURN_OVER: Final = "turn_duration"  # written by the terminal UI as a prompt's turn ends
_COMMAND_OUTPUT: Final = ("<local-command-stdout>", "<local-command-stderr>")
_NOTIFICATION_TAG: Final = "<task-notification>"
# `/compact` is written after the boundary it made: the boundary opens its turn, not the echo.
_COMPACT_COMMAND: Final = "<command-name>/compact</command-name>"


class ClaudeSessionMapper:
    """Maps the lines of one session's files; remembers the tool names seen (per source, through
    `ClaudeTranscriptMapper`) and the cost reported so far."""

    __slots__ = (
        "_copied",
        "_counted",
        "_counted_messages",
        "_fork_told",
        "_forked_from",
        "_last_report",
        "_permission_mode",
        "_running_cost",
        "_transcript",
    )

    def __init__(self) -> None:
        self._transcript = ClaudeTranscriptMapper()
        self._running_cost = RunningCost()
        # The tokens of the messages seen (each once), to tell what the session's totals hold
        # beyond them: model calls that wrote no line (`/compact`'s summary).
        self._counted: dict[str, int] = {}
        self._counted_messages: OrderedDict[str, None] = OrderedDict()
        self._last_report: tuple[Any, Any] | None = None  # the last `cost-state`'s totals
        self._permission_mode: Any = None  # the last `permission-mode` told
        self._forked_from: str | None = None  # the session this one is a fork of
        self._copied: frozenset[str] = frozenset()  # the uuids of that session's lines
        self._fork_told = False

    def line(self, line: str | bytes, source: str) -> SessionLine:
        if isinstance(line, str):
            return self._line(line, source)
        text, repaired = utf8_text(line)
        said = self._line(text, source)
        return said._replace(repaired=repaired) if repaired else said

    def _line(self, line: str, source: str) -> SessionLine:
        try:
            entry = parse_json(line)
        except (ValueError, RecursionError):
            entry = None
        if not isinstance(entry, dict):  # the transcript mapping says why, with the line as raw
            return SessionLine(self._transcript.line(line, source))
        session_id = entry.get("sessionId")
        at = timestamp_ns(entry.get("timestamp"))
        said = SessionLine([], at, session_id=session_id if isinstance(session_id, str) else None)
        kind = type_of(entry)
        if self._forked_from is not None and self._is_copied(entry):
            return said._replace(entries=self._fork_told_once(entry, line, source))
        if kind == "cost-state":
            report = (entry.get("totalCostUSD"), entry.get("modelUsage"))
            repeated = source == MAIN_SOURCE and report == self._last_report  # on leaving, again
            if source == MAIN_SOURCE:
                self._last_report = report
            entries = [] if repeated else self._cost(entry, line, source)
            return said._replace(entries=entries, ends_turn=source == MAIN_SOURCE)
        if kind == "permission-mode":
            return said._replace(entries=self._permission_mode_told(entry, line, source))
        if kind in _BOOKKEEPING:
            return said
        if kind == "assistant":
            return self._assistant(entry, line, source, said)
        if kind == "user":
            return self._user(entry, line, source, said)
        if kind == "attachment":
            return said._replace(entries=attachment_entries(entry, line, source))
        if kind == "system":
            subtype = entry.get("subtype")
            detail: dict[str, Any] = {"sdk_entry": entry}
            if isinstance(subtype, str):
                detail["subtype"] = _SYSTEM_SUBTYPES.get(subtype, subtype)
            event = MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)
            main = source == MAIN_SOURCE
            return said._replace(
                entries=[event],
                opens_turn=manual_compaction(entry) and main,
                ends_turn=subtype == _TURN_OVER and main,  # the terminal UI's turn is over
            )
        if kind == "summary":
            return said._replace(entries=self._transcript.parsed(entry, line, source))
        unknown = MappedEntry(EntryType.UNKNOWN.value, {"sdk_entry": entry}, line, source)
        return said._replace(entries=[unknown])

    def _assistant(self, entry: dict[str, Any], line: str, source: str, said: SessionLine) -> SessionLine:
        message = entry.get("message")
        model = message.get("model") if isinstance(message, dict) else None
        if entry.get("isApiErrorMessage") is True or model == _SYNTHETIC_MODEL:
            words = " ".join(b["text"] for b in content_blocks(entry) or [] if is_text(b))
            return said._replace(entries=[error_entry(entry, "api_error", words, line, source)])
        self._count_message(message)
        entries: list[MappedEntry] = []
        for mapped in self._transcript.parsed(entry, line, source):
            entries += thinking_first(mapped) if mapped.entry_type == "assistant_message" else [mapped]
        if entries and entries[0].raw is None:  # a line of tool calls only: its first call keeps it
            entries[0] = entries[0]._replace(raw=line)
        return said._replace(entries=entries, model=model if isinstance(model, str) and model else None)

    def _user(self, entry: dict[str, Any], line: str, source: str, said: SessionLine) -> SessionLine:
        content = entry["message"].get("content") if isinstance(entry.get("message"), dict) else None
        text = content if isinstance(content, str) else ""
        if entry.get("isCompactSummary") is True:
            detail = {"sdk_entry": entry, "subtype": COMPACTION, "text": text}
            return said._replace(entries=[MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)])
        if entry.get("isMeta") is True:
            detail = {"sdk_entry": entry, "subtype": "meta"}
            return said._replace(entries=[MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)])
        origin = entry.get("origin")
        if (isinstance(origin, dict) and origin.get("kind") == "task-notification") or text.startswith(
            _NOTIFICATION_TAG
        ):
            detail = notification_detail(entry, text)
            event = MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)
            return said._replace(entries=[event], opens_turn=source == MAIN_SOURCE)
        entries = self._transcript.parsed(entry, line, source)
        results = [mapped for mapped in entries if mapped.entry_type == EntryType.TOOL_RESULT.value]
        launched = entry.get("toolUseResult")
        if isinstance(launched, dict) and launched.get("status") == "async_launched":
            for mapped in results:
                mapped.detail["background_launch"] = True
        echo = text.lstrip().startswith(_COMMAND_OUTPUT) or _COMPACT_COMMAND in text
        prompt = not results and not echo
        return said._replace(entries=entries, opens_turn=prompt and source == MAIN_SOURCE)

    def _cost(self, entry: dict[str, Any], line: str, source: str) -> list[MappedEntry]:
        """`cost-state` (cumulative over the session) as stdout's `result` gives it: the cost
        since the last report and the session's token totals, on the main source."""
        detail: dict[str, Any] = {"sdk_entry": entry}
        if source == MAIN_SOURCE:
            session_usage = self._running_cost.add_report(
                detail, entry.get("totalCostUSD"), entry.get("modelUsage")
            )
            if session_usage:
                unreported = {
                    key: value - self._counted.get(key, 0)
                    for key, value in session_usage.items()
                    if value > self._counted.get(key, 0)
                }
                if unreported:  # the calls of this run no line told: the turn's tokens all the same
                    detail["usage"] = unreported
                    self._counted.update(
                        (key, self._counted.get(key, 0) + n) for key, n in unreported.items()
                    )
        return [MappedEntry(EntryType.TOKEN_USAGE.value, detail, line, source)]

    def _permission_mode_told(self, entry: dict[str, Any], line: str, source: str) -> list[MappedEntry]:
        """The terminal UI tells the permission mode at every prompt: a change is an event."""
        mode = entry.get("permissionMode")
        if mode == self._permission_mode:
            return []
        self._permission_mode = mode
        detail = {"sdk_entry": entry, "subtype": "permission_mode", "mode": mode}
        return [MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)]

    def fork_of(self, session_id: str, copied: frozenset[str]) -> None:
        """The session is a fork of `session_id` (`--fork-session`), whose lines (`copied`: their
        uuids) its file begins with: that history is the other session's run, not this one's.
        Its first line is a `system_event` `forked`; the others, and the assistant lines that
        name another session's request (where its file is gone), nothing. (Go on from its
        totals with `resume_after`.)"""
        self._forked_from, self._copied = session_id, copied

    def _is_copied(self, entry: dict[str, Any]) -> bool:
        uuid = entry.get("uuid")
        if isinstance(uuid, str) and uuid in self._copied:
            return True
        named = entry.get("requestSessionId")
        if type_of(entry) != "assistant" or not isinstance(named, str) or named == entry.get("sessionId"):
            return False
        if self._last_report is None:  # no totals to go on from (its file is gone): this call's
            self._count_message(entry.get("message"))  # are in the fork's, not the fork's own
            self._running_cost.baseline = dict(self._counted)
        return True

    def _fork_told_once(self, entry: dict[str, Any], line: str, source: str) -> list[MappedEntry]:
        if self._fork_told:
            return []
        self._fork_told = True
        detail = {"sdk_entry": entry, "subtype": "forked", "forked_from": self._forked_from}
        return [MappedEntry(EntryType.SYSTEM_EVENT.value, detail, line, source)]

    def resume_after(self, cost_state: str | bytes) -> None:
        """Go on from a `cost-state` line (the last before the lines this mapper will see: a
        session taken up part-way; a fork's parent's): its totals were reported, so only what
        comes after counts, in the cost and tokens of each report and in its `session_usage`."""
        entry = self._running_cost.resume_at(cost_state)
        if entry is not None:
            self._counted = dict(self._running_cost.baseline)
            self._last_report = (entry.get("totalCostUSD"), entry.get("modelUsage"))

    def counted(self) -> dict[str, Any]:
        """What the lines mapped so far counted (JSON): the tokens, the cost reported, the last
        report, the latest messages. A mapper told it (`go_on`) counts only what comes after."""
        return {
            "tokens": dict(self._counted),
            "cost_usd": self._running_cost.so_far,
            "report": None if self._last_report is None else list(self._last_report),
            "messages": latest(self._counted_messages, _MESSAGES_HANDED_ON),
            "open_calls": self._transcript.tool_names.open_calls(_CALLS_HANDED_ON),
            # (the mode told last: told again at the next prompt, it is no change)
            "permission_mode": self._permission_mode if isinstance(self._permission_mode, str) else None,
        }

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        """Go on from what another mapper of the session `counted()` (a run that went before: one
        ended on idle, a watch stopped and started again): its tokens and cost were that run's,
        only what comes after counts, in each report and its `session_usage`. False, and nothing
        changed, for what no mapper said (a state file edited by hand)."""
        said: list[Any] = [counted.get(key) for key in ("tokens", "cost_usd", "report", "messages")]
        tokens, cost, report, messages = said
        mode = counted.get("permission_mode")  # (none in a state kept before it was)
        if not (
            _token_counts(tokens)
            and _finite_number(cost)
            and (report is None or (isinstance(report, list) and len(report) == 2))
            and isinstance(messages, list)
            and all(isinstance(message, str) for message in messages)
            and (mode is None or isinstance(mode, str))
            and self._transcript.tool_names.go_on(counted.get("open_calls", {}))
        ):
            return False
        self._permission_mode = mode
        self._counted = dict(tokens)
        self._running_cost.baseline = dict(tokens)
        self._running_cost.so_far = float(cost)
        self._last_report = None if report is None else (report[0], report[1])
        self._counted_messages = OrderedDict.fromkeys(messages)
        return True

    def _count_message(self, message: Any) -> None:
        """Adds a message's usage to what the lines told, once per message id."""
        if not isinstance(message, dict) or not isinstance(message.get("id"), str):
            return
        usage = message.get("usage")
        if message["id"] in self._counted_messages or not isinstance(usage, dict):
            return
        self._counted_messages[message["id"]] = None
        if len(self._counted_messages) > _MAX_COUNTED_MESSAGES:
            self._counted_messages.popitem(last=False)
        for key in _USAGE_KEYS:
            value = usage.get(key)
            if isinstance(value, int) and not isinstance(value, bool):
                self._counted[key] = self._counted.get(key, 0) + value


def _token_counts(tokens: Any) -> bool:
    """Whether `tokens` is token counts by name, as `counted()` gives them."""
    return isinstance(tokens, dict) and all(
        isinstance(key, str) and type(count) is int and count >= 0 for key, count in tokens.items()
    )


def _finite_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value) and value >= 0
