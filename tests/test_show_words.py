"""`show` and `summary` say in words what the recorded sessions of the real CLIs did (issue 47
item 9): each session log is imported as `transcript-otel import` does, then read through
the CLI. No entry shows its detail's JSON where a person expects words."""

from __future__ import annotations

from pathlib import Path

import pytest

from transcript_otel.cli import main
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session

from session_fixtures import CLAUDE, CODEX, codex_threads

WINK_ROLLOUTS = Path(__file__).resolve().parent / "fixtures" / "codex" / "wink-rollouts"
Capture = pytest.CaptureFixture[str]


def _imported(path: Path, directory: Path) -> Path:
    (session,) = find_sessions([path])
    return import_session(session, directory).path


def _cli(capsys: Capture, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


def shown(capsys: Capture, path: Path, directory: Path) -> str:
    return _cli(capsys, "show", "--no-pager", "--full", str(_imported(path, directory)))


def block(text: str, header_end: str) -> str:
    """The body of the first entry whose header line ends with `header_end`."""
    lines = text.split("\n")
    at = next(index for index, line in enumerate(lines) if line.endswith(header_end))
    body = lines[at + 1 : lines.index("", at + 1)]
    return "\n".join(body)


def test_a_claude_session_logs_usage_line_is_its_totals_and_cost(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CLAUDE / "tools", tmp_path)
    assert block(text, "⚙️ USAGE") == "session total: 4100 in, 75 out, 800 cached · $0.01566"
    assert "sdk_entry" not in text
    failed = shown(capsys, CLAUDE / "fatal_500", tmp_path / "failed")
    assert block(failed, "⚙️ USAGE") == "session total: no tokens, no cost"


def test_a_logged_api_retry_is_its_attempt_delay_and_cause(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CLAUDE / "fatal_500", tmp_path)
    assert block(text, "⚙️ SYSTEM") == "api retry: attempt 1 of 1 · in 521 ms · after 500 scripted failure 500"
    assert "parentUuid" not in text


def test_claude_terminal_session_events_are_words(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CLAUDE / "interactive_two_prompts", tmp_path)
    assert "permission mode: auto\n" in text
    assert "turn duration: 173 ms · 13 messages\n" in text
    assert "turn duration: 64 ms · 16 messages\n" in text
    assert '{"' not in text


def test_codex_session_events_are_words(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CODEX / "interactive_subagent", tmp_path)
    assert "thread started: Codex 0.171.0 (codex-tui) · cwd /scratch/work · provider scripted\n" in text
    assert "\nturn started\n" in text
    assert "turn_id" not in text
    root, child = codex_threads("interactive_subagent")
    helper = f"thread {child}"
    assert f"subagent started: /root/helper (gpt-5.5) · {helper}\n" in text
    assert f"subagent completed: /root/helper · {helper}\n" in text
    assert f"subagent /root/helper of thread {root}" in text
    interrupted = shown(capsys, CODEX / "interactive_interrupted", tmp_path / "interrupted")
    assert "turn aborted: interrupted\n" in interrupted


def test_a_result_without_output_text_says_what_the_call_did(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CODEX / "interactive_subagent", tmp_path)
    assert block(text, "🔧 wait_agent → result") == "wait completed"


def test_search_results_are_what_was_found_or_searched(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CODEX / "tour", tmp_path)
    assert block(text, "🔧 tool_search → result") == "found: mcp__docs (lookup)"
    assert block(text, "🔧 codex:web_search → result") == "searched: counting lines in a file"
    assert "tool_use_id" not in text


def test_a_patch_is_shown_as_the_patch(capsys: Capture, tmp_path: Path) -> None:
    text = shown(capsys, CODEX / "apply_patch", tmp_path)
    patch = "*** Begin Patch\n*** Add File: notes.txt\n+written by codex\n*** End Patch\n"
    assert block(text, "🔧 codex:file_change") == patch.rstrip("\n")
    assert "\\n" not in text


def test_a_codex_session_stopped_mid_turn_does_not_say_completed(capsys: Capture, tmp_path: Path) -> None:
    """What a Codex killed during its second turn leaves: the recorded rollout up to that
    turn's prompt (its `task_complete` never written)."""
    (rollout,) = (CODEX / "interactive_two_prompts").rglob("rollout-*.jsonl")
    lines = rollout.read_text(encoding="utf-8").splitlines(keepends=True)
    prompt = max(index for index, line in enumerate(lines) if '"UserMessage"' in line)
    cut = tmp_path / "cut" / rollout.name
    cut.parent.mkdir()
    cut.write_text("".join(lines[: prompt + 1]), encoding="utf-8")
    run = _imported(cut, tmp_path / "runs")
    assert _cli(capsys, "summary", str(run)).startswith("codex · codex_session · interrupted\n")
    assert "── stopped mid-turn · 8 entries" in _cli(capsys, "show", "--no-pager", str(run))
    whole = _imported(rollout, tmp_path / "whole")
    assert _cli(capsys, "summary", str(whole)).startswith("codex · codex_session · completed\n")
    assert "── stopped · 11 entries" in _cli(capsys, "show", "--no-pager", str(whole))


def test_a_codex_turn_aborted_then_answered_is_completed(capsys: Capture, tmp_path: Path) -> None:
    run = _imported(CODEX / "interactive_interrupted", tmp_path)
    assert _cli(capsys, "summary", str(run)).startswith("codex · codex_session · completed\n")


def test_a_bridged_wink_tool_is_a_call_and_its_result(capsys: Capture, tmp_path: Path) -> None:
    (rollout,) = WINK_ROLLOUTS.glob("rollout-*.jsonl")
    text = shown(capsys, rollout, tmp_path)
    assert "UNKNOWN" not in text
    assert block(text, "🔧 echo") == '{"text":"hi"}'
    assert block(text, "🔧 echo → result") == "hi"
