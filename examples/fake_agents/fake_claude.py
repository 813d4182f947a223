#!/usr/bin/env python3
"""A scripted stand-in for the ``claude`` CLI in SDK mode (stdlib only).

claude-agent-sdk starts the CLI with ``--output-format stream-json --verbose
--input-format stream-json ...`` and speaks newline-delimited JSON over stdio:

* ``control_request`` from the SDK (``initialize``, ...) get a ``control_response``
  (``subtype: "success"``). ``initialize`` carries ``request.hooks``:
  event -> ``[{"matcher", "hookCallbackIds": ["hook_0", ...]}]``.
* a ``{"type": "user", ...}`` line is a prompt. The fake then prints
  ``system/init``, sends ``control_request`` ``hook_callback`` for every
  ``UserPromptSubmit`` callback (waiting for each ``control_response``), writes
  the Claude Code transcript JSONL (``$CLAUDE_CONFIG_DIR`` or
  ``$HOME/.claude``, ``projects/<cwd-slug>/<session>.jsonl`` plus
  ``<session>/subagents/agent-<id>.jsonl``), fires the ``Stop`` callbacks, waits
  ``FAKE_CLAUDE_SETTLE_S`` (default 0.3 s) so a polling transcript collector
  sees the files, and prints an ``assistant`` and a ``result`` message.

The scenario comes from ``FAKE_SCENARIO`` (``plain``, ``rich`` or ``error``; see
tests/agents/README.md). The fake exits when stdin closes (exit code 1 after an
error result, as the real CLI does). ``-v``/``--version`` prints a version.
Optional: ``FAKE_AGENT_LOG=<path>`` appends every message read and written.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
import uuid
from collections import deque
from collections.abc import Callable
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

from json_lines import EndOfInput, JsonLines, JsonObj

VERSION = "2.1.330"
MODEL = "claude-opus-4-6"
SCENARIOS = ("plain", "rich", "error")
SUBAGENT_ID = "a1b2c3"


class Wire(JsonLines):
    """stream-json over stdio, with a backlog for lines read while waiting."""

    def __init__(self) -> None:
        super().__init__("claude")
        self._inbox = self.messages()
        self._backlog: deque[JsonObj] = deque()
        self._next_request = 0
        self.hook_ids: dict[str, list[str]] = {}

    def _read(self) -> JsonObj:
        msg = next(self._inbox, None)
        if msg is None:
            raise EndOfInput
        return msg

    def next_message(self) -> JsonObj:
        return self._backlog.popleft() if self._backlog else self._read()

    def answer_control(self, msg: JsonObj) -> None:
        request = msg.get("request") or {}
        if request.get("subtype") == "initialize":
            for event, matchers in (request.get("hooks") or {}).items():
                for matcher in matchers or []:
                    self.hook_ids.setdefault(event, []).extend(matcher.get("hookCallbackIds") or [])
        self.send(
            {
                "type": "control_response",
                "response": {"subtype": "success", "request_id": msg.get("request_id"), "response": {}},
            }
        )

    def control_request(self, request: JsonObj) -> JsonObj:
        """Send a CLI->SDK control request and wait for its response."""
        self._next_request += 1
        request_id = f"req_{self._next_request}_{uuid.uuid4().hex[:8]}"
        self.send({"type": "control_request", "request_id": request_id, "request": request})
        while True:
            msg = self._read()
            if msg.get("type") == "control_response":
                response = msg.get("response") or {}
                if response.get("request_id") == request_id:
                    return dict(response)
            elif msg.get("type") == "control_request":
                self.answer_control(msg)
            else:
                self._backlog.append(msg)

    def fire_hooks(self, event: str, hook_input: JsonObj, tool_use_id: str | None = None) -> None:
        for callback_id in self.hook_ids.get(event, []):
            self.control_request(
                {
                    "subtype": "hook_callback",
                    "callback_id": callback_id,
                    "input": hook_input,
                    "tool_use_id": tool_use_id,
                }
            )


def assistant_message(content: object, stop_reason: str | None, usage: JsonObj | None = None) -> JsonObj:
    """The `message` of an assistant line or stream message, as the Anthropic API returns it."""
    return {
        "id": f"msg_{uuid.uuid4().hex[:20]}",
        "type": "message",
        "role": "assistant",
        "model": MODEL,
        "content": content,
        "stop_reason": stop_reason,
        "usage": usage or {"input_tokens": 10, "output_tokens": 5},
    }


def _now() -> str:
    # timezone.utc rather than datetime.UTC: the fakes also run on Python < 3.11.
    return datetime.now(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")  # noqa: UP017


def project_dir(cwd: str) -> Path:
    """Where Claude Code keeps a project's transcripts (non-alphanumerics -> '-')."""
    config_dir = os.environ.get("CLAUDE_CONFIG_DIR")
    base = Path(config_dir) if config_dir else Path(os.environ.get("HOME") or Path.home()) / ".claude"
    return base / "projects" / re.sub(r"[^A-Za-z0-9]", "-", cwd)


