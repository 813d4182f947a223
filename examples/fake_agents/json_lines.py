"""Newline-delimited JSON on stdin and stdout, the framing both fake agents speak (stdlib only).

Each fake's `Wire` adds its protocol on top: `fake_codex.py` JSON-RPC without the
``"jsonrpc"`` key, `fake_claude.py` the claude CLI's stream-json with control requests.
With ``FAKE_AGENT_LOG=<path>``, every message read and written is appended to that file as
``{"agent", "dir", "msg"}``.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterator
from typing import Any

JsonObj = dict[str, Any]


class EndOfInput(Exception):
    """stdin closed: the client (the SDK, the adapter) is gone."""


class JsonLines:
    """One JSON object a line each way on stdin/stdout, logged to ``FAKE_AGENT_LOG`` when set."""

    def __init__(self, agent: str, separators: tuple[str, str] | None = None) -> None:
        self._agent = agent
        self._separators = separators
        self._log_path = os.environ.get("FAKE_AGENT_LOG") or None

    def log(self, direction: str, payload: object) -> None:
        if self._log_path is None:
            return
        with open(self._log_path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps({"agent": self._agent, "dir": direction, "msg": payload}) + "\n")

    def send(self, msg: JsonObj) -> None:
        self.log("out", msg)
        sys.stdout.write(json.dumps(msg, separators=self._separators) + "\n")
        sys.stdout.flush()

    def messages(self) -> Iterator[JsonObj]:
        """The objects read from stdin until it closes; blank lines, lines that are not JSON
        (logged as ``in-bad``) and JSON that is not an object are skipped."""
        for line in iter(sys.stdin.readline, ""):
            text = line.strip()
            if not text:
                continue
            try:
                parsed: object = json.loads(text)
            except json.JSONDecodeError:
                self.log("in-bad", text)
                continue
            if isinstance(parsed, dict):
                self.log("in", parsed)
                yield parsed
