"""Codex rollout lines to canonical entries: the recorded sessions against what `codex exec --json`
printed for the same runs, then one test per row of the mapping table, then bad input.

The fixtures (`tests/fixtures/sessions/codex/<scenario>/`, docs/session-logs.md) hold each run's
stdout (`stdout-N.jsonl`, mapped by `CodexExecAdapter`) and the rollout file the same runs wrote.
"""

from __future__ import annotations

import json
import shlex
from collections import Counter
from datetime import UTC
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.genai.attributes import tool_identity, usage_attributes
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.codex_exec import CodexExecAdapter
from transcript_otel.mappings.codex_rollout import CodexRolloutMapper
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.reading.text import entry_text

from helpers import JSONISH
from session_fixtures import (
    CODEX,
    CODEX_FORKED_SCENARIOS,
    CODEX_INTERACTIVE_SCENARIOS,
    CODEX_OLDER_SCENARIOS,
    CODEX_SCENARIOS,
)

FIXTURES = CODEX
SCENARIOS = sorted(CODEX_SCENARIOS + CODEX_OLDER_SCENARIOS)
Turn = list[MappedEntry]


def test_every_recorded_scenario_is_compared() -> None:
    recorded = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
    assert recorded == sorted(SCENARIOS + list(CODEX_INTERACTIVE_SCENARIOS + CODEX_FORKED_SCENARIOS))


@pytest.mark.parametrize(
    ("scenario", "printed_as"),
    [("interactive", "shell"), ("interactive_two_prompts", "resumed"), ("interactive_subagent", "subagent")],
)
def test_the_terminal_ui_logs_what_codex_exec_printed_for_the_same_conversation(
    scenario: str, printed_as: str
) -> None:
    """The terminal UI a person uses, given `printed_as`'s conversation (its prompts typed in
    one UI, not one `codex exec` each): its rollout says, turn by turn, what `codex exec
    --json` printed, with the same tokens per response as `printed_as`'s rollout; the UI's own
    summary as it ended counts them alike."""
    turns, printed = rollout_turns(scenario), exec_turns(printed_as)
    assert len(turns) == len(printed) == len(typed_prompts(meta(scenario)["runs"][0]["arguments"]))
    for turn, theirs in zip(turns, printed, strict=True):
        assert conversation(turn, rollout=True) == conversation(theirs, rollout=False)

    def tokens(of: list[Turn]) -> list[dict[str, int]]:
        return [usage_attributes(e.detail) for turn in of for e in turn if e.entry_type == "token_usage"]

    assert tokens(turns) == tokens(rollout_turns(printed_as))
    summary = (FIXTURES / scenario / "terminal-1.txt").read_text().splitlines()[0]
    counted = tokens(turns)
    cached = sum(t["gen_ai.usage.cache_read.input_tokens"] for t in counted)
    uncached = sum(t["gen_ai.usage.input_tokens"] for t in counted) - cached
    output = sum(t["gen_ai.usage.output_tokens"] for t in counted)
    told = f"input={uncached:,}" + (f" (+ {cached:,} cached)" if cached else "") + f" output={output:,}"
    assert summary.startswith("Token usage: ")
    assert told in summary


def typed_prompts(arguments: list[str]) -> list[str]:
    """The prompts of a terminal UI's recording: its arguments but `--no-daemon` and `-c KEY=VALUE`
    (the first prompt is the last argument; the others were typed)."""
    prompts: list[str] = []
    words = iter(arguments)
    for word in words:
        if word == "-c":
            next(words)
        elif word != "--no-daemon":
            prompts.append(word)
    return prompts


