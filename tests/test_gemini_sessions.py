"""`transcript-otel import` and `watch` of the Gemini CLI's session files: the real CLI's recorded
sessions (tests/fixtures/sessions/gemini/, docs/gemini-opencode-notes.md) become runs with each
message once, tool calls paired with their results, the thoughts, and the tokens the scripted
model served and the CLI stored; a file growing line by line gives the same entries as its import.
"""

from __future__ import annotations

import json
import shutil
import sys
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import check_invariants, read_records
from transcript_otel.cli import main
from transcript_otel.mappings.gemini_session import GeminiSessionMapper
from transcript_otel.mappings.session_lines import timestamp_ns
from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.sessions.files import SessionKind, find_sessions
from transcript_otel.sessions.formats import Format, format_of, read_head
from transcript_otel.sessions.gemini_home import gemini_sessions_dir
from transcript_otel.sessions.importer import ImportedRun, import_session
from transcript_otel.sessions.recorder import run_id_of
from transcript_otel.sessions.watch import Watcher

from session_fixtures import GEMINI, GEMINI_SCENARIOS, gemini_served, gemini_session_file

CLI = [sys.executable, "-m", "transcript_otel.cli"]
# The chat spans' token attributes, by the name the session's `tokens` give them.
SPAN_USAGE = {
    "input": "gen_ai.usage.input_tokens",
    "output": "gen_ai.usage.output_tokens",
    "cached": "gen_ai.usage.cache_read.input_tokens",
    "thoughts": "gen_ai.usage.reasoning.output_tokens",
}
# The same counts as the Gemini API served them (`usageMetadata`).
SERVED_USAGE = {
    "input": "promptTokenCount",
    "output": "candidatesTokenCount",
    "cached": "cachedContentTokenCount",
    "thoughts": "thoughtsTokenCount",
}


def _import(source: Path, directory: Path) -> ImportedRun:
    (session,) = find_sessions([source])
    assert session.kind is SessionKind.GEMINI
    return import_session(session, directory)


def _records(imported: ImportedRun) -> list[dict[str, Any]]:
    return list(read_records(imported.path))


def _entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]


def _spans(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == TranscriptEvent.SPAN.value]


def _stored_records(path: Path) -> dict[str, dict[str, Any]]:
    """The session's message records, the last per id (as the CLI reads its file back)."""
    records: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if isinstance(record.get("id"), str):
            records[record["id"]] = record
    return records


def _stored_tokens(path: Path) -> dict[str, int]:
    totals = dict.fromkeys(SPAN_USAGE, 0)
    for record in _stored_records(path).values():
        for key in totals:
            totals[key] += record.get("tokens", {}).get(key, 0)
    return totals


def _thoughts_in_output(counts: dict[str, int]) -> dict[str, int]:
    return {**counts, "output": counts["output"] + counts["thoughts"]}


def _chat_tokens(records: list[dict[str, Any]]) -> dict[str, int]:
    chats = [span for span in _spans(records) if span[fields.NAME].startswith("chat")]
    return {
        key: sum(span[fields.ATTRIBUTES].get(name, 0) for span in chats) for key, name in SPAN_USAGE.items()
    }


