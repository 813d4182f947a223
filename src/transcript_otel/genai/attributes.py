"""GenAI semantic-convention attributes read from an entry's `detail`.

Adapters shape `detail` differently (Codex notifications, Claude SDK entries,
bridged WINK tools, role-based chat messages); this looks in the places each of
them uses and returns only what it finds. Pure, tolerant of any input.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.genai.lookup import is_mapping, mapping_at
from transcript_otel.otel import attributes as attr
from transcript_otel.records.serialize import safe_text

_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_CALL_ID_KEYS: Final = ("tool_use_id", "tool_call_id", "call_id", "callId", "toolCallId")
_TOOL_NAME_KEYS: Final = ("tool_name", "toolName", "tool", "name")

# (semantic-convention key, candidate keys: snake_case SDKs, camelCase Codex)
_USAGE_KEYS: Final = (
    (attr.GEN_AI_USAGE_INPUT_TOKENS, ("input_tokens", "inputTokens", "prompt_tokens")),
    (attr.GEN_AI_USAGE_OUTPUT_TOKENS, ("output_tokens", "outputTokens", "completion_tokens")),
    (
        attr.GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS,
        ("cache_read_input_tokens", "cachedInputTokens", "cached_input_tokens"),
    ),
    (
        attr.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS,
        ("cache_creation_input_tokens", "cacheWriteInputTokens", "cache_write_input_tokens"),
    ),
    (
        attr.GEN_AI_USAGE_REASONING_OUTPUT_TOKENS,
        ("reasoningOutputTokens", "reasoning_output_tokens", "reasoning_tokens"),
    ),
)
# The conventions' `gen_ai.usage.input_tokens` is the whole prompt, cached tokens included.
# OpenAI and Codex count it so (`prompt_tokens`, `inputTokens`, and `input_tokens` next to
# `cached_input_tokens`: Codex's `totalTokens` is `inputTokens + outputTokens`); Anthropic does
# not: its `input_tokens` leaves out what was read from (`cache_read_input_tokens`) and written
# to (`cache_creation_input_tokens`) the cache, so those are added. Anthropic usage is told by
# those two keys of Anthropic's own beside `input_tokens`: Claude's `usage` (messages,
# `result`), a subagent's `message_usage`, and `modelUsage` summed into `session_usage` (the
# mapping renames its camelCase keys to these). No OpenAI-style usage we read has them; LiteLLM's
# does, but beside an inclusive `prompt_tokens`, which is left as it is.
_ANTHROPIC_INPUT_KEY: Final = "input_tokens"
_ANTHROPIC_CACHE_KEYS: Final = ("cache_read_input_tokens", "cache_creation_input_tokens")


def _first_text(
    container: Mapping[str, Any], keys: tuple[str, ...], id_is_call_id: bool = False
) -> str | None:
    """The first non-empty string under `keys`; with `id_is_call_id`, a missing `call_id` is `id`."""
    for key in keys:
        value = container.get(key)
        if value is None and id_is_call_id and key == "call_id" and key not in container:
            value = container.get("id")
        if isinstance(value, str) and value:
            return safe_text(value)[0]  # OTLP cannot encode lone surrogates
    return None


# The keys under which a detail nests where a tool's id or name may sit (`_tool_candidates`).
_NESTING_KEYS: Final = ("notification", "sdk_entry", "type", "content")


def _tool_candidates(detail: Mapping[str, Any]) -> list[tuple[Mapping[str, Any], bool]]:
    """Where a tool id or name may sit, most specific first; True where `id` is the call id
    (a Codex item, a content block). Not copied: this runs on the agent's thread."""
    if type(detail) is dict and not any(key in detail for key in _NESTING_KEYS):
        return [(detail, False)]  # a flat detail (WINK's, a session's): itself alone, at once
    candidates: list[tuple[Mapping[str, Any], bool]] = []
    notification = mapping_at(detail, "notification")
    if notification is not None:
        item = mapping_at(notification, "item")
        if item is not None:
            candidates.append((item, True))
        candidates.append((notification, False))
    sdk_entry = mapping_at(detail, "sdk_entry")
    for container in (sdk_entry, mapping_at(sdk_entry, "message"), detail):
        if container is None:
            continue
        if container.get("type") in ("tool_use", "tool_result"):  # a block split out of a message
            candidates.append((container, True))
        content = container.get("content")
        if isinstance(content, list):
            for block in content:
                if is_mapping(block) and block.get("type") in ("tool_use", "tool_result"):
                    candidates.append((block, True))
        candidates.append((container, False))
    return candidates


