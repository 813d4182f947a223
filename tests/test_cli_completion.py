"""`transcript-otel completion bash|zsh` (issue 48, item 6): a script generated from the CLI's
parser, loaded by the real shells as README says. bash's completions are asked for as bash asks
them at a TAB (COMP_WORDS, COMP_CWORD); zsh's from a real zsh at a TAB on a pseudo-terminal
(tests/zsh_completions.zsh), having loaded the script both ways README gives."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from loopback import subprocess_env
from requirements_switch import require

CLI = [sys.executable, "-m", "transcript_otel"]
COMMANDS = ["run", "show", "summary", "validate", "list", "bundle", "export", "replay", "import", "watch"]


def _script(shell: str, tmp_path: Path) -> Path:
    done = subprocess.run(
        [*CLI, "completion", shell],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, ""), done.stderr
    script = tmp_path / f"transcript-otel.{shell}"
    script.write_text(done.stdout)
    return script


def _bash_completes(script: Path, *words: str, cwd: Path) -> list[str]:
    """What bash offers at a TAB after `transcript-otel words...` (the last word being completed)."""
    line = (
        f"source {script}; COMP_WORDS=(transcript-otel {' '.join(map(repr, words))}); "
        f"COMP_CWORD={len(words)}; _shtab_transcript_otel; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    done = subprocess.run(
        ["bash", "-c", line], capture_output=True, text=True, cwd=cwd, timeout=60, check=True
    )
    return done.stdout.splitlines()


def test_bash_completes_commands_options_choices_and_files(tmp_path: Path) -> None:
    script = _script("bash", tmp_path)
    (tmp_path / "runs").mkdir()
    (tmp_path / "run-a.jsonl").write_text("")
    assert _bash_completes(script, "", cwd=tmp_path) == [*COMMANDS, "completion"]
    assert _bash_completes(script, "im", cwd=tmp_path) == ["import"]
    assert _bash_completes(script, "show", "--co", cwd=tmp_path) == ["--color"]
    assert sorted(_bash_completes(script, "import", "--js", cwd=tmp_path)) == ["--json", "--jsonl-dir"]
    assert _bash_completes(script, "export", "x", "--format", "", cwd=tmp_path) == [
        "devflow",
        "markdown",
        "html",
        "jsonl",
    ]
    assert _bash_completes(script, "completion", "", cwd=tmp_path) == ["bash", "zsh"]
    assert _bash_completes(script, "show", "run-", cwd=tmp_path) == ["run-a.jsonl"]  # RUN: a file
    assert _bash_completes(script, "list", "--jsonl-dir", "r", cwd=tmp_path) == ["runs"]  # a directory


def test_the_scripts_offer_what_the_parser_has(tmp_path: Path) -> None:
    """Generated, not written by hand: an option added to a command is in both scripts."""
    help_text = subprocess.run(
        [*CLI, "import", "--help"],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
        check=True,
    ).stdout
    options = set(re.findall(r"(?<![\w-])--[a-z][a-z-]+", help_text))
    assert {"--json", "--jobs", "--jsonl-dir", "--endpoint"} <= options
    for shell in ("bash", "zsh"):
        script = _script(shell, tmp_path).read_text()
        assert all(option in script for option in options), shell
        assert all(command in script for command in COMMANDS), shell


def _zsh() -> str:
    return require(shutil.which("zsh"), "zsh is not installed (`make zsh`)")


@pytest.mark.parametrize("how", ["fpath", "eval"])
def test_zsh_loads_the_script_as_readme_says(how: str, tmp_path: Path) -> None:
    """`~/.zfunc/_transcript-otel` on fpath before compinit, or `eval` after it: either way zsh
    completes transcript-otel with the script's function."""
    script = _script("zsh", tmp_path)
    assert script.read_text().startswith("#compdef transcript-otel\n")
    functions = tmp_path / "zfunc"
    functions.mkdir()
    shutil.copy(script, functions / "_transcript-otel")
    setup = {
        "fpath": f"fpath=({functions} $fpath); autoload -Uz compinit && compinit -u -D",
        "eval": f'autoload -Uz compinit && compinit -u -D; eval "$(cat {script})"',
    }[how]
    done = subprocess.run(
        [_zsh(), "-f", "-c", f"{setup}; print -r -- ${{_comps[transcript-otel]}}"],
        capture_output=True,
        text=True,
        env=subprocess_env(HOME=str(tmp_path)),
        timeout=60,
        check=False,
    )
    assert (done.returncode, done.stderr) == (0, "")
    assert done.stdout == {"fpath": "_transcript-otel\n", "eval": "_shtab_transcript_otel\n"}[how]


def test_zsh_script_completes_files_and_directories_where_they_are_asked_for(tmp_path: Path) -> None:
    script = _script("zsh", tmp_path).read_text()
    assert re.search(r'"--jsonl-dir\[[^"]*\]:jsonl_dir:_files -/"', script)  # directories
    assert re.search(r'":a JSONL mirror file[^"]*:_files"', script)  # RUN
    assert '":the shell to complete in:(bash zsh)"' in script  # the shells, as choices


def test_building_the_parser_does_not_load_shtab() -> None:
    """Only `completion` imports it: every other command starts as fast as before."""
    code = "import sys; from transcript_otel.cli import _parser; _parser(); print('shtab' in sys.modules)"
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True
    )
    assert done.stdout == "False\n"


def _zsh_completes(functions: Path, line: str, cwd: Path) -> set[str]:
    """What zsh offers at a TAB after `line`, the script's folder on fpath (a real zsh on a
    pseudo-terminal: tests/zsh_completions.zsh)."""
    helper = Path(__file__).resolve().parent / "zsh_completions.zsh"
    done = subprocess.run(
        [_zsh(), "-f", str(helper), line, str(functions)],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=subprocess_env(HOME=str(cwd)),
        timeout=60,
        check=True,
    )
    return {match.strip() for match in done.stdout.splitlines() if match.strip()}


def test_zsh_completes_commands_options_choices_and_files(tmp_path: Path) -> None:
    functions = tmp_path / "zfunc"
    functions.mkdir()
    shutil.copy(_script("zsh", tmp_path), functions / "_transcript-otel")
    (tmp_path / "runs").mkdir()
    (tmp_path / "run-a.jsonl").write_text("")
    assert _zsh_completes(functions, "transcript-otel ", tmp_path) == {*COMMANDS, "completion"}
    assert _zsh_completes(functions, "transcript-otel im", tmp_path) == {"import"}
    assert _zsh_completes(functions, "transcript-otel show --co", tmp_path) == {"--color"}
    assert _zsh_completes(functions, "transcript-otel export x --format ", tmp_path) == {
        "devflow",
        "markdown",
        "html",
        "jsonl",
    }
    assert _zsh_completes(functions, "transcript-otel show run-", tmp_path) == {"run-a.jsonl"}
    assert "runs" in _zsh_completes(functions, "transcript-otel list --jsonl-dir r", tmp_path)
