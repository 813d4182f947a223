#!/usr/bin/env python3
"""A scripted Gemini API on loopback, for the real `gemini` CLI (stdlib only).

Gemini CLI runs against it with `GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:<port>` and any
`GEMINI_API_KEY` (see `gemini_offline.py`): the model is scripted, the agent is real. It serves

* `POST /v1beta/models/<model>:generateContent`: one JSON `GenerateContentResponse`. The CLI
  sends it for its utility calls, which ask for JSON of a schema (`generationConfig.
  responseJsonSchema` or `responseSchema`): the router's complexity score
  (`{complexity_reasoning, complexity_score}`, answered with a low score) and any other schema
  (each property filled: an enum's first value, "scripted", 1, false).
* `POST /v1beta/models/<model>:streamGenerateContent?alt=sse`: server-sent events, each one
  `data: <GenerateContentResponse>` as the API streams them: the step's thought as
  `{"text", "thought": true}` parts, its text in pieces, then its calls as `functionCall`
  parts (`{name, args}`; the first non-thought part carries a `thoughtSignature` when the step
  thought), every chunk with `modelVersion` and `responseId`; the last chunk has
  `finishReason: "STOP"` and the `usageMetadata` (`promptTokenCount`, `candidatesTokenCount`,
  `thoughtsTokenCount`, `cachedContentTokenCount`, `totalTokenCount`, per-modality details).

Which answer a request gets: `chat_scenarios.SCENARIOS`; the request's user text selects the
conversation, the number of `model` turns in `contents` the step. A step may fail its first
attempts with an HTTP status and the API's error body (`{"error": {code, message, status}}`;
a 429 also says `retry-after`). A stream request no conversation matches gets a short answer.

Every request is appended to `--log` as one JSON line (method, path, model, kind, conversation,
step, attempt, HTTP status, response id, usage), unknown routes included (answered 404), so a
run shows everything the CLI called.

    gemini_api.py --scenario NAME [--port 0] [--log served.jsonl]

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

SHELL_TOOL = "run_shell_command"
THOUGHT_SIGNATURE = "c2NyaXB0ZWQgdGhvdWdodCBzaWduYXR1cmU="
ROUTER_ANSWER = {"complexity_reasoning": "Scripted: a simple, direct task.", "complexity_score": 10}


def user_text(request: JsonObj) -> str:
    texts = []
    for content in request.get("contents") or []:
        if isinstance(content, dict) and content.get("role") == "user":
            for part in content.get("parts") or []:
                if isinstance(part, dict) and isinstance(part.get("text"), str):
                    texts.append(part["text"])
    return "\n".join(texts)


def request_summary(request: JsonObj) -> JsonObj:
    """What the log keeps of a request: its contents' roles and part kinds, the tools offered,
    the generation config (thinking included) and whether a system instruction came."""
    contents = [
        {"role": c.get("role"), "parts": sorted({key for part in c.get("parts") or [] for key in part})}
        for c in request.get("contents") or []
        if isinstance(c, dict)
    ]
    tools = [
        d.get("name")
        for tool in request.get("tools") or []
        for d in (tool.get("functionDeclarations") or [])
        if isinstance(d, dict)
    ]
    schemas = ("responseJsonSchema", "responseSchema")
    config = {k: v for k, v in (request.get("generationConfig") or {}).items() if k not in schemas}
    return {
        "contents": contents,
        "tools": tools,
        "generationConfig": config,
        "systemInstruction": "systemInstruction" in request,
    }


def model_turns(request: JsonObj) -> int:
    return sum(1 for c in request.get("contents") or [] if isinstance(c, dict) and c.get("role") == "model")


def usage_metadata(step: Step) -> JsonObj:
    """The usage as the API reports it: candidates exclude thoughts, the total counts all."""
    usage: JsonObj = {
        "promptTokenCount": step.prompt_tokens,
        "candidatesTokenCount": step.output_tokens,
        "totalTokenCount": step.prompt_tokens + step.output_tokens + step.reasoning_tokens,
        "promptTokensDetails": [{"modality": "TEXT", "tokenCount": step.prompt_tokens}],
    }
    if step.cached_tokens:
        usage["cachedContentTokenCount"] = step.cached_tokens
        usage["cacheTokensDetails"] = [{"modality": "TEXT", "tokenCount": step.cached_tokens}]
    if step.reasoning_tokens:
        usage["thoughtsTokenCount"] = step.reasoning_tokens
    return usage


def _call_part(call: Call) -> JsonObj:
    return {
        "functionCall": {
            "name": SHELL_TOOL,
            "args": {"command": call.command, "description": call.description},
        }
    }


def _parts(step: Step) -> list[JsonObj]:
    """The step's parts in the order the model streams them, one chunk each."""
    parts: list[JsonObj] = (
        [{"text": piece, "thought": True} for piece in pieces(step.thought or "", 40)] if step.thought else []
    )
    parts += [{"text": piece} for piece in pieces(step.text)] if step.text else []
    parts += [_call_part(call) for call in step.calls]
    if step.thought:
        first = next(i for i, part in enumerate(parts) if not part.get("thought"))
        parts[first] = {**parts[first], "thoughtSignature": THOUGHT_SIGNATURE}
    return parts


