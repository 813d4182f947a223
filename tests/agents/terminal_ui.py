"""The real CLIs' terminal UIs driven as a person drives them, on a pseudo-terminal
(`terminal_session.TerminalSession`): for recording session fixtures and for the tests that
follow a live session.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path[:0] = [str(ROOT / "tests"), str(ROOT / "examples" / "model_servers")]  # the terminal, the models

import claude_offline  # noqa: E402

from terminal_session import TerminalSession  # noqa: E402


def as_after_first_use(home: Path, work: Path, permission_mode: str | None = None) -> None:
    """Claude Code's state once a person has used it: onboarding done, the API key approved, the
    folder trusted, Bash allowed (`~/.claude/settings.json`), so no first-run dialog shows.
    `permission_mode`: the mode the UI starts in (default: its own, auto mode, whose server-side
    check of a subagent's launch cannot get through a scripted model, and asks the person)."""
    state = {
        "hasCompletedOnboarding": True,
        "theme": "dark",
        "customApiKeyResponses": {"approved": [claude_offline.API_KEY[-20:]], "rejected": []},
        "projects": {str(work): {"hasTrustDialogAccepted": True, "hasCompletedProjectOnboarding": True}},
    }
    (home / ".claude.json").write_text(json.dumps(state))
    (home / ".claude").mkdir(exist_ok=True)
    permissions = {"allow": ["Bash"], **({"defaultMode": permission_mode} if permission_mode else {})}
    (home / ".claude" / "settings.json").write_text(json.dumps({"permissions": permissions}))


# The terminal UI's text without its escape sequences (colours, cursor moves, titles).
_ESCAPES = re.compile(
    r"\x1b\[[0-9;?<>=]*[ -/]*[@-~]"  # CSI: colours, cursor moves, modes
    r"|\x1b[\]P_^][^\x07\x1b]*(?:\x07|\x1b\\)"  # OSC, DCS...: titles, queries
    r"|\x1b[()*+][0-9A-Za-z]|\x1b[78=>]|\x1b[@-Z\\-_]|[\x0e\x0f]"  # character sets, saved cursors
)
_UI_WAIT_S = 60.0
# In `run_ui`'s `typed_while_busy`: Esc, which stops what the agent is doing, not a prompt.
INTERRUPT = "<Esc>"


@dataclass(frozen=True)
class TerminalUI:
    """How a CLI's terminal UI is driven: `answers` (a text it shows, the keys a person presses
    then), what its session file says once the prompt's turn is over, the keys that leave it,
    and what its session file says once the model called a tool (the agent is busy)."""

    answers: tuple[tuple[str, bytes], ...]
    turn_over: bytes
    leave: tuple[bytes, ...]
    busy: bytes
    compacted: bytes  # what its session file says once `/compact` is done (no turn ends then)

    def done_marker(self, typed: str) -> bytes:
        return self.compacted if typed == COMPACT else self.turn_over


# The command typed to compact the conversation, in both UIs.
COMPACT = "/compact"
CODEX_UI = TerminalUI(  # the offered newer model declined; left with Ctrl-D
    (("existing", b"2"),),
    b'"type":"task_complete"',
    (b"\x04",),
    b'"type":"function_call"',
    b'"type":"compacted"',
)
CLAUDE_UI = TerminalUI(
    (),
    b'"subtype":"turn_duration"',
    (b"\x03", b"\x03"),  # Ctrl-C twice
    b'"type":"tool_use"',
    b'"subtype":"compact_boundary"',
)


def run_ui(
    ui: TerminalUI,
    command: list[str],
    environment: dict[str, str],
    work: Path,
    sessions: Path,
    follow_ups: tuple[str, ...] = (),
    while_open: Callable[[], None] | None = None,
    typed_while_busy: tuple[str, ...] = (),
) -> str:
    """`command` on a terminal, as a person runs it, until its prompt's turn is over, each of
    `follow_ups` typed once what was typed before is done (a turn over; `COMPACT`: the
    conversation compacted), then (`while_open` run first) left:
    what it printed once it left its screen (the CLIs say how to resume there).
    `typed_while_busy`: typed as soon as the first turn's model called a tool (`INTERRUPT`:
    Esc pressed)."""
    line = f"cd {shlex.quote(str(work))} && {shlex.join(command)}"
    turns_before = _count(sessions, ui.turn_over)  # a session it goes on with (a fork's) has some
    with TerminalSession(line, {**environment, "TERM": "xterm-256color"}, columns=120, rows=40) as terminal:
        for shown, keys in ui.answers:
            terminal.expect(shown, _UI_WAIT_S)
            terminal.wait_quiet(0.5)  # drawn: it reads keys now
            terminal.send_keys(keys)
        if typed_while_busy:
            _wait_for(lambda: _count(sessions, ui.busy) > 0, "the model never called a tool", terminal)
            for prompt in typed_while_busy:  # its spinner never lets the terminal fall quiet
                if prompt == INTERRUPT:
                    terminal.send_keys(b"\x1b")  # Esc: the tool call under way is stopped
                    time.sleep(2.0)
                    continue
                terminal.send_keys(prompt.encode())
                time.sleep(0.3)
                terminal.send_keys(b"\r")
        done, before, last = ui.turn_over, turns_before, command[-1]
        for typed in (*follow_ups, None):
            ended = lambda marker=done, seen=before: _count(sessions, marker) > seen  # noqa: E731
            _wait_for(ended, f"{last!r} never done", terminal)
            terminal.wait_quiet(1.0)
            if typed is not None:
                done, last = ui.done_marker(typed), typed
                before = _count(sessions, done)
                _type(terminal, typed)
        if while_open is not None:
            while_open()
        for keys in ui.leave:
            terminal.send_keys(keys)
            terminal.wait_quiet(0.5)
        status = terminal.close()
    if status != 0:
        raise RuntimeError(f"{command[0]} exited {status}")
    after_screen = terminal.output.rpartition("\x1b[?1049l")[2]  # the alternate screen left
    text = _ESCAPES.sub("", after_screen).replace("\r", "")
    return "".join(line.rstrip() + "\n" for line in text.splitlines() if line.strip())


def _count(sessions: Path, marker: bytes) -> int:
    return sum(path.read_bytes().count(marker) for path in sessions.rglob("*.jsonl"))


def _wait_for(condition: Callable[[], bool], failure: str, terminal: TerminalSession) -> None:
    deadline = time.monotonic() + _UI_WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"{failure}:\n{_ESCAPES.sub('', terminal.output)[-2000:]}")
        time.sleep(0.2)


def _type(terminal: TerminalSession, typed: str) -> None:
    """A prompt typed, then Enter once the UI has drawn it."""
    terminal.send_keys(typed.encode())
    terminal.wait_quiet(0.5)
    terminal.send_keys(b"\r")