def meta(scenario: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((FIXTURES / scenario / "meta.json").read_text())
    return found


def thread_file(scenario: str) -> str:
    """The session file of the thread `codex exec` ran, or the terminal UI ran (each subagent's
    thread has its own): the one `codex exec --json` named first, or the UI as it ended
    ("To continue this session, run: codex resume <thread>")."""
    if scenario in CODEX_INTERACTIVE_SCENARIOS:
        told = (FIXTURES / scenario / "terminal-1.txt").read_text()
        thread = told.split("codex resume ", 1)[1].split()[0]
    else:
        thread = json.loads((FIXTURES / scenario / "stdout-1.jsonl").read_text().splitlines()[0])["thread_id"]
    (name,) = [name for name in meta(scenario)["session_files"] if name.endswith(f"-{thread}.jsonl")]
    return str(name)


def rollout_lines(scenario: str, *, subagents: bool = False) -> list[tuple[str, SessionLine]]:
    """The lines of the thread's file, each mapped (with `subagents`, then each subagent's
    file's, by a mapper of its own)."""
    names = [thread_file(scenario)]
    if subagents:
        names += [name for name in meta(scenario)["session_files"] if name not in names]
    mapped: list[tuple[str, SessionLine]] = []
    for name in names:
        mapper = CodexRolloutMapper()
        text = (FIXTURES / scenario / name).read_text()
        mapped += [(line, mapper.line(line)) for line in text.splitlines(keepends=True)]
    return mapped


def rollout_turns(scenario: str) -> list[Turn]:
    turns: list[Turn] = []
    for _, said in rollout_lines(scenario):
        if said.opens_turn:
            turns.append([])
        if turns:
            turns[-1].extend(said.entries)
    return turns


def exec_turns(scenario: str) -> list[Turn]:
    """Each run's entries after its `turn.started` (every recorded run is one turn)."""
    turns: list[Turn] = []
    for run in range(1, len(meta(scenario)["runs"]) + 1):
        adapter = CodexExecAdapter()
        lines = (FIXTURES / scenario / f"stdout-{run}.jsonl").read_text().splitlines()
        entries = [entry for line in lines for entry in adapter.feed(line)]
        subtypes = [entry.detail.get("subtype") for entry in entries]
        assert subtypes[:2] == ["thread_started", "turn_started"]
        assert subtypes.count("turn_started") == 1
        turns.append(entries[2:])
    return turns


def exec_tool(item: dict[str, Any]) -> tuple[Any, ...]:
    kind = item["type"]
    if kind == "command_execution":
        return ("command", item["command"], item["aggregated_output"], item["exit_code"])
    if kind == "mcp_tool_call":
        texts = [part["text"] for part in item["result"]["content"]]
        return ("mcp", item["server"], item["tool"], item["arguments"], "\n".join(texts))
    if kind == "web_search":
        return ("web_search", item["query"], item["action"])
    if kind == "collab_tool_call":
        return ("collab", item["tool"], item["status"], item["receiver_thread_ids"])
    assert kind == "file_change"
    return ("file_change", sorted((change["path"], change["kind"]) for change in item["changes"]))


def rollout_tool(item: dict[str, Any], text: str) -> tuple[Any, ...]:
    kind = item["type"]
    if kind == "CommandExecution":
        return ("command", shlex.join(item["command"]), text, item["exit_code"])
    if kind == "McpToolCall":
        return ("mcp", item["server"], item["tool"], item["arguments"], text)
    if kind == "WebSearch":
        return ("web_search", item["query"], item["action"])
    if kind == "CollabAgentToolCall":
        return ("collab", item["tool"], item["status"], item["receiver_thread_ids"])
    assert kind == "FileChange"
    return ("file_change", sorted((path, change["type"]) for path, change in item["changes"].items()))


# Codex's own `tool_search` is not printed by `codex exec --json`, nor are `spawn_agent` and
# code mode's script (the commands it runs are); the
# wait for a subagent is, as a `collab_tool_call` (`codex:wait`), where the file names the
# call as the model made it (`wait_agent`): compared below, by name.
NOT_PRINTED_ALIKE = frozenset({"tool_search", "spawn_agent", "codex:code_mode"})
SAME_CALL = {"codex:wait": "wait_agent"}


def said(entry: MappedEntry, rollout: bool, ids: dict[str, str], typed: bool) -> tuple[Any, ...] | None:
    """What an entry says that both streams say: None for what only one of them has (the prompt,
    the lifecycle, retries, compaction, per-response tokens, the `tool_search` tool)."""
    kind, detail = entry.entry_type, entry.detail
    item = {} if rollout else detail["event"].get("item", {})
    if kind in ("thinking", "assistant_message"):
        return (kind, detail["text"] if rollout else item["text"])
    if kind == "error":
        return (kind, detail["text"] if rollout else detail["event"]["error"]["message"])
    if kind not in ("tool_use", "tool_result") or detail["tool_name"] in NOT_PRINTED_ALIKE:
        return None
    call = ids.setdefault(detail["tool_use_id"], f"call#{len(ids)}")  # ids differ: their pairing must not
    assert tool_identity(detail) == (detail["tool_use_id"], detail["tool_name"])
    name = SAME_CALL.get(detail["tool_name"], detail["tool_name"])
    if kind == "tool_use":
        return (kind, name, call)
    if not typed:  # an older rollout's result is the output the model read: its outcome only
        return (kind, name, call, detail["is_error"])
    facts = rollout_tool(detail["item"], detail["text"]) if rollout else exec_tool(item)
    return (kind, name, call, detail["is_error"], facts)


def conversation(turn: Turn, rollout: bool, typed: bool = True) -> list[tuple[Any, ...]]:
    """`typed`: the rollout has typed tool items (0.171), whose facts are compared too."""
    ids: dict[str, str] = {}
    return [found for entry in turn if (found := said(entry, rollout, ids, typed)) is not None]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rollout_says_what_the_exec_stream_says(scenario: str) -> None:
    """Same entry types in the same order, texts, tool names, call pairing, arguments (the
    command Codex ran), results, failure and turn errors: turn by turn, run by run."""
    rollout, printed = rollout_turns(scenario), exec_turns(scenario)
    assert len(rollout) == len(printed) == len(meta(scenario)["runs"])
    typed = scenario not in CODEX_OLDER_SCENARIOS
    for mine, theirs in zip(rollout, printed, strict=True):
        assert conversation(mine, rollout=True, typed=typed) == conversation(
            theirs, rollout=False, typed=typed
        )
        assert conversation(mine, rollout=True, typed=typed)  # something was compared


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rollout_tokens_per_turn(scenario: str) -> None:
    """The rollout has one `token_usage` per model response; their sum is what the turn cost.
    `codex exec` reports only the thread's running total at `turn.completed`: equal for a
    thread's first turn, the sum of all turns so far on a resumed run (`resumed` stdout-2: 4000
    input tokens for a 2000-token turn; `compacted` stdout-2: 6000, with the 2000 of the
    compaction request), and nothing for a failed turn (whose answered response the rollout
    still counts: `tool_then_500`)."""
    running: Counter[str] = Counter()
    for mine, theirs in zip(rollout_turns(scenario), exec_turns(scenario), strict=True):
        turn: Counter[str] = Counter()
        for entry in mine:
            if entry.entry_type == "token_usage":
                turn.update(usage_attributes(entry.detail))
        running.update(turn)
        # Counts of 0 are counts not told (a migrated 0.140 rollout tells `cache_write_input_tokens`: 0).
        reported = [+Counter(usage_attributes(e.detail)) for e in theirs if e.entry_type == "token_usage"]
        if any(e.entry_type == "error" for e in theirs):
            assert reported == []
            assert turn["gen_ai.usage.input_tokens"] > 0
        else:
            assert reported == [+running]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rollout_tokens_are_what_the_model_served(scenario: str) -> None:
    """Each response's tokens, by its id (0.171), or in order (0.140 names no response)."""
    answered = [(s["response_id"], s["usage"]) for s in meta(scenario)["served"] if s["status"] == 200]
    counted = [
        (entry.detail["response_id"], entry.detail["usage"])
        for _, line in rollout_lines(scenario, subagents=True)
        for entry in line.entries
        if entry.entry_type == "token_usage"
    ]
    if scenario in CODEX_OLDER_SCENARIOS:
        assert [response_id for response_id, _ in counted] == [None] * len(answered)
        counted = [
            (answered_id, usage) for (answered_id, _), (_, usage) in zip(answered, counted, strict=True)
        ]
    usage = dict(counted)
    assert usage.keys() == dict(answered).keys()
    for response_id, served in answered:
        assert usage[response_id]["input_tokens"] == served["input_tokens"]
        assert usage[response_id]["cached_input_tokens"] == served["input_tokens_details"]["cached_tokens"]
        assert usage[response_id]["output_tokens"] == served["output_tokens"]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_rollout_lifecycle(scenario: str) -> None:
    lines = rollout_lines(scenario)
    runs = len(meta(scenario)["runs"])
    thread = json.loads((FIXTURES / scenario / "stdout-1.jsonl").read_text().splitlines()[0])["thread_id"]
    assert [said.session_id for _, said in lines if said.session_id] == [thread]
    assert {said.model for _, said in lines if said.model} == {s["model"] for s in meta(scenario)["served"]}
    assert sum(said.opens_turn for _, said in lines) == sum(said.ends_turn for _, said in lines) == runs
    times = [said.timestamp_ns for _, said in lines]
    assert None not in times
    assert times == sorted(times)  # type: ignore[type-var]
    prompts = [e.detail["text"] for _, said in lines for e in said.entries if e.entry_type == "user_message"]
    assert prompts == [run["arguments"][-1] for run in meta(scenario)["runs"]]
    for line, said in rollout_lines(scenario, subagents=True):
        assert all(entry.source == "main" for entry in said.entries)
        assert [entry.raw for entry in said.entries][:1] in ([], [line])
        assert "unknown" not in {entry.entry_type for entry in said.entries}


def _token_count(total: int, last: int) -> str:
    def usage(tokens: int) -> dict[str, int]:
        return {
            "input_tokens": tokens,
            "cached_input_tokens": 0,
            "output_tokens": 1,
            "total_tokens": tokens + 1,
        }

    return event(
        {"type": "token_count", "info": {"total_token_usage": usage(total), "last_token_usage": usage(last)}}
    )


def test_without_usage_records_a_token_count_whose_total_moved_is_a_responses_tokens() -> None:
    """Codex 0.140 writes no `token_usage_record`: `token_count` tells each response's tokens;
    one repeating the running total (rate limits told again) or telling nothing adds nothing."""
    mapper = CodexRolloutMapper()
    first = one(mapper.line(_token_count(3000, 3000)))
    assert (first.entry_type, first.detail["usage"]["input_tokens"], first.detail["response_id"]) == (
        "token_usage",
        3000,
        None,
    )
    assert mapper.line(_token_count(3000, 3000)).entries == []
    assert mapper.line(event({"type": "token_count", "info": None})).entries == []
    assert one(mapper.line(_token_count(6200, 3200))).detail["usage"]["input_tokens"] == 3200


def test_with_usage_records_a_token_count_adds_nothing() -> None:
    mapper = CodexRolloutMapper()
    record = {"usage": {"input_tokens": 10}, "response_id": "resp_1", "turn_id": "t1"}
    assert one(mapper.line(rollout("token_usage_record", record))).entry_type == "token_usage"
    assert mapper.line(_token_count(10, 10)).entries == []


@pytest.mark.parametrize(
    ("output", "failed"),
    [
        ("Chunk ID: 1\nWall time: 0.0 seconds\nProcess exited with code 2\nOutput:\nls: no\n", True),
        ("Chunk ID: 1\nProcess exited with code 0\nOutput:\nProcess exited with code 1\n", False),
        ("no exit line", False),
    ],
)
def test_a_commands_output_that_says_it_exited_badly_is_a_failure(output: str, failed: bool) -> None:
    mapper = CodexRolloutMapper()
    mapper.line(item({"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"}))
    result = one(mapper.line(item({"type": "function_call_output", "call_id": "c1", "output": output})))
    assert (result.detail["tool_name"], result.detail["is_error"]) == ("codex:command", failed)


@pytest.mark.parametrize(
    ("name", "output", "failed"),
    [
        ("exec_command", "Wall time: 0.2 seconds\naborted by user", True),  # `interactive_interrupted`
        ("mcp__docs__lookup", "aborted by user\n", True),
        ("exec_command", "Output:\naborted by user, it said\n", False),
    ],
)
def test_a_call_the_person_stopped_is_a_failure(name: str, output: str, failed: bool) -> None:
    """Esc in the terminal UI: Codex ends the call's output "aborted by user" (its typed item,
    status `failed`, comes only after the next turn)."""
    mapper = CodexRolloutMapper()
    mapper.line(item({"type": "function_call", "name": name, "arguments": "{}", "call_id": "c1"}))
    result = one(mapper.line(item({"type": "function_call_output", "call_id": "c1", "output": output})))
    assert result.detail["is_error"] is failed


def test_the_tools_a_model_is_told_of_give_nothing() -> None:
    """The terminal UI with a code-mode model (gpt-6-sol) declares its tools in the history."""
    tools = {"type": "additional_tools", "id": "at_1", "role": "developer", "tools": [{"type": "namespace"}]}
    assert CodexRolloutMapper().line(item(tools)).entries == []


def test_a_message_between_agents_starts_a_turn_only_when_its_metadata_says_so() -> None:
    mapper = CodexRolloutMapper()
    message = item({"type": "agent_message", "author": "/root", "recipient": "/root/a", "content": [
        {"type": "input_text", "text": "Message Type: NEW_TASK\n"},
        {"type": "encrypted_content", "encrypted_content": "gAAAA..."},
    ]})  # fmt: skip
    assert mapper.line(rollout("inter_agent_communication_metadata", {"trigger_turn": True})).entries == []
    task = one(mapper.line(message))
    assert (task.entry_type, task.detail["text"]) == ("user_message", "Message Type: NEW_TASK\n")
    # The metadata says it for the next message only; a message with none starts nothing.
    told = one(mapper.line(message))
    assert (told.entry_type, told.detail["subtype"], told.detail["author"]) == (
        "system_event",
        "agent_message",
        "/root",
    )


def test_a_collaboration_item_is_the_result_of_the_call_it_answers() -> None:
    mapper = CodexRolloutMapper()
    call = {"type": "function_call", "name": "wait_agent", "namespace": "collaboration", "call_id": "w1"}
    assert one(mapper.line(item({**call, "arguments": "{}"}))).detail["tool_name"] == "wait_agent"
    wait = {"type": "CollabAgentToolCall", "id": "w1", "tool": "wait", "status": "completed"}
    result = one(mapper.line(typed(wait)))
    assert (result.entry_type, result.detail["tool_name"], result.detail["is_error"]) == (
        "tool_result",
        "wait_agent",
        False,
    )
    # One whose call the file does not hold is named after its tool, call and result.
    use, alone = CodexRolloutMapper().line(typed({**wait, "id": "w2"})).entries
    assert (use.detail["tool_name"], alone.detail["tool_name"]) == ("codex:wait", "codex:wait")


def test_a_subagents_thread_maps_its_task_as_its_prompt_and_its_answer_reaches_the_parent() -> None:
    """`multi_agent_v2`: the task arrives in the subagent's file as an `agent_message` that
    starts its turn (its prompt: only the plain parts, the model's payload is encrypted); its
    answer arrives in the parent's as an `agent_message` that starts nothing."""
    thread = thread_file("subagent")
    (child,) = [name for name in meta("subagent")["session_files"] if name != thread]
    mapper = CodexRolloutMapper()
    entries = [
        entry
        for line in (FIXTURES / "subagent" / child).read_text().splitlines()
        for entry in mapper.line(line).entries
    ]
    (task,) = [entry.detail for entry in entries if entry.entry_type == "user_message"]
    assert task == {
        "text": "Message Type: NEW_TASK\nTask name: /root/helper\nSender: /root\nPayload:\n",
        "author": "/root",
        "recipient": "/root/helper",
    }
    assert [e.detail["text"] for e in entries if e.entry_type == "assistant_message"] == [
        "Hi from the helper."
    ]
    parent = [entry for _, said in rollout_lines("subagent") for entry in said.entries]
    (answer,) = [e.detail for e in parent if e.detail.get("subtype") == "agent_message"]
    assert answer["author"] == "/root/helper"
    assert answer["text"].endswith("Payload:\nHi from the helper.")
    started, completed = [e.detail for e in parent if str(e.detail.get("subtype")).startswith("subagent_")]
    assert (started["subtype"], started["item_id"], started["agent_path"]) == (
        "subagent_started",
        "call_spawn_1",
        "/root/helper",
    )
    assert completed["subtype"] == "subagent_completed"
    assert completed["agent_thread_id"] == started["agent_thread_id"]


def test_compaction_output_is_a_system_event_not_the_answer() -> None:
    second = rollout_turns("compacted")[1]
    compaction = [e for e in second if e.detail.get("subtype") == "compaction"]
    assert [e.detail["item_type"] for e in compaction] == ["reasoning", "message"]
    assert compaction[1].detail["text"] == "Hello from the scripted model."
    kinds = [e.entry_type for e in second if e.entry_type != "token_usage"]
    assert kinds == [
        "system_event",
        "system_event",
        "system_event",
        "user_message",
        "thinking",
        "assistant_message",
    ]


# -- one test per mapping row ---------------------------------------------------------------------

STAMP = "2026-11-27T08:39:20.254Z"


def rollout(kind: str, payload: Any, **fields: Any) -> str:
    return json.dumps({"timestamp": STAMP, "ordinal": 0, "type": kind, "payload": payload, **fields}) + "\n"


def event(payload: dict[str, Any]) -> str:
    return rollout("event_msg", payload)


def item(payload: dict[str, Any], **metadata: Any) -> str:
    return rollout("response_item", payload, metadata=metadata)


def typed(item: dict[str, Any]) -> str:
    return event({"type": "item_completed", "item": item})


def one(said: SessionLine) -> MappedEntry:
    (entry,) = said.entries
    return entry


def test_session_meta_is_thread_started_with_the_session_id() -> None:
    line = rollout("session_meta", {"id": "th_1", "cwd": "/w", "base_instructions": {"text": "long"}})
    said = CodexRolloutMapper().line(line)
    assert said.session_id == "th_1"
    assert one(said) == MappedEntry(
        "system_event", {"subtype": "thread_started", "session_id": "th_1", "cwd": "/w"}, line
    )
    assert said.timestamp_ns == 1_795_768_760_254_000_000


def test_turn_context_names_the_model() -> None:
    said = CodexRolloutMapper().line(rollout("turn_context", {"turn_id": "t", "model": "gpt-5.5"}))
    assert (said.entries, said.model, said.opens_turn) == ([], "gpt-5.5", False)


@pytest.mark.parametrize(
    "line",
    [
        rollout("world_state", {"full": True}),
        event({"type": "thread_settings_applied", "thread_settings": {"model": "m"}}),
        event({"type": "token_count", "info": {"total_token_usage": {"input_tokens": 5}}}),
        event({"type": "agent_message", "message": "Hi"}),
        event({"type": "agent_reasoning", "text": "Hmm"}),
        event({"type": "exec_command_end", "call_id": "c", "exit_code": 0}),
        typed({"type": "AgentMessage", "id": "m", "content": [{"type": "Text", "text": "Hi"}]}),
        typed({"type": "Reasoning", "id": "r", "summary_text": ["Hmm"]}),
        typed({"type": "ContextCompaction", "id": "x"}),
    ],
)
def test_what_other_lines_hold_gives_nothing(line: str) -> None:
    said = CodexRolloutMapper().line(line)
    assert said.entries == []
    assert (said.opens_turn, said.ends_turn) == (False, False)


def test_task_started_opens_the_turn() -> None:
    said = CodexRolloutMapper().line(event({"type": "task_started", "turn_id": "t1"}))
    assert (said.opens_turn, said.ends_turn) == (True, False)
    assert one(said).detail == {"subtype": "turn_started", "turn_id": "t1"}


def test_task_complete_ends_the_turn() -> None:
    said = CodexRolloutMapper().line(
        event({"type": "task_complete", "turn_id": "t1", "last_agent_message": "x"})
    )
    assert (said.ends_turn, said.entries) == (True, [])


def test_failed_task_complete_is_an_error() -> None:
    error = {"message": "high demand", "codex_error_info": "internal_server_error"}
    said = CodexRolloutMapper().line(event({"type": "task_complete", "turn_id": "t1", "error": error}))
    entry = one(said)
    assert (said.ends_turn, entry.entry_type) == (True, "error")
    assert entry_text("error", entry.detail) == "high demand"


def test_turn_aborted_ends_the_turn() -> None:
    said = CodexRolloutMapper().line(
        event({"type": "turn_aborted", "turn_id": "t1", "reason": "interrupted"})
    )
    assert said.ends_turn
    assert one(said).detail == {"subtype": "turn_aborted", "turn_id": "t1", "reason": "interrupted"}


@pytest.mark.parametrize(
    "line",
    [
        typed({"type": "UserMessage", "id": "u", "content": [{"type": "text", "text": "Do it"}]}),
        event({"type": "user_message", "message": "Do it"}),
    ],
)
def test_the_prompt_is_a_user_message(line: str) -> None:
    assert one(CodexRolloutMapper().line(line)) == MappedEntry("user_message", {"text": "Do it"}, line)


@pytest.mark.parametrize(
    ("role", "text"),
    [
        ("user", "Do it"),  # the prompt: its `UserMessage` item is the entry
        ("user", "<environment_context>\n  <cwd>/w</cwd>\n</environment_context>"),
        ("user", "# AGENTS.md instructions for /w\n\n<INSTRUCTIONS>be brief</INSTRUCTIONS>"),
        ("developer", "<skills_instructions>...</skills_instructions>"),
        ("system", "You are Codex."),
    ],
)
def test_history_messages_not_the_assistants_give_nothing(role: str, text: str) -> None:
    line = item({"type": "message", "role": role, "content": [{"type": "input_text", "text": text}]})
    assert CodexRolloutMapper().line(line).entries == []


def test_assistant_message() -> None:
    content = [{"type": "output_text", "text": "Done", "annotations": []}]
    line = item({"type": "message", "role": "assistant", "id": "me_1", "content": content})
    assert one(CodexRolloutMapper().line(line)).detail == {"text": "Done", "message_id": "me_1"}


@pytest.mark.parametrize(
    ("reasoning", "text"),
    [
        (
            {"summary": [{"type": "summary_text", "text": "A"}, {"type": "summary_text", "text": "B"}]},
            "A\n\nB",
        ),
        ({"summary": [], "content": [{"type": "reasoning_text", "text": "raw"}]}, "raw"),
    ],
)
def test_reasoning_is_thinking(reasoning: dict[str, Any], text: str) -> None:
    entry = one(CodexRolloutMapper().line(item({"type": "reasoning", **reasoning})))
    assert (entry.entry_type, entry_text("thinking", entry.detail)) == ("thinking", text)


def test_encrypted_only_reasoning_gives_nothing() -> None:
    line = item({"type": "reasoning", "summary": [], "content": None, "encrypted_content": "xx"})
    assert CodexRolloutMapper().line(line).entries == []


def test_compaction_output_is_a_compaction_event_and_the_compacted_line_adds_nothing() -> None:
    mapper = CodexRolloutMapper()
    content = [{"type": "output_text", "text": "Summary"}]
    answer = item({"type": "message", "role": "assistant", "content": content}, compaction_output=True)
    entry = one(mapper.line(answer))
    assert (entry.entry_type, entry.detail["subtype"], entry.detail["text"]) == (
        "system_event",
        "compaction",
        "Summary",
    )
    assert (
        mapper.line(rollout("compacted", {"message": "prefix Summary", "replacement_history": []})).entries
        == []
    )
    # A later compaction with no output line (not recorded in 0.171) is shown by its `compacted` line.
    entry = one(mapper.line(rollout("compacted", {"message": "prefix Other", "window_number": 2})))
    assert entry.detail == {"subtype": "compaction", "text": "prefix Other"}


@pytest.mark.parametrize(
    ("call", "name", "arguments"),
    [
        (
            {"type": "function_call", "name": "exec_command", "arguments": '{"cmd": "ls"}'},
            "codex:command",
            {"cmd": "ls"},
        ),
        ({"type": "function_call", "name": "shell", "arguments": "not json"}, "codex:command", "not json"),
        ({"type": "local_shell_call", "action": {"command": ["ls"]}}, "codex:command", {"command": ["ls"]}),
        (
            {"type": "custom_tool_call", "name": "apply_patch", "input": "*** Begin Patch"},
            "codex:file_change",
            "*** Begin Patch",
        ),
        (
            {
                "type": "function_call",
                "name": "lookup",
                "namespace": "mcp__docs",
                "arguments": '{"topic": "sse"}',
            },
            "docs:lookup",
            {"topic": "sse"},
        ),
        ({"type": "function_call", "name": "mcp__docs__lookup", "arguments": "{}"}, "docs:lookup", {}),
        (
            {"type": "web_search_call", "action": {"type": "search", "query": "otel"}},
            "codex:web_search",
            {"type": "search", "query": "otel"},
        ),
        ({"type": "tool_search_call", "arguments": {"query": "docs"}}, "tool_search", {"query": "docs"}),
        ({"type": "custom_tool_call", "name": "exec", "input": "text(1);"}, "codex:code_mode", "text(1);"),
        ({"type": "function_call", "name": "update_plan", "arguments": "{}"}, "update_plan", {}),
    ],
)
def test_calls_are_tool_uses_named_as_codex_exec_names_them(
    call: dict[str, Any], name: str, arguments: Any
) -> None:
    entry = one(CodexRolloutMapper().line(item({**call, "call_id": "c1"})))
    assert entry.entry_type == "tool_use"
    assert entry.detail == {"tool_use_id": "c1", "tool_name": name, "input": arguments}
    assert tool_identity(entry.detail) == ("c1", name)


COMMAND = {
    "type": "CommandExecution",
    "id": "c1",
    "command": ["/bin/bash", "-lc", "ls /nope"],
    "status": "failed",
    "aggregated_output": "ls: /nope: No such file\n",
    "exit_code": 2,
}


def test_typed_item_is_the_result_and_its_output_line_adds_nothing() -> None:
    mapper = CodexRolloutMapper()
    mapper.line(item({"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"}))
    result = one(mapper.line(typed(COMMAND)))
    assert result.entry_type == "tool_result"
    assert result.detail == {
        "tool_use_id": "c1",
        "tool_name": "codex:command",
        "is_error": True,
        "text": "ls: /nope: No such file\n",
        "item": COMMAND,
    }
    assert (
        mapper.line(item({"type": "function_call_output", "call_id": "c1", "output": "exit 2"})).entries == []
    )


def test_output_first_then_its_typed_item_gives_one_result() -> None:
    mapper = CodexRolloutMapper()
    mapper.line(item({"type": "function_call", "name": "exec_command", "arguments": "{}", "call_id": "c1"}))
    assert (
        one(mapper.line(item({"type": "function_call_output", "call_id": "c1", "output": "x"}))).detail[
            "text"
        ]
        == "x"
    )
    assert mapper.line(typed(COMMAND)).entries == []


def test_typed_item_of_a_call_not_seen_gives_the_call_too() -> None:
    line = typed({"type": "WebSearch", "id": "ws_1", "query": "otel"})
    use, result = CodexRolloutMapper().line(line).entries
    assert use == MappedEntry(
        "tool_use", {"tool_use_id": "ws_1", "tool_name": "codex:web_search", "input": {"query": "otel"}}, line
    )
    assert (result.entry_type, result.raw, result.detail["is_error"]) == ("tool_result", None, False)


def test_a_hosted_web_search_is_one_call_though_its_history_item_comes_after() -> None:
    """Codex 0.171 writes the `WebSearch` item, then the history's `web_search_call` (same id,
    no output after it): one tool call, answered, as `codex exec --json` shows it."""
    mapper = CodexRolloutMapper()
    action = {"type": "search", "query": "otel"}
    use, result = mapper.line(
        typed({"type": "WebSearch", "id": "ws_1", "query": "otel", "action": action})
    ).entries
    assert (use.entry_type, result.entry_type) == ("tool_use", "tool_result")
    later = item({"type": "web_search_call", "id": "ws_1", "status": "completed", "action": action})
    assert mapper.line(later).entries == []
    # The id is forgotten once matched: a later call reusing it is a call again.
    assert one(mapper.line(later)).entry_type == "tool_use"


@pytest.mark.parametrize(
    ("typed_item", "text", "failed"),
    [
        (
            {"type": "McpToolCall", "server": "docs", "tool": "lookup", "status": "completed",
             "result": {"content": [{"type": "text", "text": "Docs"}], "isError": True}},
            "Docs",
            True,
        ),
        ({"type": "McpToolCall", "server": "docs", "tool": "lookup", "status": "failed",
          "error": {"message": "gone"}}, "gone", True),
        ({"type": "FileChange", "changes": {}, "status": "completed", "stdout": "Success.\n", "stderr": ""},
         "Success.\n", False),
    ],
)  # fmt: skip
def test_typed_tool_results(typed_item: dict[str, Any], text: str, failed: bool) -> None:
    mapper = CodexRolloutMapper()
    mapper.line(item({"type": "function_call", "name": "x", "call_id": "c1"}))
    entry = one(mapper.line(typed({**typed_item, "id": "c1"})))
    assert (entry.detail["text"], entry.detail["is_error"]) == (text, failed)


def test_output_of_a_call_with_no_typed_item_is_the_result() -> None:
    mapper = CodexRolloutMapper()
    mapper.line(item({"type": "tool_search_call", "call_id": "s1", "arguments": {"query": "docs"}}))
    tools = [{"type": "namespace", "name": "mcp__docs"}]
    entry = one(mapper.line(item({"type": "tool_search_output", "call_id": "s1", "tools": tools})))
    assert entry.detail == {
        "tool_use_id": "s1",
        "tool_name": "tool_search",
        "is_error": False,
        "output": tools,
    }
    parts = [{"type": "input_text", "text": "a"}, {"type": "input_text", "text": "b"}]
    mapper.line(item({"type": "function_call", "name": "update_plan", "call_id": "p1"}))
    entry = one(mapper.line(item({"type": "function_call_output", "call_id": "p1", "output": parts})))
    assert (entry.detail["tool_name"], entry.detail["text"]) == ("update_plan", "a\nb")


def test_token_usage_record_is_one_responses_usage() -> None:
    usage = {
        "input_tokens": 3200,
        "cached_input_tokens": 2800,
        "output_tokens": 30,
        "reasoning_output_tokens": 4,
    }
    line = rollout(
        "token_usage_record", {"response_id": "r1", "turn_id": "t1", "usage": usage, "thread_token_usage": {}}
    )
    entry = one(CodexRolloutMapper().line(line))
    assert entry.detail == {"usage": usage, "response_id": "r1", "turn_id": "t1"}
    assert usage_attributes(entry.detail) == {
        "gen_ai.usage.input_tokens": 3200,
        "gen_ai.usage.cache_read.input_tokens": 2800,
        "gen_ai.usage.output_tokens": 30,
        "gen_ai.usage.reasoning.output_tokens": 4,
    }


@pytest.mark.parametrize(
    ("kind", "subtype"), [("error", "api_error"), ("stream_error", "retry"), ("warning", "warning")]
)
def test_codex_errors_and_warnings_are_system_events(kind: str, subtype: str) -> None:
    entry = one(CodexRolloutMapper().line(event({"type": kind, "message": "stream broke"})))
    assert entry.detail == {"subtype": subtype, "text": "stream broke"}


# -- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("line", "detail"),
    [
        (rollout("hologram", {"x": 1}), {"line_type": "hologram"}),
        (event({"type": "hologram"}), {"line_type": "event_msg", "payload_type": "hologram"}),
        (rollout("event_msg", None), {"line_type": "event_msg", "payload_type": None}),
        (item({"type": "hologram"}), {"line_type": "response_item", "payload_type": "hologram"}),
        (rollout("response_item", [1, 2]), {"line_type": "response_item", "payload_type": None}),
        (typed({"type": "Hologram", "id": "h"}), {"line_type": "item_completed", "item_type": "Hologram"}),
        (event({"type": "item_completed"}), {"line_type": "item_completed", "item_type": None}),
    ],
)
def test_unknown_types_are_unknown_with_the_line_as_raw(line: str, detail: dict[str, Any]) -> None:
    assert one(CodexRolloutMapper().line(line)) == MappedEntry("unknown", detail, line)