class Transcript:
    """Appends Claude Code style JSONL lines with the usual metadata keys."""

    def __init__(self, path: Path, session_id: str, cwd: str, agent_id: str | None = None) -> None:
        self.path = path
        self.session_id = session_id
        self.cwd = cwd
        self.agent_id = agent_id
        self.last_uuid: str | None = None
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()

    def raw(self, line: str) -> None:
        with self.path.open("a", encoding="utf-8") as fh:
            fh.write(line + "\n")
        time.sleep(0.005)

    def plain(self, entry: JsonObj) -> None:
        self.raw(json.dumps(entry))

    def message(self, kind: str, content: object, **extra: Any) -> None:
        entry_uuid = str(uuid.uuid4())
        message: JsonObj = {"role": kind, "content": content}
        if kind == "assistant":
            message = assistant_message(content, None)
        entry: JsonObj = {
            "parentUuid": self.last_uuid,
            "isSidechain": self.agent_id is not None,
            "userType": "external",
            "cwd": self.cwd,
            "sessionId": self.session_id,
            "version": VERSION,
            "gitBranch": "",
        }
        if self.agent_id is not None:
            entry["agentId"] = self.agent_id
        entry.update({"type": kind, "message": message, "uuid": entry_uuid, "timestamp": _now(), **extra})
        self.plain(entry)
        self.last_uuid = entry_uuid


def _prompt_text(msg: JsonObj) -> str:
    content = (msg.get("message") or {}).get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(b.get("text", "")) for b in content if isinstance(b, dict))
    return ""


def write_plain(main: Transcript, prompt: str) -> str:
    main.message("user", prompt)
    text = "Hello from fake claude"
    main.message("assistant", [{"type": "text", "text": text}])
    return text


def write_rich(main: Transcript, prompt: str) -> str:
    main.message("user", prompt)
    task_input = {"description": "List files", "prompt": "List the files", "subagent_type": "general-purpose"}
    main.message(
        "assistant",
        [
            {"type": "thinking", "thinking": "I should delegate the listing.", "signature": "sig-fake"},
            {"type": "text", "text": "Delegating to a subagent."},
            {"type": "tool_use", "id": "toolu_1", "name": "Task", "input": task_input},
        ],
    )

    sub_path = main.path.parent / main.session_id / "subagents" / f"agent-{SUBAGENT_ID}.jsonl"
    sub = Transcript(sub_path, main.session_id, main.cwd, agent_id=SUBAGENT_ID)
    sub.message("user", "List the files")
    sub.message(
        "assistant", [{"type": "tool_use", "id": "toolu_sub_1", "name": "Bash", "input": {"command": "ls"}}]
    )
    sub.message(
        "user",
        [{"type": "tool_result", "tool_use_id": "toolu_sub_1", "content": "a.txt", "is_error": False}],
        toolUseResult={"stdout": "a.txt", "stderr": "", "interrupted": False},
    )
    sub.message("assistant", [{"type": "text", "text": "sub done"}])

    main.message(
        "user",
        [
            {
                "type": "tool_result",
                "tool_use_id": "toolu_1",
                "content": [{"type": "text", "text": "sub done"}],
            }
        ],
        toolUseResult={"status": "completed", "agentId": SUBAGENT_ID},
    )
    main.plain(
        {"type": "thinking", "thinking": "pondering", "sessionId": main.session_id, "timestamp": _now()}
    )
    main.plain(
        {"type": "summary", "summary": "Compacted: listed files via a subagent", "leafUuid": main.last_uuid}
    )
    main.plain(
        {
            "type": "system",
            "subtype": "informational",
            "content": "Conversation compacted",
            "level": "info",
            "isMeta": False,
            "sessionId": main.session_id,
            "uuid": str(uuid.uuid4()),
            "timestamp": _now(),
        }
    )
    main.plain({"type": "mystery", "foo": 1})
    main.raw("{broken json")
    text = "All done"
    main.message("assistant", [{"type": "text", "text": text}])
    return text


