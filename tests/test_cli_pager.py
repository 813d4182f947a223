"""`show` through `$PAGER` (issue 48, item 6): on a terminal, a transcript longer than the screen
goes through the pager, one that fits is printed as it is; never when piped, nor with
`--no-pager`. The pager is a small script that records it was called and what it was given."""

from __future__ import annotations

import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from helpers import write_large_run
from loopback import subprocess_env
from terminal_session import TerminalSession

RUN = Path(__file__).resolve().parent / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
SHOW = [sys.executable, "-m", "transcript_otel", "show", str(RUN), "--color", "never"]
DONE = "SHOW-ENDED"


def _plain_show() -> str:
    """What `show` prints, piped (no pager)."""
    done = subprocess.run(SHOW, capture_output=True, text=True, env=subprocess_env(), timeout=60, check=True)
    return done.stdout


@pytest.fixture
def pager(tmp_path: Path) -> tuple[Path, Path]:
    """A pager that writes what it was given to a file and prints a mark: its script and the file."""
    given = tmp_path / "given-to-pager"
    script = tmp_path / "recording-pager"
    script.write_text(f"#!/bin/sh\ncat > {shlex.quote(str(given))}\necho PAGER-WAS-CALLED\n")
    script.chmod(0o755)
    return script, given


def _on_terminal(command: list[str], pager: Path, rows: int) -> str:
    """`command` on a terminal of `rows` rows, with `pager` as $PAGER: what the terminal showed,
    ending with its exit status."""
    shell_line = f"{shlex.join(command)}; echo {DONE} $?"
    with TerminalSession(shell_line, subprocess_env(PAGER=str(pager)), rows=rows) as t:
        shown = t.expect(DONE + r" \d+\r?\n")
        t.close()
    return shown


def test_a_transcript_longer_than_the_screen_goes_through_the_pager(pager: tuple[Path, Path]) -> None:
    script, given = pager
    expected = _plain_show()
    assert len(expected.splitlines()) > 20
    shown = _on_terminal(SHOW, script, rows=20)
    assert f"PAGER-WAS-CALLED\r\n{DONE} 0" in shown
    assert given.read_text() == expected  # all of it, the screenful held back first included
    assert expected.splitlines()[2] not in shown  # nothing printed past the pager


def test_a_transcript_that_fits_on_the_screen_is_printed_without_the_pager(pager: tuple[Path, Path]) -> None:
    script, given = pager
    expected = _plain_show()
    shown = _on_terminal(SHOW, script, rows=len(expected.splitlines()) + 40)
    assert "PAGER-WAS-CALLED" not in shown
    assert not given.exists()
    assert expected.splitlines()[-1] in shown


def test_no_pager_asked_for_prints_it_on_the_terminal(pager: tuple[Path, Path]) -> None:
    script, given = pager
    shown = _on_terminal([*SHOW, "--no-pager"], script, rows=20)
    assert "PAGER-WAS-CALLED" not in shown
    assert not given.exists()
    assert _plain_show().splitlines()[-1] in shown


def test_piped_there_is_no_pager(pager: tuple[Path, Path]) -> None:
    script, given = pager
    done = subprocess.run(
        SHOW, capture_output=True, text=True, env=subprocess_env(PAGER=str(script)), timeout=60, check=True
    )
    assert "PAGER-WAS-CALLED" not in done.stdout
    assert not given.exists()
    assert len(done.stdout.splitlines()) > 20


def test_a_pager_quit_early_ends_show_quietly(tmp_path: Path) -> None:
    """`head -1` as the pager takes a line and is gone, long before show has written the rest
    (more than a pipe holds): show ends with status 0, without a traceback."""
    run = write_large_run(tmp_path / "large.jsonl", entries=5_000)
    command = [sys.executable, "-m", "transcript_otel", "show", str(run)]
    shown = _on_terminal(command, Path("head -1"), rows=5)
    assert f"{DONE} 0" in shown
    assert "Traceback" not in shown
