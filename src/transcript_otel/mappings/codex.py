"""Codex app-server notifications to canonical entries (the specification's Codex table).

Agrees with weakincentives 0.26+'s own `CodexTranscriptBridge`, so a run gives
the same entries whether weakincentives or we build them:

* the prompt sent with `turn/start` → `user_message` `{text}`;
* `turn/started` → `system_event` `{subtype: "turn_started"}` (as weakincentives does;
  the specification's table would call it `unknown`);
* `item/started` of a tool item → `tool_use`; `item/completed` of a tool item →
  `tool_result`, of `agentMessage` → `assistant_message`, of `reasoning` → `thinking`
  (how Codex 0.171 sends reasoning; weakincentives' bridge drops it), of
  `contextCompaction` → `system_event` `{subtype: "compaction"}`;
* `item/reasoning/completed` (older Codex) → `thinking` (once per item, with its
  `item/completed`); `thread/tokenUsage/updated` →
  `token_usage` (its `total` is the thread's running total: see `genai.attributes.RunningUsage`);
  `turn/completed` with status `failed` → `error` (the reason in `turn.error`);
* what weakincentives' bridge leaves out or calls `unknown`, kept as `system_event`s:
  `turn/diff/updated` → `{subtype: "turn_diff"}`, `warning` → `{subtype: "warning"}`,
  `error` → `{subtype: "retry"}` when Codex retries (`willRetry`), else
  `{subtype: "api_error"}` (the failed turn that follows is the `error` entry);
* a bridged tool request `item/tool/call` → `tool_use`, the response sent back →
  `tool_result` `{notification, result}`;
* streaming deltas are folded, never one entry per delta: an `agentMessage` whose
  completion carries no `text` gets the joined deltas as `detail.accumulated_text`;
* `multi_agent_v2` subagents: `item/started` of a `subAgentActivity` of kind `started` (the
  model's `spawn_agent` call, its id the call id) → `tool_use` `spawn_agent`, its
  `item/completed` → `tool_result` (the call returns as the subagent starts); of kind
  `completed` → `system_event` `{subtype: "subagent_completed", agent_thread_id}` (once, at
  its `item/started`: a client may stop reading when a turn completes); a
  `collabAgentToolCall` (`wait`...) → `tool_use` / `tool_result` as a tool item. The
  subagent's own thread speaks on the same connection: its notifications are mapped as any
  other, source `main` as the specification has it for Codex (`detail.notification.threadId`
  says whose), its tokens counted from its own thread's running total;
* any other `item/*` or `turn/*` method → `unknown`; other methods (`thread/*`,
  `account/*`, `mcpServer/*`, legacy `codex/event/*`) are not transcript content; items
  that are neither (`userMessage`: the prompt is already the `user_message`;
  `dynamicToolCall`: the bridged call is already `item/tool/call`) give nothing.

`detail` is `{"notification": params}`; `raw` is the notification as JSON
(`{"method", "params"}`), encoded later by the background writer.
"""

from __future__ import annotations

import functools
from typing import Any, Final

from transcript_otel.mappings._entry import COMPACTION, SUBAGENT_COMPLETED, MappedEntry
from transcript_otel.model.entries import DetailInRaw, EntryType, RawJson
from transcript_otel.records.serialize import safe_text

TOOL_ITEM_TYPES: Final = frozenset({"commandExecution", "fileChange", "mcpToolCall", "webSearch"})
# `multi_agent_v2`: a subagent started or completed (`kind`), and the other subagent tools.
SUBAGENT_ACTIVITY: Final = "subAgentActivity"
COLLAB_TOOL_CALL: Final = "collabAgentToolCall"
STREAMING_DELTAS: Final = frozenset(
    {
        "item/agentMessage/delta",
        "item/reasoning/delta",
        "item/reasoning/summaryTextDelta",
        "item/reasoning/summaryPartAdded",
        "item/reasoning/textDelta",
        "item/commandExecution/outputDelta",
        "item/commandExecution/terminalInteraction",
        "item/fileChange/outputDelta",
    }
)
_AGENT_MESSAGE_DELTA: Final = "item/agentMessage/delta"
# Notifications weakincentives' bridge (0.26+) drops or calls `unknown`, as `system_event`s.
TURN_DIFF: Final = "turn/diff/updated"
SYSTEM_NOTIFICATIONS: Final = frozenset({TURN_DIFF, "warning", "error"})
# Deltas kept per message until it completes; beyond this they are not kept (the
# completed item carries the text anyway).
_MAX_FOLDED_CHARS: Final = 1 << 20
_MAX_THOUGHTS: Final = 100_000
REASONING_COMPLETED: Final = "item/reasoning/completed"


def _item(params: dict[str, Any]) -> dict[str, Any]:
    item = params.get("item")
    return item if isinstance(item, dict) else {}


