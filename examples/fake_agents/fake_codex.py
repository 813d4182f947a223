#!/usr/bin/env python3
"""A scripted stand-in for ``codex app-server`` (stdlib only).

weakincentives' Codex adapter spawns ``<codex_bin> app-server`` and talks
newline-delimited JSON-RPC over stdio, without the ``"jsonrpc"`` key:

* client requests ``{"id", "method", "params"}`` get ``{"id", "result"}``;
* notifications are ``{"method", "params"}`` (no id);
* server requests (``item/tool/call``) are ``{"id", "method", "params"}`` and
  the client answers them with ``{"id", "result"}``.

This fake answers ``initialize``, ``thread/start`` and ``turn/start``, answers
any other request with an empty result, and after ``turn/start`` streams the
notifications of the scenario named by ``FAKE_SCENARIO`` (``plain``, ``rich``
or ``failed``, see examples/fake_agents/README.md; or ``bulk``, one turn of 2,000
notifications for benchmarks/bench_e2e.py, see ``scenario_bulk``). It exits when
stdin closes.

What it is for: what the real Codex cannot be made to do on demand (a notification no
mapping knows, a line that is not JSON, 2,000 notifications in a second for the
benchmark). The tests of what Codex really does run the real CLI
(``tests/test_real_codex.py``). The shapes it sends follow what Codex 0.171.0 sent in
those runs (``tests/fixtures/codex/app-server/``): reasoning completes with an
``item/completed`` of type ``reasoning`` (never ``item/reasoning/completed``), a
failure is in ``turn.error`` only, a file change's ``kind`` is an object, and token
usage comes once per model call with the thread's running ``total``. Only the hostile
parts (``item/unknownThing/happened``, ``{not json``) are ours.

Optional: ``FAKE_AGENT_LOG=<path>`` appends every message read and written
(``{"dir": "in"|"out"|"out-raw", ...}``) to that file.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Callable, Iterator

from json_lines import EndOfInput, JsonLines, JsonObj

THREAD_ID = "thr_1"
TURN_ID = "turn_1"
SCENARIOS = ("plain", "rich", "failed", "bulk")


class Wire(JsonLines):
    """JSON-RPC without the ``"jsonrpc"`` key, one compact message a line on stdin/stdout."""

    def __init__(self) -> None:
        super().__init__("codex", separators=(",", ":"))
        self._next_server_id = 1000

    def write_raw(self, line: str) -> None:
        self.log("out-raw", line)
        sys.stdout.write(line + "\n")
        sys.stdout.flush()

    def notify(self, method: str, params: JsonObj) -> None:
        self.send({"method": method, "params": params})

    def respond(self, request_id: object, result: JsonObj) -> None:
        self.send({"id": request_id, "result": result})

    def server_request(self, inbox: Iterator[JsonObj], method: str, params: JsonObj) -> JsonObj:
        """Send a server->client request and block until its response arrives.

        Client requests that arrive meanwhile are answered with an empty result.
        """
        request_id = self._next_server_id
        self._next_server_id += 1
        self.send({"id": request_id, "method": method, "params": params})
        for msg in inbox:
            if msg.get("id") == request_id and "method" not in msg:
                result = msg.get("result")
                return result if isinstance(result, dict) else {"error": msg.get("error")}
            if "id" in msg and "method" in msg:
                self.respond(msg["id"], {})
        raise EndOfInput


def _ids(item_id: str | None = None) -> JsonObj:
    ids: JsonObj = {"threadId": THREAD_ID, "turnId": TURN_ID}
    if item_id is not None:
        ids["itemId"] = item_id
    return ids


def _turn(status: str, error: JsonObj | None = None) -> JsonObj:
    return {"id": TURN_ID, "items": [], "status": status, "error": error}


def _item_started(wire: Wire, item: JsonObj) -> None:
    wire.notify("item/started", {**_ids(), "item": item})


def _item_completed(wire: Wire, item: JsonObj) -> None:
    wire.notify("item/completed", {**_ids(), "item": item})


def _agent_message(wire: Wire, item_id: str, chunks: list[str]) -> None:
    _item_started(wire, {"type": "agentMessage", "id": item_id, "text": ""})
    for chunk in chunks:
        wire.notify("item/agentMessage/delta", {**_ids(item_id), "delta": chunk})
    _item_completed(wire, {"type": "agentMessage", "id": item_id, "text": "".join(chunks)})


def _usage(input_tokens: int, output_tokens: int, cached: int, reasoning: int) -> JsonObj:
    return {
        "totalTokens": input_tokens + output_tokens,
        "inputTokens": input_tokens,
        "cachedInputTokens": cached,
        "outputTokens": output_tokens,
        "reasoningOutputTokens": reasoning,
    }


def _token_usage(wire: Wire, last: JsonObj, total: JsonObj) -> None:
    wire.notify(
        "thread/tokenUsage/updated",
        {**_ids(), "tokenUsage": {"last": last, "total": total, "modelContextWindow": 272000}},
    )


def scenario_plain(wire: Wire, inbox: Iterator[JsonObj]) -> None:
    wire.notify("turn/started", {"threadId": THREAD_ID, "turn": _turn("inProgress")})
    _agent_message(wire, "item_msg_1", ["Hello ", "from ", "fake codex"])
    usage = _usage(50, 8, 0, 0)
    _token_usage(wire, usage, usage)
    wire.notify("turn/completed", {"threadId": THREAD_ID, "turn": _turn("completed")})


def scenario_rich(wire: Wire, inbox: Iterator[JsonObj]) -> None:
    wire.notify("turn/started", {"threadId": THREAD_ID, "turn": _turn("inProgress")})

    # Reasoning: summary deltas, then `item/completed` of type "reasoning" (as Codex 0.171).
    summary = "Echo the text, then inspect the workspace."
    _item_started(wire, {"type": "reasoning", "id": "item_reason_1", "summary": [], "content": []})
    wire.notify("item/reasoning/summaryPartAdded", {**_ids("item_reason_1"), "summaryIndex": 0})
    for chunk in ("Echo the text, ", "then inspect the workspace."):
        wire.notify(
            "item/reasoning/summaryTextDelta",
            {**_ids("item_reason_1"), "delta": chunk, "summaryIndex": 0},
        )
    reasoning_item: JsonObj = {
        "type": "reasoning",
        "id": "item_reason_1",
        "summary": [summary],
        "content": [],
    }
    _item_completed(wire, reasoning_item)

    # A WINK bridged tool: server request, wait for the client's answer.
    wire.server_request(
        inbox,
        "item/tool/call",
        {**_ids(), "callId": "call_echo_1", "tool": "echo", "arguments": {"text": "hi"}},
    )

    # Codex-native tool items.
    cmd: JsonObj = {
        "type": "commandExecution",
        "id": "item_cmd_1",
        "command": "echo hi",
        "cwd": os.getcwd(),
        "processId": None,
        "status": "inProgress",
        "commandActions": [{"type": "unknown", "command": "echo hi"}],
        "aggregatedOutput": None,
        "exitCode": None,
        "durationMs": None,
    }
    _item_started(wire, cmd)
    wire.notify("item/commandExecution/outputDelta", {**_ids("item_cmd_1"), "delta": "hi\n"})
    _item_completed(
        wire, {**cmd, "status": "completed", "aggregatedOutput": "hi\n", "exitCode": 0, "durationMs": 12}
    )

    change: JsonObj = {
        "type": "fileChange",
        "id": "item_file_1",
        "changes": [{"path": "a.txt", "kind": {"type": "add"}, "diff": "+hi\n"}],
        "status": "inProgress",
    }
    _item_started(wire, change)
    _item_completed(wire, {**change, "status": "completed"})

    mcp: JsonObj = {
        "type": "mcpToolCall",
        "id": "item_mcp_1",
        "server": "docs",
        "tool": "search",
        "status": "inProgress",
        "arguments": {"query": "opentelemetry logs"},
        "result": None,
        "error": None,
        "durationMs": None,
    }
    _item_started(wire, mcp)
    _item_completed(
        wire,
        {
            **mcp,
            "status": "completed",
            "result": {"content": [{"type": "text", "text": "3 documents found"}], "structuredContent": None},
            "durationMs": 40,
        },
    )

    _item_started(wire, {"type": "webSearch", "id": "item_web_1", "query": ""})
    _item_completed(
        wire,
        {
            "type": "webSearch",
            "id": "item_web_1",
            "query": "otel",
            "action": {"type": "search", "query": "otel"},
        },
    )

    _item_started(wire, {"type": "contextCompaction", "id": "item_compact_1"})
    _item_completed(wire, {"type": "contextCompaction", "id": "item_compact_1"})

    wire.notify("item/unknownThing/happened", {**_ids("item_x_1"), "foo": 1, "bar": ["baz"]})
    wire.write_raw("{not json")

    _agent_message(wire, "item_msg_1", ["Done", ": ", "hi"])
    _token_usage(
        wire,
        {"inputTokens": 120, "outputTokens": 30, "cachedInputTokens": 10, "reasoningOutputTokens": 5},
        _usage(120, 30, 10, 5),
    )
    wire.notify("turn/completed", {"threadId": THREAD_ID, "turn": _turn("completed")})


def scenario_failed(wire: Wire, inbox: Iterator[JsonObj]) -> None:
    wire.notify("turn/started", {"threadId": THREAD_ID, "turn": _turn("inProgress")})
    error: JsonObj = {
        "message": "fake failure",
        "codexErrorInfo": "internalServerError",
        "additionalDetails": None,
    }
    # As Codex 0.171: the failure only in `turn.error` (weakincentives 0.25-0.27 read
    # `turn.codexErrorInfo`, so their exception says "Turn failed: unknown").
    wire.notify("error", {**_ids(), "error": error, "willRetry": False})
    wire.notify("turn/completed", {"threadId": THREAD_ID, "turn": _turn("failed", error)})


# -- bulk: one long turn, for the end-to-end benchmark (benchmarks/bench_e2e.py) ---------

BULK_NOTIFICATIONS = 2_000
BULK_STEPS = 50
# Per step: reasoning (3 + deltas), a command (2 + output deltas), a message (2 + deltas), usage (1).
BULK_REASONING_DELTAS = 8
BULK_OUTPUT_DELTAS = 6
BULK_MESSAGE_DELTAS = 16
_BULK_WORDS = (
    "the parser splits the path on '/' after normalising 'café' → so the index shifts by one; "
    "checking tests/test_paths.py next, then the fixture that builds the tree ✓ "
)


def _bulk_text(step: int, part: int, length: int) -> str:
    """`length` characters of prose, different for every (step, part), a few non-ASCII."""
    start = (step * 31 + part * 7) % len(_BULK_WORDS)
    text = (_BULK_WORDS[start:] + _BULK_WORDS) * (length // len(_BULK_WORDS) + 2)
    return f"[{step}.{part}] " + text[:length]


def _bulk_output_chunk(step: int, part: int) -> str:
    """About 1 KB of pytest-like output (each line differs)."""
    lines = [
        f"tests/test_module_{step:02d}.py::test_case_{part * 12 + index:03d}[cafe-{index % 7}] "
        + ("FAILED" if (step + index) % 13 == 0 else "PASSED")
        + (" ✓" if index % 5 == 0 else "")
        for index in range(12)
    ]
    return "\n".join(lines) + "\n"


def _bulk_step(wire: Wire, step: int) -> int:
    """One agent step: reasoning, a command with output, a message, token usage; notifications sent."""
    reason_id, command_id, message_id = f"item_reason_{step}", f"item_cmd_{step}", f"item_msg_{step}"
    sent = 0

    reasoning_chunks = [_bulk_text(step, part, 60) for part in range(BULK_REASONING_DELTAS)]
    _item_started(wire, {"type": "reasoning", "id": reason_id, "summary": [], "content": []})
    wire.notify("item/reasoning/summaryPartAdded", {**_ids(reason_id), "summaryIndex": 0})
    for chunk in reasoning_chunks:
        wire.notify("item/reasoning/summaryTextDelta", {**_ids(reason_id), "delta": chunk, "summaryIndex": 0})
    reasoning: JsonObj = {"type": "reasoning", "id": reason_id, "summary": ["".join(reasoning_chunks)]}
    _item_completed(wire, {**reasoning, "content": []})
    sent += 3 + BULK_REASONING_DELTAS

    command = f"pytest -q tests/test_module_{step:02d}.py"
    cmd: JsonObj = {
        "type": "commandExecution",
        "id": command_id,
        "command": f"bash -lc '{command}'",
        "cwd": os.getcwd(),
        "processId": None,
        "status": "inProgress",
        "commandActions": [{"type": "unknown", "command": command}],
        "aggregatedOutput": None,
        "exitCode": None,
        "durationMs": None,
    }
    _item_started(wire, cmd)
    output = [_bulk_output_chunk(step, part) for part in range(BULK_OUTPUT_DELTAS)]
    for chunk in output:
        wire.notify("item/commandExecution/outputDelta", {**_ids(command_id), "delta": chunk})
    _item_completed(
        wire,
        {
            **cmd,
            "status": "completed",
            "aggregatedOutput": "".join(output),
            "exitCode": step % 2,
            "durationMs": 800 + step,
        },
    )
    sent += 2 + BULK_OUTPUT_DELTAS

    _agent_message(wire, message_id, [_bulk_text(step, part, 50) for part in range(BULK_MESSAGE_DELTAS)])
    sent += 2 + BULK_MESSAGE_DELTAS

    # Codex's `total` is the thread's running total of every call's `last`.
    calls = [_bulk_counts(earlier) for earlier in range(step + 1)]
    _token_usage(wire, _bulk_usage(step), _usage(*(sum(counts) for counts in zip(*calls, strict=True))))
    return sent + 1


def _bulk_counts(step: int) -> tuple[int, int, int, int]:
    """The counts of one step's model call: input, output, cached input, reasoning output."""
    return 1_800 + step * 40, 350 + step, 1_200 + step * 30, 120