@pytest.mark.parametrize("line", ["{not json", '{"type": "event_msg"', "\ud800", "[" * 100_000])
def test_a_line_that_is_not_json_is_unknown(line: str) -> None:
    entry = one(CodexRolloutMapper().line(line))
    assert (entry.entry_type, entry.raw) == ("unknown", line)
    assert entry.detail["parse_error"].startswith("invalid JSON")


@pytest.mark.parametrize("line", ["[1, 2]", '"text"', "42", "null", '{"payload": {}}', '{"type": 7}'])
def test_a_line_that_is_not_a_typed_object_is_unknown(line: str) -> None:
    entry = one(CodexRolloutMapper().line(line))
    assert (entry.entry_type, entry.raw, entry.detail["line"]) == ("unknown", line, json.loads(line))
    assert "parse_error" in entry.detail


def test_missing_fields_are_tolerated() -> None:
    mapper = CodexRolloutMapper()
    assert one(mapper.line('{"type": "session_meta"}')).detail == {
        "subtype": "thread_started",
        "session_id": None,
    }
    assert mapper.line('{"type": "turn_context", "payload": {"model": 5}}').model is None
    assert (
        one(
            mapper.line('{"type": "response_item", "payload": {"type": "message", "role": "assistant"}}')
        ).detail["text"]
        == ""
    )
    use = one(mapper.line('{"type": "response_item", "payload": {"type": "function_call"}}'))
    assert use.detail == {"tool_use_id": None, "tool_name": "codex:tool", "input": None}
    result = one(mapper.line('{"type": "response_item", "payload": {"type": "function_call_output"}}'))
    assert result.detail == {"tool_use_id": None, "tool_name": None, "is_error": False, "output": None}
    said = mapper.line(
        '{"type": "event_msg", "timestamp": "yesterday",'
        ' "payload": {"type": "task_complete", "error": "boom"}}'
    )
    assert (said.timestamp_ns, said.ends_turn, one(said).detail["text"]) == (None, True, "boom")