def _item_type(item: dict[str, Any]) -> str | None:
    item_type = item.get("type")
    return item_type if isinstance(item_type, str) else None


def _entry(entry_type: EntryType, method: str, params: Any, **extra: Any) -> MappedEntry:
    return MappedEntry(
        entry_type.value,
        {"notification": params, **extra},
        RawJson({"method": method, "params": params}),
    )


class CodexMapper:
    """Maps the notifications of one run; holds the deltas of unfinished messages and the
    reasoning items already recorded."""

    __slots__ = ("_deltas", "_folded_chars", "_thoughts")

    def __init__(self) -> None:
        self._deltas: dict[str, list[str]] = {}
        self._folded_chars: dict[str, int] = {}
        # Reasoning items recorded, by id: a Codex that sends both `item/reasoning/completed`
        # and the item's `item/completed` gets one `thinking` entry.
        self._thoughts: set[str] = set()

    def thought(self, params: Any) -> bool:
        """Note the reasoning item `params` completes; False if it was noted already."""
        item_id = _item(params).get("id") if isinstance(params, dict) else None
        if isinstance(params, dict) and item_id is None:
            item_id = params.get("itemId")
        if not isinstance(item_id, str):
            return True
        if item_id in self._thoughts:
            return False
        if len(self._thoughts) < _MAX_THOUGHTS:
            self._thoughts.add(item_id)
        return True

    def user_message(self, text: Any) -> MappedEntry:
        return MappedEntry(EntryType.USER_MESSAGE.value, {"text": text})

    def tool_call(self, params: Any) -> MappedEntry:
        return _entry(EntryType.TOOL_USE, "item/tool/call", params)

    def tool_result(self, params: Any, result: Any) -> MappedEntry:
        return MappedEntry(
            EntryType.TOOL_RESULT.value,
            {"notification": params, "result": result},
            RawJson({"method": "item/tool/result", "params": params, "result": result}),
        )

    def notification(self, method: Any, params: Any) -> MappedEntry | None:
        """The entry for one notification, or None when it is not transcript content."""
        if not isinstance(method, str):
            return MappedEntry(
                EntryType.UNKNOWN.value,
                {"notification": params, "reason": f"method is {type(method).__name__}, not a string"},
                RawJson({"method": method, "params": params}),
            )
        if method in STREAMING_DELTAS:
            if method == _AGENT_MESSAGE_DELTA and isinstance(params, dict):
                self._fold(params)
            return None
        if not isinstance(params, dict):
            if method.startswith(("item/", "turn/", "thread/tokenUsage/")):
                return _entry(EntryType.UNKNOWN, method, params, reason="params is not an object")
            return None
        if method == "turn/started":
            return _entry(EntryType.SYSTEM_EVENT, method, params, subtype="turn_started")
        if method in SYSTEM_NOTIFICATIONS:
            return _entry(EntryType.SYSTEM_EVENT, method, params, subtype=system_subtype(method, params))
        if method == "item/started":
            return self._item_started(method, params)
        if method == "item/completed":
            return self._item_completed(method, params)
        if method == REASONING_COMPLETED:
            return _entry(EntryType.THINKING, method, params) if self.thought(params) else None
        if method == "thread/tokenUsage/updated":
            return _entry(EntryType.TOKEN_USAGE, method, params)
        if method == "turn/completed":
            turn = params.get("turn")
            failed = isinstance(turn, dict) and turn.get("status") == "failed"
            return _entry(EntryType.ERROR, method, params) if failed else None
        if method.startswith(("item/", "turn/")):
            return _entry(EntryType.UNKNOWN, method, params)
        return None

    @staticmethod
    def malformed(line: Any, reason: str) -> MappedEntry:
        """A line from the agent that was not a JSON-RPC message: kept, never lost."""
        return MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason}, _as_text(line))

    @staticmethod
    def _item_started(method: str, params: dict[str, Any]) -> MappedEntry | None:
        item = _item(params)
        if _is_call(item):
            return _entry(EntryType.TOOL_USE, method, params)
        if _item_type(item) == SUBAGENT_ACTIVITY and item.get("kind") == "completed":
            thread = item.get("agentThreadId")
            return _entry(
                EntryType.SYSTEM_EVENT, method, params, subtype=SUBAGENT_COMPLETED, agent_thread_id=thread
            )
        return None

    def _item_completed(self, method: str, params: dict[str, Any]) -> MappedEntry | None:
        item = _item(params)
        item_type = _item_type(item)
        if _is_call(item):
            return _entry(EntryType.TOOL_RESULT, method, params)
        if item_type == "agentMessage":
            item_id = item.get("id")
            pieces = None
            if isinstance(item_id, str):
                pieces = self._deltas.pop(item_id, None)
                self._folded_chars.pop(item_id, None)
            if pieces and not isinstance(item.get("text"), str):
                return _entry(EntryType.ASSISTANT_MESSAGE, method, params, accumulated_text="".join(pieces))
            return _entry(EntryType.ASSISTANT_MESSAGE, method, params)
        if item_type == "reasoning":
            return _entry(EntryType.THINKING, method, params) if self.thought(params) else None
        if item_type == "contextCompaction":
            return _entry(EntryType.SYSTEM_EVENT, method, params, subtype=COMPACTION)
        return None

    def _fold(self, params: dict[str, Any]) -> None:
        delta = params.get("delta")
        if not isinstance(delta, str):
            return
        item_id = params.get("itemId")
        if not isinstance(item_id, str):
            return
        folded = self._folded_chars.get(item_id, 0) + len(delta)
        if folded <= _MAX_FOLDED_CHARS:
            self._folded_chars[item_id] = folded
            self._deltas.setdefault(item_id, []).append(delta)


