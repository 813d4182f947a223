#!/usr/bin/env python3
"""A scripted Anthropic Messages API on loopback, for the real `claude` CLI (stdlib only).

The real Claude Code CLI runs against it with `ANTHROPIC_BASE_URL=http://127.0.0.1:<port>`:
the model is scripted, the agent is real. It serves `POST /v1/messages` (the CLI adds
`?beta=true`), streaming SSE as the real API does (`message_start` with the usage so far:
input and cache counts, the cache writes by lifetime in `cache_creation`, `service_tier`;
`ping`; `content_block_start/delta/stop` with `thinking_delta` + `signature_delta`,
`text_delta`, `input_json_delta` (a client's or a server tool's call), a `redacted_thinking`
or `web_search_tool_result` block whole in its start; `message_delta` with the stop reason
and the cumulative usage, `server_tool_use` (the web searches the answer made) where the
request offered server tools; `message_stop`), or one JSON message when the request has no
`"stream": true` (the CLI's fallback after a broken stream). Every reply has a `request-id`
header of its own, every answer a message id of its own; an error body names its request
id too, and a 429 says when to retry (`retry-after`). `POST /v1/messages/count_tokens`
answers a count; `HEAD`/`GET /` answer 200.

Which answer a request gets: a scenario (`claude_scenarios.SCENARIOS`) is a list of
conversations, each keyed by a text its first user message contains (the prompt of the
main agent, or the prompt a subagent was given). The answer is the conversation's step
number N, where N is how many assistant messages the request already holds, so a
subagent's requests and the main agent's interleave freely. A step may fail its first
attempts (HTTP status, or an SSE `error` event in the middle of the stream) before it
answers. A request no conversation matches (the CLI's own side requests: titles,
summaries) gets a short text answer.

Every answer served is appended to `--log` as one JSON line: the conversation, step,
attempt, HTTP status, request and message ids, model, and the usage the answer reported,
so tests can compare what a transcript recorded with what the model really served.

    anthropic_api.py --scenario NAME [--port 0] [--log served.jsonl]

prints `{"port": N}` on its first stdout line once it listens, and serves until killed.
"""

from __future__ import annotations

import itertools
import json
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_scenarios import SCENARIOS, Step
from scripted_http import AnswerLog, JsonObj, ScriptedHandler, http_server, main, pieces, sse

RETRY_AFTER_SECONDS = 1


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(
            _text_of(block.get("text") or block.get("content"))
            for block in content
            if isinstance(block, dict)
        )
    return ""


def conversation_key(request: JsonObj, keys: list[str]) -> str | None:
    """The scenario conversation whose key the request's first user message contains."""
    messages = request.get("messages") or []
    first_user = next((m for m in messages if isinstance(m, dict) and m.get("role") == "user"), None)
    text = _text_of(first_user.get("content")) if first_user else ""
    # The longest key first: a subagent's prompt may contain the main prompt's key.
    for key in sorted(keys, key=len, reverse=True):
        if key in text:
            return key
    return None


def _cache_ttl(request: JsonObj) -> str:
    """The cache lifetime the request's `cache_control` marks ask for ("5m" unless one says "1h")."""
    marks: list[Any] = []

    def collect(value: Any) -> None:
        if isinstance(value, dict):
            if isinstance(value.get("cache_control"), dict):
                marks.append(value["cache_control"])
            for inner in value.values():
                collect(inner)
        elif isinstance(value, list):
            for inner in value:
                collect(inner)

    collect([request.get("system"), request.get("messages"), request.get("tools")])
    return "1h" if any(mark.get("ttl") == "1h" for mark in marks) else "5m"


def _offers_server_tools(request: JsonObj) -> bool:
    """Whether the request offered a tool the API runs itself (web search, web fetch)."""
    tools = request.get("tools") or []
    return any(isinstance(tool, dict) and str(tool.get("type", "")).startswith("web_") for tool in tools)


