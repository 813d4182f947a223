"""The real OpenCode CLI (npm `opencode-ai`, pinned in the Makefile) against the scripted chat
completions API, under `transcript-otel run`.

`opencode run --format json --thinking -m scripted/scripted-chat PROMPT` runs offline
(`opencode_offline.py`: throwaway HOME and XDG folders, `PWD`, the config folder's guard
files) for the scenarios `shell` (a command the model runs) and `thinking` (reasoning), once
each for the whole module. The tests compare the JSONL mirror (entries and spans) with what the
scripted model served and what OpenCode stored in its own database (`opencode.db`, read-only).
`error_500` is never run here: OpenCode retries it for about 75 s (its fixture covers it).

Without the CLI (`make agents`) these tests skip, or fail where the Makefile requires them
(`TRANSCRIPT_OTEL_REQUIRE_REAL`, tests/requirements_switch.py).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from transcript_otel.model.invariants import check_invariants
from transcript_otel.reading.digest import RunDigest

from requirements_switch import require

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import opencode_cli  # noqa: E402
from captured_run import CapturedRun, record_mirrored  # noqa: E402
from chat_scenarios import prompt_for  # noqa: E402
from opencode_cli import record, stored  # noqa: E402
from opencode_offline import xdg  # noqa: E402

PROMPT_NAME = "opencode-run"
WRAPPER = (sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", PROMPT_NAME, "--")
LIVE = ("shell", "thinking")
# The served usage (chat completions) → the chat spans' attributes.
SPAN_USAGE = {
    "prompt_tokens": "gen_ai.usage.input_tokens",
    "cached_tokens": "gen_ai.usage.cache_read.input_tokens",
    "completion_tokens": "gen_ai.usage.output_tokens",
    "reasoning_tokens": "gen_ai.usage.reasoning.output_tokens",
}
DIGEST_USAGE = {
    "prompt_tokens": "input",
    "cached_tokens": "cached_input",
    "completion_tokens": "output",
    "reasoning_tokens": "reasoning_output",
}


@dataclass
class OpenCodeRun(CapturedRun):
    """One live run: the mirror, what the model served, what OpenCode stored."""

    tables: dict[str, list[dict[str, Any]]] = field(default_factory=dict)

    @property
    def session(self) -> dict[str, Any]:
        (session,) = self.tables["session"]
        return session

    def parts(self, kind: str) -> list[dict[str, Any]]:
        return [row["data"] for row in self.tables["part"] if row["data"]["type"] == kind]

    def of_type(self, entry_type: str) -> list[dict[str, Any]]:
        return [entry for entry in self.entries if entry["entry_type"] == entry_type]

    def served_steps(self) -> list[dict[str, int]]:
        """Each answered model step's usage (the title request apart), flat."""
        steps = []
        for call in self.served:
            if call["kind"] == "turn" and call["status"] == 200:
                usage = call["usage"]
                steps.append(
                    {
                        "prompt_tokens": usage["prompt_tokens"],
                        "cached_tokens": usage["prompt_tokens_details"]["cached_tokens"],
                        "completion_tokens": usage["completion_tokens"],
                        "reasoning_tokens": usage["completion_tokens_details"]["reasoning_tokens"],
                    }
                )
        return steps


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, OpenCodeRun]:
    """Each live scenario once under `transcript-otel run`, run on first use."""
    require(
        opencode_cli.cli_path(),
        f"the real OpenCode CLI is not installed (`make agents`, or {opencode_cli.CLI_VARIABLE})",
    )

    class Runs(dict[str, OpenCodeRun]):
        def __missing__(self, scenario: str) -> OpenCodeRun:
            scratch = tmp_path_factory.mktemp(scenario)
            recorded, records = record_mirrored(record, scenario, scratch, WRAPPER)
            run = OpenCodeRun.of(
                scenario, recorded, records, prompt_name=PROMPT_NAME, tables=stored(scratch / "home")
            )
            self[scenario] = run
            return run

    return Runs()


@pytest.mark.parametrize("scenario", LIVE)
def test_the_run_passes_opencodes_output_through_and_records_a_valid_transcript(
    runs: dict[str, OpenCodeRun], scenario: str
) -> None:
    run = runs[scenario]
    assert run.exit_code == 0, run.stderr[-2000:]
    assert run.stderr == ""  # `--format json` prints nothing else, and the run added nothing
    assert check_invariants(run.records) == []
    assert "unknown" not in {entry["entry_type"] for entry in run.entries}
    # Every line OpenCode printed is on stdout as printed, and the raw of the entries it gave.
    lines = run.stdout.splitlines(keepends=True)
    assert [entry["raw"] for entry in run.entries if entry.get("raw")] == lines
    assert [message["type"] for message in run.messages] == [
        json.loads(line)["type"]
        for line in (TESTS / "fixtures" / "line_streams" / "opencode" / f"{scenario}.json-thinking.jsonl")
        .read_text()
        .splitlines()
    ]
    # Each entry is timed as its line says it was printed.
    printed = {line: datetime.fromtimestamp(json.loads(line)["timestamp"] / 1000, UTC) for line in lines}
    for entry in run.entries:
        if entry.get("raw") in printed:
            assert datetime.fromisoformat(entry["timestamp"]) == printed[entry["raw"]]
    # The prompt, which OpenCode never prints, comes from the command line: as OpenCode stored
    # it, but for the double quotes it puts around a message with spaces.
    first = run.entries[0]
    assert (first["entry_type"], first["detail"]) == ("user_message", {"text": prompt_for(scenario)})
    (prompt,) = [part["text"] for part in run.parts("text") if part["text"].startswith('"')]
    assert prompt == f'"{prompt_for(scenario)}"'
    assert run.root["attributes"]["gen_ai.conversation.id"] == run.session["id"]
    assert run.root["attributes"]["transcript.line_adapter"] == "opencode-json"