def _mcp_tool_name(detail: Mapping[str, Any]) -> str | None:
    """An app-server `mcpToolCall` item's tool as `codex exec` names it: `server:tool`."""
    item = mapping_at(mapping_at(detail, "notification"), "item")
    if item is None or item.get("type") != "mcpToolCall":
        return None
    server, tool = item.get("server"), item.get("tool")
    return safe_text(f"{server}:{tool}")[0] if isinstance(server, str) and isinstance(tool, str) else None


def _tool_attributes(detail: Mapping[str, Any]) -> dict[str, str]:
    found: dict[str, str] = {}
    mcp_tool = _mcp_tool_name(detail)
    if mcp_tool is not None:
        found[attr.GEN_AI_TOOL_NAME] = mcp_tool
    for candidate, id_is_call_id in _tool_candidates(detail):
        if attr.GEN_AI_TOOL_CALL_ID not in found:
            call_id = _first_text(candidate, _CALL_ID_KEYS, id_is_call_id)
            if call_id:
                found[attr.GEN_AI_TOOL_CALL_ID] = call_id
        if attr.GEN_AI_TOOL_NAME not in found:
            name = _first_text(candidate, _TOOL_NAME_KEYS)
            if name:
                found[attr.GEN_AI_TOOL_NAME] = name
    return found


def _usage_container(detail: Mapping[str, Any]) -> Mapping[str, Any]:
    """Codex: `notification.tokenUsage.last`; Claude: `usage`; else `detail` itself."""
    notification = mapping_at(detail, "notification") or detail
    token_usage = mapping_at(notification, "tokenUsage")
    if token_usage is not None:
        return mapping_at(token_usage, "last") or mapping_at(token_usage, "total") or token_usage
    sdk_entry = mapping_at(detail, "sdk_entry")
    for container in (sdk_entry, mapping_at(sdk_entry, "message"), detail):
        usage = mapping_at(container, "usage")
        if usage is not None:
            return usage
    return detail


def _count(value: Any) -> int | None:
    """`value` if it is a token count OTLP can carry (an int64, not a bool), else None."""
    if isinstance(value, int) and not isinstance(value, bool) and _INT64_MIN <= value <= _INT64_MAX:
        return value
    return None


def _usage_attributes(detail: Mapping[str, Any]) -> dict[str, int]:
    usage = _usage_container(detail)
    found: dict[str, int] = {}
    input_key: str | None = None
    for key, candidates in _USAGE_KEYS:
        for candidate in candidates:
            value = _count(usage.get(candidate))
            if value is not None:
                found[key] = value
                if key == attr.GEN_AI_USAGE_INPUT_TOKENS:
                    input_key = candidate
                break
    if input_key == _ANTHROPIC_INPUT_KEY and any(key in usage for key in _ANTHROPIC_CACHE_KEYS):
        cached = sum(_count(usage.get(key)) or 0 for key in _ANTHROPIC_CACHE_KEYS)
        found[attr.GEN_AI_USAGE_INPUT_TOKENS] = min(
            found[attr.GEN_AI_USAGE_INPUT_TOKENS] + cached, _INT64_MAX
        )
    cache_write = found.get(attr.GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS)
    if cache_write is not None:
        found[attr.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS] = cache_write
    return found


# Codex tool items carry no tool name; these are the names weakincentives uses too.
_CODEX_ITEM_TOOL_NAMES: Final = {
    "commandExecution": "codex:command",
    "fileChange": "codex:file_change",
    "webSearch": "codex:web_search",
    "subAgentActivity": "spawn_agent",  # a subagent's start: the model's call, as its rollout names it
}


