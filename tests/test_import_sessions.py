"""`transcript-otel import`: session logs the real Claude Code and Codex CLIs wrote (recorded in
tests/fixtures/sessions/, docs/session-logs.md) become runs in the mirror: valid, at the times
the files say, with the tokens the scripted model served, subagents as spans of their own, the
same run at every import, and readable by `show`, `summary` and `bundle` like any run.
"""

from __future__ import annotations

import asyncio
import functools
import json
import os
import shutil
import subprocess
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from test_session_formats import NOT_A_SESSION
from transcript_otel import check_invariants, read_records
from transcript_otel.capture.defaults import pipeline_from_environment
from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.genai.attributes import tool_identity
from transcript_otel.mappings.session_lines import timestamp_ns
from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.text import entry_text
from transcript_otel.sessions import importer
from transcript_otel.sessions.files import SessionKind, find_sessions
from transcript_otel.sessions.formats import Format
from transcript_otel.sessions.importer import ImportedRun, import_session
from transcript_otel.sessions.recorder import run_id_of

from loopback import subprocess_env
from receivers import TapCollector, run_to_completion
from session_fixtures import IMPORTED, SESSIONS, codex_threads

SCENARIOS = sorted(
    f"{cli.name}/{scenario.name}" for cli in IMPORTED for scenario in cli.iterdir() if scenario.is_dir()
)
CLI = [sys.executable, "-m", "transcript_otel.cli"]


def _import(scenario: str, directory: Path) -> ImportedRun:
    (imported,) = _import_all(scenario, directory)
    return imported


def _import_all(scenario: str, directory: Path) -> list[ImportedRun]:
    """Each session of the scenario (one, but `forked`'s two), imported into its own folder."""
    sessions = list(find_sessions([SESSIONS / scenario]))
    alone = len(sessions) == 1
    return [
        import_session(session, directory if alone else directory / str(index))
        for index, session in enumerate(sessions)
    ]


def _all_records(scenario: str, directory: Path) -> list[dict[str, Any]]:
    return [record for imported in _import_all(scenario, directory) for record in _records(imported)]


def _records(imported: ImportedRun) -> list[dict[str, Any]]:
    return list(read_records(imported.path))


def _spans(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == TranscriptEvent.SPAN.value]


