"""`codex exec` command lines: the prompt and model `transcript-otel run` records, which the
`--json` stream does not print (`mappings.codex_exec.ExecCommand`)."""

from __future__ import annotations

from pathlib import Path

import pytest

from transcript_otel.mappings.codex_exec import ExecCommand


@pytest.fixture
def codex_home(tmp_path: Path) -> dict[str, str]:
    home = tmp_path / "codex-home"
    home.mkdir()
    (home / "config.toml").write_text(
        'model = "gpt-5.5"\nmodel_provider = "scripted"\n\n[profiles.fast]\nmodel = "gpt-5.5-mini"\n'
    )
    return {"CODEX_HOME": str(home), "HOME": str(tmp_path)}


@pytest.mark.parametrize(
    ("command", "prompt", "model"),
    [
        (["codex", "exec", "--json", "fix the tests"], "fix the tests", "gpt-5.5"),
        (["/opt/bin/codex", "e", "--json", "--skip-git-repo-check", "hi"], "hi", "gpt-5.5"),
        (["codex", "exec", "--json", "-m", "o3", "hi"], "hi", "o3"),
        (["codex", "exec", "--json", "--model=o4-mini", "hi"], "hi", "o4-mini"),
        (["codex", "exec", "--json", "-c", 'model="gpt-x"', "hi"], "hi", "gpt-x"),
        (["codex", "exec", "--json", "-c", "model=gpt-bare", "hi"], "hi", "gpt-bare"),
        (["codex", "-c", "model=gpt-global", "exec", "--json", "hi"], "hi", "gpt-global"),
        (["codex", "exec", "--json", "-p", "fast", "hi"], "hi", "gpt-5.5-mini"),
        (["codex", "exec", "--json", "-c", "sandbox_mode=read-only", "-C", "/w", "hi"], "hi", "gpt-5.5"),
        (["codex", "exec", "--json", "-"], None, "gpt-5.5"),  # the prompt comes on stdin
        (["codex", "exec", "--json"], None, "gpt-5.5"),
        (["npx", "codex", "exec", "--json", "--", "-starts with a dash"], "-starts with a dash", "gpt-5.5"),
    ],
)
def test_the_prompt_and_model_of_a_codex_exec_command(
    codex_home: dict[str, str], command: list[str], prompt: str | None, model: str
) -> None:
    assert ExecCommand.of(command, codex_home) == ExecCommand(prompt, model)


@pytest.mark.parametrize(
    ("command", "prompt", "resumes"),
    [
        (["codex", "exec", "--json", "resume", "0199a5c1", "and now?"], "and now?", True),
        (["codex", "exec", "resume", "--last", "and now?"], "and now?", True),
        (["codex", "exec", "resume", "--last", "--all", "and now?"], "and now?", True),
        (["codex", "exec", "--json", "resume", "--last"], None, True),
        (["codex", "exec", "--json", "and now?"], "and now?", False),
    ],
)
def test_a_codex_exec_command_that_resumes_a_thread(
    codex_home: dict[str, str], command: list[str], prompt: str | None, resumes: bool
) -> None:
    assert ExecCommand.of(command, codex_home) == ExecCommand(prompt, "gpt-5.5", resumes)


@pytest.mark.parametrize(
    "command",
    [
        ["claude", "-p", "hi"],
        ["codex", "login"],
        ["codex"],  # the interactive CLI
        ["python", "agent.py", "codex", "exec"],  # `codex` is an argument, not the program
    ],
)
def test_other_commands_are_not_codex_exec(codex_home: dict[str, str], command: list[str]) -> None:
    assert ExecCommand.of(command, codex_home) is None


def test_without_a_readable_config_the_model_is_unknown(tmp_path: Path) -> None:
    (tmp_path / "config.toml").write_text("model = [unclosed\n")
    assert ExecCommand.of(["codex", "exec", "hi"], {"CODEX_HOME": str(tmp_path)}) == ExecCommand("hi", None)
    assert ExecCommand.of(["codex", "exec", "hi"], {"HOME": str(tmp_path / "nowhere")}) == ExecCommand(
        "hi", None
    )