def _is_call(item: dict[str, Any]) -> bool:
    """An item that is a tool call: a tool item, a subagent tool, a subagent's start (the
    model's `spawn_agent` call, which returns as the subagent starts)."""
    item_type = _item_type(item)
    return (
        item_type in TOOL_ITEM_TYPES
        or item_type == COLLAB_TOOL_CALL
        or (item_type == SUBAGENT_ACTIVITY and item.get("kind") == "started")
    )


def system_subtype(method: str, params: dict[str, Any]) -> str:
    """The `subtype` of a notification kept as a `system_event` (`SYSTEM_NOTIFICATIONS`)."""
    if method == TURN_DIFF:
        return "turn_diff"
    if method == "warning":
        return "warning"
    return "retry" if params.get("willRetry") is True else "api_error"


# The items weakincentives' bridge (0.26, 0.27) emits nothing for, although they are content:
# Codex 0.171's reasoning items (when completed) and its subagent items.
BRIDGE_DROPPED_ITEM_TYPES: Final = frozenset({"reasoning", SUBAGENT_ACTIVITY, COLLAB_TOOL_CALL})


def bridge_drops(method: Any, params: Any) -> bool:
    """Whether weakincentives' bridge (0.26, 0.27) emits nothing for this notification, although
    it is transcript content: Codex 0.171's reasoning items, warnings, errors and subagent items."""
    if method in SYSTEM_NOTIFICATIONS:
        return bool(method != TURN_DIFF)  # the bridge calls a diff `unknown`
    item_type = _item_type(_item(params)) if isinstance(params, dict) else None
    if method == "item/completed":
        return item_type in BRIDGE_DROPPED_ITEM_TYPES
    return method == "item/started" and item_type in (SUBAGENT_ACTIVITY, COLLAB_TOOL_CALL)


# The start of the `raw` weakincentives 0.26+'s bridge writes for a diff (`json.dumps({"method":
# method, "params": params})`), which it has no handler for and calls `unknown`.
_DIFF_RAW_START: Final = f'{{"method": "{TURN_DIFF}", '


def bridge_unknown(detail: Any, raw: Any) -> tuple[str, Any]:
    """The type and detail to record for an `unknown` entry weakincentives' bridge emitted: a
    diff is the `system_event` 0.25 gets (`{subtype: "turn_diff"}`); anything else stays
    `unknown`."""
    if type(raw) is str and raw.startswith(_DIFF_RAW_START) and type(detail) is dict:
        return EntryType.SYSTEM_EVENT.value, {**detail, "subtype": system_subtype(TURN_DIFF, {})}
    return EntryType.UNKNOWN.value, detail


def _as_text(line: Any) -> str:
    return line if isinstance(line, str) else safe_text(line)[0]  # a repr that cannot raise


# weakincentives 0.26+'s own bridge writes `raw = json.dumps({"method": method, "params":
# params})` of the very `params` its detail holds: `{"notification": params}`, with a constant
# `subtype` for two methods. `params` was parsed from the wire, so `json.loads(raw)` gives it
# back exactly. (A bridged tool's result is left alone: it holds what the tool returned.)
_NOTIFICATION_IN_RAW: Final = DetailInRaw((("notification", "params"),))


def native_detail(detail: Any) -> Any:
    """The `detail` of an entry weakincentives' Codex bridge emitted with a `raw`, as the writer
    takes it out of that `raw` (`DetailInRaw`) where it can; any other detail as it is.

    On the agent's thread, for every entry: a few dict lookups, nothing more.
    """
    if type(detail) is not dict or "notification" not in detail:
        return detail
    size = len(detail)
    if size == 1:
        return _NOTIFICATION_IN_RAW
    if size == 2:
        subtype = detail.get("subtype")
        if type(subtype) is str:
            return _notification_with_subtype(subtype)
    return detail


@functools.lru_cache(maxsize=16)
def _notification_with_subtype(subtype: str) -> DetailInRaw:
    return DetailInRaw(_NOTIFICATION_IN_RAW.fields, (("subtype", subtype),))
