#!/usr/bin/env python3
"""A scripted stand-in for the ``claude`` CLI that writes no transcript files (stdlib only).

Unlike ``fake_claude.py``, the whole conversation is in the stream-json messages on
stdout: tool calls and results, thinking, subagent messages (``parent_tool_use_id`` =
the ``Task`` call id) and task lifecycle frames. Start it as
``ClaudeAgentOptions(cli_path=<launcher>)``. It exists to drive the SDK's protocol
(control requests, hooks, prompts while a turn runs, cancellation, a CLI that dies) in
the instrumentor's tests; it is not a record of what Claude Code prints. The real CLI
(2.1.332) differs: one ``assistant`` line per content block, subagents in the background
with a notification turn, API errors as ``success`` results. What the real
CLI prints is recorded in ``tests/fixtures/claude_code/`` and tested with the real
binary in ``tests/test_real_claude_code.py``.

* Streaming mode (``--input-format stream-json``, every SDK >= 0.1 except below):
  ``control_request`` lines get a ``control_response`` success; each
  ``{"type": "user"}`` line is a prompt and runs one turn. The fake exits when stdin
  closes, with code 1 if any turn ended in an error result, as the real CLI does.
* ``--print -- <prompt>`` (SDK 0.1.0 with a string prompt): one turn for the prompt
  from argv, then exit. stdin is not read.

Every turn prints ``system/init`` (the fields the real CLI prints there), the scenario's
messages and a ``result``. ``FAKE_TRACEPARENT_LOG=<path>`` appends, as the process starts,
the ``TRACEPARENT`` it inherited (an empty line when none): what the SDK passed the CLI, which
the real CLI never prints. The scenario comes from
``FAKE_SCENARIO`` (see ``SCENARIOS``; an unknown one exits with code 2).
``-v``/``--version`` prints a version. ``FAKE_AGENT_LOG=<path>`` appends every message
read and written.
"""

from __future__ import annotations

import itertools
import os
import sys
import time
import uuid
from collections.abc import Callable
from typing import Any

from fake_claude import MODEL, VERSION, Wire, assistant_message, serve
from json_lines import JsonObj

USAGE = {
    "input_tokens": 100,
    "output_tokens": 20,
    "cache_read_input_tokens": 5,
    "cache_creation_input_tokens": 3,
}


def text(value: str) -> JsonObj:
    return {"type": "text", "text": value}


def thinking(value: str) -> JsonObj:
    return {"type": "thinking", "thinking": value, "signature": "sig-fake"}


def tool_use(call_id: str, name: str, **tool_input: Any) -> JsonObj:
    return {"type": "tool_use", "id": call_id, "name": name, "input": tool_input}


def task(call_id: str, description: str, prompt: str, subagent_type: str) -> JsonObj:
    return tool_use(call_id, "Task", description=description, prompt=prompt, subagent_type=subagent_type)


class Turn:
    """Prints one turn's stream-json messages; scenarios are scripts over these helpers."""

    def __init__(self, wire: Wire, session_id: str, number: int = 1) -> None:
        self.wire = wire
        self.session_id = session_id
        self.number = number  # the turn's place in this process's session
        self.final_text = ""
        self.failed = False

    def emit(self, kind: str, **fields: Any) -> None:
        self.wire.send({"type": kind, **fields, "session_id": self.session_id, "uuid": str(uuid.uuid4())})

    def system(self, subtype: str, **fields: Any) -> None:
        self.emit("system", subtype=subtype, **fields)

    def init(self) -> None:
        self.system(
            "init",
            cwd=os.getcwd(),
            tools=["Task", "Bash", "Read", "Write"],
            mcp_servers=[],
            model=MODEL,
            permissionMode="bypassPermissions",
            slash_commands=[],
            apiKeySource="none",
            claude_code_version=VERSION,
            output_style="default",
            agents=[],
            skills=[],
            plugins=[],
        )

    def say(self, *blocks: JsonObj | str, parent: str | None = None) -> None:
        """An assistant message; plain strings become text blocks."""
        content = [text(b) if isinstance(b, str) else b for b in blocks]
        calls_tool = any(b["type"] == "tool_use" for b in content)
        message = assistant_message(content, "tool_use" if calls_tool else "end_turn")
        self.emit("assistant", message=message, parent_tool_use_id=parent)
        texts = [b["text"] for b in content if b["type"] == "text"]
        if parent is None and texts:
            self.final_text = texts[-1]

    def user(self, content: object, parent: str | None = None, **extra: Any) -> None:
        self.emit("user", message={"role": "user", "content": content}, parent_tool_use_id=parent, **extra)

    def tool_result(
        self, call_id: str, content: object, parent: str | None = None, result: JsonObj | None = None
    ) -> None:
        block = {"type": "tool_result", "tool_use_id": call_id, "content": content, "is_error": False}
        self.user([block], parent, **({} if result is None else {"tool_use_result": result}))

    def task_started(self, task_id: str, call_id: str, description: str) -> None:
        self.system(
            "task_started",
            task_id=task_id,
            tool_use_id=call_id,
            description=description,
            task_type="local_agent",
        )

    def task_done(self, task_id: str, call_id: str, summary: str) -> None:
        usage = {"total_tokens": 50, "tool_uses": 1, "duration_ms": 10}
        self.system(
            "task_notification",
            task_id=task_id,
            tool_use_id=call_id,
            status="completed",
            output_file="",
            summary=summary,
            usage=usage,
        )

    def _result(self, subtype: str, num_turns: int, **fields: Any) -> None:
        self.emit(
            "result",
            subtype=subtype,
            duration_ms=1234,
            duration_api_ms=1000,
            num_turns=num_turns,
            total_cost_usd=round(TURN_COST_USD * self.number, 6),  # the session's total so far
            usage=USAGE,
            modelUsage={},
            permission_denials=[],
            **fields,
        )

    def succeed(self, num_turns: int = 1) -> None:
        self._result("success", num_turns, is_error=False, result=self.final_text, stop_reason="end_turn")

    def fail(self, error: str) -> None:
        self.failed = True
        self._result("error_during_execution", 1, is_error=True, errors=[error], stop_reason=None)


