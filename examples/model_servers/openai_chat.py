#!/usr/bin/env python3
"""A scripted OpenAI-compatible chat completions API on loopback, for the real `opencode` CLI
(stdlib only).

OpenCode runs against it as a custom provider (`@ai-sdk/openai-compatible` with
`options.baseURL = http://127.0.0.1:<port>/v1`, see `opencode_offline.py`): the model is
scripted, the agent is real. `POST /v1/chat/completions` with `"stream": true` answers with
server-sent events, `data: <chat.completion.chunk>` each, as the API streams them: a first
chunk with `delta.role`, the step's thinking as `delta.reasoning_content` pieces, its text as
`delta.content` pieces, its calls as `delta.tool_calls` (the first chunk of a call with `id`,
`type` and `function.name`, then `function.arguments` pieces), a chunk with `finish_reason`
(`tool_calls` or `stop`), then (when `stream_options.include_usage` asks, as the AI SDK does)
a chunk with no choices and the `usage`: `prompt_tokens` (cached included),
`completion_tokens` (reasoning included), `total_tokens`, `prompt_tokens_details.
cached_tokens`, `completion_tokens_details.reasoning_tokens`; then `data: [DONE]`. Without
`"stream": true` it answers one `chat.completion`. `GET /v1/models` lists the scripted model.

Which answer a request gets: `chat_scenarios.SCENARIOS`; the request's user messages select
the conversation, the number of `assistant` messages the step. A request without tools (the
title OpenCode asks for a new session) gets a short title. A step may fail its first attempts
with an HTTP status and the API's error body (a 429 also says `retry-after`).

Every request is appended to `--log` as one JSON line (method, path, model, kind, conversation,
step, attempt, HTTP status, completion id, usage), unknown routes included (answered 404).

    openai_chat.py --scenario NAME [--port 0] [--log served.jsonl]

prints `{"port": N}` on its first stdout line once it listens, and serves until killed.
"""

from __future__ import annotations

import json
import sys
import time
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from chat_scenarios import RATE_LIMIT_RETRY_AFTER_S, SCENARIOS, Call, Step, conversation
from scripted_http import JsonObj, ScriptedHandler, ScriptedModel, http_server, main, pieces

SHELL_TOOL = "bash"
TITLE = Step("Scripted task", prompt_tokens=300, output_tokens=3)


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def user_text(request: JsonObj) -> str:
    messages = request.get("messages") or []
    return "\n".join(
        _text(m.get("content")) for m in messages if isinstance(m, dict) and m.get("role") == "user"
    )


def request_summary(request: JsonObj) -> JsonObj:
    """What the log keeps of a request: its messages' roles (with tool calls, reasoning and tool
    results marked), the tools offered and the other settings (not the messages' text)."""
    messages = []
    for message in request.get("messages") or []:
        if not isinstance(message, dict):
            continue
        marks = [k for k in ("tool_calls", "reasoning_content", "tool_call_id") if message.get(k)]
        messages.append("+".join([str(message.get("role")), *marks]))
    tools = [t.get("function", {}).get("name") for t in request.get("tools") or [] if isinstance(t, dict)]
    settings = {k: v for k, v in request.items() if k not in ("messages", "tools")}
    return {"messages": messages, "tools": tools, **settings}


def assistant_turns(request: JsonObj) -> int:
    return sum(
        1 for m in request.get("messages") or [] if isinstance(m, dict) and m.get("role") == "assistant"
    )


def usage_of(step: Step) -> JsonObj:
    completion = step.output_tokens + step.reasoning_tokens
    return {
        "prompt_tokens": step.prompt_tokens,
        "completion_tokens": completion,
        "total_tokens": step.prompt_tokens + completion,
        "prompt_tokens_details": {"cached_tokens": step.cached_tokens, "audio_tokens": 0},
        "completion_tokens_details": {
            "reasoning_tokens": step.reasoning_tokens,
            "audio_tokens": 0,
            "accepted_prediction_tokens": 0,
            "rejected_prediction_tokens": 0,
        },
    }


def _arguments(call: Call) -> str:
    return json.dumps({"command": call.command, "description": call.description})


def _deltas(step: Step) -> Iterator[JsonObj]:
    yield {"role": "assistant", "content": ""}
    for piece in pieces(step.thought or "", 40) if step.thought else []:
        yield {"reasoning_content": piece}
    for piece in pieces(step.text) if step.text else []:
        yield {"content": piece}
    for index, call in enumerate(step.calls):
        function = {"name": SHELL_TOOL, "arguments": ""}
        yield {"tool_calls": [{"index": index, "id": call.call_id, "type": "function", "function": function}]}
        for piece in pieces(_arguments(call)):
            yield {"tool_calls": [{"index": index, "function": {"arguments": piece}}]}


