#!/usr/bin/env python3
"""A scripted OpenAI Responses API on loopback, for the real `codex` CLI (stdlib only).

Codex runs against it as a custom model provider (`wire_api = "responses"`, `base_url =
http://127.0.0.1:<port>/v1`, see `codex_offline.py`): the model is scripted, the agent is
real. `POST /v1/responses` answers with a server-sent event stream of the events and fields
the OpenAI Python SDK's `types/responses` declare, every event numbered by `sequence_number`:
`response.created`, `response.in_progress`, then per output item
`response.output_item.added`, its content (a message: `response.content_part.added`,
`response.output_text.delta`…, `response.output_text.done`, `response.content_part.done`;
reasoning: `response.reasoning_summary_part.added`, `response.reasoning_summary_text.delta`…,
`response.reasoning_summary_text.done`, `response.reasoning_summary_part.done`; a function
call: `response.function_call_arguments.delta`… and `.done`; a custom tool call:
`response.custom_tool_call_input.delta`… and `.done`; a hosted web search:
`response.web_search_call.in_progress`, `.searching`, `.completed`) and
`response.output_item.done`, then `response.completed` with usage (cached and cache-written
input, reasoning output tokens in their `_details`). The response object repeats the request's
model and tool settings, as the API's does. Each response has an id of its own, and each reply
an `x-request-id` of its own. `GET /v1/models` answers an empty list.

Which answer a request gets: a scenario (`codex_scenarios.SCENARIOS`) maps conversation
keys to steps; the request's user messages select the conversation, and the answer is the
first step codex has not sent back yet (`Step.marker`). A step may fail its first attempts:
an HTTP status (the API's error body; a 429 also says `retry-after`), `response.failed`, an
`error` event that ends the stream, or a stream cut before `response.completed` (in the
first item, or after the last). A request no conversation matches gets a short text answer.

Every answer served is appended to `--log` as one JSON line (conversation, step, attempt,
HTTP status, model; for a stream, its response id and usage or failure), so tests compare
what a transcript recorded with what the model really served.

    openai_responses.py --scenario NAME [--port 0] [--log served.jsonl]

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

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codex_scenarios import RATE_LIMIT_RETRY_AFTER_S, SCENARIOS, Step
from scripted_http import AnswerLog, JsonObj, ScriptedHandler, http_server, main, pieces, sse


def _user_text(request: JsonObj) -> str:
    """The user's messages, and what other agents sent (a subagent's task comes as an
    `agent_message`, its payload in an `encrypted_content` part: plain text from this model)."""
    texts = []
    for item in request.get("input") or []:
        if not isinstance(item, dict):
            continue
        kind = item.get("type")
        if (kind == "message" and item.get("role") == "user") or kind == "agent_message":
            for part in item.get("content") or []:
                if isinstance(part, dict):
                    text = part.get("text", part.get("encrypted_content"))
                    if isinstance(text, str):
                        texts.append(text)
    return "\n".join(texts)


def conversation_key(request: JsonObj, keys: list[str]) -> str | None:
    """The scenario conversation whose key a user message of the request contains."""
    text = _user_text(request)
    for key in sorted(keys, key=len, reverse=True):
        if key in text:
            return key
    return None


def usage_of(step: Step) -> JsonObj:
    return {
        "input_tokens": step.input_tokens,
        "input_tokens_details": {
            "cached_tokens": step.cached_tokens,
            "cache_write_tokens": step.cache_write_tokens,
        },
        "output_tokens": step.output_tokens,
        "output_tokens_details": {"reasoning_tokens": step.reasoning_tokens},
        "total_tokens": step.input_tokens + step.output_tokens,
    }


# The prefix of an output item's id, per item type, as the API's ids begin.
ID_PREFIXES = {
    "message": "msg",
    "reasoning": "rs",
    "function_call": "fc",
    "custom_tool_call": "ctc",
    "web_search_call": "ws",
    "tool_search_call": "tsc",
}


def _output_item(item: JsonObj, item_id: str) -> JsonObj:
    """The item as `response.output_item.done` carries it."""
    kind = item["type"]
    if kind == "message":
        content = [{"type": "output_text", "text": item["text"], "annotations": [], "logprobs": []}]
        return {
            "type": "message",
            "id": item_id,
            "role": "assistant",
            "status": "completed",
            "content": content,
        }
    if kind == "reasoning":
        return {
            "type": "reasoning",
            "id": item_id,
            "summary": [{"type": "summary_text", "text": item["summary"]}],
            "encrypted_content": "c2NyaXB0ZWQgcmVhc29uaW5n",
        }
    if kind == "web_search_call":
        action = {"type": "search", "query": item["query"]}
        return {"type": "web_search_call", "id": item_id, "status": "completed", "action": action}
    return {**item, "id": item_id, "status": "completed"}


def _pending(done: JsonObj) -> JsonObj:
    """The item as `response.output_item.added` announces it, before its content streams."""
    kind = done["type"]
    if kind == "message":
        return {**done, "status": "in_progress", "content": []}
    if kind == "reasoning":
        return {"type": "reasoning", "id": done["id"], "summary": []}
    if kind == "function_call":
        return {**done, "status": "in_progress", "arguments": ""}
    if kind == "custom_tool_call":
        return {**done, "status": "in_progress", "input": ""}
    return {**done, "status": "in_progress"}


Event = tuple[str, JsonObj]  # an event's type and its other fields


def _content(done: JsonObj, index: int) -> Iterator[Event]:
    """What streams between an item's `output_item.added` and its `output_item.done`."""
    where = {"item_id": done["id"], "output_index": index}
    kind = done["type"]
    if kind == "message":
        part = done["content"][0]
        text = part["text"]
        at = {**where, "content_index": 0}
        yield "response.content_part.added", {**at, "part": {**part, "text": ""}}
        for piece in pieces(text):
            yield "response.output_text.delta", {**at, "delta": piece, "logprobs": []}
        yield "response.output_text.done", {**at, "text": text, "logprobs": []}
        yield "response.content_part.done", {**at, "part": part}
    elif kind == "reasoning":
        text = done["summary"][0]["text"]
        at = {**where, "summary_index": 0}
        yield "response.reasoning_summary_part.added", {**at, "part": {"type": "summary_text", "text": ""}}
        for piece in pieces(text):
            yield "response.reasoning_summary_text.delta", {**at, "delta": piece}
        yield "response.reasoning_summary_text.done", {**at, "text": text}
        yield "response.reasoning_summary_part.done", {**at, "part": {"type": "summary_text", "text": text}}
    elif kind in ("function_call", "custom_tool_call"):
        field, event = (
            ("arguments", "function_call_arguments")
            if kind == "function_call"
            else ("input", "custom_tool_call_input")
        )
        for piece in pieces(done[field]):
            yield f"response.{event}.delta", {**where, "delta": piece}
        yield f"response.{event}.done", {**where, field: done[field]}
    elif kind == "web_search_call":
        for status in ("in_progress", "searching", "completed"):
            yield f"response.web_search_call.{status}", where


