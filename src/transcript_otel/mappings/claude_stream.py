"""Claude Code stream-json messages to canonical entries.

These are the messages the `claude` CLI prints with `--output-format stream-json`:
what claude-agent-sdk reads from its CLI process (before turning them into
`AssistantMessage`, `ResultMessage`, ...), and what `claude -p --output-format
stream-json` prints. One message (a JSON object) becomes:

* source `subagent:{parent_tool_use_id}` when the message belongs to a subagent (its
  `parent_tool_use_id` is the id of the `Task`/`Agent` call that launched it), else `main`;
* `assistant` → one `thinking` per thinking block, then one `assistant_message` for
  the other blocks (text, ...) if any, then one `tool_use` per `tool_use` or
  `server_tool_use` block;
* `user` → `user_message` for the content other than tool results (if any), then one
  `tool_result` per `tool_result` block, named after its `tool_use` when that was seen;
* `result` → `token_usage` (its `usage` and `total_cost_usd`) when it reports either,
  then `error` when it reports an error (`is_error`, or an `error_*` subtype). The CLI
  reports running totals, so a main result's `token_usage` also gets `turn_cost_usd`
  (the cost since the previous result) and `session_usage` (the tokens of the whole
  session so far, subagents included: the sum of `modelUsage` over models). What the
  session's totals grew by since the last report beyond the `usage` of the results since is
  `unlogged_usage`: model calls the CLI made itself (a WebSearch call's request) that no
  message tells, the turn's all the same; left out where a subagent ran since that report
  (its messages may come after the result, and tell less output than it was served);
* `assistant` from the CLI itself (`model: "<synthetic>"`, `is_api_error_message`: the
  text of an API error, which the `result` after it reports) → `system_event`
  `api_error_message`, not words of the model;
* a subagent's `assistant` message: its first line gets `detail.message_usage` (the
  usage the CLI printed for that model call, once per message id);
* `system` → `system_event` with its `subtype` (`compact_boundary` is `compaction`);
  `rate_limit_event` and `conversation_reset` → `system_event` with that subtype.
  Progress frames (`thinking_tokens`, `task_progress` of one task) come many to a
  second: consecutive frames fold into one entry (the last frame, `detail.frames` their
  count) made when the next other message arrives, or at `flush()`. The `tool_result` of a
  call launched in the background (`tool_use_result.status: async_launched`) gets
  `detail.background_launch`: the call runs on after its result; that call's
  `task_notification` gets `detail.background_call_ended` (the call's id). A synchronous
  subagent's (`run_in_background: false`) notification ends no call: its real `tool_result`
  follows and ends it, so the call is counted once. That result (`tool_use_result.status:
  completed`, with `usage` and `resolvedModel`) gets `detail.subagent_last_call`: the usage and
  model of the subagent's last model call, whose answer the CLI prints only as this result;
* `stream_event` (partial-message deltas) → nothing: the complete message follows;
  control frames → nothing: they are the SDK's protocol, not the conversation;
* any other type → `unknown`, kept whole; a message that is not a JSON object (or
  whose type is not a string) → `unknown` with `detail.parse_error`.

`detail.sdk_entry` is the message, or the block split out of it; the first entry
made from a message carries the message as `raw` (encoded by the background writer).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.mappings._claude_blocks import ToolNames, content_blocks, is_block, with_content
from transcript_otel.mappings._entry import COMPACTION, MappedEntry
from transcript_otel.mappings.claude_cost import MODEL_USAGE_KEYS, RunningCost
from transcript_otel.model.entries import MAIN_SOURCE, EntryType, RawJson, subagent_source

_THINKING_BLOCKS: Final = frozenset({"thinking", "redacted_thinking"})
_TOOL_USE_BLOCKS: Final = frozenset({"tool_use", "server_tool_use"})
_NOT_CONVERSATION: Final = frozenset(
    {"stream_event", "control_request", "control_response", "control_cancel_request", "transcript_mirror"}
)
_SYSTEM_SUBTYPES: Final = {"compact_boundary": COMPACTION}
_EVENT_MESSAGES: Final = frozenset({"rate_limit_event", "conversation_reset"})
# `system` subtypes that report progress many times a second: folded (see the module docstring).
_PROGRESS_SUBTYPES: Final = frozenset({"thinking_tokens", "task_progress"})
# Subagent message ids whose usage was counted, and ids of calls running in the background;
# beyond this many of either, the oldest are forgotten.
_MAX_COUNTED_MESSAGES: Final = 10_000
# Tools whose calls run a subagent.
_SUBAGENT_TOOLS: Final = frozenset({"Task", "Agent"})


def _block_type(block: Any) -> str | None:
    if isinstance(block, dict):
        block_type = block.get("type")
        if isinstance(block_type, str):
            return block_type
    return None


def source_of(message: dict[str, Any]) -> str:
    """`subagent:{parent_tool_use_id}` for a subagent's message, else `main`."""
    parent = message.get("parent_tool_use_id")
    return subagent_source(parent) if isinstance(parent, str) and parent else MAIN_SOURCE