def tool_identity(detail: Any) -> tuple[str | None, str | None]:
    """`(call id, tool name)` of a `tool_use`/`tool_result` entry's `detail`, where found."""
    if not is_mapping(detail):
        return None, None
    found = _tool_attributes(detail)
    name = found.get(attr.GEN_AI_TOOL_NAME)
    item = mapping_at(mapping_at(detail, "notification"), "item") if "notification" in detail else None
    item_type = item.get("type") if item is not None else None
    if item is not None and item_type == "collabAgentToolCall":  # its `tool`, as `codex exec` names it
        name = f"codex:{item.get('tool') or 'collab'}"
    elif name is None and isinstance(item_type, str):
        name = _CODEX_ITEM_TOOL_NAMES.get(item_type)
    return found.get(attr.GEN_AI_TOOL_CALL_ID), name


def usage_attributes(detail: Any) -> dict[str, int]:
    """The `gen_ai.usage.*` token counts found in `detail` (Codex, Claude or plain): input is the
    whole prompt, cached tokens included, and a cache-write count goes under both its names."""
    return _usage_attributes(detail) if is_mapping(detail) else {}


def _running_total(detail: Any) -> dict[str, int] | None:
    """Codex's `notification.tokenUsage.total`: the thread's running total, where reported."""
    total = mapping_at(mapping_at(mapping_at(detail, "notification"), "tokenUsage"), "total")
    return _usage_attributes({"usage": total}) if total is not None else None


# Threads whose running totals one run keeps; the longest silent goes first.
_MAX_THREADS: Final = 1024


class RunningUsage:
    """What each usage report of one run adds to its totals.

    A report counts what it says, but a harness that also reports its running total (Codex:
    several `thread/tokenUsage/updated` per turn, the same one again after a stream retry)
    adds what that total grew by since its last report, so repeats add nothing and the run
    ends at the harness's own total. The first such report adds its own call's counts (a
    resumed thread's total holds earlier sessions). Each thread has its own total (a Codex
    subagent's thread reports its own, between its parent's reports).
    """

    __slots__ = ("_totals",)

    def __init__(self) -> None:
        self._totals: dict[str | None, dict[str, int]] = {}  # by thread id (None: a report naming none)

    def added(self, detail: Any) -> dict[str, int]:
        total = _running_total(detail)
        if total is None:
            return _with_unlogged(usage_attributes(detail), detail)
        notification = mapping_at(detail, "notification")
        thread = notification.get("threadId") if notification is not None else None
        thread = thread if isinstance(thread, str) else None
        previous = self._totals.pop(thread, None)
        if len(self._totals) >= _MAX_THREADS:
            del self._totals[next(iter(self._totals))]
        self._totals[thread] = total
        if previous is None:
            return usage_attributes(detail)
        return {key: max(value - previous.get(key, 0), 0) for key, value in total.items()}


def _with_unlogged(usage: dict[str, int], detail: Any) -> dict[str, int]:
    """`usage` and a Claude result's `unlogged_usage`: model calls of its turn that no message
    tells (the CLI's own requests), which its `usage` leaves out."""
    unlogged = detail.get("unlogged_usage") if is_mapping(detail) else None
    if not is_mapping(unlogged):
        return usage
    for key, count in usage_attributes({"usage": {"input_tokens": 0, **unlogged}}).items():
        usage[key] = usage.get(key, 0) + count
    return usage


def genai_attributes(entry_type: str, detail: Any) -> dict[str, str | int]:
    """The `gen_ai.tool.*` / `gen_ai.usage.*` attributes `detail` supports. A tool is named as
    its span names it (`tool_identity`): Codex command, file-change and web-search items too."""
    if not is_mapping(detail):
        return {}
    if entry_type in ("tool_use", "tool_result"):
        call_id, name = tool_identity(detail)
        found: dict[str, str | int] = {}
        if call_id is not None:
            found[attr.GEN_AI_TOOL_CALL_ID] = call_id
        if name is not None:
            found[attr.GEN_AI_TOOL_NAME] = name
        return found
    if entry_type == "token_usage":
        return dict(_usage_attributes(detail))
    return {}


