"""`ClaudeSessionMapper`: Claude Code 2.1.332 session log lines to canonical entries.

First the recorded sessions (tests/fixtures/sessions/claude_code/): the session file and its
subagent files say what `ClaudeStreamMapper` makes of the same run's stdout, where both say it,
with the usage the scripted model served and the cost and session totals stdout reports. Then
one test per row of the mapping table, and bad input.

Known differences (docs/session-logs.md, "File vs. stdout"): stdout has `init`, progress,
task and status `system` lines, the `result` (`token_usage`, and the `error` of a failed run)
and the synthetic API-error message as a `system_event`, but not a `-p` prompt nor a subagent's
prompt; the file has the prompts, the harness's `isMeta` text, the compaction summary as an
event, and the real usage on every line of a message (stdout: 1 output token per block).
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel import CANONICAL_ENTRY_TYPES
from transcript_otel.genai.attributes import (
    cost_usd,
    message_usage,
    session_usage,
    tool_failed,
    tool_identity,
    usage_attributes,
)
from transcript_otel.instrumentation.span_tree.details import error_type
from transcript_otel.mappings import MappedEntry
from transcript_otel.mappings.claude_session import ClaudeSessionMapper
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.mappings.session_lines import SessionLine
from transcript_otel.model.entries import is_valid_source
from transcript_otel.reading.text import entry_text
from transcript_otel.sessions.timeline import timeline

from helpers import JSONISH
from session_fixtures import (
    CLAUDE,
    CLAUDE_FORKED_SCENARIOS,
    CLAUDE_INTERACTIVE_SCENARIOS,
    CLAUDE_OLDER_SCENARIOS,
    CLAUDE_SCENARIOS,
)

sys.path.insert(0, str(Path(__file__).resolve().parent / "agents"))

from claude_code import USAGE_KEYS

FIXTURES = CLAUDE
SCENARIOS = CLAUDE_SCENARIOS
PROJECT = Path("home/.claude/projects/-scratch-work")
# What both say: the conversation, the run's failure, and these events.
SHARED_TYPES = frozenset({"thinking", "assistant_message", "tool_use", "tool_result", "error"})
SHARED_EVENTS = frozenset({"api_retry", "task_notification", "compaction"})


# -- the recorded sessions -------------------------------------------------------------------


def session_files(scenario: str) -> list[tuple[Path, str]]:
    """The session file (`main`), then each subagent file with its source `subagent:<agentId>`
    (in `<session>/subagents/`; in 2.0, beside the session's file)."""
    project = FIXTURES / scenario / PROJECT
    agents = sorted(project.glob("*/subagents/agent-*.jsonl")) + sorted(project.glob("agent-*.jsonl"))
    (main,) = [path for path in project.glob("*.jsonl") if path not in agents]
    return [(main, "main")] + [(p, "subagent:" + p.stem.removeprefix("agent-")) for p in agents]


def mapped_file(scenario: str) -> list[tuple[dict[str, Any], SessionLine, str]]:
    """(the parsed line, what it maps to, its source) for every line of every file, mapped in the
    order the importer maps them (`sessions.timeline`: one mapper for the session's files)."""
    mapper = ClaudeSessionMapper()
    mapped: list[tuple[dict[str, Any], SessionLine, str]] = []

    def map_line(line: bytes, source: str) -> SessionLine:
        said = mapper.line(line, source)
        mapped.append((json.loads(line), said, source))
        return said

    for _ in timeline(session_files(scenario), map_line):
        pass
    return mapped


def file_entries(scenario: str) -> list[MappedEntry]:
    return [entry for _, said, _ in mapped_file(scenario) for entry in said.entries]


def stdout_runs(scenario: str) -> list[list[dict[str, Any]]]:
    paths = sorted((FIXTURES / scenario).glob("stdout-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))
    return [[json.loads(line) for line in path.read_text().splitlines()] for path in paths]


def stdout_entries(scenario: str) -> list[MappedEntry]:
    """Each run's stdout as `transcript-otel run` maps it (a mapper per run), subagents renamed
    from their launching call to their agent id (the subagent's `.meta.json` `toolUseId`)."""
    agent_ids = {
        json.loads(path.read_text())["toolUseId"]: path.name.removeprefix("agent-").removesuffix(".meta.json")
        for path in (FIXTURES / scenario / PROJECT).glob("*/subagents/*.meta.json")
    }
    entries: list[MappedEntry] = []
    for messages in stdout_runs(scenario):
        mapper = ClaudeStreamMapper()
        for message in messages:
            entries += mapper.message(message)
        entries += mapper.flush()
    renamed = []
    for entry in entries:
        call_id = entry.source.removeprefix("subagent:")
        source = f"subagent:{agent_ids[call_id]}" if entry.source.startswith("subagent:") else entry.source
        renamed.append(entry._replace(source=source))
    return renamed


def said(entry: MappedEntry) -> tuple[Any, ...]:
    """What an entry says that both mappings must agree on."""
    kind, detail = entry.entry_type, entry.detail
    if kind == "tool_use":
        call_id, name = tool_identity(detail)
        return kind, call_id, name, json.dumps(detail["sdk_entry"].get("input"), sort_keys=True)
    if kind == "tool_result":
        call_id, name = tool_identity(detail)
        return kind, call_id, name, tool_failed(detail), entry_text(kind, detail)
    if kind == "error":
        return kind, error_type(detail)
    if kind == "system_event":
        return kind, detail.get("subtype"), detail.get("background_call_ended"), detail.get("is_error")
    return kind, entry_text(kind, detail)


def shared(entries: list[MappedEntry]) -> dict[str, list[tuple[Any, ...]]]:
    by_source: dict[str, list[tuple[Any, ...]]] = defaultdict(list)
    for entry in entries:
        summary = entry.detail.get("sdk_entry", {}).get("isCompactSummary") is True
        event = entry.entry_type == "system_event" and entry.detail.get("subtype") in SHARED_EVENTS
        if (entry.entry_type in SHARED_TYPES or event) and not summary:
            by_source[entry.source].append(said(entry))
    return dict(by_source)


def results(scenario: str) -> list[dict[str, Any]]:
    return [message for run in stdout_runs(scenario) for message in run if message["type"] == "result"]


def usage_of(usage: dict[str, Any]) -> dict[str, int]:
    return {key: usage[key] for key in USAGE_KEYS}


def meta_of(scenario: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads((FIXTURES / scenario / "meta.json").read_text())
    return found


def test_every_scenario_has_a_recording() -> None:
    recorded = sorted(path.name for path in FIXTURES.iterdir() if path.is_dir())
    assert recorded == sorted(
        SCENARIOS + CLAUDE_INTERACTIVE_SCENARIOS + CLAUDE_OLDER_SCENARIOS + CLAUDE_FORKED_SCENARIOS
    )


@pytest.mark.parametrize("scenario", CLAUDE_OLDER_SCENARIOS)
def test_an_older_clis_file_says_what_its_stdout_says(scenario: str) -> None:
    """Claude Code 2.0.32: its session's own lines say what `claude -p` printed; it logged no
    `cost-state` (the cost was on stdout only); its agents' warm-ups are sources of their own."""
    from_file, from_stdout = shared(file_entries(scenario)), shared(stdout_entries(scenario))
    assert from_file["main"] == from_stdout["main"]
    assert sorted(from_file) == sorted(source for _, source in session_files(scenario))
    assert [e for e in file_entries(scenario) if e.entry_type in ("token_usage", "unknown")] == []


@pytest.mark.parametrize(
    ("scenario", "printed_as"), [("interactive", "tools"), ("interactive_two_prompts", "resumed")]
)
def test_the_terminal_ui_logs_what_claude_p_logs_for_the_same_conversation(
    scenario: str, printed_as: str
) -> None:
    """The terminal UI a person uses, given `printed_as`'s conversation (its prompts typed in
    one UI, not one `claude -p` each): the same entries, plus the permission mode it ran in and
    each turn's end (`turn_duration`), which ends the turn there, not when the UI is left; the
    same cost and session totals, reported once, as the UI is left."""
    interactive, printed = file_entries(scenario), file_entries(printed_as)
    assert shared(interactive) == shared(printed)
    prompts = len(meta_of(scenario)["runs"][0]["arguments"])
    extra = [(e.entry_type, e.detail.get("subtype")) for e in interactive if not shared([e])]
    expected = [(e.entry_type, e.detail.get("subtype")) for e in printed if not shared([e])]
    ui_only = [("system_event", "permission_mode")] + [("system_event", "turn_duration")] * prompts
    without_reports = [kind for kind in expected if kind != ("token_usage", None)]
    assert sorted(extra) == sorted([*without_reports, *ui_only, ("token_usage", None)])
    ends = [line for _, line, _ in mapped_file(scenario) if line.ends_turn]
    assert [[e.detail.get("subtype") for e in line.entries] for line in ends[:prompts]] == [
        ["turn_duration"]
    ] * prompts

    def reported(entries: list[MappedEntry]) -> tuple[float, dict[str, int]]:
        reports = [e.detail for e in entries if e.entry_type == "token_usage"]
        return round(sum(cost_usd(r) for r in reports), 9), reports[-1]["session_usage"]

    assert reported(interactive) == reported(printed)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_file_says_what_stdout_says_source_by_source(scenario: str) -> None:
    from_file, from_stdout = shared(file_entries(scenario)), shared(stdout_entries(scenario))
    if scenario == "synchronous_subagent":
        # stdout never prints a synchronous subagent's last answer (its call's result holds it),
        # and says its task ended, which the file leaves to that result.
        (subagent,) = [source for source in from_file if source != "main"]
        last = from_file[subagent].pop()
        (result,) = [said for said in from_stdout["main"] if said[0] == "tool_result"]
        assert last[0] == "assistant_message"
        assert last[-1] in result[-1]
        from_stdout["main"].remove(("system_event", "task_notification", None, None))
    assert from_file == from_stdout
    assert len(from_file) == len(session_files(scenario))  # every subagent says something


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_what_only_one_side_says_is_the_known_difference(scenario: str) -> None:
    only_stdout = {
        (e.entry_type, e.detail.get("subtype")) for e in stdout_entries(scenario) if not shared([e])
    }
    only_file = {(e.entry_type, e.detail.get("subtype")) for e in file_entries(scenario) if not shared([e])}
    known_stdout: set[tuple[str, str | None]] = {
        ("system_event", subtype)
        for subtype in ("init", "thinking_tokens", "task_started", "task_progress", "task_updated")
    }
    known_stdout |= {("system_event", s) for s in ("background_tasks_changed", "status", "permission_denied")}
    known_stdout |= {("system_event", "api_error_message"), ("token_usage", None), ("user_message", None)}
    assert only_stdout <= known_stdout
    known_file: set[tuple[str, str | None]] = {
        ("user_message", None),
        ("system_event", "meta"),
        ("system_event", "compaction"),
    }
    assert only_file <= known_file | {("token_usage", None)}
    assert all(e.entry_type != "unknown" for e in file_entries(scenario))


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_turn_opens_where_stdout_reports_one(scenario: str) -> None:
    opened = [source for _, line, source in mapped_file(scenario) if line.opens_turn]
    assert opened == ["main"] * len(results(scenario))
    ended = [line for _, line, _ in mapped_file(scenario) if line.ends_turn]
    assert len(ended) == len(stdout_runs(scenario))  # a `cost-state` at the end of each process run


# The model calls the CLI made for itself, which no assistant line holds: those that wrote a
# compaction's summary (`/compact`'s, and the automatic one's: it asked twice), and a WebSearch
# call's own request to the API's web_search tool.
_UNLOGGED_CALLS: dict[str, set[str]] = {
    "compacted": {"msg_scripted_0002", "msg_scripted_0003"},
    "auto_compacted": {"msg_scripted_0003", "msg_scripted_0004"},
    "web_search": {"msg_scripted_0002"},
}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_message_has_the_usage_the_model_served(scenario: str) -> None:
    served = {
        answer["message_id"]: usage_of(answer["usage"])
        for answer in json.loads((FIXTURES / scenario / "meta.json").read_text())["served"]
        if "usage" in answer
    }
    in_file: dict[str, dict[str, int]] = {}
    for line, mapped, _ in mapped_file(scenario):
        if line["type"] == "assistant" and line["message"]["model"] != "<synthetic>":
            assert mapped.model == line["message"]["model"]
            message = line["message"]
            assert in_file.setdefault(message["id"], usage_of(message["usage"])) == usage_of(message["usage"])
    assert in_file == {key: value for key, value in served.items() if key in in_file}
    unseen = set(served) - set(in_file)
    assert unseen == _UNLOGGED_CALLS.get(scenario, set())
    # The session's totals (`cost-state`, as `session_usage`) count every call served, those too.
    reports = [e for e in file_entries(scenario) if e.entry_type == "token_usage"]
    totals = session_usage(reports[-1].detail)
    expected = session_usage(
        {"session_usage": {key: sum(u[key] for u in served.values()) for key in USAGE_KEYS}}
    )
    assert totals == (expected if served else {})


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_answer_names_the_request_the_model_served_it_under(scenario: str) -> None:
    """The CLI logs the API's `request-id` with each answer: every request had its own."""
    served: list[dict[str, Any]] = meta_of(scenario)["served"]
    assert len({answer["request_id"] for answer in served}) == len(served)
    request_of = {answer["message_id"]: answer["request_id"] for answer in served if "usage" in answer}
    named: dict[str, set[str]] = {}
    for line, _, _ in mapped_file(scenario):
        if line["type"] == "assistant" and line["message"]["model"] != "<synthetic>":
            named.setdefault(line["message"]["id"], set()).add(line["requestId"])
    assert named == {message: {request_of[message]} for message in named}


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_main_turn_has_the_usage_its_result_reports(scenario: str) -> None:
    turns: list[dict[str, dict[str, int]]] = []
    for line, mapped, source in mapped_file(scenario):
        if mapped.opens_turn:
            turns.append({})
        if source == "main" and line["type"] == "assistant":
            turns[-1][line["message"]["id"]] = usage_of(line["message"]["usage"])
    summed = [{key: sum(u[key] for u in turn.values()) for key in USAGE_KEYS} for turn in turns]
    assert summed == [usage_of(result["usage"]) for result in results(scenario)]


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_cost_and_session_totals_are_what_stdout_reports(scenario: str) -> None:
    reports = [e for e in file_entries(scenario) if e.entry_type == "token_usage"]
    runs = stdout_runs(scenario)
    assert len(reports) == len(runs)
    spent = 0.0
    for report, run in zip(reports, runs, strict=True):
        last = [message for message in run if message["type"] == "result"][-1]
        spent += cost_usd(report.detail)
        assert spent == pytest.approx(last["total_cost_usd"])
        stream_usage = [e for e in ClaudeStreamMapper().message(last) if e.entry_type == "token_usage"]
        assert session_usage(report.detail) == session_usage(stream_usage[0].detail)
    # Each message's tokens are on its own lines; a report adds only what no line told (the calls
    # the CLI made for itself), so the lines and the reports add up to the session's totals.
    told: dict[str, dict[str, int]] = {}
    for entry in file_entries(scenario):
        counted = message_usage(entry.detail)
        if counted is not None:
            told.setdefault(*counted)
    reported = [usage_attributes(report.detail) for report in reports]
    total = {
        key: sum(u.get(key, 0) for u in [*told.values(), *reported])
        for key in ("gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens")
    }
    last_session = session_usage(reports[-1].detail)
    assert total == {key: last_session.get(key, 0) for key in total}
    assert any(reported) == (scenario in _UNLOGGED_CALLS)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_every_line_tells_its_time_and_session_and_conversation_lines_are_kept(scenario: str) -> None:
    session_id = session_files(scenario)[0][0].stem
    raws = {entry.raw for entry in file_entries(scenario)}
    for line, mapped, source in mapped_file(scenario):
        assert mapped.session_id == session_id
        assert (mapped.timestamp_ns is None) == ("timestamp" not in line)
        assert all(entry.source == source and is_valid_source(source) for entry in mapped.entries)
        context = line["type"] == "attachment" and line["attachment"]["type"] != "max_turns_reached"
        if line["type"] in ("user", "assistant", "system", "cost-state") or (
            line["type"] == "attachment" and not context
        ):
            assert json.dumps(line) in {json.dumps(json.loads(raw)) for raw in raws if isinstance(raw, str)}


# -- one test per row of the mapping ---------------------------------------------------------

ENVELOPE = {"sessionId": "s-1", "timestamp": "2026-11-27T08:00:00.000Z", "uuid": "u-1"}
AT = 1_795_766_400_000_000_000


def line_of(**fields: Any) -> str:
    return json.dumps({**ENVELOPE, **fields})


def assistant(*blocks: Any, model: str = "claude-x", message_id: str = "msg_1", **fields: Any) -> str:
    usage = {"input_tokens": 10, "output_tokens": 2}
    message = {"id": message_id, "role": "assistant", "model": model, "content": list(blocks), "usage": usage}
    return line_of(type="assistant", message=message, **fields)


def user(content: Any, **fields: Any) -> str:
    return line_of(type="user", message={"role": "user", "content": content}, **fields)


def kinds(mapped: SessionLine) -> list[tuple[str, Any]]:
    return [(entry.entry_type, entry.detail.get("subtype")) for entry in mapped.entries]


def test_an_assistant_line_per_block_maps_like_stdout_and_names_the_model() -> None:
    mapper = ClaudeSessionMapper()
    thinking = mapper.line(assistant({"type": "thinking", "thinking": "plan", "signature": "x"}), "main")
    text = mapper.line(assistant({"type": "text", "text": "Hi"}), "main")
    call = mapper.line(assistant({"type": "tool_use", "id": "t1", "name": "Bash", "input": {}}), "main")
    assert [kinds(m) for m in (thinking, text, call)] == [
        [("thinking", None)],
        [("assistant_message", None)],
        [("tool_use", None)],
    ]
    assert thinking.entries[0].detail == {
        "sdk_entry": {"type": "thinking", "thinking": "plan", "signature": "x"},
        # The message's first line, perhaps its only one: it keeps the message's usage.
        "claude_message": {"id": "msg_1", "usage": {"input_tokens": 10, "output_tokens": 2}},
    }
    message = text.entries[0].detail["sdk_entry"]["message"]
    assert (message["id"], message["usage"]) == ("msg_1", {"input_tokens": 10, "output_tokens": 2})
    assert all(m.model == "claude-x" and m.timestamp_ns == AT and m.session_id == "s-1" for m in (text, call))
    assert call.entries[0].raw is not None  # a line of tool calls only is kept on its first call
    assert not any(m.opens_turn or m.ends_turn for m in (thinking, text, call))


def test_an_assistant_line_of_several_blocks_gives_thinking_text_then_calls() -> None:
    line = assistant(
        {"type": "text", "text": "Running"},
        {"type": "thinking", "thinking": "plan"},
        {"type": "tool_use", "id": "t1", "name": "Bash", "input": {}},
    )
    mapped = ClaudeSessionMapper().line(line, "main")
    assert [e.entry_type for e in mapped.entries] == ["thinking", "assistant_message", "tool_use"]
    assert [e.raw for e in mapped.entries] == [line, None, None]
    assert mapped.entries[1].detail["sdk_entry"]["message"]["content"] == [
        {"type": "text", "text": "Running"}
    ]


def test_a_synthetic_api_error_message_is_an_error_not_words_of_the_model() -> None:
    line = assistant(
        {"type": "text", "text": "API Error: 500 boom"}, model="<synthetic>", isApiErrorMessage=True
    )
    mapped = ClaudeSessionMapper().line(line, "main")
    (entry,) = mapped.entries
    assert entry.entry_type == "error"
    assert mapped.model is None
    assert error_type(entry.detail) == "api_error"
    assert entry_text("error", entry.detail) == "api_error: API Error: 500 boom"


def test_tool_results_are_named_after_their_call_and_a_background_launch_says_so() -> None:
    mapper = ClaudeSessionMapper()
    mapper.line(assistant({"type": "tool_use", "id": "t1", "name": "Agent", "input": {}}), "main")
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "launched", "is_error": False}
    mapped = mapper.line(user([block], toolUseResult={"status": "async_launched", "agentId": "a1"}), "main")
    assert [
        (e.entry_type, e.detail.get("tool_name"), e.detail.get("background_launch")) for e in mapped.entries
    ] == [("tool_result", "Agent", True)]
    assert not mapped.opens_turn


def test_a_denied_call_is_a_failed_tool_result() -> None:
    block = {"type": "tool_result", "tool_use_id": "t1", "content": "denied", "is_error": True}
    (entry,) = ClaudeSessionMapper().line(user([block], toolDenialKind="permission"), "main").entries
    assert tool_failed(entry.detail)
    assert "background_launch" not in entry.detail


@pytest.mark.parametrize("content", ["Do it", [{"type": "text", "text": "Do it"}]])
def test_a_prompt_opens_a_turn_on_the_main_source_only(content: Any) -> None:
    main = ClaudeSessionMapper().line(user(content), "main")
    subagent = ClaudeSessionMapper().line(user(content, isSidechain=True, agentId="a1"), "subagent:a1")
    assert kinds(main) == kinds(subagent) == [("user_message", None)]
    assert main.opens_turn
    assert not subagent.opens_turn
    assert entry_text("user_message", main.entries[0].detail) == "Do it"


def test_a_task_notification_ends_the_background_call_and_opens_a_turn() -> None:
    text = (
        "<task-notification>\n<tool-use-id>t9</tool-use-id>\n<status>failed</status>\n<result>Done.</result>"
    )
    mapped = ClaudeSessionMapper().line(user(text, origin={"kind": "task-notification"}), "main")
    (entry,) = mapped.entries
    assert (entry.entry_type, entry.detail["subtype"]) == ("system_event", "task_notification")
    assert entry.detail["background_call_ended"] == "t9"
    assert entry.detail["is_error"] is True
    assert entry_text("system_event", entry.detail) == "task notification: Done."
    assert mapped.opens_turn


def test_harness_text_is_a_meta_event_not_a_prompt() -> None:
    mapped = ClaudeSessionMapper().line(user("<system-reminder>x</system-reminder>", isMeta=True), "main")
    assert kinds(mapped) == [("system_event", "meta")]
    assert not mapped.opens_turn


def test_the_compaction_summary_is_a_compaction_event_with_its_text() -> None:
    mapped = ClaudeSessionMapper().line(
        user("This session is being continued...", isCompactSummary=True), "main"
    )
    assert kinds(mapped) == [("system_event", "compaction")]
    assert not mapped.opens_turn
    assert mapped.entries[0].detail["text"] == "This session is being continued..."


@pytest.mark.parametrize(
    "text",
    ["<local-command-stdout>Compacted </local-command-stdout>", "<command-name>/compact</command-name>"],
)
def test_the_compact_command_and_command_output_echoes_open_no_turn(text: str) -> None:
    mapped = ClaudeSessionMapper().line(user(text), "main")
    assert kinds(mapped) == [("user_message", None)]
    assert not mapped.opens_turn


@pytest.mark.parametrize(
    ("subtype", "fields", "expected", "opens"),
    [
        ("api_error", {"error": {"status": 500}, "retryAttempt": 1}, "api_retry", False),
        ("compact_boundary", {"compactMetadata": {"trigger": "manual"}}, "compaction", True),
        ("compact_boundary", {"compactMetadata": {"trigger": "auto"}}, "compaction", False),
        ("local_command", {}, "local_command", False),
    ],
)
def test_system_lines_are_events_with_a_subtype(
    subtype: str, fields: dict[str, Any], expected: str, opens: bool
) -> None:
    mapped = ClaudeSessionMapper().line(line_of(type="system", subtype=subtype, **fields), "main")
    assert kinds(mapped) == [("system_event", expected)]
    assert mapped.opens_turn is opens
    assert mapped.entries[0].detail["sdk_entry"]["subtype"] == subtype


def test_max_turns_reached_is_the_runs_error_as_stdout_gives_it() -> None:
    line = line_of(type="attachment", attachment={"type": "max_turns_reached", "maxTurns": 1, "turnCount": 2})
    (entry,) = ClaudeSessionMapper().line(line, "main").entries
    assert entry.entry_type == "error"
    assert error_type(entry.detail) == "error_max_turns"
    assert entry_text("error", entry.detail) == "error_max_turns: Reached maximum number of turns (1)"


@pytest.mark.parametrize("kind", ["environment", "prompt_snapshot", "date", "skill_listing"])
def test_context_attachments_map_to_nothing(kind: str) -> None:
    mapped = ClaudeSessionMapper().line(line_of(type="attachment", attachment={"type": kind}), "main")
    assert mapped == SessionLine([], AT, session_id="s-1")


def test_another_attachment_is_kept_as_an_event() -> None:
    line = line_of(type="attachment", attachment={"type": "queued_command", "prompt": "later"})
    (entry,) = ClaudeSessionMapper().line(line, "main").entries
    assert (entry.entry_type, entry.detail["subtype"], entry.detail["attachment_type"]) == (
        "system_event",
        "attachment",
        "queued_command",
    )


def test_a_prompt_typed_while_the_agent_worked_is_a_user_message_of_the_running_turn() -> None:
    """The terminal UI's `queued_command` of a person's prompt (`interactive_typed_while_busy`)."""
    attachment = {"type": "queued_command", "prompt": "And also this?", "commandMode": "prompt"}
    human = {**attachment, "origin": {"kind": "human"}, "humanTurn": True}
    for typed in (attachment, human):
        mapped = ClaudeSessionMapper().line(line_of(type="attachment", attachment=typed), "main")
        (entry,) = mapped.entries
        assert (entry.entry_type, entry_text("user_message", entry.detail)) == (
            "user_message",
            "And also this?",
        )
        assert not mapped.opens_turn  # handed over with the running turn's next request
    for queued in (
        {**attachment, "origin": {"kind": "task-notification"}},  # not a person's
        {**attachment, "commandMode": "bash"},  # a command, not a prompt
        {**attachment, "prompt": ["not", "text"]},
    ):
        (entry,) = ClaudeSessionMapper().line(line_of(type="attachment", attachment=queued), "main").entries
        assert (entry.entry_type, entry.detail["attachment_type"]) == ("system_event", "queued_command")


def cost_state(total: float, **usage: int) -> str:
    model_usage = {"claude-x": {"inputTokens": usage.get("i", 0), "outputTokens": usage.get("o", 0)}}
    return json.dumps(
        {"type": "cost-state", "sessionId": "s-1", "totalCostUSD": total, "modelUsage": model_usage}
    )


def test_cost_state_is_the_runs_cost_since_the_last_report_and_the_session_totals() -> None:
    mapper = ClaudeSessionMapper()
    first, second = (
        mapper.line(cost_state(0.5, i=100, o=10), "main"),
        mapper.line(cost_state(0.75, i=300), "main"),
    )
    assert kinds(first) == kinds(second) == [("token_usage", None)]
    assert first.ends_turn
    assert first.timestamp_ns is None
    assert first.session_id == "s-1"
    assert [cost_usd(m.entries[0].detail) for m in (first, second)] == [0.5, 0.25]
    assert second.entries[0].detail["session_usage"] == {"input_tokens": 300, "output_tokens": 0}
    # No message line was seen: all of the session's tokens are the reports' to tell.
    assert [m.entries[0].detail["usage"] for m in (first, second)] == [
        {"input_tokens": 100, "output_tokens": 10},
        {"input_tokens": 200},
    ]


def test_a_cost_state_repeating_the_last_ones_totals_adds_nothing_but_still_ends_the_turn() -> None:
    """The terminal UI writes its `cost-state` again as it is left: the same totals."""
    mapper = ClaudeSessionMapper()
    first, again = mapper.line(cost_state(0.5, i=100), "main"), mapper.line(cost_state(0.5, i=100), "main")
    assert kinds(first) == [("token_usage", None)]
    assert again.entries == []
    assert again.ends_turn
    assert kinds(mapper.line(cost_state(0.75, i=100), "main")) == [("token_usage", None)]


def test_the_terminal_uis_permission_mode_is_an_event_when_it_changes() -> None:
    mapper = ClaudeSessionMapper()

    def told(mode: str) -> list[tuple[str, Any]]:
        line = json.dumps({"type": "permission-mode", "permissionMode": mode, "sessionId": "s-1"})
        return [(e.detail["subtype"], e.detail["mode"]) for e in mapper.line(line, "main").entries]

    assert told("auto") == [("permission_mode", "auto")]
    assert told("auto") == []  # told again at the next prompt
    assert told("plan") == [("permission_mode", "plan")]


def test_the_permission_mode_told_is_carried_to_the_run_after_a_restart() -> None:
    """A watch stopped and started again (or a run ended on idle) goes on with the mode the run
    before was told: the same mode told at the next prompt is no event again. Before: one
    `permission_mode` event more per restart in every terminal-UI session (the watch soak found
    14 in 200 sessions, benchmarks/soak_watch.py)."""

    def told(mapper: ClaudeSessionMapper, mode: str) -> list[str]:
        line = json.dumps({"type": "permission-mode", "permissionMode": mode, "sessionId": "s-1"})
        return [e.detail["mode"] for e in mapper.line(line, "main").entries]

    before = ClaudeSessionMapper()
    assert told(before, "auto") == ["auto"]
    after = ClaudeSessionMapper()
    assert after.go_on(json.loads(json.dumps(before.counted())))  # as the state file keeps it
    assert told(after, "auto") == []
    assert told(after, "plan") == ["plan"]
    # A state written before the mode was kept, or one edited by hand: as before, told once.
    for counted in ({k: v for k, v in before.counted().items() if k != "permission_mode"},):
        fresh = ClaudeSessionMapper()
        assert fresh.go_on(counted)
        assert told(fresh, "auto") == ["auto"]
    assert not ClaudeSessionMapper().go_on(before.counted() | {"permission_mode": ["auto"]})


def test_the_terminal_uis_turn_duration_ends_the_turn_of_the_main_agent_only() -> None:
    line = line_of(type="system", subtype="turn_duration", durationMs=436, messageCount=17)
    main, subagent = ClaudeSessionMapper().line(line, "main"), ClaudeSessionMapper().line(line, "subagent:a1")
    assert kinds(main) == [("system_event", "turn_duration")]
    assert (main.ends_turn, subagent.ends_turn) == (True, False)


def test_a_subagents_cost_state_carries_no_cost_of_the_run() -> None:
    (entry,) = ClaudeSessionMapper().line(cost_state(0.5, i=1), "subagent:a1").entries
    assert entry.entry_type == "token_usage"
    assert cost_usd(entry.detail) == 0.0
    assert "session_usage" not in entry.detail


@pytest.mark.parametrize(
    "kind",
    [
        "queue-operation",
        "api-request",
        "api-request-shape",
        "api-request-blob",
        "atis-latch",
        "tools-used",
        "mode",
        "last-prompt",
        "file-history-snapshot",
    ],
)
def test_bookkeeping_lines_map_to_nothing_but_keep_their_time_and_session(kind: str) -> None:
    mapped = ClaudeSessionMapper().line(line_of(type=kind, operation="enqueue", content="Do it"), "main")
    assert mapped == SessionLine([], AT, session_id="s-1")


def test_an_older_summary_line_is_a_compaction() -> None:
    mapped = ClaudeSessionMapper().line(json.dumps({"type": "summary", "summary": "Earlier"}), "main")
    assert kinds(mapped) == [("system_event", "compaction")]


def test_a_new_line_type_is_unknown_and_kept_whole() -> None:
    line = line_of(type="brand-new-thing", payload={"x": 1})
    mapped = ClaudeSessionMapper().line(line, "main")
    assert mapped.entries == [MappedEntry("unknown", {"sdk_entry": json.loads(line)}, line, "main")]
    assert mapped.session_id == "s-1"
    assert mapped.timestamp_ns == AT


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize("line", ["{not json", "[1, 2]", "42", "", b"\xff\xfe"])
def test_a_line_that_is_not_a_json_object_is_unknown_with_the_reason(line: str | bytes) -> None:
    mapped = ClaudeSessionMapper().line(line, "main")
    (entry,) = mapped.entries
    assert entry.entry_type == "unknown"
    assert isinstance(entry.detail["parse_error"], str)
    assert entry.raw is not None
    assert mapped.timestamp_ns is None
    assert mapped.session_id is None


@pytest.mark.parametrize(
    "fields",
    [
        {"type": "assistant", "message": "text"},
        {"type": "assistant", "message": {"content": None, "model": 3}},
        {"type": "user", "message": None},
        {"type": "user", "message": {"content": 7}},
        {"type": "attachment", "attachment": None},
        {"type": "system", "subtype": None, "compactMetadata": "x"},
        {"type": "cost-state", "totalCostUSD": "NaN", "modelUsage": [1]},
        {"type": None, "timestamp": "yesterday", "sessionId": 5},
        # a type that is no string (unhashable, where the type is looked up in a set)
        {"type": []},
        {"type": "attachment", "attachment": {"type": {}}},
        {"type": "assistant", "message": {"content": [{"type": []}]}},
    ],
)
def test_odd_fields_never_raise(fields: dict[str, Any]) -> None:
    mapped = ClaudeSessionMapper().line(json.dumps(fields), "main")
    assert all(entry.entry_type in CANONICAL_ENTRY_TYPES for entry in mapped.entries)


LINES = st.fixed_dictionaries(
    {"type": st.sampled_from(["user", "assistant", "system", "attachment", "cost-state", "x"])},
    optional={
        "message": JSONISH,
        "attachment": JSONISH,
        "subtype": JSONISH,
        "timestamp": JSONISH,
        "isMeta": JSONISH,
    },
)


@settings(max_examples=300, deadline=None)
@given(LINES | JSONISH, st.sampled_from(["main", "subagent:a1"]))
def test_any_json_maps_without_raising(value: Any, source: str) -> None:
    mapped = ClaudeSessionMapper().line(json.dumps(value), source)
    assert all(
        entry.entry_type in CANONICAL_ENTRY_TYPES and entry.source == source for entry in mapped.entries
    )
