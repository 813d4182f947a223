"""`transcript-otel run` at a terminal: the command gets a terminal of its own, as without us.

Each test runs the wrapper on a real pseudo-terminal (`script`, see `terminal_session.py`) around
`tests/agents/terminal_agent.py`, and checks what a person at that terminal sees: the
agent finds a terminal on stdin, stdout and stderr, of the terminal's size, is told when
the window is resized, hears what is typed, stops with Ctrl-Z and comes back with `fg`,
and is interrupted by Ctrl-C; the terminal's settings are as they were afterwards; the
transcript holds what the agent printed.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import signal
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from transcript_otel import read_records
from transcript_otel.model.invariants import check_invariants

from loopback import subprocess_env
from terminal_session import TerminalSession

AGENT = Path(__file__).resolve().parent / "agents" / "terminal_agent.py"
WRAPPER = f"{shlex.quote(sys.executable)} -m transcript_otel.cli run --prompt-name terminal --"
AGENT_COMMAND = f"{shlex.quote(sys.executable)} {shlex.quote(str(AGENT))}"


def texts(tmp_path: Path) -> list[str]:
    (path,) = (tmp_path / "runs").glob("*.jsonl")
    records = list(read_records(path))
    assert check_invariants(records) == []
    entries: list[dict[str, Any]] = [r["context"] for r in records if r["event"] == "transcript.entry"]
    return [entry["detail"].get("text", "") for entry in entries]


def environment(tmp_path: Path) -> dict[str, str]:
    return subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"))


def test_the_command_gets_a_terminal_of_the_same_size_resizes_keystrokes_and_ctrl_c(tmp_path: Path) -> None:
    # The terminal's settings are printed before and after: the wrapper puts them back.
    command = (
        f"before=$(stty -g); {WRAPPER} {AGENT_COMMAND}; status=$?; "
        f'[ "$(stty -g)" = "$before" ] && echo TERMINAL-RESTORED; echo WRAPPER-STATUS=$status'
    )
    with TerminalSession(command, environment(tmp_path), columns=97, rows=31) as terminal:
        terminal.expect("AGENT-READY")
        assert "AGENT-TTY stdin=True stdout=True stderr=True" in terminal.output
        assert "AGENT-SIZE 97x31" in terminal.output
        terminal.resize(120, 40)
        terminal.expect("AGENT-RESIZED 120x40")
        terminal.send_keys(b"hello agent\r")
        terminal.expect("AGENT-HEARD hello agent")
        terminal.send_keys(b"\x03")  # Ctrl-C
        terminal.expect("WRAPPER-STATUS=")
        assert terminal.close() == 0
    output = terminal.output
    assert "AGENT-INTERRUPTED" in output
    assert "WRAPPER-STATUS=130" in output
    assert "TERMINAL-RESTORED" in output
    recorded = texts(tmp_path)
    assert recorded[:2] == ["AGENT-TTY stdin=True stdout=True stderr=True", "AGENT-SIZE 97x31"]
    # What the terminal showed, the typed line (echoed) and Ctrl-C (`^C`) included. A line's
    # end that the agent had not yet got through when Ctrl-C came may be lost: the terminal
    # discards output it holds on a signal key, with or without us (no NOFLSH).
    joined = "\n".join(recorded)
    for shown in ("AGENT-RESIZED 120x40", "hello agent", "AGENT-HEARD hello agent", "^CAGENT-INTERRUPTED"):
        assert shown in joined
    assert not any("\r" in text for text in recorded)  # lines without the terminal's "\r"


def test_ctrl_z_stops_the_job_and_fg_resumes_it(tmp_path: Path) -> None:
    """In an interactive shell, Ctrl-Z stops the wrapper's job as it would stop the agent's."""
    rcfile = tmp_path / "bashrc"
    rcfile.write_text("PS1='PROMPT> '\n")
    shell = f"exec bash --noprofile --rcfile {shlex.quote(str(rcfile))} -i"
    with TerminalSession(shell, environment(tmp_path)) as terminal:
        terminal.expect("PROMPT> ")
        terminal.send_keys(f"{WRAPPER} {AGENT_COMMAND}\r".encode())
        terminal.expect("AGENT-READY")
        terminal.send_keys(b"\x1a")  # Ctrl-Z
        terminal.expect(r"Stopped[^\n]*transcript_otel[^\n]*\n[^\n]*PROMPT> ")
        terminal.send_keys(b"fg\r")
        terminal.expect("AGENT-CONTINUED")
        terminal.send_keys(b"still there\r")
        terminal.expect("AGENT-HEARD still there")
        terminal.send_keys(b"\x03")
        terminal.expect(r"AGENT-INTERRUPTED[^\n]*\n[^\n]*PROMPT> ")
        terminal.send_keys(b"echo WRAPPER-STATUS=$?\r")
        terminal.expect("WRAPPER-STATUS=130")
        terminal.send_keys(b"exit\r")
        assert terminal.close() == 0
    assert "^ZAGENT-CONTINUED" in "\n".join(texts(tmp_path))  # as the terminal showed it


def test_with_stdin_not_a_terminal_the_command_reads_ours(tmp_path: Path) -> None:
    command = f"echo 'from a pipe' | {WRAPPER} {AGENT_COMMAND}; echo WRAPPER-STATUS=$?"
    with TerminalSession(command, environment(tmp_path)) as terminal:
        terminal.expect("WRAPPER-STATUS=0")
        assert terminal.close() == 0
    assert "AGENT-TTY stdin=False stdout=True stderr=True" in terminal.output
    assert "AGENT-HEARD from a pipe" in texts(tmp_path)


def descendants(pid: int) -> list[int]:
    """The processes below `pid` (its children, theirs, ...), read from /proc."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                children.setdefault(parent, []).append(int(entry.name))
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def alive(pid: int) -> bool:
    """Running (not a zombie waiting for its parent)."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the processes are read from /proc")
def test_a_wrapper_killed_with_sigkill_takes_the_command_with_it_and_the_terminal_is_restored(
    tmp_path: Path,
) -> None:
    """SIGKILL to the wrapper left our terminal raw and the relay and the command running; the
    relay hears the wrapper end, ends the command and puts the terminal back."""
    command = (
        f"before=$(stty -g); sh -c 'echo WRAPPER-PID=$$; exec {WRAPPER} {AGENT_COMMAND}'; "
        "echo WRAPPER-GONE; read go; "
        '[ "$(stty -g)" = "$before" ] && echo TERMINAL-RESTORED || echo TERMINAL-LEFT-RAW'
    )
    with TerminalSession(command, environment(tmp_path)) as terminal:
        shown = terminal.expect("AGENT-READY")
        wrapper = int(shown.split("WRAPPER-PID=", 1)[1].split()[0])
        below = descendants(wrapper)  # the relay, the session leader, the agent
        assert len(below) == 3
        try:
            os.kill(wrapper, signal.SIGKILL)
            terminal.expect("WRAPPER-GONE")
            for _ in range(3000):
                if not any(map(alive, below)):
                    break
                time.sleep(0.01)
            assert not any(map(alive, below))
            terminal.send_keys(b"go\n")  # a newline that ends the line, raw or not
            terminal.expect("TERMINAL-")
        finally:
            for pid in below:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
        assert terminal.close() == 0
    assert "TERMINAL-RESTORED" in terminal.output
