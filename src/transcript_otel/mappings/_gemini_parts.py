"""What a Gemini CLI session record's fields say: the text of its content parts, its tool calls'
outcomes, its thoughts, its tokens in the conventions' names.

Pure reading of the dicts `gemini_session.GeminiSessionMapper` maps (docs/session-logs.md).
"""

from __future__ import annotations

import json
import re
from typing import Any, Final

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.mappings._rollout_payload import part_texts
from transcript_otel.mappings.gemini_usage import session_tokens_usage

# The hidden first user message the CLI writes into every session (its workspace, the date):
# what the CLI tells the model, not what a person asked.
SESSION_CONTEXT: Final = "<session_context>"
# The shell tool's output ends `Exit Code: N` where the command failed; the CLI still says
# `status: "success"` (it ran), so the exit code tells the failure.
_EXIT_LINE: Final = re.compile(r"^Exit Code: (-?\d+)$", re.MULTILINE)
_FAILED_STATUSES: Final = frozenset({"error", "cancelled"})
# The session's `tokens` counts (`gemini_usage.session_tokens_usage` names them as `run` does:
# output with the thoughts): `input` is the whole prompt, cached included; `output` without thoughts.
_USAGE_KEYS: Final = ("input", "output", "cached", "thoughts")


def message_text(content: Any) -> str:
    """A message's `content`: a string, or the `text`s of its parts joined."""
    return "".join(part_texts(content))


def function_responses(content: Any) -> list[dict[str, Any]]:
    """The `functionResponse`s among a message's parts (a tool's result as the model got it)."""
    if not isinstance(content, list):
        return []
    found = [part.get("functionResponse") for part in content if isinstance(part, dict)]
    return [response for response in found if isinstance(response, dict)]


def response_text(response: dict[str, Any]) -> str:
    """What one `functionResponse` told the model: its `output`, else its `error`, else the
    response as JSON."""
    said = response.get("response")
    if isinstance(said, dict):
        for key in ("output", "error"):
            if isinstance(said.get(key), str):
                return str(said[key])
    return json.dumps(said, ensure_ascii=False) if said is not None else ""  # (parsed JSON: dumps again)


def thinking_detail(thoughts: Any) -> dict[str, Any] | None:
    """A `thinking` entry's detail from a message's `thoughts` (one per streamed chunk: their
    descriptions joined give the text back), None where there are none."""
    if not isinstance(thoughts, list):
        return None
    chunks = [thought for thought in thoughts if isinstance(thought, dict)]
    text = "".join(chunk["description"] for chunk in chunks if isinstance(chunk.get("description"), str))
    subjects = [subject for chunk in chunks if (subject := nonempty_text(chunk.get("subject")))]
    if not text and not subjects:
        return None
    return {"text": text, "subjects": subjects}


def usage_detail(tokens: Any, message_id: str, model: str | None) -> dict[str, Any] | None:
    """A `token_usage` entry's detail from a message's `tokens`, None where it holds none."""
    if not isinstance(tokens, dict):
        return None
    if not any(type(tokens.get(key)) is int for key in _USAGE_KEYS):
        return None
    return {"usage": session_tokens_usage(tokens), "tokens": tokens, "message_id": message_id, "model": model}


def call_id(call: dict[str, Any]) -> str | None:
    return nonempty_text(call.get("id"))


def tool_use_detail(call: dict[str, Any]) -> dict[str, Any]:
    return {
        "tool_use_id": call_id(call),
        "tool_name": nonempty_text(call.get("name")),
        "input": call.get("args"),
        "description": call.get("description"),
    }


def has_outcome(call: dict[str, Any]) -> bool:
    """The CLI recorded how the call ended (it records calls once they complete)."""
    return call.get("result") is not None or call.get("status") in _FAILED_STATUSES


def tool_result_detail(call: dict[str, Any]) -> dict[str, Any]:
    """A `toolCalls` entry's outcome: what the model got back, what the person was shown, and
    whether it failed (the CLI's status, or a command's exit code)."""
    text = "\n".join(response_text(response) for response in function_responses(call.get("result")))
    status = call.get("status")
    return {
        "tool_use_id": call_id(call),
        "tool_name": nonempty_text(call.get("name")),
        "is_error": status in _FAILED_STATUSES or shell_exited_badly(text),
        "status": status,
        "text": text,
        "display": call.get("resultDisplay"),
        "completed_at": call.get("timestamp"),
    }


def response_result_detail(response: dict[str, Any]) -> dict[str, Any]:
    """A tool result told only by the `functionResponse` the model got (no `toolCalls` entry
    said it first)."""
    text = response_text(response)
    return {
        "tool_use_id": nonempty_text(response.get("id")),
        "tool_name": nonempty_text(response.get("name")),
        "is_error": shell_exited_badly(text),
        "text": text,
    }


def shell_exited_badly(text: str) -> bool:
    """A shell command's output says it exited with a code other than 0."""
    found = _EXIT_LINE.search(text)
    return found is not None and found.group(1) != "0"
