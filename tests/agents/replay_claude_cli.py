#!/usr/bin/env python3
"""The real Claude Code CLI's recorded stdout, replayed to claude-agent-sdk as its CLI (stdlib only).

    CLAUDE_REPLAY=tests/fixtures/claude_sdk/NAME.jsonl replay_claude_cli.py [the CLI's arguments]

The SDK starts it as its `claude` (`cli_path`, or the first `claude` on PATH through a
launcher). It prints the lines the real CLI printed when the SDK drove it
(`record_sdk_stdout.py` recorded them), in their order, and nothing of its own:

* each `control_request` the SDK sends gets the recording's next `control_response`, under
  the request id the SDK sent (the one change to a recorded line: the SDK matches a response
  to its request by that id);
* each prompt (a `user` line on stdin) gets the recorded lines up to and including the next
  `session_state_changed` to `idle` (the CLI waits for input again: turns it started by itself,
  such as a background subagent's notification turn, come before), or, in a recording
  without those, the next `result`;
* when stdin ends, the rest of the recording (what the CLI printed after its last prompt's
  result: a background subagent's notification turn); then it exits with the recorded status
  (`NAME.meta.json`);
* with `--print` (claude-agent-sdk 0.1.0 given a string prompt puts it on the command line
  and never writes to stdin), every recorded line but the control responses, then the exit.

`CLAUDE_REPLAY_PACE=<seconds>` waits that long before each line it prints, as a model that
takes its time would make the CLI. `CLAUDE_REPLAY_TRACEPARENT_LOG=<path>` appends the
`TRACEPARENT` the process inherited (an empty line when none): what the SDK passed its CLI.
"""

from __future__ import annotations

import json
import os
import sys
import time
from collections import deque
from pathlib import Path
from typing import Any


class Replay:
    def __init__(self, recording: Path) -> None:
        lines = [line for line in recording.read_text().splitlines() if line.strip()]
        self.responses = deque(line for line in lines if _kind(line) == "control_response")
        self.lines = deque(line for line in lines if _kind(line) != "control_response")
        meta = json.loads(recording.with_suffix(".meta.json").read_text())
        self.exit_code: int = meta["exit_code"]
        self.pace = float(os.environ.get("CLAUDE_REPLAY_PACE") or 0)

    def print(self, line: str) -> None:
        if self.pace:
            time.sleep(self.pace)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def answer(self, request: dict[str, Any]) -> None:
        if not self.responses:
            raise SystemExit(f"replay_claude_cli: the recording answers no more control requests: {request}")
        response = json.loads(self.responses.popleft())
        response["response"]["request_id"] = request.get("request_id")
        self.print(json.dumps(response, separators=(",", ":")))

    def turn(self) -> None:
        idle_marks = any(_is_idle(line) for line in self.lines)
        while self.lines:
            line = self.lines.popleft()
            self.print(line)
            if _is_idle(line) if idle_marks else _kind(line) == "result":
                return

    def rest(self) -> None:
        while self.lines:
            self.print(self.lines.popleft())


def _is_idle(line: str) -> bool:
    message: dict[str, Any] = json.loads(line)
    return message.get("subtype") == "session_state_changed" and message.get("state") == "idle"


def _kind(line: str) -> str:
    kind = json.loads(line).get("type")
    return kind if isinstance(kind, str) else ""


def main(argv: list[str]) -> int:
    traceparent_log = os.environ.get("CLAUDE_REPLAY_TRACEPARENT_LOG")
    if traceparent_log:
        with open(traceparent_log, "a", encoding="utf-8") as log:
            log.write(os.environ.get("TRACEPARENT", "") + "\n")
    replay = Replay(Path(os.environ["CLAUDE_REPLAY"]))
    try:
        if "--print" in argv and "--input-format" not in argv:
            replay.rest()
            return replay.exit_code
        for line in sys.stdin:
            if not line.strip():
                continue
            message = json.loads(line)
            if message.get("type") == "control_request":
                replay.answer(message)
            elif message.get("type") == "user":
                replay.turn()
        replay.rest()
    except BrokenPipeError:  # the SDK stopped reading
        return 0
    return replay.exit_code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