def test_a_shell_command_is_a_paired_call_and_result_under_its_step(runs: dict[str, OpenCodeRun]) -> None:
    run = runs["shell"]
    (call,), (result,) = run.of_type("tool_use"), run.of_type("tool_result")
    (tool,) = run.parts("tool")
    assert (
        call["detail"]["tool_use_id"] == result["detail"]["tool_use_id"] == tool["callID"] == "call_shell_1"
    )
    assert call["detail"]["input"] == tool["state"]["input"]
    assert result["detail"]["output"] == tool["state"]["output"] == "2 data.txt\n"
    assert result["detail"]["is_error"] is False
    (span,) = run.named("execute_tool")
    assert span["name"] == "execute_tool bash"
    assert span["attributes"]["gen_ai.tool.call.id"] == "call_shell_1"
    assert span["status"] == "UNSET"
    assert run.parent(span) == run.chat_spans()[0]
    # The final answer, after the command's result, is the last text OpenCode stored.
    answers = [entry["detail"]["text"] for entry in run.of_type("assistant_message")]
    assert answers == [part["text"] for part in run.parts("text")][1:]
    assert answers[-1] == "data.txt has 2 lines: one and two."


def test_reasoning_printed_with_thinking_is_a_thinking_entry(runs: dict[str, OpenCodeRun]) -> None:
    run = runs["thinking"]
    (thinking,) = run.of_type("thinking")
    (reasoning,) = run.parts("reasoning")
    assert thinking["detail"]["text"] == reasoning["text"]
    assert [entry["detail"]["text"] for entry in run.of_type("assistant_message")] == ["Paris."]


@pytest.mark.parametrize("scenario", LIVE)
def test_each_step_is_a_chat_span_with_the_tokens_served_and_the_cost_opencode_stored(
    runs: dict[str, OpenCodeRun], scenario: str
) -> None:
    run = runs[scenario]
    steps = run.served_steps()
    chats = run.chat_spans()
    assert len(chats) == len(steps) == len(run.of_type("token_usage"))
    messages = [row["data"] for row in run.tables["message"] if row["data"]["role"] == "assistant"]
    for chat, served, message in zip(chats, steps, messages, strict=True):
        attributes = chat["attributes"]
        assert chat["name"] == "chat scripted-chat"
        assert attributes["gen_ai.request.model"] == "scripted-chat"
        assert attributes["gen_ai.provider.name"] == "scripted"
        assert {name: attributes[key] for name, key in SPAN_USAGE.items()} == served
        assert attributes["gen_ai.usage.cost"] == message["cost"]
    totals = {name: sum(step[name] for step in steps) for name in SPAN_USAGE}
    digest = RunDigest.of(run.records)
    assert {name: digest.tokens.get(key, 0) for name, key in DIGEST_USAGE.items()} == totals
    assert digest.cost_usd == run.session["cost"]
    assert run.root["attributes"]["transcript.usage.cost_usd"] == run.session["cost"]
    # OpenCode's own counts leave the cache's tokens out of the input and the reasoning out of
    # the output: what it stored is what was recorded, less those.
    session = run.session
    assert session["tokens_input"] == totals["prompt_tokens"] - totals["cached_tokens"]
    assert session["tokens_cache_read"] == totals["cached_tokens"]
    assert session["tokens_output"] == totals["completion_tokens"] - totals["reasoning_tokens"]
    assert session["tokens_reasoning"] == totals["reasoning_tokens"]


def test_the_cli_and_the_fixtures_are_the_pinned_version(tmp_path: Path) -> None:
    makefile = (TESTS.parent / "Makefile").read_text()
    assert f"\nOPENCODE_VERSION := {opencode_cli.OPENCODE_VERSION}\n" in makefile
    fixtures = (TESTS / "fixtures" / "line_streams" / "opencode").glob("*.meta.json")
    assert {json.loads(path.read_text())["version"] for path in fixtures} == {opencode_cli.OPENCODE_VERSION}
    cli = require(opencode_cli.cli_path(), "the real OpenCode CLI is not installed (`make agents`)")
    # A throwaway HOME: OpenCode writes its folders there even to say its version.
    version = subprocess.run(
        [str(cli), "--version"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        env={**os.environ, "HOME": str(tmp_path), **xdg(tmp_path)},
    )
    assert version.stdout.strip() == opencode_cli.OPENCODE_VERSION