def _cli(*arguments: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`transcript-otel ARGUMENTS` in a process of its own (its environment: `env`, else ours)."""
    return subprocess.run(
        [*CLI, *arguments],
        capture_output=True,
        text=True,
        env=env or subprocess_env(),
        timeout=120,
        check=False,
    )


def _served(scenario: str) -> list[dict[str, Any]]:
    """The model calls the scripted server answered, with the usage it sent, but those the CLIs
    log in no file (nor count in their own summaries): the title Codex's terminal UI asks for a
    new thread (in a thread of its own), and Claude Code 2.0's "Warmup" calls that left no
    agent file (`_warmups_no_file_holds`); and the calls Claude Code's terminal UI logs only in
    the cost it logs as the person leaves (`/compact`'s): in the run's total, no turn's."""
    meta = json.loads((SESSIONS / scenario / "meta.json").read_text())
    unlogged = _warmups_no_file_holds(scenario)
    if scenario.startswith("claude_code/interactive"):
        unlogged |= _calls_no_file_holds(scenario)
    return [
        call
        for call in meta["served"]
        if call.get("status") == 200
        and call.get("usage")
        and call.get("conversation") != "title"
        and call.get("message_id") not in unlogged
    ]


def _calls_no_file_holds(scenario: str) -> set[str]:
    meta = json.loads((SESSIONS / scenario / "meta.json").read_text())
    logged = "".join(path.read_text() for path in (SESSIONS / scenario / "home").rglob("*.jsonl"))
    return {call["message_id"] for call in meta["served"] if call.get("message_id", "") not in logged}


def _warmups_no_file_holds(scenario: str) -> set[str]:
    meta = json.loads((SESSIONS / scenario / "meta.json").read_text())
    warmups = {call.get("message_id") for call in meta["served"] if call.get("conversation") is None}
    return _calls_no_file_holds(scenario) & warmups


def test_two_copies_of_one_session_are_one_run_and_the_cli_says_so(tmp_path: Path) -> None:
    session = next((SESSIONS / "claude_code/tools/home/.claude/projects").rglob("*.jsonl"))
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        shutil.copy(session, tmp_path / folder / session.name)
    runs = tmp_path / "runs"
    done = _cli("import", "--jobs", "1", "--jsonl-dir", str(runs), str(tmp_path / "a"), str(tmp_path / "b"))
    assert done.returncode == 0, done.stderr
    assert len(list(runs.glob("*.jsonl"))) == 1
    assert (
        f"transcript-otel import: {tmp_path / 'b' / session.name} is the same session as "
        f"{tmp_path / 'a' / session.name} (a copy?): its run replaced that one"
    ) in done.stderr


def test_the_commands_a_code_mode_script_runs_are_its_own_tool_calls(tmp_path: Path) -> None:
    """Codex code mode: the model's script (`codex:code_mode`) runs two commands; their spans
    are the script's children, the failed one an error, and end before it does."""
    spans = _spans(_records(_import("codex/code_mode", tmp_path)))
    (script,) = [span for span in spans if span[fields.NAME] == "execute_tool codex:code_mode"]
    commands = [span for span in spans if span[fields.NAME] == "execute_tool codex:command"]
    assert [span[fields.PARENT_SPAN_ID] for span in commands] == [script["span_id"]] * 2
    assert [span["status"] for span in commands] == ["UNSET", "ERROR"]
    assert all(
        script[fields.START] <= span[fields.START] <= span[fields.END] <= script[fields.END]
        for span in commands
    )


def test_claude_code_2_0_logs_its_agents_warmups_beside_the_session(tmp_path: Path) -> None:
    """Claude Code 2.0.32 writes each subagent's file in the project's folder itself, not in
    `<session>/subagents/`: the session's agents' "Warmup" calls. They are subagents of the
    session's one run (named alone, an agent file is that session too); one of its three
    warm-up calls has no file."""
    project = SESSIONS / "claude_code/v2.0.32_tools/home/.claude/projects/-scratch-work"
    agents = sorted(project.glob("agent-*.jsonl"))
    (main,) = [path for path in project.glob("*.jsonl") if path not in agents]
    assert {find_sessions([path]).__next__().path for path in [*agents, main]} == {main}
    records = _records(_import("claude_code/v2.0.32_tools", tmp_path))
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    sources = Counter(e["source"] for e in entries)
    assert sources == {"main": 6, **{f"subagent:{path.stem.removeprefix('agent-')}": 2 for path in agents}}
    prompts = [
        e["detail"]["sdk_entry"]["message"]["content"] for e in entries if e["entry_type"] == "user_message"
    ]
    assert sorted(prompts)[-2:] == ["Warmup", "Warmup"]
    assert len(_warmups_no_file_holds("claude_code/v2.0.32_tools")) == 1


def _first_time(imported: ImportedRun) -> int:
    """The earliest time the session's files tell first (Claude Code 2.0's subagent warm-ups
    are logged before the session's own first line)."""
    firsts = []
    for path, _ in imported.session.sources():
        times = (timestamp_ns(json.loads(line).get("timestamp")) for line in path.read_text().splitlines())
        firsts.append(next(at for at in times if at is not None))
    return min(firsts)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_a_session_becomes_one_valid_run_at_the_times_it_recorded(scenario: str, tmp_path: Path) -> None:
    for imported in _import_all(scenario, tmp_path):
        _assert_one_valid_run(imported, scenario)


def _assert_one_valid_run(imported: ImportedRun, scenario: str) -> None:
    records = _records(imported)
    assert check_invariants(records) == []
    assert [path.name for path in imported.path.parent.iterdir()] == [imported.path.name]
    kind = SessionKind(scenario.split("/", maxsplit=1)[0])
    assert imported.run_id == run_id_of(kind, imported.session_id)
    assert {r["context"]["run_id"] for r in records if "run_id" in r["context"]} == {imported.run_id}
    assert {record["context"].get("session_id") for record in records} == {imported.session_id}
    start = records[0]
    assert start["event"] == TranscriptEvent.START.value
    # The run began when the session's first line says, not when it was imported.
    assert timestamp_ns(start["timestamp"]) == _first_time(imported)
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    assert entries
    assert all(e["timestamp"] for e in entries)
    kinds = {e["entry_type"] for e in entries}
    # Every session holds its prompt, and the answer or the failure that ended it.
    assert "user_message" in kinds
    assert kinds & {"assistant_message", "error"}


@pytest.mark.parametrize("scenario", ["claude_code/parallel_subagents", "codex/resumed"])
def test_importing_again_replaces_the_run_with_the_same_one(scenario: str, tmp_path: Path) -> None:
    first = _import(scenario, tmp_path)
    content = first.path.read_bytes()
    second = _import(scenario, tmp_path)
    assert second.run_id == first.run_id
    assert second.path == first.path
    assert [path.name for path in tmp_path.iterdir()] == [first.path.name]
    assert second.path.read_bytes() == content


def _by_kind(path: Path) -> tuple[list[str], list[str], list[str]]:
    """The run's entry records in file order, and its span and other records, sorted: where a
    span's record lands among the entries depends on where a batch of the writer ended."""
    lines = path.read_text().splitlines()
    entries = [line for line in lines if '"event":"transcript.entry"' in line]
    spans = sorted(line for line in lines if '"event":"transcript.span"' in line)
    others = sorted(set(lines) - set(entries) - set(spans))
    return entries, spans, others


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_import_writes_what_a_writer_thread_would_whenever_it_drains(
    scenario: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The import writes on its own thread, every few hundred records. Draining after every
    few records (mid-turn, mid-tool-call) or a background writer thread writes the same
    records, the entries in the same order, the spans with the same ids and times."""

    def written(directory: Path) -> list[tuple[list[str], list[str], list[str]]]:
        return [_by_kind(imported.path) for imported in _import_all(scenario, directory)]

    by_caller = written(tmp_path / "caller")
    monkeypatch.setattr(importer, "_DRAIN_AT_RECORDS", 3)
    assert written(tmp_path / "often") == by_caller
    threaded = functools.partial(pipeline_from_environment, drained_by_caller=False)
    monkeypatch.setattr(importer, "pipeline_from_environment", threaded)
    assert written(tmp_path / "thread") == by_caller


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_the_chat_spans_count_the_tokens_the_model_served(scenario: str, tmp_path: Path) -> None:
    served = _served(scenario)
    spans = _spans(_all_records(scenario, tmp_path))  # a fork's: each call counted in one run
    chats = [span for span in spans if span[fields.NAME].startswith("chat")]

    def total(key: str) -> int:
        return sum(span[fields.ATTRIBUTES].get(f"gen_ai.usage.{key}", 0) for span in chats)

    output = sum(call["usage"]["output_tokens"] for call in served)
    prompt = sum(
        call["usage"]["input_tokens"]
        + call["usage"].get("cache_read_input_tokens", 0)
        + call["usage"].get("cache_creation_input_tokens", 0)
        for call in served
    )
    assert (total("input_tokens"), total("output_tokens")) == (prompt, output)
    # No other span counts them again.
    assert not any("gen_ai.usage.input_tokens" in s[fields.ATTRIBUTES] for s in spans if s not in chats)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_each_turn_is_a_request_to_the_model(scenario: str, tmp_path: Path) -> None:
    """Each main `chat` span holds a model call: tokens, or the failure of its request. Prompts
    queued while the model was busy (two subagents' notifications, in `parallel_subagents` and
    `interactive_subagents`) go to it in one request: one turn, not an empty one each."""
    records = _all_records(scenario, tmp_path)
    spans = _spans(records)
    turns = [span for span in spans if "transcript.turn" in span[fields.ATTRIBUTES]]
    assert turns
    for turn in turns:
        attributes = turn[fields.ATTRIBUTES]
        if attributes.get("gen_ai.usage.input_tokens") or turn["status"] == "ERROR":
            continue
        # `/compact` in Claude Code's terminal UI: a request whose usage it logs nowhere.
        said = [r["context"] for r in records if r["context"].get("span_id") == turn["span_id"]]
        assert scenario == "claude_code/interactive_compacted", attributes
        assert [e["detail"].get("subtype") for e in said if e.get("entry_type") == "system_event"][:2] == [
            "compaction",
            "compaction",
        ]


@pytest.mark.parametrize("cli", ["claude_code", "codex"])
def test_a_prompt_typed_while_the_agent_works_is_the_persons_in_the_same_turn(
    cli: str, tmp_path: Path
) -> None:
    """Both terminal UIs hand a prompt typed while a command runs to the model with the
    command's result (Claude Code: a `queued_command` attachment; Codex: a user message in the
    running turn): the person's words, a `user_message` of the running turn, in what its
    `chat` span says was sent."""
    records = _records(_import(f"{cli}/interactive_typed_while_busy", tmp_path))
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    said = [(e["entry_type"], entry_text(e["entry_type"], e["detail"])) for e in entries]
    prompts = [text for kind, text in said if kind == "user_message"]
    assert prompts == ["BUSY-PROMPT-SCENARIO: please do the task.", "And also this?"]
    assert said.index(("user_message", "And also this?")) < said.index(
        ("assistant_message", "The command is done.")
    )
    assert not [e for e in entries if e["detail"].get("attachment_type") == "queued_command"]
    (turn,) = [span for span in _spans(records) if "transcript.turn" in span[fields.ATTRIBUTES]]
    sent = json.loads(turn[fields.ATTRIBUTES]["gen_ai.input.messages"])
    typed = [part["content"] for message in sent if message["role"] == "user" for part in message["parts"]]
    assert typed == ["BUSY-PROMPT-SCENARIO: please do the task.", "And also this?"]


@pytest.mark.parametrize("cli", ["claude_code", "codex"])
def test_a_call_the_person_stopped_failed_and_the_next_prompt_is_its_own_turn(
    cli: str, tmp_path: Path
) -> None:
    """Esc in the terminal UI while a command runs, then "Never mind." typed: the command's
    span is an error (Claude Code: the CLI's refusal; Codex: "aborted by user"), the prompt
    after it a turn of its own with the model's answer."""
    records = _records(_import(f"{cli}/interactive_interrupted", tmp_path))
    spans = _spans(records)
    (command,) = [span for span in spans if span[fields.NAME].startswith("execute_tool")]
    assert command["status"] == "ERROR"
    turns = [span for span in spans if "transcript.turn" in span[fields.ATTRIBUTES]]
    assert len(turns) == 2
    sent = json.loads(turns[1][fields.ATTRIBUTES]["gen_ai.input.messages"])
    typed = [part["content"] for message in sent if message["role"] == "user" for part in message["parts"]]
    assert typed[-1] == "Never mind."
    answer = json.loads(turns[1][fields.ATTRIBUTES]["gen_ai.output.messages"])
    assert answer[0]["parts"][-1]["content"] == "The command is done."


def test_subagents_are_sources_and_spans_of_their_own(tmp_path: Path) -> None:
    records = _records(_import("claude_code/parallel_subagents", tmp_path))
    sources = Counter(r["context"]["source"] for r in records if r["event"] == TranscriptEvent.ENTRY.value)
    subagents = sorted(source for source in sources if source.startswith("subagent:"))
    assert len(subagents) == 2
    spans = _spans(records)
    by_id = {span["span_id"]: span for span in spans}
    agents = [s for s in spans if s[fields.ATTRIBUTES].get("gen_ai.operation.name") == "invoke_agent"]
    root = next(s for s in agents if s[fields.PARENT_SPAN_ID] is None)
    nested = [s for s in agents if s is not root]
    assert len(nested) == 2
    for span in nested:
        # Each under the tool call that launched it, inside the run.
        launcher = by_id[span[fields.PARENT_SPAN_ID]]
        assert launcher[fields.NAME].startswith("execute_tool")
        assert span[fields.START] >= root[fields.START]
        assert span[fields.END] <= root[fields.END]


def test_a_codex_subagents_thread_is_part_of_its_session(tmp_path: Path) -> None:
    """Codex `multi_agent_v2` writes a subagent's thread to a file of its own: the import makes
    it a source and an `invoke_agent` span of the session's one run, under the `spawn_agent`
    call, running on after that call returned until the parent is told it completed; each
    model call's tokens counted once, as served."""
    rollouts = sorted((SESSIONS / "codex/subagent").rglob("rollout-*.jsonl"))
    # Named alone, either file is the same session, whose main file is the root thread's.
    assert len({find_sessions([path]).__next__().path for path in rollouts}) == 1
    imported = _import("codex/subagent", tmp_path)
    records = _records(imported)
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    (child,) = [p for p in rollouts if p != imported.session.path]
    thread = child.stem[-36:]
    assert Counter(e["source"] for e in entries) == {"main": 14, f"subagent:{thread}": 5}
    assert [e["entry_type"] for e in entries if e["entry_type"] == "unknown"] == []
    spans = _spans(records)
    by_name = {span[fields.NAME]: span for span in spans}
    subagent, spawn = by_name["invoke_agent subagent"], by_name["execute_tool spawn_agent"]
    assert subagent[fields.PARENT_SPAN_ID] == spawn["span_id"]
    assert subagent[fields.ATTRIBUTES]["gen_ai.agent.id"] == thread
    assert subagent[fields.END] > spawn[fields.END]
    chats = {
        span[fields.ATTRIBUTES].get("gen_ai.agent.name"): span[fields.ATTRIBUTES]["gen_ai.usage.input_tokens"]
        for span in spans
        if span[fields.NAME].startswith("chat")
    }
    assert chats == {None: 2400 + 2600 + 2800, thread: 1500}
    run_total = by_name["invoke_agent codex"][fields.ATTRIBUTES]["transcript.usage.input_tokens"]
    assert run_total == sum(call["usage"]["input_tokens"] for call in _served("codex/subagent")) == 9300


def test_a_codex_subagents_model_is_its_chat_spans_and_not_the_sessions(tmp_path: Path) -> None:
    """A subagent's thread says its model in its own `turn_context`, no response of it does: its
    `chat` span is named by it. Given another model than the root thread's (the recorded child
    with its `turn_context` model changed), the root's turns and the run keep theirs."""
    rollouts = sorted((SESSIONS / "codex/subagent").rglob("rollout-*.jsonl"), key=lambda p: p.stat().st_size)
    child, root = rollouts
    day = tmp_path / "sessions" / "2026" / "11" / "27"
    day.mkdir(parents=True)
    shutil.copy(root, day / root.name)
    lines = child.read_text().splitlines(keepends=True)
    old, new = '"model":"gpt-5.5"', '"model":"gpt-5.5-mini"'
    changed = [line.replace(old, new) if '"turn_context"' in line else line for line in lines]
    assert changed != lines
    (day / child.name).write_text("".join(changed))
    (session,) = find_sessions([tmp_path / "sessions"])
    spans = _spans(_records(import_session(session, tmp_path / "runs")))
    models = {
        (span[fields.NAME], span[fields.ATTRIBUTES].get("gen_ai.request.model"))
        for span in spans
        if span[fields.NAME].startswith(("chat", "invoke_agent codex"))
    }
    assert models == {
        ("chat gpt-5.5-mini", "gpt-5.5-mini"),
        ("chat gpt-5.5", "gpt-5.5"),
        ("invoke_agent codex", "gpt-5.5"),
    }


def test_a_codex_subagent_started_after_midnight_is_found_in_the_next_days_folder(tmp_path: Path) -> None:
    rollouts = sorted((SESSIONS / "codex/subagent").rglob("rollout-*.jsonl"), key=lambda p: p.stat().st_size)
    child, root = rollouts
    sessions = tmp_path / "sessions"
    for path, day in ((root, "2026/11/27"), (child, "2026/11/28")):
        (sessions / day).mkdir(parents=True)
        shutil.copy(path, sessions / day / path.name)
    moved_root, moved_child = sessions / "2026/11/27" / root.name, sessions / "2026/11/28" / child.name
    (found,) = find_sessions([sessions])
    assert (found.path, [path for path, _ in found.subagents]) == (moved_root, [moved_child])
    assert next(iter(find_sessions([moved_child]))).path == moved_root


FORKED = SESSIONS / "claude_code/forked"


def _fork_and_parent() -> tuple[Path, Path]:
    """The forked session's file (the larger: it holds a copy of the other's), and its parent's."""
    fork, parent = sorted((FORKED / "home").rglob("*.jsonl"), key=lambda p: p.stat().st_size, reverse=True)
    return fork, parent


def _run_totals(records: list[dict[str, Any]]) -> tuple[int, float]:
    digest = RunDigest.of(records)
    return digest.tokens.get("input", 0), round(digest.cost_usd, 9)


def test_a_forked_session_is_a_run_of_what_it_did_itself(tmp_path: Path) -> None:
    """`claude --resume <id> --fork-session`: the fork's file begins with a copy of the other
    session's lines, and its costs go on from that session's. Its run holds what the fork
    did (one `system_event` says whose fork it is): the other session's calls are counted in
    that session's run only, so the runs' tokens and costs add up to what was served and
    billed."""
    fork, parent = _fork_and_parent()
    runs = {
        session.path: _records(import_session(session, tmp_path / session.path.stem))
        for session in find_sessions([FORKED])
    }
    entries = [r["context"] for r in runs[fork] if r["event"] == TranscriptEvent.ENTRY.value]
    first = entries[0]
    assert (first["entry_type"], first["detail"]["subtype"]) == ("system_event", "forked")
    assert first["detail"]["forked_from"] == parent.stem
    assert [
        entry_text(e["entry_type"], e["detail"]) for e in entries if e["entry_type"] == "user_message"
    ] == ["And now?"]
    served = {call["message_id"]: call["usage"]["input_tokens"] for call in _served("claude_code/forked")}
    own = {message_id: n for message_id, n in served.items() if message_id not in parent.read_text()}
    assert _run_totals(runs[fork])[0] == sum(own.values()) == 1000
    assert _run_totals(runs[parent])[0] + _run_totals(runs[fork])[0] == sum(served.values())
    last_cost = [json.loads(line) for line in fork.read_text().splitlines() if '"cost-state"' in line][-1]
    assert _run_totals(runs[parent])[1] + _run_totals(runs[fork])[1] == round(last_cost["totalCostUSD"], 9)


def test_a_codex_fork_is_a_run_of_what_it_did_itself(tmp_path: Path) -> None:
    """`codex fork <thread> PROMPT` (the terminal UI; `codex exec` cannot fork): the fork's
    rollout holds only its own turn, the other thread's history by reference
    (`forked_from_id`), though its running totals go on from the other's (the UI said
    input=4,000 for its one call of 2,000). Its run says whose fork it is, and the runs'
    tokens add up to what was served."""
    parent, fork = sorted((SESSIONS / "codex/forked").rglob("rollout-*.jsonl"))  # by time: the parent first
    parent_thread = parent.stem[-36:]
    runs = {
        session.path: _records(import_session(session, tmp_path / session.path.stem))
        for session in find_sessions([SESSIONS / "codex/forked"])
    }
    assert set(runs) == {parent, fork}

    def entries(path: Path) -> list[dict[str, Any]]:
        return [r["context"] for r in runs[path] if r["event"] == TranscriptEvent.ENTRY.value]

    said = [(e["entry_type"], e["detail"].get("subtype")) for e in entries(fork)]
    assert said[:2] == [("system_event", "thread_started"), ("system_event", "forked")]
    assert entries(fork)[1]["detail"]["forked_from"] == parent_thread
    assert ("system_event", "forked") not in [
        (e["entry_type"], e["detail"].get("subtype")) for e in entries(parent)
    ]
    assert [
        entry_text(e["entry_type"], e["detail"]) for e in entries(fork) if e["entry_type"] == "user_message"
    ] == ["And now?"]
    assert "input=4,000" in (SESSIONS / "codex/forked/terminal-1.txt").read_text()  # the thread's totals
    served = [call["usage"]["input_tokens"] for call in _served("codex/forked")]
    assert _run_totals(runs[fork])[0] == 2000
    assert _run_totals(runs[parent])[0] + _run_totals(runs[fork])[0] == sum(served) == 4000


def test_a_rollout_codex_migrated_imports_as_the_one_it_was(tmp_path: Path) -> None:
    """`codex migrate-rollouts --apply` (0.171.0) rewrites an older rollout in place, its events
    as typed items (`v0.140_shell_migrated`: `v0.140_shell`'s conversation, recorded again and
    migrated): it imports to the same entries and tokens."""

    def said(scenario: str) -> tuple[list[tuple[str, object]], int]:
        """Each entry's type and what it says that two recordings share (not the ids, not the
        command's wall time): its text, a tool result's failure."""
        records = _all_records(scenario, tmp_path / scenario)
        entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
        shared = [
            (
                e["entry_type"],
                e["detail"].get("is_error")
                if e["entry_type"] == "tool_result"
                else e["detail"].get("subtype")
                if e["entry_type"] == "system_event"
                else entry_text(e["entry_type"], e["detail"]),
            )
            for e in entries
        ]
        return shared, _run_totals(records)[0]

    migrated = json.loads((SESSIONS / "codex/v0.140_shell_migrated/meta.json").read_text())["maintenance"]
    assert [(step["arguments"], step["exit_code"]) for step in migrated] == [
        (["migrate-rollouts", "--apply"], 0)
    ]
    assert "1 migrated" in migrated[0]["stdout"]
    assert said("codex/v0.140_shell_migrated") == said("codex/v0.140_shell")


def test_a_fork_whose_parents_file_is_gone_still_counts_only_its_own_calls(tmp_path: Path) -> None:
    """Without the other session's file, the copied answers still name that session's request:
    left out, their tokens not counted (the copied prompt is kept, in the fork's first turn;
    the fork's cost still includes the other's, which only that file tells)."""
    fork, _ = _fork_and_parent()
    alone = tmp_path / "projects" / fork.name
    alone.parent.mkdir()
    shutil.copy(fork, alone)
    (session,) = find_sessions([alone])
    records = _records(import_session(session, tmp_path / "runs"))
    assert check_invariants(records) == []
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    assert [e["entry_type"] for e in entries if e["entry_type"] == "assistant_message"] == [
        "assistant_message"
    ]
    assert _run_totals(records)[0] == 1000
    chats = [s for s in _spans(records) if s[fields.NAME].startswith("chat")]
    assert [s[fields.ATTRIBUTES]["gen_ai.usage.input_tokens"] for s in chats] == [1000]


def test_a_codex_subagents_file_without_its_roots_is_a_session_of_its_own(tmp_path: Path) -> None:
    """Nothing is left out: with the root thread's file gone, the subagent's imports alone; a
    rollout whose first line says nothing of its thread (damaged) is a session too, told by the
    records after it. A file named like one holding no rollout record is none."""
    rollouts = sorted((SESSIONS / "codex/subagent").rglob("rollout-*.jsonl"), key=lambda p: p.stat().st_size)
    child = tmp_path / "sessions" / rollouts[0].name
    child.parent.mkdir()
    shutil.copy(rollouts[0], child)
    broken = child.parent / "rollout-2026-11-27T00-00-00-not-json.jsonl"
    second_record = child.read_text().splitlines(keepends=True)[1]
    broken.write_text('{"timestamp": "2026-11-27T00:00:00Z", "type"\n' + second_record)
    junk = child.parent / "rollout-2026-11-27T00-00-01-junk.jsonl"
    junk.write_text('{"timestamp": "2026-11-27T00:00:00Z", "type"\n')
    refused: dict[Path, Format] = {}
    found = {session.path: session.subagents for session in find_sessions([child.parent], refused=refused)}
    assert found == {broken: (), child: ()}
    assert refused == {junk: Format.TEXT}
    imported = import_session(next(iter(find_sessions([child]))), tmp_path / "runs")
    assert imported.summary.total_entries == 5


def _first_line_changed(path: Path, change: Callable[[dict[str, Any]], None]) -> None:
    first, rest = path.read_text().split("\n", 1)
    line = json.loads(first)
    change(line)
    path.write_text(json.dumps(line) + "\n" + rest)


def _set(*keys_and_value: Any) -> Callable[[dict[str, Any]], None]:
    *keys, last, value = keys_and_value

    def change(line: dict[str, Any]) -> None:
        for key in keys:
            line = line[key]
        line[last] = value

    return change


CODEX_ROOT, CODEX_CHILD = codex_threads("subagent")
# The recorded Claude Code 2.0 session's two agents (its warm-ups), a file each.
CLAUDE_2_AGENT, CLAUDE_2_OTHER_AGENT = sorted(
    path.stem for path in (SESSIONS / "claude_code/v2.0.32_tools").rglob("agent-*.jsonl")
)
HOSTILE_FIRST_LINES = {
    "codex root's own id not a string": ("codex/subagent", CODEX_ROOT, _set("payload", "id", -1)),
    "codex root's own id a path": ("codex/subagent", CODEX_ROOT, _set("payload", "id", "../../x")),
    "codex root's own id a pattern": ("codex/subagent", CODEX_ROOT, _set("payload", "id", "*")),
    "codex root and child name each other": (
        "codex/subagent",
        CODEX_ROOT,
        _set("payload", "session_id", CODEX_CHILD),
    ),
    "codex child's session a path": ("codex/subagent", CODEX_CHILD, _set("payload", "session_id", "a/b")),
    "claude 2.0 agent names itself": (
        "claude_code/v2.0.32_tools",
        CLAUDE_2_AGENT,
        _set("sessionId", CLAUDE_2_AGENT),
    ),
    "claude 2.0 agent names a path": (
        "claude_code/v2.0.32_tools",
        CLAUDE_2_OTHER_AGENT,
        _set("sessionId", "../x"),
    ),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_FIRST_LINES))
def test_a_first_line_naming_no_file_or_itself_leaves_every_file_in_one_session(
    case: str, tmp_path: Path
) -> None:
    """What a file's first line says of whose it is only joins it to a session whose root says
    it is one: a self-naming id, files naming each other, an id that is a path or a pattern
    never loop, fail the search or drop a file. Each file is imported, in exactly one run."""
    scenario, name, change = HOSTILE_FIRST_LINES[case]
    copied = tmp_path / "in"
    shutil.copytree(SESSIONS / scenario, copied)
    files = sorted(path for path in copied.rglob("*.jsonl") if not path.name.startswith("stdout"))
    (target,) = [path for path in files if name in path.name]
    _first_line_changed(target, change)
    sessions = list(find_sessions([copied]))
    held = [path for session in sessions for path, _ in session.sources()]
    assert sorted(held) == files
    for index, session in enumerate(sessions):
        imported = import_session(session, tmp_path / f"runs-{index}")
        assert imported.summary.total_entries > 0
        assert check_invariants(_records(imported)) == []


def test_the_cli_imports_the_default_locations_and_the_readers_read_the_runs(tmp_path: Path) -> None:
    claude_home = tmp_path / "claude"
    shutil.copytree(SESSIONS / "claude_code/tools/home/.claude", claude_home)
    codex_home = tmp_path / "codex"
    shutil.copytree(SESSIONS / "codex/shell/codex-home", codex_home)
    runs = tmp_path / "runs"
    env = subprocess_env(CLAUDE_CONFIG_DIR=str(claude_home), CODEX_HOME=str(codex_home))
    imported = _cli("import", "--claude-code", "--codex", "--jsonl-dir", str(runs), env=env)
    assert imported.returncode == 0, imported.stderr
    files = sorted(runs.glob("*.jsonl"))
    assert len(files) == 2
    said = sorted(line.split(" -> ")[1].split(" (")[0] for line in imported.stdout.splitlines())
    assert said == [str(path) for path in files]
    for path in files:
        for command in (["show", str(path)], ["summary", str(path)], ["validate", str(path)]):
            done = _cli(*command, env=env)
            assert done.returncode == 0, (command, done.stderr)
        bundle = tmp_path / f"{path.stem}.zip"
        done = _cli("bundle", str(path), "-o", str(bundle), env=env)
        assert done.returncode == 0, done.stderr
        assert bundle.is_file()


def test_codex_sessions_archived_are_imported_too_and_an_archived_one_stays_one_run(tmp_path: Path) -> None:
    """`codex archive <thread>` moves its rollout to `$CODEX_HOME/archived_sessions/` (flat;
    measured with 0.171.0): `--codex` imports those too, and a thread imported before it was
    archived is the same run after (importing into the same mirror replaces it)."""
    codex_home = tmp_path / "codex"
    shutil.copytree(SESSIONS / "codex/shell/codex-home", codex_home)
    (kept,) = (SESSIONS / "codex/resumed/codex-home/sessions").rglob("rollout-*.jsonl")
    env = subprocess_env(CODEX_HOME=str(codex_home))

    def import_codex(runs: Path) -> list[str]:
        done = _cli("import", "--codex", "--jsonl-dir", str(runs), env=env)
        assert done.returncode == 0, done.stderr
        return sorted(path.name for path in runs.glob("*.jsonl"))

    day = codex_home / "sessions" / kept.parent.relative_to(kept.parents[3])
    day.mkdir(parents=True, exist_ok=True)
    shutil.copy(kept, day / kept.name)
    before = import_codex(tmp_path / "runs")
    assert len(before) == 2
    (codex_home / "archived_sessions").mkdir()
    (day / kept.name).rename(codex_home / "archived_sessions" / kept.name)
    assert import_codex(tmp_path / "archived") == before
    assert import_codex(tmp_path / "runs") == before


@pytest.mark.parametrize("stage", ["shutdown", "replace"])
def test_an_import_interrupted_at_its_end_leaves_the_earlier_run_whole(
    stage: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    earlier = _import("codex/shell", tmp_path)
    content = earlier.path.read_bytes()

    shut_down = TranscriptPipeline.shutdown
    interrupts = [KeyboardInterrupt()]  # one Ctrl-C, at the end of the import

    def interrupted(*args: Any, **kwargs: Any) -> None:
        if stage == "shutdown":
            shut_down(*args, **kwargs)
        if interrupts:
            raise interrupts.pop()

    if stage == "replace":
        monkeypatch.setattr(os, "replace", interrupted)
    else:
        monkeypatch.setattr(TranscriptPipeline, "shutdown", interrupted)
    with pytest.raises(KeyboardInterrupt):
        _import("codex/shell", tmp_path)
    monkeypatch.undo()
    assert [path.name for path in tmp_path.iterdir()] == [earlier.path.name]  # no partial file
    assert earlier.path.read_bytes() == content


def test_bad_paths_and_empty_sessions_are_said(tmp_path: Path) -> None:
    env = subprocess_env()
    missing = _cli("import", str(tmp_path / "nothing-here"), env=env)
    assert missing.returncode == 2
    assert "no such file or directory" in missing.stderr
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    said = _cli("import", str(empty), "--jsonl-dir", str(tmp_path / "runs"), env=env)
    assert said.returncode == 2  # not a session: refused as a bad path is
    assert said.stderr == (  # the path once
        f"transcript-otel import: {empty}: an empty file, {NOT_A_SESSION}\n"
    )


def test_lines_that_are_not_the_format_become_unknown_entries_and_the_rest_is_kept(tmp_path: Path) -> None:
    source = SESSIONS / "claude_code/tools/home/.claude/projects/-scratch-work"
    (main,) = source.glob("*.jsonl")
    broken = tmp_path / "in" / main.name
    broken.parent.mkdir()
    lines = main.read_text().splitlines(keepends=True)
    broken.write_text("".join([lines[0], "not json\n", '["a list"]\n', *lines[1:]]))
    (session,) = find_sessions([broken])
    imported = import_session(session, tmp_path / "runs")
    records = _records(imported)
    assert check_invariants(records) == []
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    unknown = [e for e in entries if e["entry_type"] == "unknown"]
    assert [e["raw"] for e in unknown] == ["not json", '["a list"]']
    clean = _records(_import("claude_code/tools", tmp_path / "clean"))
    kept = [r["context"]["entry_type"] for r in clean if r["event"] == TranscriptEvent.ENTRY.value]
    assert [e["entry_type"] for e in entries if e["entry_type"] != "unknown"] == [
        t for t in kept if t != "unknown"
    ]


# What `transcript-otel run` recorded when the CLI printed this session live (its recorded
# stdout, printed again by `cat`), against what the session's own log says.
# Codex searches its tools (`tool_search`, a call the model makes) without printing it on stdout.
ONLY_IN_THE_LOG = {"tool_search"}
SAME_RUN = {
    "claude_code/tools": "claude-stream-json",
    "claude_code/denied_tool": "claude-stream-json",
    "codex/shell": "codex-json",
    "codex/mcp_tool": "codex-json",
    "codex/web_search": "codex-json",
    "codex/tour": "codex-json",
    "codex/v0.140_shell": "codex-json",
    "codex/v0.140_mcp_tool": "codex-json",
}


def _conversation(records: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """The main agent's words and tool calls, as both records say them."""
    said: list[tuple[str, str | None]] = []
    for record in records:
        context = record["context"]
        if record["event"] != TranscriptEvent.ENTRY.value or context["source"] != "main":
            continue
        kind, detail = context["entry_type"], context["detail"]
        if kind in ("assistant_message", "thinking"):
            said.append((kind, entry_text(kind, detail)))
        elif kind in ("tool_use", "tool_result") and tool_identity(detail)[1] not in ONLY_IN_THE_LOG:
            said.append((kind, tool_identity(detail)[1]))
    return said


def _main_chats(records: list[dict[str, Any]]) -> list[tuple[int, int]]:
    return [
        (
            span[fields.ATTRIBUTES].get("gen_ai.usage.input_tokens", 0),
            span[fields.ATTRIBUTES].get("gen_ai.usage.output_tokens", 0),
        )
        for span in _spans(records)
        if span[fields.NAME].startswith("chat")
    ]


@pytest.mark.parametrize("scenario", sorted(SAME_RUN))
def test_the_import_says_what_the_live_run_recorded(scenario: str, tmp_path: Path) -> None:
    imported = _records(_import(scenario, tmp_path / "imported"))
    live_dir = tmp_path / "live"
    stdout = SESSIONS / scenario / "stdout-1.jsonl"
    done = subprocess.run(
        [*CLI, "run", "--adapter", SAME_RUN[scenario], "--", "cat", str(stdout)],
        capture_output=True,
        env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(live_dir)),
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    (live_file,) = live_dir.glob("*.jsonl")
    live = list(read_records(live_file))
    assert _conversation(imported) == _conversation(live)
    # The same model calls, the same tokens in each turn (the log counts them per message, the
    # live run from each turn's result).
    assert _main_chats(imported) == _main_chats(live)


async def _sent(scenario: str, runs: Path) -> list[Any]:
    """The spans a backend receives from `transcript-otel import --endpoint`."""
    async with TapCollector() as tap:
        session = str(SESSIONS / scenario)
        command = [*CLI, "import", session, "--jsonl-dir", str(runs), "--endpoint", tap.endpoint]
        status, _, stderr = await run_to_completion(command, 120, env=subprocess_env())
        assert status == 0, stderr.decode(errors="replace")
        # The import wrote the run before sending it: as many spans as it keeps must arrive.
        (mirror,) = runs.glob("*.jsonl")
        kept = len(_spans(list(read_records(mirror))))
        await tap.wait_for(lambda: len(tap.spans) >= kept, 60)
        await asyncio.sleep(0.2)  # anything more than was sent would arrive now
        return list(tap.spans)


def test_an_import_sent_to_a_backend_twice_is_one_trace_there(tmp_path: Path) -> None:
    scenario = "claude_code/parallel_subagents"
    first, second = (asyncio.run(_sent(scenario, tmp_path / "runs")) for _ in range(2))
    (mirror,) = (tmp_path / "runs").glob("*.jsonl")
    kept = _spans(list(read_records(mirror)))
    for sent in (first, second):
        assert sorted(span.span_id.hex() for span in sent) == sorted(span["span_id"] for span in kept)
        assert {span.trace_id.hex() for span in sent} == {kept[0]["trace_id"]}
    names = Counter(span.name for span in first)
    assert names["invoke_agent claude-code"] == 1
    assert names["invoke_agent general-purpose"] == 2


def test_a_session_opening_with_undated_lines_begins_at_its_first_time(tmp_path: Path) -> None:
    """Older Claude Code files open with lines that say no time (`summary`): the run begins at
    the first time a line tells, never at the file's modification time, and stays one run."""
    source = SESSIONS / "claude_code/tools/home/.claude/projects/-scratch-work"
    (main,) = source.glob("*.jsonl")
    copy = tmp_path / "in" / main.name
    copy.parent.mkdir()
    undated = json.dumps({"type": "summary", "summary": "an earlier session", "leafUuid": "u-0"})
    copy.write_text(undated + "\n" + main.read_text())
    os.utime(copy, (2_000_000_000, 2_000_000_000))  # 2033: a time no line says
    (session,) = find_sessions([copy])
    imported = import_session(session, tmp_path / "runs")
    records = _records(imported)
    first_time = _first_time(_import("claude_code/tools", tmp_path / "clean"))
    assert timestamp_ns(records[0]["timestamp"]) == first_time
    assert all(not r["timestamp"].startswith("2033") for r in records)
    with copy.open("a") as out:  # the session goes on; imported again, it is the same run
        out.write(main.read_text().splitlines(keepends=True)[-1])
    again = import_session(session, tmp_path / "runs")
    assert again.path == imported.path
    assert [path.name for path in (tmp_path / "runs").glob("*.jsonl")] == [imported.path.name]


@pytest.mark.parametrize(
    ("scenario", "failed"),
    [
        ("claude_code/fatal_500", "api_error: API Error: 500 scripted failure 500."),
        ("codex/tool_then_500", "We\u2019re currently experiencing high demand"),
        ("claude_code/tools", None),
        ("codex/shell", None),
    ],
)
def test_the_root_span_of_a_session_whose_last_turn_failed_is_an_error(
    scenario: str, failed: str | None, tmp_path: Path
) -> None:
    """As a live run's root fails when its harness raises: status ERROR, `error.type`, and an
    `exception` event with the failure's words at the session's end (the same at every import)."""
    (imported,) = _import_all(scenario, tmp_path)
    records = _records(imported)
    (root,) = [
        r["context"]
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and r["context"][fields.PARENT_SPAN_ID] is None
    ]
    if failed is None:
        assert root[fields.STATUS] == "UNSET"
        assert fields.EVENTS not in root
        return
    assert root[fields.STATUS] == "ERROR"
    assert root[fields.ATTRIBUTES]["error.type"].endswith("SessionFailedError")
    (event,) = root[fields.EVENTS]
    assert event["name"] == "exception"
    assert event["attributes"]["exception.message"].startswith(failed)
    assert event["time_unix_nano"] == root[fields.END]


@pytest.mark.parametrize("scenario", ["claude_code/tools", "codex/shell"])
def test_a_line_with_bytes_that_are_not_utf8_keeps_its_text_and_says_so(
    scenario: str, tmp_path: Path
) -> None:
    """A prompt whose line holds a byte that is not UTF-8 (a file cut or written wrong) was a
    Claude `unknown` entry, the whole line as raw JSON; a Codex one was read without a word.
    Each is the entry it was, its text with U+FFFD for the byte, a transcript.error in the run
    and one warning on stderr for the file saying so."""
    (session,) = find_sessions([SESSIONS / scenario])
    copied = tmp_path / "in" / session.path.name
    copied.parent.mkdir()
    copied.write_bytes(session.path.read_bytes().replace(b"please do", b"pl\xe9ase do"))
    done = _cli("import", str(copied), "--jsonl-dir", str(tmp_path / "runs"), "-j", "1")
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("not UTF-8") == 1
    assert f"{copied}: lines holding bytes that are not UTF-8 are read with U+FFFD" in done.stderr
    (run,) = (tmp_path / "runs").glob("*.jsonl")
    records = list(read_records(run))
    assert check_invariants(records) == []
    entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
    clean = [r["context"] for r in _records(_import(scenario, tmp_path / "clean"))]
    clean_entries = [c for c in clean if c.get("entry_type")]
    assert [e["entry_type"] for e in entries] == [e["entry_type"] for e in clean_entries]
    prompts = [entry_text(e["entry_type"], e["detail"]) for e in entries if e["entry_type"] == "user_message"]
    assert prompts[0].endswith(": pl\ufffdase do the task.")
    errors = [r["context"]["error"] for r in records if r["event"] == TranscriptEvent.ERROR.value]
    assert errors
    assert all(
        error.endswith("1 byte sequence not UTF-8 read as U+FFFD, the rest of it read as written")
        for error in errors
    )