def _bulk_usage(step: int) -> JsonObj:
    return _usage(*_bulk_counts(step))


def scenario_bulk(wire: Wire, inbox: Iterator[JsonObj]) -> None:
    """One turn of `BULK_NOTIFICATIONS` notifications, as a long Codex turn streams them."""
    wire.notify("turn/started", {"threadId": THREAD_ID, "turn": _turn("inProgress")})
    sent = 1
    for step in range(BULK_STEPS):
        sent += _bulk_step(wire, step)
    # The final answer's deltas fill the turn up to exactly BULK_NOTIFICATIONS (with turn/completed).
    final_deltas = BULK_NOTIFICATIONS - sent - 3
    _agent_message(wire, "item_msg_final", [_bulk_text(BULK_STEPS, part, 40) for part in range(final_deltas)])
    wire.notify("turn/completed", {"threadId": THREAD_ID, "turn": _turn("completed")})


SCRIPTS: dict[str, Callable[[Wire, Iterator[JsonObj]], None]] = {
    "plain": scenario_plain,
    "rich": scenario_rich,
    "failed": scenario_failed,
    "bulk": scenario_bulk,
}


def serve(scenario: str) -> None:
    wire = Wire()
    inbox = wire.messages()
    script = SCRIPTS[scenario]
    for msg in inbox:
        method = msg.get("method")
        if "id" not in msg:
            continue  # a notification ("initialized") or a stray response
        request_id = msg["id"]
        if method == "initialize":
            wire.respond(request_id, {"userAgent": "fake-codex/0.0.0 (tests/agents)"})
        elif method == "thread/start":
            params = msg.get("params") or {}
            wire.respond(
                request_id,
                {
                    "thread": {"id": THREAD_ID, "preview": "", "modelProvider": "openai", "createdAt": 0},
                    "model": params.get("model"),
                    "cwd": params.get("cwd"),
                    "approvalPolicy": params.get("approvalPolicy"),
                },
            )
        elif method == "turn/start":
            wire.respond(request_id, {"turn": _turn("inProgress")})
            script(wire, inbox)
        else:
            wire.respond(request_id, {})


def main(argv: list[str]) -> int:
    if any(arg in ("-V", "--version") for arg in argv):
        print("codex-cli 0.0.0-fake")
        return 0
    scenario = os.environ.get("FAKE_SCENARIO", "plain")
    if scenario not in SCRIPTS:
        print(
            f"fake_codex: unknown FAKE_SCENARIO {scenario!r}; known: {', '.join(SCENARIOS)}", file=sys.stderr
        )
        return 2
    with contextlib.suppress(EndOfInput, BrokenPipeError):
        serve(scenario)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
