"""What the scripted model servers share: attempts per step, the log of answers, HTTP replies.

`anthropic_api.py` (for Claude Code) and `openai_responses.py` (for Codex) each speak
their API; both count the attempts at each step (so a step can fail its first ones), append
every answer they serve to a JSONL log, and reply with JSON or a server-sent event stream;
both run in a thread of the test or demo that uses them (`running`) or as a script (`main`).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import threading
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

JsonObj = dict[str, Any]


def sse(event: str, data: JsonObj) -> bytes:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n".encode()


def pieces(text: str, size: int = 24) -> list[str]:
    """Text cut as a model streams it."""
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


class AnswerLog:
    """Attempts per (conversation, step), served answer ids, and the JSONL log of answers."""

    def __init__(self, log_path: Path | None) -> None:
        self._log_path = log_path
        self._lock = threading.Lock()
        self._attempts: dict[tuple[str, int], int] = {}
        self._served = 0

    def attempt(self, conversation: str | None, step: int) -> tuple[int, int]:
        """(attempt number at this step, answer number overall), both counted from here."""
        with self._lock:
            attempt = self._attempts.get((str(conversation), step), 0)
            self._attempts[(str(conversation), step)] = attempt + 1
            self._served += 1
            return attempt, self._served

    def log(self, record: JsonObj) -> None:
        if self._log_path is None:
            return
        with self._lock, self._log_path.open("a", encoding="utf-8") as log:
            log.write(json.dumps(record) + "\n")


class ScriptedModel:
    """A scenario's server state: the scenario, and the answers it served (a stateless API's
    server: the conversation is in each request)."""

    def __init__(self, scenario: str, log_path: Path | None) -> None:
        self.scenario = scenario
        self.answers = AnswerLog(log_path)


class ScriptedHandler(BaseHTTPRequestHandler):
    """HTTP/1.1 replies of a scripted model: JSON bodies and event streams; quiet."""

    protocol_version = "HTTP/1.1"
    request_id_header = "x-request-id"

    def request_id(self) -> str:
        """The id the reply's request-id header carries (a server may give each reply its own)."""
        return "req_scripted"

    def log_message(self, message_format: str, *args: Any) -> None:  # the answer log says it all
        return

    def read_json(self) -> Any:
        """The request body as JSON, or None (after replying 400) when it is not JSON."""
        length = int(self.headers.get("Content-Length") or 0)
        try:
            return json.loads(self.rfile.read(length) or b"{}")
        except ValueError:
            self.reply_json(400, {"error": {"type": "invalid_request_error", "message": "body is not JSON"}})
            return None

    def send_stream(self, events: Iterable[bytes]) -> None:
        """An event stream; the connection closes when the events end (also when they stop early)."""
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Connection", "close")
        self.send_header(self.request_id_header, self.request_id())
        self.end_headers()
        for event in events:
            self.wfile.write(event)
            self.wfile.flush()
        self.close_connection = True

    def reply_json(self, status: int, body: Any, headers: dict[str, str] | None = None) -> None:
        self.reply(status, json.dumps(body).encode(), "application/json", headers)

    def reply(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        self.send_header(self.request_id_header, self.request_id())
        if status >= 500 or status == 429:
            self.send_header("x-should-retry", "true")
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)


Serve = Callable[[str, int, "Path | None"], ThreadingHTTPServer]


def http_server(handler: type[BaseHTTPRequestHandler], port: int) -> ThreadingHTTPServer:
    server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    server.daemon_threads = True
    return server


def environment_without(prefixes: tuple[str, ...], **overrides: str) -> dict[str, str]:
    """This process's environment without the variables starting with `prefixes`, plus
    `overrides`: what a real CLI run offline starts from (nothing of the user's account or
    telemetry settings leaks in)."""
    environment = {key: value for key, value in os.environ.items() if not key.startswith(prefixes)}
    environment.update(overrides)
    return environment


@dataclass
class ModelServer:
    """A scripted model serving one scenario; `served()` is what it answered, in order."""

    scenario: str
    url: str
    log_path: Path
    prompt: str  # the prompt that selects the scenario's main conversation

    def served(self) -> list[dict[str, Any]]:
        if not self.log_path.exists():
            return []
        return [json.loads(line) for line in self.log_path.read_text().splitlines() if line]


@contextlib.contextmanager
def running(serve: Serve, scenario: str, prompt: str, directory: Path) -> Iterator[ModelServer]:
    """The model `serve` makes, serving `scenario` on a free loopback port in a thread of ours."""
    log_path = directory / f"served-{scenario}.jsonl"
    server = serve(scenario, 0, log_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield ModelServer(scenario, f"http://127.0.0.1:{server.server_address[1]}", log_path, prompt)
    finally:
        server.shutdown()
        server.server_close()


def main(description: str, scenarios: Iterable[str], serve: Serve) -> None:
    """Serve one scenario until killed; print `{"port": N}` once listening."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--scenario", required=True, choices=sorted(scenarios))
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--log", type=Path)
    arguments = parser.parse_args()
    server = serve(arguments.scenario, arguments.port, arguments.log)
    print(json.dumps({"port": server.server_address[1]}), flush=True)
    server.serve_forever()