def reports_error(result: dict[str, Any]) -> bool:
    subtype = result.get("subtype")
    return result.get("is_error") is True or (isinstance(subtype, str) and subtype.startswith("error"))


def result_error_type(result: Mapping[str, Any]) -> str:
    """What went wrong in a `result` that reports an error: its `error_*` subtype; `api_error`
    for a failed API call (Claude Code reports those as subtype `success` with `is_error`,
    `api_error_status` when there was a response, `terminal_reason: api_error`); else
    `error_result`."""
    subtype = result.get("subtype")
    if isinstance(subtype, str) and subtype.startswith("error"):
        return subtype
    if result.get("api_error_status") is not None or result.get("terminal_reason") == "api_error":
        return "api_error"
    return "error_result"


class ClaudeStreamMapper:
    """Maps the messages of one run; remembers what the CLI reports as running totals, the tool
    names seen (per source), the subagent messages counted, the calls running in the
    background and the progress frames folding."""

    __slots__ = (
        "_background_calls",
        "_counted_messages",
        "_last_session_usage",
        "_progress",
        "_progress_count",
        "_results_usage",
        "_running_cost",
        "_subagent_ran",
        "_tool_names",
    )

    def __init__(self) -> None:
        self._tool_names = ToolNames()
        self._running_cost = RunningCost()
        self._counted_messages: dict[str, None] = {}
        self._background_calls: dict[str, None] = {}
        self._progress: dict[str, Any] | None = None
        self._progress_count = 0
        # Since the session's last reported totals: those totals, the main results' usage, and
        # whether a subagent ran (then what the totals grew by cannot be told from its calls).
        self._last_session_usage: dict[str, int] = {}
        self._results_usage: dict[str, int] = {}
        self._subagent_ran = False

    def message(self, message: Any) -> list[MappedEntry]:
        if not isinstance(message, dict):
            reason = f"a stream-json message must be a JSON object, got {type(message).__name__}"
            entry = MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason}, RawJson(message))
            return [*self.flush(), entry]
        raw = RawJson(message)
        message_type = message.get("type")
        if not isinstance(message_type, str):
            reason = "the message has no string 'type'"
            entry = MappedEntry(EntryType.UNKNOWN.value, {"parse_error": reason, "sdk_entry": message}, raw)
            return [*self.flush(), entry]
        if message_type in _NOT_CONVERSATION:
            return []
        if message_type == "system" and _is_progress(message):
            return self._fold(message)
        folded = self.flush()
        source = source_of(message)
        if source != MAIN_SOURCE:
            self._subagent_ran = True
        if message_type == "assistant":
            entries = self._assistant(message, source)
        elif message_type == "user":
            entries = self._user(message, source)
        elif message_type == "result":
            entries = self._result(message, source)
        elif message_type == "system":
            entries = [(EntryType.SYSTEM_EVENT, self._system(message))]
        elif message_type in _EVENT_MESSAGES:
            entries = [(EntryType.SYSTEM_EVENT, {"sdk_entry": message, "subtype": message_type})]
        else:
            entries = [(EntryType.UNKNOWN, {"sdk_entry": message})]
        return folded + [
            MappedEntry(entry_type.value, detail, raw if index == 0 else None, source)
            for index, (entry_type, detail) in enumerate(entries)
        ]

    def background_calls_running(self) -> list[str]:
        """The ids of the calls launched in the background whose end the CLI has not told yet."""
        return list(self._background_calls)

    def flush(self) -> list[MappedEntry]:
        """The progress frames being folded, as one entry (at the end of the stream, or before
        the next other message)."""
        frame, count = self._progress, self._progress_count
        if frame is None:
            return []
        self._progress, self._progress_count = None, 0
        detail = {**_system_detail(frame), "frames": count}
        return [MappedEntry(EntryType.SYSTEM_EVENT.value, detail, RawJson(frame), source_of(frame))]

    def _fold(self, frame: dict[str, Any]) -> list[MappedEntry]:
        """Hold a progress frame to fold with the next ones; frames of another kind held
        before it are written first."""
        held = self._progress
        same_kind = held is not None and _progress_kind(held) == _progress_kind(frame)
        written = [] if same_kind else self.flush()
        self._progress = frame
        self._progress_count += 1
        return written

    def _assistant(self, message: dict[str, Any], source: str) -> list[tuple[EntryType, dict[str, Any]]]:
        if _is_synthetic(message):
            return [(EntryType.SYSTEM_EVENT, {"sdk_entry": message, "subtype": "api_error_message"})]
        blocks = content_blocks(message)
        if blocks is None:
            return [(EntryType.ASSISTANT_MESSAGE, {"sdk_entry": message})]
        thinking: list[Any] = []
        tool_uses: list[Any] = []
        others: list[Any] = []
        for block in blocks:
            block_type = _block_type(block)
            kind = thinking if block_type in _THINKING_BLOCKS else others
            (tool_uses if block_type in _TOOL_USE_BLOCKS else kind).append(block)
        entries = [(EntryType.THINKING, {"sdk_entry": block}) for block in thinking]
        if others or not blocks:
            entries.append((EntryType.ASSISTANT_MESSAGE, {"sdk_entry": with_content(message, others)}))
        for block in tool_uses:
            self._tool_names.remember(source, block)
            name = block.get("name") if isinstance(block, dict) else None
            if isinstance(name, str) and name in _SUBAGENT_TOOLS:
                self._subagent_ran = True
            entries.append((EntryType.TOOL_USE, {"sdk_entry": block}))
        if source != MAIN_SOURCE and entries:
            usage = self._new_message_usage(message)
            if usage is not None:
                entries[0][1]["message_usage"] = usage
        return entries

    def _new_message_usage(self, message: dict[str, Any]) -> dict[str, Any] | None:
        """The usage of a model call the first time one of its lines is seen (the CLI prints a
        line per content block, each with the call's usage), else None."""
        body = message.get("message")
        if not isinstance(body, dict):
            return None
        message_id, usage = body.get("id"), body.get("usage")
        if not isinstance(message_id, str) or not isinstance(usage, dict):
            return None
        if message_id in self._counted_messages:
            return None
        if len(self._counted_messages) >= _MAX_COUNTED_MESSAGES:
            del self._counted_messages[next(iter(self._counted_messages))]
        self._counted_messages[message_id] = None
        return usage

    def _user(self, message: dict[str, Any], source: str) -> list[tuple[EntryType, dict[str, Any]]]:
        blocks = content_blocks(message)
        if blocks is None:
            return [(EntryType.USER_MESSAGE, {"sdk_entry": message})]
        results = [block for block in blocks if is_block(block, "tool_result")]
        others = [block for block in blocks if not is_block(block, "tool_result")]
        entries: list[tuple[EntryType, dict[str, Any]]] = []
        if others or not blocks:
            entries.append((EntryType.USER_MESSAGE, {"sdk_entry": with_content(message, others)}))
        launched = _launched_in_background(message)
        last_call = _subagent_last_call(message) if len(results) == 1 else None
        for block in results:
            detail = self._tool_names.result_detail(source, block)
            if launched:
                self._subagent_ran = True
                detail["background_launch"] = True
                self._running_in_background(block.get("tool_use_id"))
            if last_call is not None:
                self._subagent_ran = True
                detail["subagent_last_call"] = last_call
            entries.append((EntryType.TOOL_RESULT, detail))
        return entries

    def _running_in_background(self, call_id: Any) -> None:
        if not isinstance(call_id, str) or not call_id:
            return
        if len(self._background_calls) >= _MAX_COUNTED_MESSAGES:
            del self._background_calls[next(iter(self._background_calls))]
        self._background_calls[call_id] = None

    def _system(self, message: dict[str, Any]) -> dict[str, Any]:
        """A `system` message's detail; a background call's notification says the call ended.
        A synchronous subagent's says nothing of the kind: its call's result comes after it."""
        detail = _system_detail(message)
        call_id = message.get("tool_use_id")
        if (
            message.get("subtype") == "task_notification"
            and isinstance(call_id, str)
            and call_id in self._background_calls
        ):
            del self._background_calls[call_id]
            detail["background_call_ended"] = call_id
            if message.get("status") not in (None, "completed"):
                detail["is_error"] = True
        return detail

    def resume_after(self, cost_state: str | bytes) -> None:
        """Go on from a session's `cost-state` line (a resumed or forked session: `result`s report
        the session's running totals, those of the runs before included): only what comes
        after it is this run's cost and tokens."""
        self._running_cost.resume_at(cost_state)

    def _result(self, message: dict[str, Any], source: str) -> list[tuple[EntryType, dict[str, Any]]]:
        entries: list[tuple[EntryType, dict[str, Any]]] = []
        total = message.get("total_cost_usd")
        if message.get("usage") is not None or total is not None:
            detail: dict[str, Any] = {"sdk_entry": message}
            if source == MAIN_SOURCE:
                self._running_cost.add_report(detail, total, message.get("modelUsage"))
                self._note_unlogged_usage(detail, message.get("usage"))
            entries.append((EntryType.TOKEN_USAGE, detail))
        if reports_error(message):
            entries.append((EntryType.ERROR, {"sdk_entry": message}))
        if not entries:
            entries.append((EntryType.SYSTEM_EVENT, {"sdk_entry": message, "subtype": "result"}))
        return entries

    def _note_unlogged_usage(self, detail: dict[str, Any], usage: Any) -> None:
        """Put in a main result's `detail` its `unlogged_usage`, where there is any (see the
        module docstring)."""
        if isinstance(usage, dict):
            for _, key in MODEL_USAGE_KEYS:
                count = usage.get(key)
                if isinstance(count, int) and not isinstance(count, bool):
                    self._results_usage[key] = self._results_usage.get(key, 0) + count
        session = detail.get("session_usage")
        if not isinstance(session, dict):
            return  # no totals: the next report's growth covers this result's usage too
        unlogged = {
            key: grown
            for key, value in session.items()
            if (grown := value - self._last_session_usage.get(key, 0) - self._results_usage.get(key, 0)) > 0
        }
        if unlogged and not self._subagent_ran and not self._background_calls:
            detail["unlogged_usage"] = unlogged
        self._last_session_usage = dict(session)
        self._results_usage = {}
        self._subagent_ran = bool(self._background_calls)