def _chunks(step: Step, model: str, completion_id: str, with_usage: bool) -> Iterator[bytes]:
    shell = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
    }
    shell["system_fingerprint"] = "fp_scripted"
    finish = "tool_calls" if step.calls else "stop"
    for delta in _deltas(step):
        yield _data(
            {**shell, "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": None}]}
        )
    yield _data({**shell, "choices": [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": finish}]})
    if with_usage:
        yield _data({**shell, "choices": [], "usage": usage_of(step)})
    yield b"data: [DONE]\n\n"


def _data(chunk: JsonObj) -> bytes:
    return f"data: {json.dumps(chunk)}\n\n".encode()


def _completion(step: Step, model: str, completion_id: str) -> JsonObj:
    message: JsonObj = {"role": "assistant", "content": step.text or None}
    if step.thought:
        message["reasoning_content"] = step.thought
    if step.calls:
        message["tool_calls"] = [
            {
                "id": c.call_id,
                "type": "function",
                "function": {"name": SHELL_TOOL, "arguments": _arguments(c)},
            }
            for c in step.calls
        ]
    choice = {
        "index": 0,
        "message": message,
        "logprobs": None,
        "finish_reason": "tool_calls" if step.calls else "stop",
    }
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [choice],
        "usage": usage_of(step),
    }


def _http_error(status: int) -> tuple[JsonObj, dict[str, str]]:
    if status == 429:
        message = f"Rate limit reached for requests. Please try again in {RATE_LIMIT_RETRY_AFTER_S}s."
        error = {"message": message, "type": "requests", "param": None, "code": "rate_limit_exceeded"}
        return {"error": error}, {"retry-after": str(RATE_LIMIT_RETRY_AFTER_S)}
    message = f"The server had an error while processing your request (scripted {status})."
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}, {}


def handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(ScriptedHandler):
        def request_id(self) -> str:
            return f"req_{uuid.uuid4().hex}"

        def _unknown(self) -> None:
            model.answers.log({"method": self.command, "path": self.path, "status": 404})
            self.reply_json(404, {"error": {"message": f"no route {self.path}", "type": "not_found"}})

        def do_GET(self) -> None:
            if self.path.split("?", 1)[0].endswith("/models"):
                model.answers.log({"method": "GET", "path": self.path, "status": 200})
                data = [{"id": "scripted-chat", "object": "model", "created": 0, "owned_by": "scripted"}]
                self.reply_json(200, {"object": "list", "data": data})
                return
            self._unknown()

        def do_POST(self) -> None:
            if not self.path.split("?", 1)[0].endswith("/chat/completions"):
                self._unknown()
                return
            request = self.read_json()
            if request is None:
                return
            completion_id = f"chatcmpl-{uuid.uuid4().hex[:24]}"
            name = str(request.get("model") or "")
            record: JsonObj = {
                "method": "POST",
                "path": self.path,
                "model": name,
                "completion_id": completion_id,
            }
            record["request"] = request_summary(request)
            key: str | None
            if not request.get("tools"):
                key, number, step, kind = "title", 0, TITLE, "title"
            else:
                key, steps = conversation(model.scenario, user_text(request))
                number = assistant_turns(request)
                step = (
                    steps[min(number, len(steps) - 1)]
                    if steps
                    else Step("OK.", prompt_tokens=100, output_tokens=2)
                )
                kind = "turn"
            attempt, _ = model.answers.attempt(key, number)
            stream = bool(request.get("stream"))
            record = {
                **record,
                "kind": kind,
                "stream": stream,
                "conversation": key,
                "step": number,
                "attempt": attempt,
            }
            if attempt < len(step.failures):
                status = step.failures[attempt]
                model.answers.log({**record, "status": status})
                body, headers = _http_error(status)
                self.reply_json(status, body, headers)
                return
            model.answers.log({**record, "status": 200, "usage": usage_of(step)})
            if not stream:
                self.reply_json(200, _completion(step, name, completion_id))
                return
            with_usage = bool((request.get("stream_options") or {}).get("include_usage"))
            self.send_stream(_chunks(step, name, completion_id, with_usage))

    return Handler


def serve(scenario: str, port: int, log_path: Path | None) -> ThreadingHTTPServer:
    return http_server(handler_for(ScriptedModel(scenario, log_path)), port)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], SCENARIOS, serve)
