"""Codex rollout lines (`$CODEX_HOME/sessions/YYYY/MM/DD/rollout-*.jsonl`) to canonical entries.

A line is `{timestamp, ordinal, type, payload}` (docs/session-logs.md, Codex 0.171). Most things
are in a rollout twice, in the model-facing history (`response_item`) and as UI events
(`event_msg`); one of each is mapped: the history's assistant messages and reasoning (not
`AgentMessage`/`Reasoning` items, nor older `agent_message`/`agent_reasoning`), the typed
`UserMessage` item for the prompt (not the history's user message), the typed tool item for a
result (not the `*_output` item, unless no typed item answers that call), `token_usage_record`
(not `token_count`, unless the file has no record: 0.140), the compaction output (not
`ContextCompaction`, nor `compacted` after it).

* `session_meta` → `system_event` `thread_started` (as `codex exec`'s `thread.started`); its `id`
  is the session id; a fork's (`codex fork`: `forked_from_id`) then a `system_event` `forked`
  `{forked_from}` (as Claude Code's: the rollout holds only what the fork did, the other
  thread's history by reference). `turn_context` → nothing; its `model` is the turn's model;
* `task_started` → `system_event` `turn_started`, opening the turn (as `turn.started`);
  `task_complete` ends it, with an `error` `{text, error}` if it failed (as `turn.failed`);
  `turn_aborted` ends it with a `system_event` `turn_aborted`;
* `item_completed` `UserMessage` (older: `event_msg` `user_message`) → `user_message` `{text}`;
  the history's user and developer messages (the prompt again, and what Codex injects:
  `<environment_context>`, AGENTS.md, skills) → nothing: `codex exec --json` shows none;
* `additional_tools` (the tools a code-mode model is told of) → nothing;
* `message` of the assistant → `assistant_message` `{text}`; `reasoning` → `thinking` `{text}`
  (the summary, else the content; nothing when only encrypted);
* a compaction's output (`metadata.compaction_output`, a `compaction` item) → `system_event`
  `compaction` `{text}`, never the assistant's words; a `compacted` line → the same only when
  no output came before it;
* `function_call`, `custom_tool_call`, `local_shell_call`, `web_search_call`,
  `tool_search_call` → `tool_use` `{tool_use_id, tool_name, input}`, named as `codex exec`
  names them: `codex:command`, `codex:file_change`, `codex:web_search`, MCP `server:tool`;
  code mode's script (`custom_tool_call` `exec`, which `codex exec` does not print) is
  `codex:code_mode`, the commands it runs typed items of their own (below);
* `item_completed` `CommandExecution`, `FileChange`, `McpToolCall`, `WebSearch`,
  `DynamicToolCall` (a tool the client offers, as weakincentives' app-server adapter does) →
  `tool_result` `{tool_use_id, tool_name, is_error, text, item}` (after a `tool_use` when the
  history showed no call); `*_output` → `tool_result` for a call no typed item answered (the
  first of the two wins; Codex writes the typed item first; a command's output that says
  "Process exited with code N", N not 0, is a failure, and so is any call's output that ends
  "aborted by user": the person stopped it, its typed item comes late); a call the typed item came before
  (a hosted `web_search_call`, written after its `WebSearch` item) → nothing;
* `token_usage_record` → `token_usage` `{usage, response_id, turn_id}`: one response's tokens;
  in a file without them (Codex 0.140), `token_count` → `token_usage` `{usage}` (its
  `last_token_usage`) when its running total moved;
* `event_msg` `error` / `stream_error` / `warning` → `system_event` `api_error` / `retry` /
  `warning`; `world_state`, `thread_settings_applied` and older versions' duplicates → nothing;
* any other line, event or item type → `unknown`; a line that is not a JSON object with a
  string `type` → `unknown` with `detail.parse_error`; a blank line → nothing.

* subagents (`multi_agent_v2`): `item_completed` `SubAgentActivity` → `system_event`
  `subagent_started` / `subagent_completed` `{item_id, agent_thread_id, agent_path, model}`;
  `CollabAgentToolCall` → `tool_result` of the call it answers (`wait_agent`); a
  `response_item` `agent_message` → `user_message` `{text, author, recipient}` when the
  `inter_agent_communication_metadata` line before it says it starts a turn (a subagent's
  task), else `system_event` `agent_message` (a subagent's answer); its text is the plain parts
  (the model's own words are `encrypted_content`).

`raw` is the line, on its first entry; the source is `main` (a subagent's thread is a file of
its own, mapped by a mapper of its own: the importer gives its entries their source). The
mapper keeps, bounded, the open calls' names and the calls a typed item answered
(`_rollout_calls`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final, NamedTuple

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.mappings._entry import COMPACTION, MappedEntry
from transcript_otel.mappings._rollout_calls import TYPED_TOOLS, RolloutCalls
from transcript_otel.mappings._rollout_payload import part_texts
from transcript_otel.mappings.session_lines import SessionLine, timestamp_ns, utf8_text
from transcript_otel.model.entries import EntryType
from transcript_otel.records.serialize import parse_json

_CALLS: Final = frozenset(
    {"function_call", "custom_tool_call", "local_shell_call", "web_search_call", "tool_search_call"}
)
_OUTPUTS: Final = frozenset({"function_call_output", "custom_tool_call_output", "tool_search_output"})
# Typed items the history already holds (the message, the reasoning, the compaction output).
_TYPED_ELSEWHERE: Final = frozenset({"AgentMessage", "Reasoning", "ContextCompaction"})
# Events of this and older versions that repeat what other lines hold, or only bookkeeping.
_QUIET_EVENTS: Final = frozenset(
    {
        "thread_settings_applied", "agent_message", "agent_message_delta",
        "agent_reasoning", "agent_reasoning_delta", "agent_reasoning_raw_content",
        "agent_reasoning_section_break", "exec_command_begin", "exec_command_end",
        "exec_command_output_delta", "patch_apply_begin", "patch_apply_end", "mcp_tool_call_begin",
        "mcp_tool_call_end", "web_search_begin", "web_search_end", "turn_diff", "item_started",
        "context_compacted", "session_configured", "mcp_startup_update", "mcp_startup_complete",
    }
)  # fmt: skip
_SYSTEM_EVENTS: Final = {"error": "api_error", "stream_error": "retry", "warning": "warning"}
_QUIET_LINES: Final = frozenset({"world_state"})
# History items that only declare to the model what it may use (a code-mode model's tools).
_MODEL_CONTEXT_ITEMS: Final = frozenset({"additional_tools"})
# What a `SubAgentActivity` item tells of the subagent it started or saw complete.
_SUBAGENT_KEYS: Final = ("agent_thread_id", "agent_path", "model")
_META_KEYS: Final = ("cwd", "cli_version", "originator", "source", "model_provider")
_UNKNOWN: Final = EntryType.UNKNOWN.value


_Entries = list[tuple[EntryType, dict[str, Any]]]


class _Said(NamedTuple):
    """What a line says, before its entries become `MappedEntry`s with the line as `raw`."""

    entries: _Entries
    opens_turn: bool = False
    ends_turn: bool = False
    model: str | None = None
    session_id: str | None = None


def _text_of(line: str | bytes) -> str:
    return line.decode("utf-8", "replace") if isinstance(line, bytes) else line


class CodexRolloutMapper:
    """Maps the lines of one rollout file, in file order (one mapper per file)."""

    __slots__ = (
        "_compaction_shown",
        "_last_total",
        "_message_starts_turn",
        "_tool_calls",
        "_usage_records",
    )

    def __init__(self) -> None:
        self._tool_calls = RolloutCalls()  # each call's one `tool_use` and one `tool_result`
        self._compaction_shown = False  # since the last `compacted` line
        self._message_starts_turn = False  # what the `inter_agent_communication_metadata` before said
        self._usage_records = False  # the file has `token_usage_record`s: `token_count` repeats them
        self._last_total: Any = None  # the running total of the last `token_count` counted

    def counted(self) -> dict[str, Any]:
        """What the lines mapped so far leave to go on from (JSON): whether the file has usage
        records, the last running total counted, the latest calls open or answered. A mapper
        told it (`go_on`) counts no usage twice and gives no call a second result."""
        return {
            "usage_records": self._usage_records,
            "last_total": self._last_total,
            **self._tool_calls.counted(),
            "compaction_shown": self._compaction_shown,
            "message_starts_turn": self._message_starts_turn,
        }

    def go_on(self, counted: Mapping[str, Any]) -> bool:
        """Go on from what another mapper of the file `counted()` (a run that went before). False,
        and nothing changed, for what no mapper said."""
        flags: list[Any] = [
            counted.get(key) for key in ("usage_records", "compaction_shown", "message_starts_turn")
        ]
        if not (all(isinstance(flag, bool) for flag in flags) and self._tool_calls.go_on(counted)):
            return False
        self._usage_records, self._compaction_shown, self._message_starts_turn = flags
        self._last_total = counted.get("last_total")
        return True

    def line(self, line: str | bytes) -> SessionLine:
        """One line's entries and facts; never raises.

        A line as read (bytes) is parsed as it is, and decoded only for what keeps its text
        (the first entry's `raw`): most lines of a rollout say nothing (`world_state`,
        `token_count`, ...), and three copies of each would slow an import."""
        if isinstance(line, bytes):
            if line.isspace() or not line:
                return SessionLine([])
            try:
                record = parse_json(line)
            except (ValueError, RecursionError):  # not UTF-8, perhaps: what its text says
                text, repaired = utf8_text(line)
                said = self._parsed_text(text)
                return said._replace(repaired=repaired) if repaired else said
            return self._said(record, line)
        return self._parsed_text(line)

    def _parsed_text(self, text: str) -> SessionLine:
        if not text.strip():
            return SessionLine([])
        try:
            record = parse_json(text)
        except (ValueError, RecursionError) as exc:
            return SessionLine([MappedEntry(_UNKNOWN, {"parse_error": f"invalid JSON: {exc}"}, text)])
        return self._said(record, text)

    def _said(self, record: Any, line: str | bytes) -> SessionLine:
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            reason = "a rollout line must be a JSON object with a string 'type'"
            return SessionLine(
                [MappedEntry(_UNKNOWN, {"parse_error": reason, "line": record}, _text_of(line))]
            )
        payload = record.get("payload")
        said = self._record(record["type"], payload if isinstance(payload, dict) else {}, record)
        entries = [
            MappedEntry(entry_type.value, detail, _text_of(line) if index == 0 else None)
            for index, (entry_type, detail) in enumerate(said.entries)
        ]
        return SessionLine(entries, timestamp_ns(record.get("timestamp")), *said[1:])

    def _record(self, kind: str, payload: dict[str, Any], record: dict[str, Any]) -> _Said:
        if kind == "response_item":
            metadata = record.get("metadata")
            compaction = isinstance(metadata, dict) and metadata.get("compaction_output") is True
            return _Said(self._item(payload, compaction))
        if kind == "event_msg":
            return self._event(payload)
        if kind == "token_usage_record":
            self._usage_records = True
            detail = {key: payload.get(key) for key in ("usage", "response_id", "turn_id")}
            return _Said([(EntryType.TOKEN_USAGE, detail)])
        if kind == "session_meta":
            session = payload.get("id", payload.get("session_id"))
            detail = {"subtype": "thread_started", "session_id": session}
            detail.update({key: payload[key] for key in _META_KEYS if key in payload})
            said: _Entries = [(EntryType.SYSTEM_EVENT, detail)]
            forked_from = nonempty_text(payload.get("forked_from_id"))
            if forked_from:  # `codex fork`: the history is the other thread's, by reference
                said.append((EntryType.SYSTEM_EVENT, {"subtype": "forked", "forked_from": forked_from}))
            return _Said(said, session_id=nonempty_text(session))
        if kind == "turn_context":
            return _Said([], model=nonempty_text(payload.get("model")))
        if kind == "compacted":
            shown, self._compaction_shown = self._compaction_shown, False
            if shown:
                return _Said([])
            detail = {"subtype": COMPACTION, "text": payload.get("message")}
            return _Said([(EntryType.SYSTEM_EVENT, detail)])
        if kind == "inter_agent_communication_metadata":
            self._message_starts_turn = payload.get("trigger_turn") is True
            return _Said([])
        if kind in _QUIET_LINES:
            return _Said([])
        return _Said([(EntryType.UNKNOWN, {"line_type": kind})])

    def _event(self, payload: dict[str, Any]) -> _Said:
        kind, turn = nonempty_text(payload.get("type")), payload.get("turn_id")
        if kind == "task_started":
            return _Said(
                [(EntryType.SYSTEM_EVENT, {"subtype": "turn_started", "turn_id": turn})], opens_turn=True
            )
        if kind == "task_complete":
            error = payload.get("error")
            if error is None:
                return _Said([], ends_turn=True)
            message = error.get("message") if isinstance(error, dict) else error
            detail = {"text": message, "error": error, "turn_id": turn}
            return _Said([(EntryType.ERROR, detail)], ends_turn=True)
        if kind == "turn_aborted":
            detail = {"subtype": "turn_aborted", "turn_id": turn, "reason": payload.get("reason")}
            return _Said([(EntryType.SYSTEM_EVENT, detail)], ends_turn=True)
        if kind == "token_count":
            return _Said(self._counted(payload.get("info")))
        if kind == "item_completed":
            item = payload.get("item")
            return _Said(self._typed(item if isinstance(item, dict) else {}))
        if kind == "user_message":  # before 0.171
            return _Said([(EntryType.USER_MESSAGE, {"text": payload.get("message")})])
        if kind in _SYSTEM_EVENTS:
            return _Said(
                [(EntryType.SYSTEM_EVENT, {"subtype": _SYSTEM_EVENTS[kind], "text": payload.get("message")})]
            )
        if kind in _QUIET_EVENTS:
            return _Said([])
        return _Said([(EntryType.UNKNOWN, {"line_type": "event_msg", "payload_type": kind})])

    def _typed(self, item: dict[str, Any]) -> _Entries:
        """An `item_completed`: the prompt, a tool's outcome, or what the history holds."""
        kind = nonempty_text(item.get("type"))
        if kind == "UserMessage":
            return [(EntryType.USER_MESSAGE, {"text": "".join(part_texts(item.get("content")))})]
        if kind in _TYPED_ELSEWHERE:
            return []
        if kind == "SubAgentActivity":
            # `kind`: started (`id` is the spawning call's), completed.
            activity = item.get("kind")
            subtype = f"subagent_{activity}" if isinstance(activity, str) else "subagent_activity"
            detail = {"subtype": subtype, "item_id": item.get("id")}
            detail.update({key: item[key] for key in _SUBAGENT_KEYS if item.get(key) is not None})
            return [(EntryType.SYSTEM_EVENT, detail)]
        if not isinstance(kind, str) or kind not in TYPED_TOOLS:
            return [(EntryType.UNKNOWN, {"line_type": "item_completed", "item_type": kind})]
        return self._tool_calls.typed(item, kind)

    def _counted(self, info: Any) -> _Entries:
        """A response's tokens where the file has no `token_usage_record` (Codex 0.140): the
        `last_token_usage` of a `token_count` whose running total moved (one that repeats the
        total, as when rate limits are told again, counts nothing)."""
        if self._usage_records or not isinstance(info, dict):
            return []
        total, last = info.get("total_token_usage"), info.get("last_token_usage")
        if total == self._last_total or not isinstance(last, dict):
            return []
        self._last_total = total
        return [(EntryType.TOKEN_USAGE, {"usage": last, "response_id": None, "turn_id": None})]

    def _agent_message(self, payload: dict[str, Any]) -> tuple[EntryType, dict[str, Any]]:
        """A message between agents: the task that starts a subagent's turn is its prompt; any
        other (a subagent's final answer to its parent) a `system_event`. Only the plain parts:
        the payload the model wrote is an `encrypted_content` part."""
        starts_turn, self._message_starts_turn = self._message_starts_turn, False
        said = {
            "text": "".join(part_texts(payload.get("content"))),
            "author": payload.get("author"),
            "recipient": payload.get("recipient"),
        }
        if starts_turn:
            return EntryType.USER_MESSAGE, said
        return EntryType.SYSTEM_EVENT, {"subtype": "agent_message", **said}

    def _item(self, payload: dict[str, Any], compaction: bool) -> _Entries:
        kind = nonempty_text(payload.get("type"))
        if compaction or kind == "compaction":
            self._compaction_shown = True
            texts = part_texts(payload.get("content")) or part_texts(payload.get("summary"))
            return [
                (EntryType.SYSTEM_EVENT, {"subtype": COMPACTION, "item_type": kind, "text": "".join(texts)})
            ]
        if kind in _MODEL_CONTEXT_ITEMS:
            return []  # what Codex tells the model it may use: no one said it
        if kind == "message":
            if payload.get("role") != "assistant":
                return []  # the prompt is the `UserMessage` item; the rest is what Codex injects
            text = "".join(part_texts(payload.get("content")))
            return [(EntryType.ASSISTANT_MESSAGE, {"text": text, "message_id": payload.get("id")})]
        if kind == "reasoning":
            texts = part_texts(payload.get("summary")) or part_texts(payload.get("content"))
            return [(EntryType.THINKING, {"text": "\n\n".join(texts)})] if texts else []
        if kind == "agent_message":
            return [self._agent_message(payload)]
        if kind in _CALLS:
            return self._tool_calls.call(payload)
        if kind in _OUTPUTS:
            return self._tool_calls.output(payload)
        return [(EntryType.UNKNOWN, {"line_type": "response_item", "payload_type": kind})]