def test_blank_lines_and_bytes() -> None:
    mapper = CodexRolloutMapper()
    assert mapper.line("\n") == SessionLine([])
    line = event({"type": "user_message", "message": "é"})
    assert one(mapper.line(line.encode())) == MappedEntry("user_message", {"text": "é"}, line)
    entry = one(mapper.line(b"\xff\n"))
    assert (entry.entry_type, entry.raw) == ("unknown", "\ufffd\n")
    # Bytes are parsed as read; what is not UTF-8 is read as its text (U+FFFD) says.
    bad_byte = event({"type": "user_message", "message": "\ufffd"}).encode().replace(b"\xef\xbf\xbd", b"\xff")
    assert one(mapper.line(bad_byte)).detail == {"text": "\ufffd"}
    assert mapper.line("\u00a0\u2028".encode()) == SessionLine([])  # blank as text, not as bytes
    assert mapper.line(b'{"type": 1}').entries[0].raw == '{"type": 1}'
    for broken in (b'{"type": "event_msg",', '{"type": "event_msg",'):
        said = "Expecting property name enclosed in double quotes: line 1 column 22 (char 21)"
        assert one(mapper.line(broken)).detail == {"parse_error": f"invalid JSON: {said}"}


def test_calls_that_never_end_are_not_kept_without_bound() -> None:
    mapper = CodexRolloutMapper()
    for index in range(10_050):
        mapper.line(item({"type": "function_call", "name": "x", "call_id": f"c{index}"}))
        mapper.line(typed({**COMMAND, "id": f"t{index}"}))  # answered with no output line
    assert len(mapper._tool_calls._calls) == len(mapper._tool_calls._answered) == 10_000