def _usage(step: Step, request: JsonObj) -> JsonObj:
    """The usage the answer reports: the step's own counts, else input sized from the request;
    the cache writes split by the lifetime the request asked for; the standard service tier."""
    size = len(json.dumps(request.get("messages") or [])) // 40
    creation = step.cache_creation_input_tokens
    one_hour = creation if _cache_ttl(request) == "1h" else 0
    usage: JsonObj = {
        "input_tokens": step.input_tokens if step.input_tokens is not None else 50 + size,
        "cache_creation_input_tokens": creation,
        "cache_read_input_tokens": step.cache_read_input_tokens,
        "cache_creation": {
            "ephemeral_5m_input_tokens": creation - one_hour,
            "ephemeral_1h_input_tokens": one_hour,
        },
        "output_tokens": step.output_tokens,
        "service_tier": "standard",
    }
    if _offers_server_tools(request):
        searches = sum(1 for block in step.blocks if block["type"] == "server_tool_use")
        usage["server_tool_use"] = {"web_search_requests": searches}
    return usage


def _delta_usage(usage: JsonObj) -> JsonObj:
    """`message_delta`'s usage: the cumulative input, cache and output counts (and the server
    tool requests, where the request offered those tools)."""
    keys = ("input_tokens", "cache_creation_input_tokens", "cache_read_input_tokens", "output_tokens")
    delta = {key: usage[key] for key in keys}
    if "server_tool_use" in usage:
        delta["server_tool_use"] = usage["server_tool_use"]
    return delta


def _stream(
    message_id: str, model: str, step: Step, usage: JsonObj, break_mid_stream: bool
) -> Iterator[bytes]:
    # What the API knows as the message starts: no server tool requests yet, one output token.
    start_usage = {key: value for key, value in usage.items() if key != "server_tool_use"}
    start_usage["output_tokens"] = 1
    yield sse(
        "message_start",
        {
            "type": "message_start",
            "message": {
                "id": message_id,
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": start_usage,
            },
        },
    )
    yield sse("ping", {"type": "ping"})
    for index, block in enumerate(step.blocks):
        kind = block["type"]
        if kind == "thinking":
            yield _block_start(index, {"type": "thinking", "thinking": "", "signature": ""})
            for piece in pieces(block["thinking"]):
                yield _block_delta(index, {"type": "thinking_delta", "thinking": piece})
            yield _block_delta(index, {"type": "signature_delta", "signature": f"c2lnbmF0dXJl{index}"})
        elif kind in ("redacted_thinking", "web_search_tool_result"):  # these come whole, no deltas
            yield _block_start(index, block)
        elif kind == "text":
            yield _block_start(index, {"type": "text", "text": ""})
            for piece in pieces(block["text"]):
                yield _block_delta(index, {"type": "text_delta", "text": piece})
        else:  # tool_use, server_tool_use: its input arrives as pieces of JSON
            yield _block_start(index, {"type": kind, "id": block["id"], "name": block["name"], "input": {}})
            for piece in pieces(json.dumps(block["input"])):
                yield _block_delta(index, {"type": "input_json_delta", "partial_json": piece})
        if break_mid_stream:
            yield sse(
                "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
            )
            return
        yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
    yield sse(
        "message_delta",
        {
            "type": "message_delta",
            "delta": {"stop_reason": step.stop_reason, "stop_sequence": None},
            "usage": _delta_usage(usage),
        },
    )
    yield sse("message_stop", {"type": "message_stop"})


def _block_start(index: int, block: JsonObj) -> bytes:
    return sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": block})


def _block_delta(index: int, delta: JsonObj) -> bytes:
    return sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta})


def _message(message_id: str, model: str, step: Step, usage: JsonObj) -> JsonObj:
    content = []
    for block in step.blocks:
        if block["type"] == "thinking":
            content.append({"type": "thinking", "thinking": block["thinking"], "signature": "c2lnbmF0dXJl"})
        else:
            content.append(block)
    return {
        "id": message_id,
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": step.stop_reason,
        "stop_sequence": None,
        "usage": usage,
    }


