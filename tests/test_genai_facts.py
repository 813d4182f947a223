"""`_genai_facts`: the model, response, subagent and answer facts each adapter's entries tell.

Checked on the entries of real fixtures: captured runs (`tests/fixtures/runs/`), the
stream-json line fixture and what the real Claude Code CLI printed (mapped here), and the
Codex runs, whose entries tell none of these.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel.genai.facts import (
    ResponseFacts,
    SubagentIdentity,
    final_answer,
    finish_reason,
    init_model,
    response_facts,
    subagent_agent_id,
)
from transcript_otel.mappings.codex_exec import CodexExecAdapter

from helpers import MappedEntry, claude_code_entries, mirrored_entries, stream_json_entries

FIXTURES = Path(__file__).resolve().parent / "fixtures"
CLAUDE_CODE_SCENARIOS = sorted(path.stem for path in (FIXTURES / "claude_code").glob("*.jsonl"))


def facts_told(entries: list[MappedEntry]) -> list[tuple[str, str, ResponseFacts]]:
    return [
        (entry_type, source, facts)
        for entry_type, source, detail in entries
        if (facts := response_facts(entry_type, detail)) != ResponseFacts()
    ]


# -- finish reasons ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("stop_reason", "expected"),
    [
        ("end_turn", "stop"),
        ("stop_sequence", "stop"),
        ("tool_use", "tool_call"),
        ("max_tokens", "length"),
        ("refusal", "content_filter"),
        ("tool_calls", "tool_call"),  # OpenAI chat
        ("stop", "stop"),
        ("length", "length"),
        ("pause_turn", "pause_turn"),  # no conventions' value: kept as it is
        ("model_context_window_exceeded", "model_context_window_exceeded"),
        ("", None),
        (None, None),
        (3, None),
    ],
)
def test_finish_reason_maps_stop_reasons_to_the_conventions_values(
    stop_reason: Any, expected: str | None
) -> None:
    assert finish_reason(stop_reason) == expected


# -- response facts per adapter ----------------------------------------------------------


def test_claude_sdk_messages_and_result() -> None:
    """claude-agent-sdk on the real CLI: each message's model and id (the answers the model
    served: its messages with words); the CLI streams them with no stop reason, each result
    has one, and the one model its `modelUsage` names."""
    entries = mirrored_entries("claude-sdk-parallel-subagents.jsonl")
    model = "claude-opus-5-5"
    assert facts_told(entries) == [
        ("assistant_message", "main", ResponseFacts(model, "msg_scripted_0002")),
        ("assistant_message", "subagent:toolu_agent_a", ResponseFacts(model, "msg_scripted_0005")),
        ("assistant_message", "subagent:toolu_agent_b", ResponseFacts(model, "msg_scripted_0006")),
        ("assistant_message", "main", ResponseFacts(model, "msg_scripted_0007")),
        ("token_usage", "main", ResponseFacts(model, finish_reason="stop")),
        ("token_usage", "main", ResponseFacts(model, finish_reason="stop")),
        ("assistant_message", "main", ResponseFacts(model, "msg_scripted_0008")),
        ("token_usage", "main", ResponseFacts(model, finish_reason="stop")),
    ]


@pytest.mark.parametrize("run", ["wink-0.27-claude-rich.jsonl", "wink-0.25-claude-rich.jsonl"])
def test_wink_claude_transcript_messages(run: str) -> None:
    """WINK's Claude adapter (transcript files): model and id; the files' lines say no stop reason."""
    told = facts_told(mirrored_entries(run))
    assert [(kind, source) for kind, source, _ in told] == [
        ("assistant_message", "main"),
        ("assistant_message", "main"),
        ("assistant_message", "subagent:a1b2c3"),
    ]
    for _, _, facts in told:
        assert facts.model == "claude-opus-4-6"
        assert str(facts.response_id).startswith("msg_")
        assert facts.finish_reason is None


def test_claude_stream_json_line_fixture() -> None:
    """`transcript-otel run` on `claude -p`: streamed messages carry no stop reason, results do.
    A message of tool calls only makes no `assistant_message` (its calls are `tool_use` entries)."""
    entries = stream_json_entries(FIXTURES / "line_streams" / "claude-stream-json.jsonl")
    assert facts_told(entries) == [
        ("assistant_message", "main", ResponseFacts("claude-opus-5-5", "msg_scripted_0002")),
        (
            "assistant_message",
            "subagent:toolu_agent_bg",
            ResponseFacts("claude-opus-5-5", "msg_scripted_0004"),
        ),
        ("assistant_message", "main", ResponseFacts("claude-opus-5-5", "msg_scripted_0005")),
        ("token_usage", "main", ResponseFacts("claude-opus-5-5", finish_reason="stop")),
        ("token_usage", "main", ResponseFacts("claude-opus-5-5", finish_reason="stop")),
    ]


@pytest.mark.parametrize("scenario", CLAUDE_CODE_SCENARIOS)
def test_real_claude_cli_responses(scenario: str) -> None:
    """Every real-CLI run: models are the scripted model's (never `<synthetic>`: the CLI's own
    error text is no response), and a turn's result says `stop`, or `error` when it failed."""
    entries = claude_code_entries(scenario)
    for entry_type, _, facts in facts_told(entries):
        if entry_type == "assistant_message":
            assert facts.model == "claude-opus-5-5"
            assert str(facts.response_id).startswith("msg_scripted_")
        else:
            assert entry_type == "token_usage"
            failed = any(kind == "error" for kind, _, _ in entries)
            assert facts.finish_reason == ("error" if failed else "stop")
            assert facts.model in ("claude-opus-5-5", None)  # None: no model was called