def _said(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [(e["entry_type"], json.dumps(e["detail"], sort_keys=True)) for e in _entries(records)]


@pytest.mark.parametrize("scenario", GEMINI_SCENARIOS)
def test_a_session_becomes_one_valid_run_with_the_tokens_served_and_stored(
    scenario: str, tmp_path: Path
) -> None:
    path = gemini_session_file(scenario)
    imported = _import(GEMINI / scenario, tmp_path)
    records = _records(imported)
    assert check_invariants(records) == []
    header = json.loads(path.read_text().splitlines()[0])
    assert imported.session_id == header["sessionId"]
    assert imported.run_id == run_id_of(SessionKind.GEMINI, header["sessionId"])
    assert timestamp_ns(records[0]["timestamp"]) == timestamp_ns(header["startTime"])
    assert (records[0]["context"]["adapter"], records[0]["context"]["prompt_name"]) == (
        "gemini_session",
        "gemini",
    )
    served = {
        key: sum(call["usage"].get(name, 0) for call in gemini_served(scenario))
        for key, name in SERVED_USAGE.items()
    }
    # Gemini counts thoughts apart from the answer; the conventions count them within the output.
    assert _chat_tokens(records) == _thoughts_in_output(served) == _thoughts_in_output(_stored_tokens(path))
    chats = [span for span in _spans(records) if span[fields.NAME].startswith("chat")]
    # (error_500: no answer names the model the failed request was for)
    assert {span[fields.NAME] for span in chats} == {
        "chat" if scenario == "error_500" else "chat gemini-3.8-flash"
    }
    assert all(span[fields.ATTRIBUTES]["gen_ai.provider.name"] == "gcp.gemini" for span in chats)
    assert not any("cost" in key for span in _spans(records) for key in span[fields.ATTRIBUTES])


@pytest.mark.parametrize("scenario", GEMINI_SCENARIOS)
def test_each_message_is_one_entry_and_the_hidden_context_none(scenario: str, tmp_path: Path) -> None:
    path = gemini_session_file(scenario)
    entries = _entries(_records(_import(GEMINI / scenario, tmp_path)))
    stored = _stored_records(path)
    prompts = [r for r in stored.values() if r["type"] == "user" and "text" in r["content"][0]]
    answers = [r for r in stored.values() if r["type"] == "gemini"]
    users = [e["detail"]["text"] for e in entries if e["entry_type"] == "user_message"]
    assert users == [r["content"][0]["text"] for r in prompts]
    assert not any("<session_context>" in text for text in users)
    texts = [e["detail"]["text"] for e in entries if e["entry_type"] == "assistant_message"]
    assert texts == [r["content"] for r in answers if r["content"]]
    usage = [e["detail"]["message_id"] for e in entries if e["entry_type"] == "token_usage"]
    assert usage == [r["id"] for r in answers]  # once each, though some are written twice


@pytest.mark.parametrize("scenario", ["shell", "failing_shell"])
def test_a_tool_call_is_one_span_with_its_arguments_and_result(scenario: str, tmp_path: Path) -> None:
    path = gemini_session_file(scenario)
    ((call,),) = [r["toolCalls"] for r in _stored_records(path).values() if "toolCalls" in r]
    records = _records(_import(GEMINI / scenario, tmp_path))
    entries = _entries(records)
    kinds = Counter(e["entry_type"] for e in entries)
    assert (kinds["tool_use"], kinds["tool_result"]) == (1, 1)  # the functionResponse record is no entry
    (use,) = [e["detail"] for e in entries if e["entry_type"] == "tool_use"]
    (result,) = [e["detail"] for e in entries if e["entry_type"] == "tool_result"]
    assert use["tool_use_id"] == result["tool_use_id"] == call["id"]
    assert use["input"] == call["args"]
    output = call["result"][0]["functionResponse"]["response"]["output"]
    assert (result["text"], result["status"], result["display"]) == (output, "success", call["resultDisplay"])
    (span,) = [s for s in _spans(records) if s[fields.NAME] == "execute_tool run_shell_command"]
    assert span[fields.ATTRIBUTES]["gen_ai.tool.call.id"] == call["id"]
    assert span[fields.ATTRIBUTES]["gen_ai.tool.call.result"] == output
    # `cat missing.txt` exits 1: the CLI says "success" (it ran), its output the exit code.
    failed = scenario == "failing_shell"
    assert result["is_error"] is failed
    assert span["status"] == ("ERROR" if failed else "UNSET")


def test_the_thoughts_are_one_thinking_entry(tmp_path: Path) -> None:
    path = gemini_session_file("thinking")
    (answer,) = [r for r in _stored_records(path).values() if r["type"] == "gemini"]
    entries = _entries(_records(_import(GEMINI / "thinking", tmp_path)))
    (thinking,) = [e["detail"] for e in entries if e["entry_type"] == "thinking"]
    # One description per streamed chunk, each trimmed by the CLI: joined as it stored them.
    assert thinking["text"] == "".join(t["description"] for t in answer["thoughts"])
    assert thinking["subjects"] == ["Recalling the capital"]
    assert [e["entry_type"] for e in entries].index("thinking") < [e["entry_type"] for e in entries].index(
        "assistant_message"
    )


def test_a_prompt_the_cli_took_back_after_a_failed_request_is_kept_and_the_run_failed(tmp_path: Path) -> None:
    """error_500: the CLI writes the prompt, then `$set`s the message list back to its hidden
    context alone (no error recorded). The prompt stays, the failure is said, the run failed."""
    records = _records(_import(GEMINI / "error_500", tmp_path))
    entries = _entries(records)
    assert [e["entry_type"] for e in entries] == ["system_event", "user_message", "error"]
    error = entries[-1]["detail"]
    assert error["prompt"] == entries[1]["detail"]["text"] == "scripted-error-500: say hello."
    assert "took this prompt out of the session" in error["text"]
    (root,) = [s for s in _spans(records) if s[fields.NAME] == "invoke_agent gemini"]
    assert root["status"] == "ERROR"


def test_damaged_lines_are_unknown_entries_and_the_rest_is_read(tmp_path: Path) -> None:
    lines = gemini_session_file("shell").read_bytes().splitlines(keepends=True)
    damaged = [
        *lines[:3],
        b'{"id": "cut-off", "type": "gem\n',
        b"[1, 2]\n",
        b"\xff\xfe not text\n",
        *lines[3:],
    ]
    target = tmp_path / "home" / "session-damaged.jsonl"
    target.parent.mkdir()
    target.write_bytes(b"".join(damaged))
    whole = _entries(_records(_import(GEMINI / "shell", tmp_path / "whole")))
    with pytest.warns(TranscriptReadWarning, match="not UTF-8"):
        records = _records(_import(target, tmp_path / "damaged"))
    entries = _entries(records)
    errors = [r["context"] for r in records if r["event"] == TranscriptEvent.ERROR.value]
    assert len(errors) == 1
    unknown = [e for e in entries if e["entry_type"] == "unknown"]
    assert len(unknown) == 3
    assert all("parse_error" in e["detail"] for e in unknown)
    kept = [(e["entry_type"], e["detail"]) for e in entries if e["entry_type"] != "unknown"]
    assert kept == [(e["entry_type"], e["detail"]) for e in whole]


def test_a_gemini_session_is_told_by_its_header_and_imported_when_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = gemini_session_file("plain")
    assert format_of(*read_head(path)) is Format.GEMINI
    copy = tmp_path / "anything.jsonl"
    shutil.copy(path, copy)
    assert main(["import", "--jobs", "1", "--jsonl-dir", str(tmp_path / "runs"), str(copy)]) == 0
    assert "(4 entries)" in capsys.readouterr().out


@pytest.mark.parametrize("variable", ["HOME", "GEMINI_CLI_HOME"])
def test_import_gemini_reads_every_session_of_the_cli_home(
    variable: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The CLI's home is `GEMINI_CLI_HOME` where set, else HOME (its bundle's `homedir()`)."""
    home = tmp_path / "home"
    for scenario in GEMINI_SCENARIOS:
        shutil.copytree(GEMINI / scenario / "home", home, dirs_exist_ok=True)
    monkeypatch.delenv("GEMINI_CLI_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "elsewhere"))
    monkeypatch.setenv(variable, str(home))
    assert gemini_sessions_dir() == home / ".gemini" / "tmp"
    runs = tmp_path / "runs"
    assert main(["import", "--gemini", "--jobs", "1", "--jsonl-dir", str(runs)]) == 0
    assert len(list(runs.glob("*_gemini_*.jsonl"))) == len(GEMINI_SCENARIOS)


def _mirror(directory: Path) -> list[dict[str, Any]]:
    runs = [records for path in directory.glob("*.jsonl") if (records := list(read_records(path)))]
    return [record for run in sorted(runs, key=lambda run: run[0]["timestamp"]) for record in run]


def _entry_count(directory: Path) -> int:
    return len(_entries(_mirror(directory))) if directory.exists() else 0


@pytest.mark.parametrize("scenario", GEMINI_SCENARIOS)
def test_a_session_written_line_by_line_is_watched_as_its_import_gives_it(
    scenario: str, tmp_path: Path, polling_watcher: Callable[[], Watcher]
) -> None:
    source = gemini_session_file(scenario)
    (tmp_path / "home").mkdir()
    watcher = polling_watcher()
    target = tmp_path / "home" / ".gemini" / "tmp" / "work" / "chats" / source.name
    target.parent.mkdir(parents=True)
    runs = tmp_path / "runs"
    seen: set[str] = set()
    for line in source.read_bytes().splitlines(keepends=True):
        before = _entry_count(runs)
        with target.open("ab") as out:
            out.write(line)
        watcher.poll_once()  # (which writes what it read before it returns)
        added = [e["entry_type"] for e in _entries(_mirror(runs))[before:]]
        record = json.loads(line)
        if record.get("id") in seen and "toolCalls" in record:
            # The model's message written again once its tool ran: only the call is new.
            assert added == ["tool_use", "tool_result"]
        seen.add(record.get("id"))
    watcher.close()
    records = _mirror(runs)
    assert [r["event"] for r in records].count(TranscriptEvent.START.value) == 1
    assert _said(records) == _said(_records(_import(GEMINI / scenario, tmp_path / "imported")))


def test_a_watch_restarted_between_a_message_and_its_rewrite_gives_no_entry_twice(
    tmp_path: Path, polling_watcher: Callable[[], Watcher]
) -> None:
    source = gemini_session_file("shell")
    lines = source.read_bytes().splitlines(keepends=True)
    rewrite = next(i for i, line in enumerate(lines) if b'"toolCalls"' in line)
    target = tmp_path / "home" / "chats" / source.name
    target.parent.mkdir(parents=True)
    for part in (lines[:rewrite], lines[rewrite:]):
        watcher = polling_watcher()
        with target.open("ab") as out:
            out.write(b"".join(part))
        watcher.poll_once()
        watcher.close()
    records = _mirror(tmp_path / "runs")
    starts = [r for r in records if r["event"] == TranscriptEvent.START.value]
    assert len(starts) == 2  # a run each
    header = json.loads(lines[0])
    assert {start["context"]["session_id"] for start in starts} == {header["sessionId"]}
    assert _said(records) == _said(_records(_import(GEMINI / "shell", tmp_path / "imported")))


@pytest.mark.parametrize(
    "counted",
    [
        {},
        {"given": "x", "listed": [], "unanswered": [], "results": []},
        {"given": [["m", "x"]], "listed": []},
    ],
)
def test_a_mapper_goes_on_only_from_what_a_mapper_counted(counted: dict[str, Any]) -> None:
    """What a watch's state kept of a session's mapping, damaged: not gone on from (the next run
    maps the lines after it afresh)."""
    mapper = GeminiSessionMapper()
    assert mapper.go_on(counted) is False
    assert mapper.counted() == GeminiSessionMapper().counted()
    lines = gemini_session_file("shell").read_bytes().splitlines()
    for line in lines[:5]:
        mapper.line(line)
    going_on = GeminiSessionMapper()
    assert going_on.go_on(json.loads(json.dumps(mapper.counted()))) is True
    rewrite = next(line for line in lines if b'"toolCalls"' in line)
    assert [entry.entry_type for entry in going_on.line(rewrite).entries] == ["tool_use", "tool_result"]