class ScriptedModel:
    """The scenario and the log of what was served."""

    def __init__(self, scenario: str, log_path: Path | None) -> None:
        self.conversations = SCENARIOS[scenario]
        self.answers = AnswerLog(log_path)
        self._request_numbers = itertools.count(1)
        self._lock = threading.Lock()

    def request_id(self) -> str:
        """A new request id: the real API gives every request its own."""
        with self._lock:
            return f"req_scripted_{next(self._request_numbers):04d}"

    def answer(self, request: JsonObj) -> tuple[str | None, int, Step, int, str]:
        """(conversation key, step number, step, attempt, message id)."""
        key = conversation_key(request, list(self.conversations))
        assistant_turns = sum(
            1 for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant"
        )
        if key is None:
            step = Step.say("OK.", output_tokens=3)
        else:
            steps = self.conversations[key]
            step = steps[min(assistant_turns, len(steps) - 1)]
        attempt, served = self.answers.attempt(key, assistant_turns)
        return key, assistant_turns, step, attempt, f"msg_scripted_{served:04d}"


def handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(ScriptedHandler):
        request_id_header = "request-id"
        current_request_id = ""

        def request_id(self) -> str:
            return self.current_request_id

        def do_HEAD(self) -> None:
            self.current_request_id = model.request_id()
            self.reply(200, b"", "text/plain")

        def do_GET(self) -> None:
            self.current_request_id = model.request_id()
            self.reply(200, b"{}", "application/json")

        def do_POST(self) -> None:
            self.current_request_id = model.request_id()
            request = self.read_json()
            if request is None:
                return
            path = self.path.split("?", 1)[0]
            if path.endswith("/count_tokens"):
                self.reply_json(200, {"input_tokens": len(json.dumps(request)) // 40})
                return
            if not path.endswith("/v1/messages"):
                self._error(404, "not_found_error", f"no route {path}")
                return
            self._messages(request)

        def _messages(self, request: JsonObj) -> None:
            key, number, step, attempt, message_id = model.answer(request)
            requested_model = str(request.get("model") or "claude-sonnet-4-5")
            streaming = request.get("stream") is True
            record: JsonObj = {
                "conversation": key,
                "step": number,
                "attempt": attempt,
                "model": requested_model,
                "stream": streaming,
                "request_id": self.current_request_id,
                "message_id": message_id,
            }
            failure = step.failures[attempt] if attempt < len(step.failures) else None
            if isinstance(failure, int):
                model.answers.log({**record, "status": failure})
                kind = {
                    400: "invalid_request_error",
                    401: "authentication_error",
                    429: "rate_limit_error",
                    529: "overloaded_error",
                }
                self._error(failure, kind.get(failure, "api_error"), f"scripted failure {failure}")
                return
            usage = _usage(step, request)
            if failure == "mid_stream" and streaming:
                model.answers.log({**record, "status": 200, "broken": True})
                self.send_stream(_stream(message_id, requested_model, step, usage, break_mid_stream=True))
                return
            model.answers.log({**record, "status": 200, "usage": usage, "stop_reason": step.stop_reason})
            if streaming:
                self.send_stream(_stream(message_id, requested_model, step, usage, break_mid_stream=False))
            else:
                self.reply_json(200, _message(message_id, requested_model, step, usage))

        def _error(self, status: int, kind: str, message: str) -> None:
            body = {
                "type": "error",
                "error": {"type": kind, "message": message},
                "request_id": self.current_request_id,
            }
            # A rate limit says how many seconds to wait before the next attempt.
            headers = {"retry-after": str(RETRY_AFTER_SECONDS)} if status == 429 else None
            self.reply_json(status, body, headers)

    return Handler


def serve(scenario: str, port: int, log_path: Path | None) -> ThreadingHTTPServer:
    return http_server(handler_for(ScriptedModel(scenario, log_path)), port)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], SCENARIOS, serve)