LINE_TYPES = [
    "session_meta",
    "turn_context",
    "event_msg",
    "response_item",
    "token_usage_record",
    "compacted",
    "x",
]
TYPED = st.fixed_dictionaries(
    {
        "type": st.sampled_from(["CommandExecution", "McpToolCall", "UserMessage"]),
        "id": st.just("c") | JSONISH,
    },
    optional=dict.fromkeys(["result", "error", "content", "command", "exit_code", "server"], JSONISH),
)
PAYLOAD_TYPES = ["task_started", "task_complete", "item_completed", "message", "reasoning", "function_call"]
PAYLOADS = (
    st.fixed_dictionaries(
        {},
        optional={
            "type": st.sampled_from([*PAYLOAD_TYPES, "function_call_output", "user_message", "error"])
            | JSONISH,
            "item": TYPED | JSONISH,
            "role": st.just("assistant") | JSONISH,
            "call_id": st.just("c") | JSONISH,
            **dict.fromkeys(["content", "summary", "name", "namespace", "arguments", "output"], JSONISH),
            **dict.fromkeys(["error", "usage", "model", "id", "message"], JSONISH),
        },
    )
    | JSONISH
)
LINES = st.builds(
    lambda kind, payload, metadata, stamp: json.dumps(
        {"type": kind, "payload": payload, "metadata": metadata, "timestamp": stamp}
    ),
    st.sampled_from(LINE_TYPES) | JSONISH,
    PAYLOADS,
    st.fixed_dictionaries({"compaction_output": st.booleans()}) | JSONISH,
    st.just(STAMP) | JSONISH,
)


