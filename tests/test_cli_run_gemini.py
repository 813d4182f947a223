"""`transcript-otel run -- gemini ...` on what the real Gemini CLI 0.61.0 printed: a `gemini` on
disk replays a recorded run (`tests/fixtures/line_streams/gemini/`: its stdout byte for byte, its
stderr, its exit status), so the adapter, the command line's facts and the span tree are checked
against every output mode without the CLI (`test_real_gemini.py` runs the real one)."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import read_records
from transcript_otel.model.invariants import check_invariants

from loopback import subprocess_env

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

from captured_run import CapturedRun, Recorded  # noqa: E402
from gemini_cli import (  # noqa: E402
    FIXTURES,
    MAIN_MODEL,
    SHELL_ENTRY_TYPES,
    SPAN_USAGE,
    meta,
    printed_totals,
    served_usage,
    span_usage,
)

EXTENSIONS = {"stream-json": "jsonl", "json": "json", "text": "txt"}
PROMPT_NAME = "gemini-run"
WRAPPER = [sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", PROMPT_NAME]


def replay(
    scenario: str,
    mode: str,
    tmp_path: Path,
    command: list[str] | None = None,
    program: str = "gemini",
    options: tuple[str, ...] = (),
) -> CapturedRun:
    """Run a `gemini` (or `program`) that replays the recorded run under `transcript-otel run
    [options]`, with its recorded arguments (or `command`)."""
    recorded = meta(scenario, mode)
    (tmp_path / "stderr.txt").write_text(recorded["stderr"])
    stdout = FIXTURES / f"{scenario}.{mode}.{EXTENSIONS[mode]}"
    gemini = tmp_path / "bin" / program
    gemini.parent.mkdir()
    gemini.write_text(
        f"#!/bin/sh\ncat {shlex.quote(str(stdout))}\ncat {shlex.quote(str(tmp_path / 'stderr.txt'))} >&2\n"
        f"exit {recorded['exit_code']}\n"
    )
    gemini.chmod(0o755)
    arguments = [str(gemini), *recorded["arguments"]] if command is None else [str(gemini), *command]
    mirror = tmp_path / "runs"
    completed = subprocess.run(
        [*WRAPPER, *options, "--", *arguments],
        capture_output=True,
        env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(mirror)),
        timeout=120,
        check=False,
    )
    assert completed.stdout == stdout.read_bytes()  # passed through unchanged
    assert completed.stderr.decode().startswith(recorded["stderr"])
    assert completed.returncode == recorded["exit_code"]
    output = Recorded(
        completed.stdout.decode(), completed.stderr.decode(), completed.returncode, recorded["served"], ""
    )
    run = CapturedRun.of(scenario, output, mirrored(mirror), prompt_name=PROMPT_NAME)
    assert check_invariants(run.records) == []
    return run


def mirrored(mirror: Path) -> list[dict[str, Any]]:
    """The records of the one run the mirror holds."""
    (path,) = mirror.glob("*.jsonl")
    return list(read_records(path))


def test_stream_json_shell_makes_the_chat_and_tool_spans_with_the_main_models_tokens(tmp_path: Path) -> None:
    run = replay("shell", "stream-json", tmp_path)
    assert [e["entry_type"] for e in run.entries] == SHELL_ENTRY_TYPES
    assert run.entries[1]["detail"]["text"] == meta("shell", "stream-json")["arguments"][1]  # once
    root = run.root
    assert root["attributes"]["gen_ai.provider.name"] == "gcp.gemini"
    assert root["attributes"]["gen_ai.conversation.id"] == run.messages[0]["session_id"]
    assert root["attributes"]["transcript.line_adapter"] == "gemini-stream-json"
    (chat,) = run.chat_spans()
    assert chat["name"] == f"chat {MAIN_MODEL}"
    assert chat["attributes"]["gen_ai.request.model"] == MAIN_MODEL
    assert chat["attributes"]["gen_ai.response.model"] == MAIN_MODEL
    assert chat["attributes"]["gen_ai.provider.name"] == "gcp.gemini"
    assert span_usage(chat) == served_usage(run.served, MAIN_MODEL)
    # The run's totals are what the CLI printed: the router's call included, counted once.
    assert span_usage(root, "transcript.usage.") == printed_totals(run.served)
    (tool,) = run.named("execute_tool")
    (call,) = [m for m in run.messages if m["type"] == "tool_use"]
    assert tool["name"] == "execute_tool run_shell_command"
    assert tool["attributes"]["gen_ai.tool.call.id"] == call["tool_id"]
    assert run.parent(tool)["span_id"] == chat["span_id"]
    assert tool["status"] == "UNSET"


def test_stream_json_failure_keeps_the_exit_status_and_fails_the_turn(tmp_path: Path) -> None:
    run = replay("error_500", "stream-json", tmp_path)
    errors = [e["detail"] for e in run.entries if e["entry_type"] == "error"]
    (result,) = [m for m in run.messages if m["type"] == "result"]
    assert [detail.get("event") for detail in errors] == [result, None]
    assert errors[1]["exception"] == {"type": "CommandFailed", "message": "exited with status 244"}
    (chat,) = run.chat_spans()
    assert chat["name"] == f"chat {MAIN_MODEL}"
    assert chat["status"] == "ERROR"
    assert span_usage(chat) == dict.fromkeys(SPAN_USAGE, 0)  # the main model answered nothing
    assert span_usage(run.root, "transcript.usage.") == printed_totals(run.served)  # the router did
    assert run.root["status"] == "ERROR"


@pytest.mark.parametrize("scenario", ["shell", "thinking"])
def test_json_records_the_prompt_from_the_command_line_and_the_last_answer(
    scenario: str, tmp_path: Path
) -> None:
    run = replay(scenario, "json", tmp_path)
    document = json.loads(run.stdout)
    prompt = meta(scenario, "json")["arguments"][1]
    assert [(e["entry_type"], e["detail"].get("text")) for e in run.entries] == [
        ("user_message", prompt),
        ("assistant_message", document["response"]),
        ("token_usage", None),
    ]
    assert run.root["attributes"]["gen_ai.conversation.id"] == document["session_id"]
    assert run.root["attributes"]["transcript.line_adapter"] == "gemini-json"
    (chat,) = run.chat_spans()
    assert chat["name"] == f"chat {MAIN_MODEL}"
    assert span_usage(chat) == served_usage(run.served, MAIN_MODEL)
    assert span_usage(run.root, "transcript.usage.") == printed_totals(run.served)
    assert run.named("execute_tool") == []  # json prints no tool call


def test_json_failure_prints_nothing_and_the_run_fails_with_the_exit_status(tmp_path: Path) -> None:
    run = replay("error_500", "json", tmp_path)
    assert run.stdout == ""
    assert [(e["entry_type"], e["detail"].get("text")) for e in run.entries] == [
        ("user_message", "scripted-error-500: say hello."),
        ("error", None),
    ]
    assert run.entries[1]["detail"]["exception"]["message"] == "exited with status 244"
    assert run.root["status"] == "ERROR"
    # The CLI's own error object went to its stderr, passed through untouched.
    assert '"code": 500' in run.stderr


def test_text_records_the_prompt_and_the_lines(tmp_path: Path) -> None:
    run = replay("shell", "text", tmp_path)
    assert [(e["entry_type"], e["detail"]["text"]) for e in run.entries] == [
        ("user_message", meta("shell", "text")["arguments"][1]),
        ("assistant_message", "I will count the lines."),
        ("assistant_message", "data.txt has 2 lines: one and two."),
    ]
    assert run.root["attributes"]["gen_ai.provider.name"] == "gcp.gemini"


def test_stream_json_alone_tells_its_format(tmp_path: Path) -> None:
    """Not a `gemini` command line (a script that runs it): the output's first line tells."""
    run = replay("plain", "stream-json", tmp_path, command=[], program="agent.sh")
    assert run.root["attributes"]["transcript.line_adapter"] == "gemini-stream-json"
    assert run.root["attributes"]["gen_ai.provider.name"] == "gcp.gemini"
    counted = Counter(e["entry_type"] for e in run.entries)
    assert counted["token_usage"] == 1
    assert counted["unknown"] == 0


