#!/usr/bin/env python3
"""A scripted stand-in for the OpenAI HTTP API (stdlib only).

weakincentives' ``OpenAIAdapter`` calls the **Responses API** through the
``openai`` SDK: ``POST {base_url}/responses`` with ``input`` items
(``function_call`` / ``function_call_output`` items in tool rounds) and
``tools`` as ``{"type": "function", "name", ...}``. Its ``LiteLLMAdapter`` calls
``litellm.completion()``, which for a model ``openai/<name>`` posts to the
**Chat Completions API**: ``POST {api_base}/chat/completions`` with ``messages``
(``role: "tool"`` messages carry tool results). This server answers both,
non-streaming, with bodies shaped like the ``response`` and ``chat.completion``
objects of the OpenAI API reference (``POST /v1/responses``,
``POST /v1/chat/completions``), so that the real SDKs parse them.

The scenario is the request's model, ``fake-<scenario>`` (litellm strips
``openai/``): ``text`` (a final answer), ``tool`` (one call to the first offered
tool, then an answer quoting its output), ``parallel`` (two calls, then an answer
quoting both outputs), ``error`` (HTTP 500). Ids, timestamps and token usage are
deterministic; the round is 1 once the request carries tool output, else 0.

    with ScriptedChatServer() as server:  # server.base_url == "http://127.0.0.1:<port>/v1"
        OpenAIAdapter(model="fake-tool", client_config=OpenAIClientConfig(base_url=server.base_url, ...))

``python fake_chat_server.py [--port N]`` serves in the foreground and prints the base URL.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import threading
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

JsonObj = dict[str, Any]

SCENARIOS = ("text", "tool", "parallel", "error")
CREATED = 1_700_000_000
FINAL_TEXT = "Hello from the scripted model."
SCRIPTED_CALLS = {"tool": [("call_1", "hi")], "parallel": [("call_1", "one"), ("call_2", "two")]}
SERVER_ERROR = {"message": "scripted server failure", "type": "server_error", "code": "scripted_failure"}


def _error(message: str, kind: str = "invalid_request_error", code: str | None = None) -> JsonObj:
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _text(content: object) -> str:
    """A tool output or message content: a string or a list of text parts."""
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return "" if content is None else str(content)


def _tool_outputs(body: JsonObj, responses: bool) -> list[str]:
    items = body.get("input" if responses else "messages")
    items = [item for item in items if isinstance(item, dict)] if isinstance(items, list) else []
    if responses:
        return [_text(item.get("output")) for item in items if item.get("type") == "function_call_output"]
    return [_text(item.get("content")) for item in items if item.get("role") == "tool"]


def _first_tool(body: JsonObj) -> str | None:
    tools = body.get("tools")
    tool = tools[0] if isinstance(tools, list) and tools and isinstance(tools[0], dict) else {}
    name = tool.get("name") or (tool.get("function") or {}).get("name")  # Responses or Chat format
    return name if isinstance(name, str) else None


def _usage(round_: int, responses: bool) -> JsonObj:
    tokens_in, tokens_out = 100 + 10 * round_, 20 + round_
    if responses:
        return {
            "input_tokens": tokens_in,
            "output_tokens": tokens_out,
            "total_tokens": tokens_in + tokens_out,
            # openai >= 2.x declares cache_write_tokens as required in InputTokensDetails.
            "input_tokens_details": {"cached_tokens": 5, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": 3},
        }
    return {
        "prompt_tokens": tokens_in,
        "completion_tokens": tokens_out,
        "total_tokens": tokens_in + tokens_out,
        "prompt_tokens_details": {"cached_tokens": 5},
        "completion_tokens_details": {"reasoning_tokens": 3},
    }


def _responses_body(body: JsonObj, round_: int, text: str | None, calls: list[JsonObj]) -> JsonObj:
    output: list[JsonObj] = [
        {"type": "function_call", "id": f"fc_{call['call_id']}", "status": "completed", **call}
        for call in calls
    ]
    if text is not None:
        content = [{"type": "output_text", "text": text, "annotations": []}]
        message = {"type": "message", "id": f"msg_{round_}", "role": "assistant", "status": "completed"}
        output.append({**message, "content": content})
    return {
        "id": f"resp_{round_}",
        "object": "response",
        "created_at": CREATED,
        "status": "completed",
        "model": body.get("model"),
        "output": output,
        "usage": _usage(round_, responses=True),
        "error": None,
        "incomplete_details": None,
        "instructions": None,
        "metadata": {},
        "parallel_tool_calls": True,
        "temperature": 1.0,
        "top_p": 1.0,
        "tool_choice": body.get("tool_choice", "auto"),
        "tools": body.get("tools", []),
        "text": {"format": {"type": "text"}},
        "truncation": "disabled",
    }


def _chat_body(body: JsonObj, round_: int, text: str | None, calls: list[JsonObj]) -> JsonObj:
    message: JsonObj = {"role": "assistant", "content": text, "refusal": None}
    if calls:
        message["tool_calls"] = [
            {
                "id": c["call_id"],
                "type": "function",
                "function": {"name": c["name"], "arguments": c["arguments"]},
            }
            for c in calls
        ]
    finish_reason = "tool_calls" if calls else "stop"
    return {
        "id": f"chatcmpl_{round_}",
        "object": "chat.completion",
        "created": CREATED,
        "model": body.get("model"),
        "choices": [{"index": 0, "message": message, "logprobs": None, "finish_reason": finish_reason}],
        "usage": _usage(round_, responses=False),
    }


def answer(path: str, body: JsonObj) -> tuple[HTTPStatus, JsonObj]:
    """The scripted reply (status, JSON body) to a POST of `body` to `path`."""
    responses = path == "/v1/responses"
    if not responses and path != "/v1/chat/completions":
        message = f"Unknown path {path}: this fake serves /v1/responses and /v1/chat/completions."
        return HTTPStatus.NOT_FOUND, _error(message, code="unknown_url")
    if body.get("stream"):
        return HTTPStatus.BAD_REQUEST, _error("This scripted fake does not stream: send stream=false.")
    name = str(body.get("model", "")).removeprefix("openai/")
    scenario = name.removeprefix("fake-") if name.startswith("fake-") else ""
    if scenario == "error":
        return HTTPStatus.INTERNAL_SERVER_ERROR, {"error": SERVER_ERROR}
    if scenario not in SCENARIOS:
        known = ", ".join(f"fake-{known}" for known in SCENARIOS)
        message = f"Unknown scripted model {body.get('model')!r}; the known models are {known}."
        return HTTPStatus.BAD_REQUEST, _error(message, code="model_not_found")
    outputs = _tool_outputs(body, responses)
    round_, text, calls = (1 if outputs else 0), None, []
    if scenario == "text":
        text = FINAL_TEXT
    elif outputs:
        text = "The tool said: " + " | ".join(outputs)
    elif (tool := _first_tool(body)) is None:
        return HTTPStatus.BAD_REQUEST, _error(f"Scenario {scenario!r} needs a tool in the request's tools.")
    else:
        calls = [
            {"call_id": call_id, "name": tool, "arguments": json.dumps({"text": arg})}
            for call_id, arg in SCRIPTED_CALLS[scenario]
        ]
    build = _responses_body if responses else _chat_body
    return HTTPStatus.OK, build(body, round_, text, calls)


class _Handler(BaseHTTPRequestHandler):
    server: _HTTPServer

    def _reply(self, status: HTTPStatus, payload: JsonObj) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_POST(self) -> None:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        path = self.path.split("?", 1)[0]
        try:
            body: object = json.loads(raw or b"{}")
        except json.JSONDecodeError:
            body = raw.decode(errors="replace")
        self.server.owner.record(path, body)
        if isinstance(body, dict):
            self._reply(*answer(path, body))
        else:
            self._reply(HTTPStatus.BAD_REQUEST, _error("The request body is not a JSON object."))

    def do_GET(self) -> None:
        self._reply(HTTPStatus.NOT_FOUND, _error(f"Unknown path {self.path}.", code="unknown_url"))

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the base class's name
        pass  # quiet: ScriptedChatServer.requests has every request


class _HTTPServer(ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, owner: ScriptedChatServer, port: int) -> None:
        super().__init__(("127.0.0.1", port), _Handler)
        self.owner = owner


class ScriptedChatServer:
    """The scripted API on 127.0.0.1 (a free port by default), served by a daemon thread in the context."""

    def __init__(self, port: int = 0) -> None:
        self._port = port
        self._lock = threading.Lock()
        self._httpd: _HTTPServer | None = None
        self._thread: threading.Thread | None = None
        self.requests: list[JsonObj] = []  # {"path", "body"} of every request, in arrival order

    def record(self, path: str, body: object) -> None:
        with self._lock:
            self.requests.append({"path": path, "body": body})

    @property
    def base_url(self) -> str:
        if self._httpd is None:
            raise RuntimeError("the ScriptedChatServer is not running")
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/v1"

    def __enter__(self) -> ScriptedChatServer:
        self._httpd = _HTTPServer(self, self._port)
        self._thread = threading.Thread(
            target=self._httpd.serve_forever,
            kwargs={"poll_interval": 0.05},  # so that __exit__ returns quickly
            name="fake-chat-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._httpd is not None and self._thread is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._thread.join()
        self._httpd = self._thread = None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--port", type=int, default=0, help="port on 127.0.0.1 (default: a free one)")
    args = parser.parse_args(argv)
    with ScriptedChatServer(args.port) as server, contextlib.suppress(KeyboardInterrupt):
        print(server.base_url, flush=True)
        threading.Event().wait()
    return 0


if __name__ == "__main__":
    sys.exit(main())