def _events(response_id: str, request: JsonObj, step: Step, failure: int | str | None) -> Iterator[Event]:
    """The response's events, in order, unnumbered; they stop early where `failure` cuts."""
    shell = {
        "id": response_id,
        "object": "response",
        "created_at": int(time.time()),
        "status": "in_progress",
        "error": None,
        "incomplete_details": None,
        "model": str(request.get("model") or ""),
        "output": [],
        # The request's tool settings, which a response repeats.
        "parallel_tool_calls": bool(request.get("parallel_tool_calls", True)),
        "tool_choice": request.get("tool_choice") or "auto",
        "tools": request.get("tools") or [],
        "usage": None,
    }
    yield "response.created", {"response": shell}
    yield "response.in_progress", {"response": shell}
    if failure == "failed":
        error = {"code": "server_error", "message": "The scripted model failed this response."}
        yield "response.failed", {"response": {**shell, "status": "failed", "error": error}}
        return
    if failure == "error_event":
        # The API's stream-level error: no response event follows, the stream ends.
        message = "The server had an error while processing your request."
        yield "error", {"code": "server_error", "message": message, "param": None}
        return
    output = []
    for index, item in enumerate(step.items):
        prefix = ID_PREFIXES.get(item["type"], item["type"][:2])
        done = _output_item(item, f"{prefix}_{response_id.removeprefix('resp_')}{index:02d}")
        yield "response.output_item.added", {"output_index": index, "item": _pending(done)}
        yield from _content(done, index)
        if failure == "mid_stream":
            return  # cut: the connection closes without `response.completed`
        yield "response.output_item.done", {"output_index": index, "item": done}
        output.append(done)
    if failure == "before_completed":
        return  # cut: every item sent, then the connection closes without `response.completed`
    completed = {**shell, "status": "completed", "output": output, "usage": usage_of(step)}
    yield "response.completed", {"response": completed}