@pytest.mark.parametrize(
    ("model_usage", "model"),
    [
        ({"claude-opus-5-5": {"inputTokens": 3}}, "claude-opus-5-5"),
        ({"claude-opus-5-5": {}, "claude-haiku-5": {}}, None),  # a subagent on another model
        ({}, None),
        ({"<synthetic>": {}}, None),
        (["claude-opus-5-5"], None),
        (None, None),
    ],
)
def test_a_result_names_the_model_only_where_its_usage_names_one(model_usage: Any, model: str | None) -> None:
    """A `result`'s `modelUsage` is the session's usage by model: with one model, that is the model
    that answered; with several, which one answered the turn is not said."""
    result = {"type": "result", "subtype": "success", "stop_reason": "end_turn", "modelUsage": model_usage}
    assert response_facts("token_usage", {"sdk_entry": result}) == ResponseFacts(model, finish_reason="stop")


def test_a_synthetic_message_tells_no_response() -> None:
    """Claude Code's own message (an API error's text) as an `assistant_message`, as a transcript
    mapping may keep it: no model answered it, whatever its stop reason says."""
    [synthetic] = [
        json.loads(line)
        for line in (FIXTURES / "claude_code" / "bad_request.jsonl").read_text().splitlines()
        if '"<synthetic>"' in line
    ]
    assert synthetic["message"]["stop_reason"] == "stop_sequence"
    assert response_facts("assistant_message", {"sdk_entry": synthetic}) == ResponseFacts()


@pytest.mark.parametrize(
    ("run", "model"),
    [
        ("wink-0.24-openai-tool.jsonl", "fake-tool"),
        ("wink-0.24-litellm-parallel.jsonl", "fake-parallel"),
        ("run-rtf1.jsonl", "gpt-4.1-mini"),
    ],
)
def test_chat_and_rtf1_usage_reports_name_the_model(run: str, model: str) -> None:
    """WINK 0.24 chat adapters: `token_usage.detail.model`; RTF1: `detail.usage.model`."""
    told = facts_told(mirrored_entries(run))
    assert told
    assert all(kind == "token_usage" and facts == ResponseFacts(model=model) for kind, _, facts in told)


@pytest.mark.parametrize(
    "run",
    [
        "wink-0.27-codex-real-demo.jsonl",
        "wink-0.27-codex-rich.jsonl",
        "wink-0.27-codex-failed.jsonl",
        "wink-0.25-codex-rich.jsonl",
        "wink-0.24-openai-error.jsonl",
    ],
)
def test_runs_whose_entries_name_no_model_tell_nothing(run: str) -> None:
    entries = mirrored_entries(run)
    assert facts_told(entries) == []
    assert all(init_model(d) is None and final_answer(d) is None for _, _, d in entries)
    assert all(subagent_agent_id(d) is None for _, _, d in entries)