def _system_detail(message: dict[str, Any]) -> dict[str, Any]:
    """A `system` message's detail: its subtype (`compact_boundary` is `compaction`)."""
    subtype = message.get("subtype")
    return _with_subtype(
        {"sdk_entry": message}, _SYSTEM_SUBTYPES.get(subtype, subtype) if isinstance(subtype, str) else None
    )


def _is_progress(message: dict[str, Any]) -> bool:
    subtype = message.get("subtype")
    return isinstance(subtype, str) and subtype in _PROGRESS_SUBTYPES


def _progress_kind(frame: dict[str, Any]) -> tuple[Any, Any]:
    return frame.get("subtype"), frame.get("task_id")


def _is_synthetic(message: dict[str, Any]) -> bool:
    body = message.get("message")
    return message.get("is_api_error_message") is True or (
        isinstance(body, dict) and body.get("model") == "<synthetic>"
    )


def _launched_in_background(message: dict[str, Any]) -> bool:
    result = message.get("tool_use_result")
    return isinstance(result, dict) and result.get("status") == "async_launched"


def _subagent_last_call(message: dict[str, Any]) -> dict[str, Any] | None:
    """A synchronous subagent's result (`tool_use_result.status: completed`): the usage and model
    of its last model call, which stream-json never prints as a message of its own."""
    result = message.get("tool_use_result")
    if not isinstance(result, dict) or result.get("status") != "completed":
        return None
    usage, model = result.get("usage"), result.get("resolvedModel")
    if not isinstance(result.get("agentId"), str) or not isinstance(usage, dict):
        return None
    return {"usage": usage, "model": model} if isinstance(model, str) else {"usage": usage}


def _with_subtype(detail: dict[str, Any], subtype: str | None) -> dict[str, Any]:
    if subtype is not None:
        detail["subtype"] = subtype
    return detail