TURN_COST_USD = 0.0123


def plain(t: Turn) -> None:
    t.say("Hello from fake claude")
    t.succeed()


def with_thinking(t: Turn) -> None:
    t.say(thinking("Let me think about greetings."), "Hello after thinking")
    t.succeed()


def tool(t: Turn) -> None:
    t.say("Listing files.", tool_use("toolu_bash_1", "Bash", command="ls"))
    t.tool_result(
        "toolu_bash_1", "a.txt\nb.txt", result={"stdout": "a.txt\nb.txt", "stderr": "", "interrupted": False}
    )
    t.say("There are two files.")
    t.succeed()


def parallel(t: Turn) -> None:
    """Two Task subagents at once, with the same prompt; their messages interleave on the
    stream, the second one's first (only the call id tells which subagent is which)."""
    a, b = "toolu_task_a", "toolu_task_b"
    t.say(
        "Delegating.",
        task(a, "Count files", "Look around", "counter"),
        task(b, "Read README", "Look around", "reader"),
    )
    t.task_started("task-a", a, "Count files")
    t.task_started("task-b", b, "Read README")
    t.user([text("Look around")], parent=b)
    t.user([text("Look around")], parent=a)
    t.say(tool_use("toolu_b_1", "Read", file_path="README.md"), parent=b)
    t.say(tool_use("toolu_a_1", "Bash", command="ls | wc -l"), parent=a)
    t.tool_result("toolu_b_1", "hi", parent=b)
    t.tool_result("toolu_a_1", "2", parent=a)
    t.say("README says hi", parent=b)
    t.say("2 files", parent=a)
    t.task_done("task-b", b, "README says hi")
    t.task_done("task-a", a, "2 files")
    t.tool_result(b, [text("README says hi")], result={"status": "completed"})
    t.tool_result(a, [text("2 files")], result={"status": "completed"})
    t.say("Counted 2 files; README says hi.")
    t.succeed(num_turns=3)


def error(t: Turn) -> None:
    t.say("Trying.")
    t.fail("fake claude failure")


def unknown(t: Turn) -> None:
    t.say("Before the mystery.")
    t.emit("mystery_event", payload={"x": 1})
    t.system("compact_boundary", compact_metadata={"trigger": "auto", "pre_tokens": 1234})
    t.say("After the mystery.")
    t.succeed()


SLOW_CHUNKS = 40  # one every 0.05 s


def slow(t: Turn) -> None:
    for i in range(SLOW_CHUNKS):
        t.say(f"chunk {i}")
        time.sleep(0.05)
    t.succeed()


SCENARIOS: dict[str, Callable[[Turn], None]] = {
    "plain": plain,
    "thinking": with_thinking,
    "tool": tool,
    "parallel": parallel,
    "error": error,
    "unknown": unknown,
    "slow": slow,
}


def run_turn(wire: Wire, scenario: str, session_id: str, number: int = 1) -> bool:
    """Print the `number`th turn of the session; returns True if it ended in an error result."""
    turn = Turn(wire, session_id, number)
    turn.init()
    SCENARIOS[scenario](turn)
    return turn.failed


def main(argv: list[str]) -> int:
    flags = argv[: argv.index("--")] if "--" in argv else argv  # after "--" comes the --print prompt
    traceparent_log = os.environ.get("FAKE_TRACEPARENT_LOG")
    if traceparent_log:
        with open(traceparent_log, "a", encoding="utf-8") as log:
            log.write(os.environ.get("TRACEPARENT", "") + "\n")
    if {"-v", "--version"} & set(flags):
        print(f"{VERSION} (Claude Code)")
        return 0
    scenario = os.environ.get("FAKE_SCENARIO", "plain")
    if scenario not in SCENARIOS:
        known = ", ".join(SCENARIOS)
        print(f"fake_claude_stream: unknown FAKE_SCENARIO {scenario!r}; known: {known}", file=sys.stderr)
        return 2
    try:
        if "--input-format" in flags or not {"-p", "--print"} & set(flags):
            numbers = itertools.count(1)
            return serve(
                lambda wire, _prompt, session_id: run_turn(wire, scenario, session_id, next(numbers))
            )
        wire = Wire()  # --print -- <prompt>: one turn, no stdin
        wire.log("in", {"argv": argv})
        return 1 if run_turn(wire, scenario, str(uuid.uuid4())) else 0
    except BrokenPipeError:
        return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