def test_codex_exec_tells_nothing() -> None:
    adapter = CodexExecAdapter()
    lines = (FIXTURES / "codex" / "exec" / "tour.jsonl").read_text().splitlines()
    entries = [(e.entry_type, e.source, e.detail) for line in lines for e in adapter.feed(line)]
    assert any(kind == "token_usage" for kind, _, _ in entries)
    assert facts_told(entries) == []


# -- the session's model ----------------------------------------------------------------


def test_init_model_of_the_sdk_and_the_cli() -> None:
    sdk = [init_model(d) for _, _, d in mirrored_entries("claude-sdk-parallel-subagents.jsonl")]
    assert [model for model in sdk if model is not None] == ["claude-opus-5-5"] * 3  # an init per turn
    for scenario in CLAUDE_CODE_SCENARIOS:
        for entry_type, _, detail in claude_code_entries(scenario):
            model = init_model(detail)
            is_init = entry_type == "system_event" and detail.get("subtype") == "init"
            assert model == ("claude-opus-5-5" if is_init else None)


# -- subagents' real ids ----------------------------------------------------------------


def test_sdk_subagents_started_as_tasks() -> None:
    """claude-agent-sdk's `task_started`: the launching call's id and the task (agent) id; each
    subagent's answer names them again."""
    entries = mirrored_entries("claude-sdk-parallel-subagents.jsonl")
    found = [(kind, subagent_agent_id(d)) for kind, _, d in entries]
    counter = SubagentIdentity("toolu_agent_a", "a3e5a1cbc98e87926")
    reader = SubagentIdentity("toolu_agent_b", "a3e5a26f9572a3208")
    assert [(kind, identity) for kind, identity in found if identity is not None] == [
        ("system_event", counter),
        ("system_event", reader),
        ("assistant_message", counter),
        ("assistant_message", reader),
    ]


@pytest.mark.parametrize(
    "scenario", ["foreground_subagent", "synchronous_subagent", "background_subagent", "parallel_subagents"]
)
def test_real_cli_subagents_have_one_agent_id_per_launching_call(scenario: str) -> None:
    """stream-json sources name a subagent by its launching call; `task_started` and the
    subagent's messages agree on its real agent id."""
    agent_ids: dict[str, set[str]] = {}
    for _, source, detail in claude_code_entries(scenario):
        identity = subagent_agent_id(detail)
        if identity is None:
            continue
        assert identity.call_id is not None
        if source != "main":
            assert source == f"subagent:{identity.call_id}"
        agent_ids.setdefault(identity.call_id, set()).add(identity.agent_id)
    assert agent_ids
    assert all(len(ids) == 1 and next(iter(ids)).startswith("a") for ids in agent_ids.values())


def test_stream_json_line_fixture_subagent() -> None:
    entries = stream_json_entries(FIXTURES / "line_streams" / "claude-stream-json.jsonl")
    found = {subagent_agent_id(d) for _, _, d in entries} - {None}
    assert found == {SubagentIdentity("toolu_agent_bg", "a4531e32b9a28a619")}


@pytest.mark.parametrize("run", ["wink-0.27-claude-rich.jsonl", "wink-0.25-claude-rich.jsonl"])
def test_transcript_file_subagents_say_their_agent_id(run: str) -> None:
    """Transcript files' `agentId` (their source already is it); the launching call is not said."""
    found = {(source, subagent_agent_id(d)) for _, source, d in mirrored_entries(run)}
    assert {item for item in found if item[1] is not None} == {
        ("subagent:a1b2c3", SubagentIdentity(None, "a1b2c3"))
    }


def test_a_background_shell_task_is_no_subagent() -> None:
    detail = {
        "sdk_entry": {
            "type": "system",
            "subtype": "task_started",
            "task_id": "b12",
            "tool_use_id": "toolu_bash",
            "task_type": "local_bash",
        }
    }
    assert subagent_agent_id(detail) is None
    detail["sdk_entry"]["task_type"] = "local_agent"
    assert subagent_agent_id(detail) == SubagentIdentity("toolu_bash", "b12")


