"""A stdlib-only MCP server over the stdio transport, with one tool, `lookup`, for offline agent tests.

It reads JSON-RPC 2.0 messages, one per line, from stdin and writes each response as one line on
stdout (MCP's stdio transport: newline-delimited, no embedded newlines). It answers `initialize`,
`ping`, `tools/list` and `tools/call`, and accepts notifications (`notifications/initialized` and the
rest) silently. `lookup` takes `{"topic": string}` and returns the text content
"Docs for <topic>: ...". Diagnostics go to stderr only. Run it as `python3 mcp_docs_server.py`,
e.g. from a Codex `config.toml`:

    [mcp_servers.docs]
    command = "python3"
    args = ["/path/to/mcp_docs_server.py"]
"""

from __future__ import annotations

import io
import json
import sys
from typing import Any, TextIO

SERVER_NAME = "docs"
SERVER_VERSION = "1.0.0"
DEFAULT_PROTOCOL_VERSION = "2025-06-18"
SUPPORTED_PROTOCOL_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")

PARSE_ERROR = -32700
INVALID_REQUEST = -32600
METHOD_NOT_FOUND = -32601
INVALID_PARAMS = -32602

LOOKUP_TOOL: dict[str, Any] = {
    "name": "lookup",
    "title": "Look up documentation",
    "description": "Look up the documentation for a topic and return it as text.",
    "inputSchema": {
        "type": "object",
        "properties": {"topic": {"type": "string", "description": "The topic to look up."}},
        "required": ["topic"],
        "additionalProperties": False,
    },
}


class RpcError(Exception):
    """A JSON-RPC error to send back to the client."""

    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def docs_for(topic: str) -> str:
    """The documentation text `lookup` returns for `topic`."""
    return f"Docs for {topic}: {topic} is documented here; this text comes from the offline docs server."


def text_result(text: str, *, is_error: bool = False) -> dict[str, Any]:
    """A `tools/call` result holding one text content block."""
    return {"content": [{"type": "text", "text": text}], "isError": is_error}


def initialize(params: dict[str, Any]) -> dict[str, Any]:
    """Answer `initialize`, echoing the client's protocol version when it is one we know."""
    requested = params.get("protocolVersion")
    version = requested if requested in SUPPORTED_PROTOCOL_VERSIONS else DEFAULT_PROTOCOL_VERSION
    return {
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": False}},
        "serverInfo": {"name": SERVER_NAME, "version": SERVER_VERSION},
        "instructions": "Use the `lookup` tool to read the documentation for a topic.",
    }


def call_tool(params: dict[str, Any]) -> dict[str, Any]:
    """Answer `tools/call`; a bad argument is a tool error (`isError`), an unknown tool an RPC error."""
    name = params.get("name")
    if name != LOOKUP_TOOL["name"]:
        raise RpcError(INVALID_PARAMS, f"Unknown tool: {name}")
    arguments = params.get("arguments") or {}
    topic = arguments.get("topic") if isinstance(arguments, dict) else None
    if not isinstance(topic, str) or not topic.strip():
        return text_result("`topic` must be a non-empty string.", is_error=True)
    return text_result(docs_for(topic.strip()))


def dispatch(method: str, params: dict[str, Any]) -> dict[str, Any]:
    """The result of one request, or an `RpcError`."""
    if method == "initialize":
        return initialize(params)
    if method == "ping":
        return {}
    if method == "tools/list":
        return {"tools": [LOOKUP_TOOL]}
    if method == "tools/call":
        return call_tool(params)
    raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method}")


def handle(message: Any) -> dict[str, Any] | None:
    """The response to one decoded message, or None for a notification or a client's response."""
    if not isinstance(message, dict) or message.get("jsonrpc") != "2.0":
        return error_response(None, INVALID_REQUEST, "Invalid Request")
    request_id = message.get("id")
    method = message.get("method")
    if not isinstance(method, str):
        # A response to a request of ours (we send none) or garbage: answer only garbage with an id.
        if "result" in message or "error" in message:
            return None
        return error_response(request_id, INVALID_REQUEST, "Invalid Request")
    if "id" not in message:
        return None  # notifications/initialized, notifications/cancelled, ...: nothing to answer
    params = message.get("params") or {}
    if not isinstance(params, dict):
        return error_response(request_id, INVALID_PARAMS, "params must be an object")
    try:
        result = dispatch(method, params)
    except RpcError as error:
        return error_response(request_id, error.code, error.message)
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def error_response(request_id: Any, code: int, message: str) -> dict[str, Any]:
    """A JSON-RPC error response."""
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def write(stream: TextIO, message: dict[str, Any]) -> None:
    """Write one message as a single line and flush it."""
    stream.write(json.dumps(message, separators=(",", ":")) + "\n")
    stream.flush()


def serve(stdin: TextIO, stdout: TextIO) -> None:
    """Answer messages from `stdin` until it closes."""
    for line in stdin:
        if not line.strip():
            continue
        try:
            message = json.loads(line)
        except json.JSONDecodeError:
            write(stdout, error_response(None, PARSE_ERROR, "Parse error"))
            continue
        if isinstance(message, list):  # a JSON-RPC batch (protocol 2025-03-26)
            responses = [response for item in message if (response := handle(item)) is not None]
            if responses:
                stdout.write(json.dumps(responses, separators=(",", ":")) + "\n")
                stdout.flush()
            continue
        response = handle(message)
        if response is not None:
            write(stdout, response)


def main() -> None:
    """Serve on this process's stdin and stdout."""
    for stream in (sys.stdin, sys.stdout):
        if isinstance(stream, io.TextIOWrapper):
            stream.reconfigure(encoding="utf-8")
    serve(sys.stdin, sys.stdout)


if __name__ == "__main__":
    main()
