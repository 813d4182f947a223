"""The command runs as `python -m transcript_otel`, as the console script does."""

from __future__ import annotations

import subprocess
import sys

from transcript_otel.version import __version__


def test_python_dash_m_runs_the_command() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "transcript_otel", "--version"], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 0, completed.stderr
    assert completed.stdout.strip() == f"transcript-otel {__version__}"


def test_python_dash_m_without_a_command_says_how_to_use_it() -> None:
    completed = subprocess.run(
        [sys.executable, "-m", "transcript_otel"], capture_output=True, text=True, timeout=60
    )
    assert completed.returncode == 2
    assert "usage: transcript-otel" in completed.stderr