def write_error(main: Transcript, prompt: str) -> str:
    main.message("user", prompt)
    return ""


WRITERS = {"plain": write_plain, "rich": write_rich, "error": write_error}


def run_turn(wire: Wire, scenario: str, msg: JsonObj, session_id: str) -> bool:
    """Handle one prompt; returns True if the result was an error."""
    cwd = os.getcwd()
    prompt = _prompt_text(msg)
    main = Transcript(project_dir(cwd) / f"{session_id}.jsonl", session_id, cwd)
    wire.send(
        {
            "type": "system",
            "subtype": "init",
            "cwd": cwd,
            "session_id": session_id,
            "tools": ["Task", "Bash", "Read", "Write"],
            "mcp_servers": [],
            "model": MODEL,
            "permissionMode": "bypassPermissions",
            "slash_commands": [],
            "apiKeySource": "none",
            "claude_code_version": VERSION,
            "output_style": "default",
            "agents": [],
            "skills": [],
            "plugins": [],
            "uuid": str(uuid.uuid4()),
        }
    )
    common: JsonObj = {
        "session_id": session_id,
        "transcript_path": str(main.path),
        "cwd": cwd,
        "permission_mode": "bypassPermissions",
    }
    wire.fire_hooks("UserPromptSubmit", {**common, "hook_event_name": "UserPromptSubmit", "prompt": prompt})
    text = WRITERS[scenario](main, prompt)
    wire.fire_hooks("Stop", {**common, "hook_event_name": "Stop", "stop_hook_active": False})
    time.sleep(float(os.environ.get("FAKE_CLAUDE_SETTLE_S", "0.3")))

    usage = {
        "input_tokens": 100,
        "output_tokens": 20,
        "cache_read_input_tokens": 5,
        "cache_creation_input_tokens": 3,
    }
    result: JsonObj = {
        "type": "result",
        "duration_ms": 1234,
        "duration_api_ms": 1000,
        "num_turns": 3 if scenario == "rich" else 1,
        "session_id": session_id,
        "total_cost_usd": 0.0123,
        "usage": usage,
        "modelUsage": {},
        "permission_denials": [],
        "uuid": str(uuid.uuid4()),
    }
    if scenario == "error":
        wire.send(
            {
                **result,
                "subtype": "error_during_execution",
                "is_error": True,
                "errors": ["fake claude failure"],
                "stop_reason": None,
            }
        )
        return True
    wire.send(
        {
            "type": "assistant",
            "message": assistant_message([{"type": "text", "text": text}], "end_turn", usage),
            "parent_tool_use_id": None,
            "session_id": session_id,
            "uuid": str(uuid.uuid4()),
        }
    )
    wire.send({**result, "subtype": "success", "is_error": False, "result": text, "stop_reason": "end_turn"})
    return False


def serve(play_turn: Callable[[Wire, JsonObj, str], bool]) -> int:
    """Answer control requests and play a turn per prompt until stdin closes.

    `play_turn(wire, prompt message, session id)` returns True when the turn failed; the
    exit code is then 1, as the real CLI's after an error result.
    """
    wire = Wire()
    session_id = str(uuid.uuid4())
    failed = False
    try:
        while True:
            msg = wire.next_message()
            kind = msg.get("type")
            if kind == "control_request":
                wire.answer_control(msg)
            elif kind == "user":
                failed = play_turn(wire, msg, session_id) or failed
    except EndOfInput:
        pass
    return 1 if failed else 0


def main(argv: list[str]) -> int:
    if any(arg in ("-v", "--version") for arg in argv):
        print(f"{VERSION} (Claude Code)")
        return 0
    scenario = os.environ.get("FAKE_SCENARIO", "plain")
    if scenario not in WRITERS:
        print(
            f"fake_claude: unknown FAKE_SCENARIO {scenario!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr
        )
        return 2
    try:
        return serve(lambda wire, msg, session_id: run_turn(wire, scenario, msg, session_id))
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