@pytest.mark.parametrize(
    ("options", "adapter"), [((), "rtf1"), (("--adapter", "gemini-json"), "gemini-json")]
)
def test_json_alone_is_read_as_text_unless_the_adapter_is_named(
    options: tuple[str, ...], adapter: str, tmp_path: Path
) -> None:
    """A `{` alone opens any JSON: without a `gemini` command line, json is Gemini's only when
    `--adapter` says so (no provider is guessed)."""
    run = replay("plain", "json", tmp_path, command=[], program="agent.sh", options=options)
    assert run.root["attributes"]["transcript.line_adapter"] == adapter
    counted = Counter(e["entry_type"] for e in run.entries)
    if adapter == "rtf1":
        assert "gen_ai.provider.name" not in run.root["attributes"]
        assert counted == {"assistant_message": len(run.stdout.splitlines())}
    else:
        assert run.root["attributes"]["gen_ai.provider.name"] == "gcp.gemini"
        assert counted == {"assistant_message": 1, "token_usage": 1}


# A key the model streams across chunks (made up, as in test_cli_run.py).
PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQy\n"
    "NTUxOQAAACBmYWtlIGtleSBmb3IgdGVzdHMgb25seSBub3QgcmVhbCBhdCBhbGwAAAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def test_a_private_key_streamed_across_chunks_reaches_no_sink(tmp_path: Path) -> None:
    """The recorded `plain` stream with its answer's chunk replaced by the key, cut in three:
    joined, the key is redacted whole, and no chunk's line is kept as `raw`."""
    recorded = [json.loads(line) for line in (FIXTURES / "plain.stream-json.jsonl").read_text().splitlines()]
    (answer,) = [event for event in recorded if event.get("delta")]
    at = recorded.index(answer)
    pieces = [PRIVATE_KEY[:40], PRIVATE_KEY[40:100], PRIVATE_KEY[100:]]
    recorded[at : at + 1] = [{**answer, "content": piece} for piece in pieces]
    stream = tmp_path / "stream.jsonl"
    stream.write_text("".join(json.dumps(event) + "\n" for event in recorded))
    mirror = tmp_path / "runs"
    completed = subprocess.run(
        [*WRAPPER, "--", "cat", str(stream)],
        capture_output=True,
        env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(mirror)),
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0
    (path,) = mirror.glob("*.jsonl")
    for line in PRIVATE_KEY.splitlines()[1:3]:
        assert line[:24] not in path.read_text()
    run = CapturedRun.of("plain", Recorded("", "", 0, [], ""), mirrored(mirror), prompt_name=PROMPT_NAME)
    (said,) = [e["detail"] for e in run.entries if e["entry_type"] == "assistant_message"]
    assert said["text"].startswith("[REDACTED:private_key:")
    assert said["deltas"] == 3
