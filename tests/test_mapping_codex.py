"""`CodexMapper`: app-server notifications to canonical entries (the specification's Codex table).

One test (or parametrized case) per row of the table and per entry emission point;
then hostile input, which must never raise.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings.codex import STREAMING_DELTAS, TOOL_ITEM_TYPES, CodexMapper, native_detail
from transcript_otel.model.entries import DetailInRaw, RawJson

TOOL_TYPES = sorted(TOOL_ITEM_TYPES)


def item(item_type: str, item_id: str = "item-1", **fields: Any) -> dict[str, Any]:
    return {"threadId": "th", "turnId": "tu", "item": {"type": item_type, "id": item_id, **fields}}


def mapped(method: str, params: Any) -> MappedEntry:
    entry = CodexMapper().notification(method, params)
    assert entry is not None, method
    return entry


def assert_notification_entry(entry: MappedEntry, entry_type: str, method: str, params: Any) -> None:
    """The shape every notification entry shares: detail.notification, raw {method, params}, main."""
    assert entry.entry_type == entry_type
    assert entry.detail["notification"] is params
    assert isinstance(entry.raw, RawJson)
    assert entry.raw.value == {"method": method, "params": params}
    assert entry.source == "main"


# -- emission point 1: the prompt sent with turn/start --------------------------------------


def test_user_message_is_the_prompt_text_without_raw() -> None:
    entry = CodexMapper().user_message("Review this diff")
    assert entry == MappedEntry("user_message", {"text": "Review this diff"}, None, "main")


# -- the notification rows of the table (emission points 2, 3, 7, 8, 9) -----------------------


@pytest.mark.parametrize("tool_type", TOOL_TYPES)
def test_item_started_of_a_tool_item_is_tool_use(tool_type: str) -> None:
    """Emission point 2."""
    params = item(tool_type, command="ls")
    assert_notification_entry(mapped("item/started", params), "tool_use", "item/started", params)


@pytest.mark.parametrize(
    "item_type", ["agentMessage", "reasoning", "userMessage", "contextCompaction", "dynamicToolCall"]
)
def test_item_started_of_other_items_is_not_an_entry(item_type: str) -> None:
    assert CodexMapper().notification("item/started", item(item_type)) is None


@pytest.mark.parametrize("tool_type", TOOL_TYPES)
def test_item_completed_of_a_tool_item_is_tool_result(tool_type: str) -> None:
    """Emission point 3."""
    params = item(tool_type, status="completed", exitCode=0)
    assert_notification_entry(mapped("item/completed", params), "tool_result", "item/completed", params)


@pytest.mark.parametrize(
    ("method", "params", "entry_type", "extra"),
    [
        pytest.param(
            "item/reasoning/completed",
            {"itemId": "r1", "summary": ["thought"]},
            "thinking",
            {},
            id="7-reasoning-completed",
        ),
        pytest.param(
            "thread/tokenUsage/updated",
            {"threadId": "th", "tokenUsage": {"last": {"inputTokens": 3}, "total": {"inputTokens": 9}}},
            "token_usage",
            {},
            id="8-token-usage",
        ),
        pytest.param(
            "turn/completed",
            {"turn": {"id": "tu", "status": "failed", "error": {"message": "boom"}}},
            "error",
            {},
            id="9-turn-failed",
        ),
        pytest.param(
            "item/completed",
            item("contextCompaction"),
            "system_event",
            {"subtype": "compaction"},
            id="context-compaction",
        ),
        pytest.param("item/somethingNew", {"x": 1}, "unknown", {}, id="other-item"),
        pytest.param("item/plan/updated", {"plan": []}, "unknown", {}, id="other-item-nested"),
        pytest.param(
            "item/completed",
            item("reasoning", summary=["Think first."], content=[]),
            "thinking",
            {},
            id="reasoning-item-completed",
        ),
        pytest.param(
            "turn/diff/updated",
            {"turnId": "tu", "diff": "+a"},
            "system_event",
            {"subtype": "turn_diff"},
            id="turn-diff",
        ),
        pytest.param(
            "warning",
            {"threadId": "th", "message": "Model metadata for `x` not found."},
            "system_event",
            {"subtype": "warning"},
            id="warning",
        ),
        pytest.param(
            "error",
            {"error": {"message": "Reconnecting... 1/1", "codexErrorInfo": {}}, "willRetry": True},
            "system_event",
            {"subtype": "retry"},
            id="error-will-retry",
        ),
        pytest.param(
            "error",
            {
                "error": {"message": "high demand", "codexErrorInfo": "internalServerError"},
                "willRetry": False,
            },
            "system_event",
            {"subtype": "api_error"},
            id="error-final",
        ),
        pytest.param("turn/plan/updated", {"plan": []}, "unknown", {}, id="other-turn"),
        pytest.param("turn/interrupted", {}, "unknown", {}, id="other-turn-empty"),
    ],
)
def test_notification_rows(method: str, params: Any, entry_type: str, extra: dict[str, Any]) -> None:
    entry = mapped(method, params)
    assert_notification_entry(entry, entry_type, method, params)
    assert entry.detail == {"notification": params, **extra}


def test_turn_started_is_a_system_event() -> None:
    """`turn/started` → `system_event` `{subtype: "turn_started"}`.

    This deliberately follows weakincentives 0.26+'s `CodexTranscriptBridge`; the
    specification's table alone would make it `unknown`.
    """
    params = {"turn": {"id": "tu", "status": "inProgress"}}
    entry = mapped("turn/started", params)
    assert_notification_entry(entry, "system_event", "turn/started", params)
    assert entry.detail["subtype"] == "turn_started"


@pytest.mark.parametrize("status", ["completed", "interrupted", None])
def test_turn_completed_without_failure_is_not_an_entry(status: str | None) -> None:
    assert CodexMapper().notification("turn/completed", {"turn": {"id": "tu", "status": status}}) is None


def test_item_completed_of_an_unmapped_item_is_not_an_entry() -> None:
    assert CodexMapper().notification("item/completed", item("userMessage")) is None


@pytest.mark.parametrize(
    "method",
    [
        *("thread/started", "thread/name/updated", "account/updated", "account/rateLimits/updated"),
        *("codex/event/task_started", "codex/event/agent_message_delta", "", "item", "turn"),
    ],
)
def test_methods_that_are_not_transcript_content(method: str) -> None:
    assert CodexMapper().notification(method, {"anything": 1}) is None


# -- streaming deltas and the accumulated agent message (emission point 4) --------------------


@pytest.mark.parametrize("method", sorted(STREAMING_DELTAS))
def test_streaming_deltas_are_never_entries(method: str) -> None:
    assert CodexMapper().notification(method, {"itemId": "m1", "delta": "x"}) is None


def test_agent_message_without_text_carries_the_joined_deltas_of_its_item() -> None:
    """Emission point 4: deltas are folded per itemId, emitted once at item/completed."""
    mapper = CodexMapper()
    for item_id, delta in [("m1", "Hel"), ("m2", "other"), ("m1", "lo, "), ("m1", "world")]:
        assert mapper.notification("item/agentMessage/delta", {"itemId": item_id, "delta": delta}) is None
    params = item("agentMessage", "m1")
    entry = mapper.notification("item/completed", params)
    assert entry is not None
    assert_notification_entry(entry, "assistant_message", "item/completed", params)
    assert entry.detail["accumulated_text"] == "Hello, world"
    # The other message keeps its own deltas; m1's were released.
    other = mapper.notification("item/completed", item("agentMessage", "m2"))
    assert other is not None
    assert other.detail["accumulated_text"] == "other"
    again = mapper.notification("item/completed", item("agentMessage", "m1"))
    assert again is not None
    assert "accumulated_text" not in again.detail


def test_agent_message_with_text_has_no_accumulated_text() -> None:
    mapper = CodexMapper()
    mapper.notification("item/agentMessage/delta", {"itemId": "m1", "delta": "Hello"})
    params = item("agentMessage", "m1", text="Hello")
    entry = mapper.notification("item/completed", params)
    assert entry is not None
    assert entry.detail == {"notification": params}


def test_agent_message_without_deltas_or_text_is_still_an_assistant_message() -> None:
    params = item("agentMessage", "m9")
    entry = mapped("item/completed", params)
    assert entry.detail == {"notification": params}
    assert entry.entry_type == "assistant_message"


def test_malformed_deltas_are_ignored() -> None:
    mapper = CodexMapper()
    for params in [{"itemId": "m1", "delta": 5}, {"itemId": 7, "delta": "x"}, "not a dict", None]:
        assert mapper.notification("item/agentMessage/delta", params) is None
    entry = mapper.notification("item/completed", item("agentMessage", "m1"))
    assert entry is not None
    assert "accumulated_text" not in entry.detail


# -- bridged WINK tools (emission points 5 and 6) ----------------------------------------------


def test_item_tool_call_is_tool_use() -> None:
    """Emission point 5."""
    params = {"threadId": "th", "turnId": "tu", "callId": "b1", "tool": "search", "arguments": {"q": 1}}
    entry = CodexMapper().tool_call(params)
    assert_notification_entry(entry, "tool_use", "item/tool/call", params)
    assert entry.detail == {"notification": params}


def test_bridged_tool_response_is_tool_result() -> None:
    """Emission point 6."""
    params = {"callId": "b1", "tool": "search", "arguments": {}}
    result = {"success": True, "contentItems": [{"type": "inputText", "text": "found"}]}
    entry = CodexMapper().tool_result(params, result)
    assert entry.entry_type == "tool_result"
    assert entry.detail == {"notification": params, "result": result}
    assert isinstance(entry.raw, RawJson)
    assert entry.raw.value == {"method": "item/tool/result", "params": params, "result": result}
    assert entry.source == "main"


# -- hostile input ---------------------------------------------------------------------------


@pytest.mark.parametrize("method", [None, 5, 1.5, b"item/started", ("item/started",)])
def test_a_method_that_is_not_a_string_is_unknown_with_a_reason(method: Any) -> None:
    entry = CodexMapper().notification(method, {"a": 1})
    assert entry is not None
    assert entry.entry_type == "unknown"
    assert "not a string" in entry.detail["reason"]
    assert isinstance(entry.raw, RawJson)
    assert entry.raw.value == {"method": method, "params": {"a": 1}}


@pytest.mark.parametrize("method", [["item/started"], {"method": "item/started"}])
def test_an_unhashable_method_does_not_raise(method: Any) -> None:
    entry = CodexMapper().notification(method, {})
    assert entry is not None
    assert entry.entry_type == "unknown"


@pytest.mark.parametrize("method", ["item/started", "item/completed"])
@pytest.mark.parametrize("item_type", [[], {}, ["commandExecution"]])
def test_an_unhashable_item_type_does_not_raise(method: str, item_type: Any) -> None:
    assert CodexMapper().notification(method, {"item": {"type": item_type, "id": "x"}}) is None


@pytest.mark.parametrize("params", [None, "text", 3, ["item"], b"{}"])
@pytest.mark.parametrize("method", ["item/started", "item/completed", "item/reasoning/completed"])
def test_item_params_that_are_not_an_object_are_unknown_with_a_reason(method: str, params: Any) -> None:
    entry = mapped(method, params)
    assert_notification_entry(entry, "unknown", method, params)
    assert entry.detail["reason"] == "params is not an object"


@pytest.mark.parametrize("method", ["thread/started", "account/updated", "codex/event/x"])
def test_other_params_that_are_not_an_object_are_not_entries(method: str) -> None:
    assert CodexMapper().notification(method, ["not", "an", "object"]) is None


@pytest.mark.parametrize("item_value", [None, "str", [1], 3])
def test_an_item_that_is_not_an_object_is_not_a_tool(item_value: Any) -> None:
    assert CodexMapper().notification("item/started", {"item": item_value}) is None
    assert CodexMapper().notification("item/completed", {"item": item_value}) is None


@pytest.mark.parametrize(
    ("line", "raw"),
    [
        ("not json {", "not json {"),
        (b"caf\xc3\xa9 \xff", "café \\xff"),
        (None, "None"),
    ],
)
def test_malformed_lines_are_kept_as_unknown(line: Any, raw: str) -> None:
    entry = CodexMapper().malformed(line, "Invalid JSON: Expecting value")
    assert entry == MappedEntry("unknown", {"parse_error": "Invalid JSON: Expecting value"}, raw, "main")


JSONISH = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=8)
    | st.binary(max_size=4),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(
            st.sampled_from(["item", "type", "id", "itemId", "delta", "text", "turn", "status"])
            | st.text(max_size=4)
            | st.integers()
            | st.none(),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
METHODS = st.sampled_from(
    [
        *sorted(STREAMING_DELTAS),
        *("item/started", "item/completed", "turn/started", "turn/completed", "item/reasoning/completed"),
        *("thread/tokenUsage/updated", "thread/started", "item/x", "turn/x"),
    ]
)
ITEM_TYPES = st.sampled_from([*TOOL_TYPES, "agentMessage", "contextCompaction"]) | JSONISH


def deep(depth: int) -> Any:
    value: Any = "leaf"
    for _ in range(depth):
        value = {"item": value, "turn": [value]}
    return value


@settings(max_examples=300, deadline=None)
@given(
    method=METHODS | JSONISH,
    params=JSONISH
    | st.fixed_dictionaries({"item": st.fixed_dictionaries({"type": ITEM_TYPES, "id": JSONISH})})
    | st.fixed_dictionaries({"turn": st.fixed_dictionaries({"status": st.just("failed") | JSONISH})})
    | st.fixed_dictionaries({"itemId": JSONISH, "delta": JSONISH}),
)
def test_notification_never_raises(method: Any, params: Any) -> None:
    mapper = CodexMapper()
    for _ in range(2):  # a second pass sees the state the first one left
        entry = mapper.notification(method, params)
        assert entry is None or (isinstance(entry, MappedEntry) and entry.entry_type in CANONICAL_ENTRY_TYPES)
    completed = mapper.notification("item/completed", {"item": {"type": "agentMessage", "id": "m"}})
    assert completed is not None


def test_deeply_nested_and_surrogate_params_do_not_raise() -> None:
    mapper = CodexMapper()
    for method in ["item/started", "item/completed", "turn/completed", "item/x", "\ud800"]:
        entry = mapper.notification(method, {"item": deep(5000), "\udfff": "\ud800", 1: 2})
        assert entry is None or entry.entry_type in CANONICAL_ENTRY_TYPES


# -- weakincentives' own Codex entries: a detail its raw holds -------------------------------


def test_native_detail_of_a_notification_is_taken_from_raw() -> None:
    params = item("agentMessage", text="done")
    kept = native_detail({"notification": params})
    assert isinstance(kept, DetailInRaw)
    assert kept.fields == (("notification", "params"),)
    assert kept.constants == ()


def test_native_detail_keeps_a_constant_subtype() -> None:
    kept = native_detail({"notification": {"turn": {}}, "subtype": "turn_started"})
    assert isinstance(kept, DetailInRaw)
    assert kept.fields == (("notification", "params"),)
    assert kept.constants == (("subtype", "turn_started"),)


@pytest.mark.parametrize(
    "detail",
    [
        {"notification": {"id": "c"}, "result": {"content": []}},  # a bridged tool's result
        {"notification": {}, "subtype": 3},
        {"notification": {}, "subtype": "x", "other": 1},
        {"text": "the prompt"},
        {},
        None,
        ["notification"],
    ],
)
def test_native_detail_leaves_every_other_detail_as_it_is(detail: Any) -> None:
    assert native_detail(detail) is detail


def test_a_reasoning_item_completed_twice_is_one_thinking_entry() -> None:
    """Codex 0.171 completes reasoning with `item/completed` only; a Codex that also sends
    `item/reasoning/completed` for the same item gets one `thinking` entry, not two."""
    mapper = CodexMapper()
    reasoning = item("reasoning", summary=["Think first."], content=[])
    first = mapper.notification("item/reasoning/completed", {**reasoning, "itemId": reasoning["item"]["id"]})
    assert first is not None
    assert first.entry_type == "thinking"
    assert mapper.notification("item/completed", reasoning) is None
    other = item("reasoning", summary=["Then act."], content=[])
    other["item"]["id"] = "r2"
    second = mapper.notification("item/completed", other)
    assert second is not None
    assert second.entry_type == "thinking"