def _stream(response_id: str, request: JsonObj, step: Step, failure: int | str | None) -> Iterator[bytes]:
    """The events as server-sent events: each named by its `type`, numbered from 0."""
    for number, (name, fields) in enumerate(_events(response_id, request, step, failure)):
        yield sse(name, {"type": name, **fields, "sequence_number": number})


def _http_error(status: int) -> tuple[JsonObj, dict[str, str]]:
    """The API's error body for an HTTP status, and the headers that go with it."""
    if status == 429:
        message = f"Rate limit reached for requests. Please try again in {RATE_LIMIT_RETRY_AFTER_S}s."
        error = {"message": message, "type": "requests", "param": None, "code": "rate_limit_exceeded"}
        return {"error": error}, {"retry-after": str(RATE_LIMIT_RETRY_AFTER_S)}
    message = f"The server had an error while processing your request (scripted {status})."
    return {"error": {"message": message, "type": "server_error", "param": None, "code": None}}, {}


TITLE_CONVERSATION = "title"
TITLE_STEP = Step.say(json.dumps({"title": "Scripted task"}), input_tokens=600, output_tokens=9)


def _asks_for_a_title(request: JsonObj) -> bool:
    text = request.get("text")
    answer_format = text.get("format") if isinstance(text, dict) else None
    schema = answer_format.get("schema") if isinstance(answer_format, dict) else None
    properties = schema.get("properties") if isinstance(schema, dict) else None
    return isinstance(properties, dict) and set(properties) == {"title"}


class ScriptedModel:
    """The scenario and the log of what was served."""

    def __init__(self, scenario: str, log_path: Path | None) -> None:
        self.conversations = SCENARIOS[scenario]
        self.answers = AnswerLog(log_path)

    def answer(self, request: JsonObj) -> tuple[str | None, int, Step]:
        """(conversation key, step number, step): the first step codex does not hold yet; the
        title the terminal UI asks for a new thread (in a thread of its own, for JSON of a
        schema with a `title`) as a model gives it."""
        if _asks_for_a_title(request):
            return TITLE_CONVERSATION, 0, TITLE_STEP
        key = conversation_key(request, list(self.conversations))
        if key is None:
            return None, 0, Step.say("OK.", input_tokens=100, output_tokens=3)
        steps = self.conversations[key]
        sent = json.dumps(request.get("input") or [])
        number = next((i for i, step in enumerate(steps) if json.dumps(step.marker)[1:-1] not in sent), None)
        number = len(steps) - 1 if number is None else number
        return key, number, steps[number]


def handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(ScriptedHandler):
        def request_id(self) -> str:
            return f"req_{uuid.uuid4().hex}"

        def do_GET(self) -> None:
            self.reply_json(200, {"object": "list", "data": [], "models": []})

        def do_POST(self) -> None:
            request = self.read_json()
            if request is None:
                return
            path = self.path.split("?", 1)[0]
            if not path.endswith("/responses"):
                self.reply_json(404, {"error": {"type": "not_found", "message": f"no route {path}"}})
                return
            key, number, step = model.answer(request)
            attempt, _ = model.answers.attempt(key, number)
            response_id = f"resp_{uuid.uuid4().hex}"
            requested_model = str(request.get("model") or "")
            record: JsonObj = {
                "conversation": key,
                "step": number,
                "attempt": attempt,
                "model": requested_model,
            }
            failure = step.failures[attempt] if attempt < len(step.failures) else None
            if isinstance(failure, int):
                model.answers.log({**record, "status": failure})
                body, headers = _http_error(failure)
                self.reply_json(failure, body, headers)
                return
            record = {**record, "response_id": response_id, "status": 200}
            if failure is None:
                model.answers.log({**record, "usage": usage_of(step)})
            else:
                model.answers.log({**record, "failure": failure})
            self.send_stream(_stream(response_id, request, step, failure))

    return Handler


def serve(scenario: str, port: int, log_path: Path | None) -> ThreadingHTTPServer:
    return http_server(handler_for(ScriptedModel(scenario, log_path)), port)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], SCENARIOS, serve)