def _chunks(step: Step, model: str, response_id: str) -> Iterator[bytes]:
    shell = {"modelVersion": model, "responseId": response_id}
    parts = _parts(step) or [{"text": ""}]
    for index, part in enumerate(parts):
        candidate: JsonObj = {"content": {"parts": [part], "role": "model"}, "index": 0}
        chunk: JsonObj = {"candidates": [candidate], **shell}
        if index == len(parts) - 1:
            candidate["finishReason"] = "STOP"
            chunk = {"candidates": [candidate], "usageMetadata": usage_metadata(step), **shell}
        yield f"data: {json.dumps(chunk)}\r\n\r\n".encode()


def _filled(schema: Any) -> Any:
    """A value of a JSON schema (the API's upper-case types or JSON Schema's lower-case ones)."""
    if not isinstance(schema, dict):
        return "scripted"
    if schema.get("enum"):
        return schema["enum"][0]
    kind = str(schema.get("type", "object")).lower()
    if kind == "object":
        return {name: _filled(sub) for name, sub in (schema.get("properties") or {}).items()}
    if kind == "array":
        return [_filled(schema.get("items"))]
    return {"string": "scripted", "integer": 1, "number": 1, "boolean": False}.get(kind, "scripted")


def utility_answer(request: JsonObj) -> str:
    config = request.get("generationConfig") or {}
    schema = config.get("responseJsonSchema") or config.get("responseSchema")
    properties = schema.get("properties") if isinstance(schema, dict) else None
    if isinstance(properties, dict) and "complexity_score" in properties:
        return json.dumps(ROUTER_ANSWER)
    if schema is not None:
        return json.dumps(_filled(schema))
    return "OK."


def _http_error(status: int) -> tuple[JsonObj, dict[str, str]]:
    if status == 429:
        message = "Resource has been exhausted (e.g. check quota)."
        return {"error": {"code": 429, "message": message, "status": "RESOURCE_EXHAUSTED"}}, {
            "retry-after": str(RATE_LIMIT_RETRY_AFTER_S)
        }
    message = f"Internal error encountered (scripted {status})."
    return {"error": {"code": status, "message": message, "status": "INTERNAL"}}, {}


def handler_for(model: ScriptedModel) -> type[BaseHTTPRequestHandler]:
    class Handler(ScriptedHandler):
        request_id_header = "x-goog-request-id"

        def request_id(self) -> str:
            return uuid.uuid4().hex

        def _unknown(self) -> None:
            model.answers.log({"method": self.command, "path": self.path, "status": 404})
            self.reply_json(
                404, {"error": {"code": 404, "message": f"no route {self.path}", "status": "NOT_FOUND"}}
            )

        def do_GET(self) -> None:
            self._unknown()

        def do_POST(self) -> None:
            path = self.path.split("?", 1)[0]
            name, _, method = path.rpartition("/")[2].partition(":")
            if not path.startswith("/v1beta/models/") or method not in (
                "generateContent",
                "streamGenerateContent",
            ):
                self._unknown()
                return
            request = self.read_json()
            if request is None:
                return
            response_id = uuid.uuid4().hex[:22]
            record: JsonObj = {"method": "POST", "path": self.path, "model": name, "response_id": response_id}
            record["request"] = request_summary(request)
            if method == "generateContent":
                text = utility_answer(request)
                usage = {"promptTokenCount": 400, "candidatesTokenCount": 20, "totalTokenCount": 420}
                model.answers.log(
                    {**record, "kind": "utility", "status": 200, "answer": text, "usage": usage}
                )
                candidate = {
                    "content": {"parts": [{"text": text}], "role": "model"},
                    "finishReason": "STOP",
                    "index": 0,
                }
                body = {
                    "candidates": [candidate],
                    "usageMetadata": usage,
                    "modelVersion": name,
                    "responseId": response_id,
                }
                self.reply_json(200, body)
                return
            key, steps = conversation(model.scenario, user_text(request))
            number = model_turns(request)
            step = (
                steps[min(number, len(steps) - 1)]
                if steps
                else Step("OK.", prompt_tokens=100, output_tokens=2)
            )
            attempt, _ = model.answers.attempt(key, number)
            record = {**record, "kind": "stream", "conversation": key, "step": number, "attempt": attempt}
            if attempt < len(step.failures):
                status = step.failures[attempt]
                model.answers.log({**record, "status": status})
                body, headers = _http_error(status)
                self.reply_json(status, body, headers)
                return
            model.answers.log({**record, "status": 200, "usage": usage_metadata(step), "time": time.time()})
            self.send_stream(_chunks(step, name, response_id))

    return Handler


def serve(scenario: str, port: int, log_path: Path | None) -> ThreadingHTTPServer:
    return http_server(handler_for(ScriptedModel(scenario, log_path)), port)


if __name__ == "__main__":
    main(__doc__.splitlines()[0], SCENARIOS, serve)
