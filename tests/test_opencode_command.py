"""`opencode run` command lines: the prompt, model and output format `transcript-otel run` reads,
which OpenCode's output does not print (`cli.opencode_command.OpenCodeCommand`)."""

from __future__ import annotations

import pytest

from transcript_otel.cli.opencode_command import OpenCodeCommand
from transcript_otel.mappings.lines import effective_name, select_adapter

PROMPT = "scripted-shell: write two lines to data.txt and count them with the shell."


@pytest.mark.parametrize(
    ("command", "prompt", "model", "provider", "prints_json"),
    [
        (["opencode", "run", "--format", "json", "--thinking", PROMPT], PROMPT, None, None, True),
        (["/x/bin/opencode", "run", "--format=json", PROMPT], PROMPT, None, None, True),
        (["opencode", "run", PROMPT], PROMPT, None, None, False),
        (["opencode", "run", "--format", "default", PROMPT], PROMPT, None, None, False),
        # The words are joined as typed (OpenCode quotes each word with a space itself).
        (["opencode", "run", "fix", "the tests", "--format", "json"], "fix the tests", None, None, True),
        (["opencode", "run", "-m", "anthropic/claude-x", "hi"], "hi", "claude-x", "anthropic", False),
        (["opencode", "run", "--model=openrouter/org/m", "hi"], "hi", "org/m", "openrouter", False),
        (["opencode", "run", "-m", "no-slash", "hi"], "hi", None, None, False),
        (["opencode", "--print-logs", "run", "--agent", "build", "hi"], "hi", None, None, False),
        (["opencode", "run", "-f", "a.txt", "b.txt", "--", "-dash first"], "-dash first", None, None, False),
        (["opencode", "run", "-f", "a.txt", "b.txt"], None, None, None, False),  # files, no message
        (["opencode", "run", "--command", "review", "main"], None, None, None, False),  # its arguments
        (["opencode", "run", "--unknown-option", "x", "hi"], None, None, None, False),  # whose is x?
        (["opencode", "run", "--no-share", "hi"], "hi", None, None, False),  # a negated flag takes no word
        (["npx", "opencode-ai", "run", "--format", "json", "hi"], "hi", None, None, True),
    ],
)  # fmt: skip
def test_the_facts_of_an_opencode_run_command(
    command: list[str], prompt: str | None, model: str | None, provider: str | None, prints_json: bool
) -> None:
    assert OpenCodeCommand.of(command) == OpenCodeCommand(prompt, model, provider, prints_json)


@pytest.mark.parametrize(
    "command",
    [
        ["opencode"],  # the terminal UI
        ["opencode", "export", "ses_1"],
        ["codex", "exec", "run"],
        ["python", "agent.py", "opencode", "run"],  # `opencode` is an argument, not the program
    ],
)
def test_other_commands_are_not_opencode_run(command: list[str]) -> None:
    assert OpenCodeCommand.of(command) is None


def test_json_output_chooses_its_adapter_unless_the_flag_or_variable_says_otherwise() -> None:
    said = OpenCodeCommand.of(["opencode", "run", "--format", "json", "hi"])
    assert said is not None
    assert effective_name(select_adapter(None, {}, said.adapter)) == "opencode-json"
    assert effective_name(select_adapter("plain", {}, said.adapter)) == "plain"
    chosen = select_adapter(None, {"TRANSCRIPT_OTEL_LINE_ADAPTER": "rtf1"}, said.adapter)
    assert effective_name(chosen) == "rtf1"
    default = OpenCodeCommand.of(["opencode", "run", "hi"])
    assert default is not None
    assert default.adapter is None
