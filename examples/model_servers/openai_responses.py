#!/usr/bin/env python3
"""A scripted OpenAI Responses API on loopback, for the real `codex` CLI (stdlib only).

Codex runs against it as a custom model provider (`wire_api = "responses"`, `base_url =
http://127.0.0.1:<port>/v1`, see `codex_offline.py`): the model is scripted, the agent is
real. It serves `POST /v1/responses` as a server-sent event stream the way the real API
does: `response.created`, `response.in_progress`, then per output item
`response.output_item.added`, its deltas (`response.reasoning_summary_part.added` +
`response.reasoning_summary_text.delta`, `response.output_text.delta`,
`response.function_call_arguments.delta`, `response.custom_tool_call_input.delta`) and
`response.output_item.done`, then `response.completed` with usage (cached input and
reasoning output tokens in their `_details`). `GET /v1/models` answers an empty list.

Which answer a request gets: a scenario (`codex_scenarios.SCENARIOS`) maps conversation
keys to steps; the request's user messages select the conversation, and the answer is the
first step codex has not sent back yet (`Step.marker`). A step may fail its first attempts:
an HTTP status, `response.failed`, or a stream cut before `response.completed` (in the
first item, or after the last). A request
no conversation matches gets a short text answer.

Every answer served is appended to `--log` as one JSON line (conversation, step, attempt,
HTTP status, model, usage), so tests compare what a transcript recorded with what the model
really served.

    openai_responses.py --scenario NAME [--port 0] [--log served.jsonl]

prints `{"port": N}` on its first stdout line once it listens, and serves until killed.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codex_scenarios import SCENARIOS, Step
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
        "input_tokens_details": {"cached_tokens": step.cached_tokens},
        "output_tokens": step.output_tokens,
        "output_tokens_details": {"reasoning_tokens": step.reasoning_tokens},
        "total_tokens": step.input_tokens + step.output_tokens,
    }


def _output_item(item: JsonObj, item_id: str) -> JsonObj:
    """The item as `response.output_item.done` carries it."""
    kind = item["type"]
    if kind == "message":
        content = [{"type": "output_text", "text": item["text"], "annotations": []}]
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


def _event(name: str, **fields: Any) -> bytes:
    """One server-sent event of the Responses API: its name is also its `type`."""
    return sse(name, {"type": name, **fields})


def _deltas(done: JsonObj, index: int) -> Iterator[bytes]:
    where = {"item_id": done["id"], "output_index": index}
    kind = done["type"]
    if kind == "message":
        for piece in pieces(done["content"][0]["text"]):
            yield _event("response.output_text.delta", **where, content_index=0, delta=piece)
    elif kind == "reasoning":
        part = {"type": "summary_text", "text": ""}
        yield _event("response.reasoning_summary_part.added", **where, summary_index=0, part=part)
        for piece in pieces(done["summary"][0]["text"]):
            yield _event("response.reasoning_summary_text.delta", **where, summary_index=0, delta=piece)
    elif kind in ("function_call", "custom_tool_call"):
        field = "arguments" if kind == "function_call" else "input"
        for piece in pieces(done[field]):
            yield _event(f"response.{kind}_{field}.delta", **where, delta=piece)


def _stream(response_id: str, model: str, step: Step, failure: int | str | None) -> Iterator[bytes]:
    shell = {"id": response_id, "object": "response", "model": model, "status": "in_progress", "output": []}
    yield _event("response.created", response=shell)
    yield _event("response.in_progress", response=shell)
    if failure == "failed":
        error = {"code": "server_error", "message": "The scripted model failed this response."}
        yield _event("response.failed", response={**shell, "status": "failed", "error": error})
        return
    output = []
    for index, item in enumerate(step.items):
        done = _output_item(item, f"{item['type'][:2]}_{response_id}_{index}")
        yield _event("response.output_item.added", output_index=index, item=_pending(done))
        yield from _deltas(done, index)
        if failure == "mid_stream":
            return  # cut: the connection closes without `response.completed`
        yield _event("response.output_item.done", output_index=index, item=done)
        output.append(done)
    if failure == "before_completed":
        return  # cut: every item sent, then the connection closes without `response.completed`
    completed = {**shell, "status": "completed", "output": output, "usage": usage_of(step)}
    yield _event("response.completed", response=completed)


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
            attempt, served = model.answers.attempt(key, number)
            response_id = f"resp_scripted_{served:04d}"
            requested_model = str(request.get("model") or "")
            record: JsonObj = {
                "conversation": key,
                "step": number,
                "attempt": attempt,
                "model": requested_model,
                "response_id": response_id,
            }
            failure = step.failures[attempt] if attempt < len(step.failures) else None
            if isinstance(failure, int):
                model.answers.log({**record, "status": failure})
                error = {"type": "server_error", "message": f"scripted failure {failure}"}
                self.reply_json(failure, {"error": error})
                return
            if failure is None:
                model.answers.log({**record, "status": 200, "usage": usage_of(step)})
            else:
                model.answers.log({**record, "status": 200, "failure": failure})
            self.send_stream(_stream(response_id, requested_model, step, failure))

    return Handler


def serve(scenario: str, port: int, log_path: Path | None) -> ThreadingHTTPServer:
    return http_server(handler_for(ScriptedModel(scenario, log_path)), port)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], SCENARIOS, serve)