def cost_usd(detail: Any) -> float:
    """The cost a `token_usage` entry adds: its `turn_cost_usd`, else Claude's `total_cost_usd`."""
    if not is_mapping(detail):
        return 0.0
    cost = detail.get("turn_cost_usd")
    if cost is None:
        entry = detail.get("sdk_entry")
        cost = entry.get("total_cost_usd") if is_mapping(entry) else None
    if isinstance(cost, int | float) and not isinstance(cost, bool) and math.isfinite(cost) and cost > 0:
        return float(cost)
    return 0.0


# Tokens are counted once in a trace, on the `chat` spans (`gen_ai.usage.*`); the root and
# subagent spans say their totals under our own names, which no backend sums with them.
_GEN_AI_USAGE_PREFIX: Final = "gen_ai.usage."
TOTAL_USAGE_PREFIX: Final = "transcript.usage."


def run_totals(usage: Mapping[str, int]) -> dict[str, int]:
    """`gen_ai.usage.*` counts as `transcript.usage.*` totals (the cache write once, as `cache_write`)."""
    return {
        TOTAL_USAGE_PREFIX + key.removeprefix(_GEN_AI_USAGE_PREFIX): value
        for key, value in usage.items()
        if key != attr.GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS
    }


def session_usage(detail: Any) -> dict[str, int]:
    """The session's own running token totals a `token_usage` entry reports (Claude Code's
    `modelUsage`, subagents included, as the mapping put it in `detail.session_usage`)."""
    totals = detail.get("session_usage") if is_mapping(detail) else None
    return usage_attributes({"usage": totals}) if totals is not None else {}


class SessionTotals:
    """A Claude session run's tokens: the session's last reported totals (`session_usage`,
    subagents included) plus its messages' usage since, in the reported totals' key order.

    The CLI writes its totals as the session is left, so a run that ends before (a restart, an
    idle end) has messages they do not cover. The key order is the report's, so the same run
    gives the same bytes in every process (a set's order would not)."""

    __slots__ = ("_reported", "_since")

    def __init__(self) -> None:
        self._reported: dict[str, int] = {}
        self._since: dict[str, int] = {}

    def report(self, detail: Any) -> None:
        """A `token_usage` entry's `detail`: the session's totals, where it reports them, are the
        new base, and only messages after it add to them."""
        reported = session_usage(detail)
        if reported:
            self._reported = reported
            self._since = {}

    def add_message(self, usage: Mapping[str, int]) -> None:
        """A message's usage (once per message: the caller knows which were counted)."""
        since = self._since
        for key, count in usage.items():
            since[key] = since.get(key, 0) + count

    def totals(self) -> Counter[str] | None:
        """The run's tokens; None while the session has reported no totals (the run's own sums
        stand then)."""
        if not self._reported:
            return None
        totals = Counter(self._reported)
        for key, count in self._since.items():
            totals[key] += count
        return totals


def tool_failed(detail: Any) -> bool:
    """Whether a `tool_result` entry says its call failed (each harness says it its own way)."""
    if not is_mapping(detail):
        return False
    if detail.get("is_error") is True:  # line adapters say so themselves
        return True
    result = detail.get("result")
    if is_mapping(result) and result.get("success") is False:
        return True
    entry = detail.get("sdk_entry")
    if is_mapping(entry) and entry.get("is_error") is True:
        return True
    notification = detail.get("notification")
    item = notification.get("item") if is_mapping(notification) else None
    if is_mapping(item):
        exit_code = item.get("exitCode")
        return item.get("status") in ("failed", "declined") or (isinstance(exit_code, int) and exit_code != 0)
    return False


def message_usage(detail: Any) -> tuple[str, dict[str, int]] | None:
    """A Claude transcript message's id and usage (repeated on each line of the message; on the
    first call of a message of tool calls only, `claude_message`)."""
    if not is_mapping(detail) or ("sdk_entry" not in detail and "claude_message" not in detail):
        return None
    entry = detail.get("sdk_entry")
    message = entry.get("message") if is_mapping(entry) else None
    if not is_mapping(message) or not isinstance(message.get("id"), str):
        message = mapping_at(detail, "claude_message")
    if message is None or not isinstance(message.get("id"), str):
        return None
    usage = usage_attributes({"usage": message.get("usage")})
    return (message["id"], usage) if usage else None