@settings(max_examples=300, deadline=None)
@given(st.lists(LINES, max_size=8))
def test_any_lines_map_to_canonical_entries_and_never_raise(lines: list[str]) -> None:
    mapper = CodexRolloutMapper()
    for line in lines:
        said = mapper.line(line)
        assert {entry.entry_type for entry in said.entries} <= CANONICAL_ENTRY_TYPES
        assert [entry.raw for entry in said.entries][:1] in ([], [line])
        for entry in said.entries:
            entry_text(entry.entry_type, entry.detail)


@given(
    st.lists(
        st.one_of(
            st.datetimes(timezones=st.just(UTC)).map(
                lambda t: t.isoformat(timespec="milliseconds").replace("+00:00", "Z")
            ),
            st.sampled_from(
                [
                    "2026-11-27T08:01:07.12Z",
                    "2026-11-27T08:01:07.\u0661\u0662\u0663Z",
                    "2026-11-27T08:01:07.123",
                    "x" * 24,
                ]
            ),
            st.text(max_size=26),
        ),
        max_size=12,
    )
)
def test_times_are_read_alike_in_any_order(values: list[str]) -> None:
    """A line's second is kept for the next (most share it): what a time reads as never depends
    on the line before."""
    from transcript_otel.mappings import session_lines

    for value in values:
        assert session_lines.timestamp_ns(value) == session_lines._parsed(value)


