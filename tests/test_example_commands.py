"""What the examples print for the user to run next works from any directory."""

from __future__ import annotations

import os
import shlex
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
PRINT_COMMAND = (
    f"import sys; sys.path.insert(0, {str(EXAMPLES)!r}); "
    "from demo_output import transcript_otel_command; print(transcript_otel_command())"
)


def _printed_command(path_variable: str, cwd: Path) -> str:
    env = {**os.environ, "PATH": path_variable}
    done = subprocess.run(
        [sys.executable, "-c", PRINT_COMMAND], env=env, cwd=cwd, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_printed_command_runs_from_another_directory(tmp_path: Path) -> None:
    """`make demo`'s environment is not on PATH: the demo names its transcript-otel by full path
    (it printed `.venv-demo/bin/transcript-otel`, which only worked from the checkout)."""
    bin_dir = Path(sys.executable).parent
    without_venv = os.pathsep.join(
        part for part in os.environ.get("PATH", "").split(os.pathsep) if Path(part) != bin_dir
    )
    command = _printed_command(without_venv or "/usr/bin:/bin", tmp_path)
    assert Path(command).is_absolute()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    done = subprocess.run([*shlex.split(command), "--version"], cwd=elsewhere, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("transcript-otel ")


def test_the_printed_command_is_the_bare_name_when_the_shell_finds_it(tmp_path: Path) -> None:
    bin_dir = Path(sys.executable).parent
    assert _printed_command(f"{bin_dir}{os.pathsep}/usr/bin:/bin", tmp_path) == "transcript-otel"