# -- final answers ----------------------------------------------------------------------


def test_final_answer_of_the_sdk_result() -> None:
    answers = [final_answer(d) for _, _, d in mirrored_entries("claude-sdk-parallel-subagents.jsonl")]
    assert [answer for answer in answers if answer is not None] == [  # a result per turn
        "I started both subagents and will report back.",
        "The counter found 3 files; the reader is still working.",
        "Both subagents are done: 3 files, and the readme says hello.",
    ]


@pytest.mark.parametrize(
    ("scenario", "expected"),
    [
        ("tools", ["The command printed: hello from bash."]),
        ("stream_json_input", ["First answer.", "Second answer."]),
        ("bad_request", []),  # the result's text is the API error's
        ("max_turns", []),
        ("unknown_flag", []),
    ],
)
def test_final_answers_of_the_real_cli(scenario: str, expected: list[str]) -> None:
    answers = [final_answer(d) for _, _, d in claude_code_entries(scenario)]
    assert [answer for answer in answers if answer is not None] == expected


# -- any input --------------------------------------------------------------------------

JUNK = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5) | st.floats(),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "sdk_entry",
                    "message",
                    "model",
                    "id",
                    "stop_reason",
                    "type",
                    "subtype",
                    "usage",
                    "result",
                    "is_error",
                    "agent_id",
                    "agentId",
                    "task_id",
                    "tool_use_id",
                    "task_type",
                    "parent_tool_use_id",
                ]
            )
            | st.sampled_from(["assistant", "system", "result", "init", "task_started", "<synthetic>"])
            | st.text(max_size=4),
            children,
            max_size=5,
        )
    ),
    max_leaves=25,
)


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(["assistant_message", "token_usage", "system_event", None, 3]), JUNK)
def test_readers_never_raise_and_return_strings_or_none(entry_type: Any, detail: Any) -> None:
    facts = response_facts(entry_type, detail)
    assert all(value is None or (isinstance(value, str) and value) for value in facts)
    for value in (init_model(detail), final_answer(detail), finish_reason(detail)):
        assert value is None or (isinstance(value, str) and value)
    identity = subagent_agent_id(detail)
    assert identity is None or (isinstance(identity.agent_id, str) and identity.agent_id)


@pytest.mark.parametrize(
    "detail",
    [
        {"sdk_entry": {"type": "assistant", "message": {"model": 5, "id": ["x"], "stop_reason": {}}}},
        {"sdk_entry": {"type": "result", "stop_reason": 1, "result": None, "is_error": "yes"}},
        {"sdk_entry": {"type": "system", "subtype": "init", "model": "<synthetic>"}},
        {"sdk_entry": {"type": "system", "subtype": "task_started", "task_id": 1, "tool_use_id": "t"}},
        {"model": "", "usage": {"model": None}},
        {"usage": "gpt"},
    ],
)
def test_wrong_types_tell_nothing(detail: dict[str, Any]) -> None:
    for entry_type in ("assistant_message", "token_usage"):
        assert response_facts(entry_type, detail) == ResponseFacts()
    assert init_model(detail) is None
    assert final_answer(detail) is None
    assert subagent_agent_id(detail) is None


def test_a_detail_is_read_as_a_mapping_whatever_mapping_it_is() -> None:
    """Dicts are told at once; any other Mapping still counts (a harness may hand one over)."""
    from types import MappingProxyType

    from transcript_otel.genai.attributes import tool_identity
    from transcript_otel.genai.lookup import is_mapping

    class Ordered(dict[str, Any]):
        pass

    mappings: list[object] = [{}, Ordered(), MappingProxyType({"a": 1})]
    others: list[object] = [None, [], "text", ("a", 1), 0]
    assert [is_mapping(value) for value in mappings + others] == [True] * 3 + [False] * 5
    proxy = MappingProxyType({"tool_use_id": "c1", "tool_name": "Bash"})
    assert tool_identity(proxy) == tool_identity(dict(proxy)) == ("c1", "Bash")