def test_a_dynamic_tool_call_of_a_weakincentives_rollout_is_a_tool_call_with_its_result(
    tmp_path: Path,
) -> None:
    """Codex 0.171 under weakincentives' app-server adapter writes its bridged tools as
    `DynamicToolCall` items (recorded: tests/fixtures/codex/wink-rollouts/): they were `unknown`."""
    from transcript_otel.cli import main
    from transcript_otel.reading.reconstruct import read_records

    (rollout,) = (Path(__file__).parent / "fixtures" / "codex" / "wink-rollouts").glob("rollout-*.jsonl")
    assert main(["import", str(rollout), "--jsonl-dir", str(tmp_path)]) == 0
    (run,) = tmp_path.glob("*.jsonl")
    entries = [r["context"] for r in read_records(run) if r["event"] == "transcript.entry"]
    assert [e for e in entries if e["entry_type"] == "unknown"] == []
    echo = [e for e in entries if e["detail"].get("tool_name") == "echo"]
    assert [e["entry_type"] for e in echo] == ["tool_use", "tool_result"]
    call, result = echo
    assert call["detail"]["tool_use_id"] == result["detail"]["tool_use_id"] == "call_demo_echo"
    assert (result["detail"]["text"], result["detail"]["is_error"]) == ("hi", False)
