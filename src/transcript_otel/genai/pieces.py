"""What an entry says: the parts of messages (`Piece`s) read from canonical entries' details,
and what a span keeps of them until it ends.

`entry_pieces()` reads only the few keys where each adapter writes its words (WINK Codex
notifications, Claude transcript / stream-json / SDK messages, `codex exec --json` items, RTF1
and chat messages) and keeps references to those strings, no copies; a span's `KeepBudget`
keeps the start of a piece larger than its character budget (`KEEP_CHARS`), without part of a
secret the cut went through, and remembers that it cut. Nothing here redacts, applies the
content policy or builds what goes out (`genai.fit`, `genai.rules`, `genai.content`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from itertools import islice
from typing import Any, Final, NamedTuple

from transcript_otel.genai.attributes import tool_identity
from transcript_otel.genai.facts import final_answer
from transcript_otel.genai.lookup import is_mapping, value_at
from transcript_otel.records.serialize import safe_text

# What a span keeps of its entries' words until it ends, in characters (`ChatContent`): about
# four times a generous attribute limit, so that what is cut at the end is a choice made
# with the whole turn in view, while a turn that says megabytes costs a bounded amount.
KEEP_CHARS: Final = 256 * 1024
# ... and in pieces (a piece is one part of a message): a long turn of short entries.
KEEP_PIECES: Final = 2048
# A single text longer than the budget is kept cut; the cut drops this much more, so that a
# secret it went through (up to a PEM key's few kilobytes) is not kept in part, where the
# redactor, which runs later, would no longer recognise it.
_SECRET_MARGIN: Final = 16 * 1024
_MIN_KEEP_CHARS: Final = 4 * _SECRET_MARGIN

# Piece kinds (see `Piece`).
KIND_USER: Final = "user"
KIND_SYSTEM: Final = "system"
KIND_TEXT: Final = "text"
KIND_REASONING: Final = "reasoning"
KIND_CALL: Final = "tool_call"
KIND_RESPONSE: Final = "tool_response"
KIND_ANSWER: Final = "answer"
KIND_BOUNDARY: Final = "boundary"  # a model call ended (its usage was reported)
ASSISTANT_KINDS: Final = frozenset({KIND_TEXT, KIND_REASONING, KIND_CALL})

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
# Codex items that are tool calls: app-server (camelCase) and `codex exec --json` (snake_case).
_COMMAND_ITEMS: Final = frozenset({"commandExecution", "command_execution"})
_FILE_CHANGE_ITEMS: Final = frozenset({"fileChange", "file_change"})
_MCP_ITEMS: Final = frozenset({"mcpToolCall", "mcp_tool_call"})
_WEB_SEARCH_ITEMS: Final = frozenset({"webSearch", "web_search"})
# What a secret may be made of, at the end of a text cut before redaction.
_TOKEN_TAIL: Final = re.compile(r"[A-Za-z0-9+/_=.-]+\Z")
_LONGEST_SECRET: Final = 512
# How deep and how wide `_size_of` looks into a structured value (tool arguments, results).
_SIZE_DEPTH: Final = 6
_SIZE_ITEMS: Final = 64
# Claude content blocks whose data (base64) no backend shows as text.
_MEDIA_BLOCKS: Final = frozenset({"image", "document"})


class Piece(NamedTuple):
    """One part of a message, as found in an entry: references, no copies."""

    kind: str
    category: str  # the entry type whose content mode decides whether the words go out
    texts: tuple[str, ...] = ()  # the words (joined by newlines when built)
    value: Any = None  # arguments or a structured result (JSON-like); None when there is none
    call_id: str | None = None
    name: str | None = None
    group: str | None = None  # the model response (message id) it belongs to, when known
    size: int = 0  # characters held, about


_CUT_BOUNDARY: Final = Piece(KIND_BOUNDARY, "token_usage")


def texts_of(value: Any) -> tuple[str, ...]:
    """The words of a content: a string, or the strings and `text`s of a list of parts/blocks
    (Claude `{"type": "text", "text"}`, OpenAI `output_text`, Codex `inputText`, summaries)."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list | tuple):
        found = []
        for part in value:
            text = part if isinstance(part, str) else value_at(part, "text")
            if isinstance(text, str) and text:
                found.append(text)
        return tuple(found)
    return ()


def _first_texts(detail: Any, *paths: tuple[str, ...]) -> tuple[str, ...]:
    for path in paths:
        texts = texts_of(value_at(detail, *path))
        if texts:
            return texts
    return ()


def _size_of(value: Any, depth: int = _SIZE_DEPTH) -> int:
    """About how many characters `value` holds: nested strings counted, a long container
    measured on its first `_SIZE_ITEMS` items and scaled, below `_SIZE_DEPTH` levels a guess
    per item. Cheap and bounded, yet an image's base64 inside a tool result is seen."""
    if isinstance(value, str):
        return len(value)
    items: list[Any]
    if is_mapping(value):
        items = list(islice(value.values(), _SIZE_ITEMS))
    elif isinstance(value, list | tuple):
        items = list(value[:_SIZE_ITEMS])
    else:
        return 8
    count = len(value)
    if depth <= 0:
        return 64 * count
    measured = sum(_size_of(item, depth - 1) for item in items)
    return (measured * count // len(items) if count > len(items) else measured) + 2


def make_piece(
    kind: str,
    category: str,
    texts: tuple[str, ...] = (),
    value: Any = None,
    call_id: str | None = None,
    name: str | None = None,
    group: str | None = None,
) -> Piece:
    size = sum(map(len, texts)) + (0 if value is None else _size_of(value))
    return Piece(kind, category, texts, value, call_id, name, group, size)


def _message(detail: Mapping[str, Any]) -> Any:
    """Claude's `sdk_entry.message`, else a chat adapter's `message`."""
    message = value_at(detail, "sdk_entry", "message")
    return message if is_mapping(message) else detail.get("message")


def _user_pieces(detail: Mapping[str, Any]) -> list[Piece]:
    message = _message(detail)
    texts = texts_of(value_at(message, "content")) or texts_of(detail.get("text"))
    if not texts:
        return []
    role = value_at(message, "role")
    # A chat adapter's system/developer message and RTF1's PROMPT are the instructions.
    system = (isinstance(role, str) and role in _SYSTEM_ROLES) or detail.get("tag") == "PROMPT"
    return [make_piece(KIND_SYSTEM if system else KIND_USER, "user_message", texts)]


def _assistant_pieces(detail: Mapping[str, Any]) -> list[Piece]:
    text = detail.get("text")
    if len(detail) == 1 and type(text) is str:  # a line of plain output: nowhere else to look
        return [Piece(KIND_TEXT, "assistant_message", (text,), size=len(text))] if text else []
    message = _message(detail)
    message_id = value_at(message, "id")
    group = safe_text(message_id)[0] if isinstance(message_id, str) and message_id else None
    content = value_at(message, "content")
    pieces = []
    if isinstance(content, list | tuple):
        # Claude transcript lines keep thinking blocks in the message (stream-json splits them).
        thoughts = tuple(
            t for t in (value_at(block, "thinking") for block in content) if isinstance(t, str) and t
        )
        if thoughts:
            pieces.append(make_piece(KIND_REASONING, "thinking", thoughts, group=group))
    texts = texts_of(content) or _first_texts(
        detail, ("notification", "item", "text"), ("event", "item", "text"), ("text",), ("accumulated_text",)
    )
    if texts:
        pieces.append(make_piece(KIND_TEXT, "assistant_message", texts, group=group))
    return pieces


def _thinking_pieces(detail: Mapping[str, Any]) -> list[Piece]:
    texts = _first_texts(
        detail,
        ("sdk_entry", "thinking"),
        ("notification", "item", "summary"),
        ("notification", "item", "content"),
        ("notification", "item", "text"),
        ("event", "item", "text"),
        ("text",),
    )
    return [make_piece(KIND_REASONING, "thinking", texts)] if texts else []


def _codex_item(detail: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Codex item a tool entry is about: app-server `notification.item`, exec `event.item`."""
    for item in (value_at(detail, "notification", "item"), value_at(detail, "event", "item")):
        if is_mapping(item):
            return item
    return None


def _present(**values: Any) -> dict[str, Any] | None:
    found = {key: value for key, value in values.items() if value is not None and value != ""}
    return found or None


def call_arguments(detail: Mapping[str, Any]) -> Any:
    """A call's arguments: what the tool was given (for Codex's own tools, what they act on)."""
    item = _codex_item(detail)
    if item is not None:
        kind = item.get("type")
        if kind in _COMMAND_ITEMS:
            return _present(command=item.get("command"), cwd=item.get("cwd"))
        if kind in _FILE_CHANGE_ITEMS:
            return _present(changes=item.get("changes"))
        if kind in _WEB_SEARCH_ITEMS:
            return _present(query=item.get("query")) or _present(action=item.get("action"))
        if item.get("arguments") is not None:  # MCP calls
            return item.get("arguments")
    for container in (detail.get("notification"), detail.get("sdk_entry"), detail):
        if is_mapping(container):
            for key in ("arguments", "input"):  # WINK-bridged Codex tools; Claude, chat, RTF1
                if container.get(key) is not None:
                    return container[key]
    return None


def call_response(detail: Mapping[str, Any]) -> tuple[tuple[str, ...], Any]:
    """A call's result: `(texts, None)` for words, `((), value)` for a structure, `((), None)`."""
    item = _codex_item(detail)
    if item is not None:
        kind = item.get("type")
        if kind in _COMMAND_ITEMS:
            output = item.get("aggregatedOutput", item.get("aggregated_output"))
            if isinstance(output, str):
                return (output,), None
            exit_code = item.get("exitCode", item.get("exit_code"))
            return (), _present(status=item.get("status"), exit_code=exit_code)
        if kind in _FILE_CHANGE_ITEMS:
            return (), _present(status=item.get("status"))
        if kind in _MCP_ITEMS:
            result, error = item.get("result"), item.get("error")
            texts = (
                texts_of(value_at(result, "content"))
                or texts_of(error)
                or texts_of(value_at(error, "message"))
            )
            return (texts, None) if texts else ((), result)
        if kind in _WEB_SEARCH_ITEMS:
            return (), item.get("results")
    result = detail.get("result")  # WINK-bridged Codex tools
    if is_mapping(result):
        texts = texts_of(result.get("contentItems"))
        return (texts, None) if texts else ((), result)
    entry = detail.get("sdk_entry")
    if is_mapping(entry) and "content" in entry:  # Claude: a string or blocks
        content = entry["content"]
        texts = texts_of(content)
        return (texts, None) if texts else ((), _without_media(content) or None)
    for key in ("output", "content", "text"):  # RTF1, chat
        texts = texts_of(detail.get(key))
        if texts:
            return texts, None
    return (), None


def _without_media(content: Any) -> Any:
    """Claude result blocks with what an image or a document holds (its base64) left out: the
    block says what it was, `{"type": "image"}`."""
    if not isinstance(content, list | tuple):
        return content
    return [
        {"type": block["type"]} if value_at(block, "type") in _MEDIA_BLOCKS else block for block in content
    ]


def _call_piece(detail: Mapping[str, Any]) -> Piece:
    call_id, name = tool_identity(detail)
    return make_piece(KIND_CALL, "tool_use", value=call_arguments(detail), call_id=call_id, name=name)


def _response_piece(detail: Mapping[str, Any]) -> Piece:
    call_id, name = tool_identity(detail)
    texts, value = call_response(detail)
    return make_piece(KIND_RESPONSE, "tool_result", texts, value, call_id=call_id, name=name)


def entry_pieces(entry_type: str, detail: Any) -> list[Piece]:
    """The message parts an entry holds (an empty list for anything else)."""
    if not is_mapping(detail):
        return []
    if entry_type == "user_message":
        return _user_pieces(detail)
    if entry_type == "assistant_message":
        return _assistant_pieces(detail)
    if entry_type == "thinking":
        return _thinking_pieces(detail)
    if entry_type == "tool_use":
        return [_call_piece(detail)]
    if entry_type == "tool_result":
        return [_response_piece(detail)]
    if entry_type == "token_usage":
        # Usage closes a model call (Codex, chat adapters report it after each); Claude's
        # `result` also holds the turn's final answer.
        answer = final_answer(detail)
        found = [make_piece(KIND_ANSWER, "assistant_message", (answer,))] if answer else []
        return [*found, _CUT_BOUNDARY]
    return []


def _cut(text: str, room: int) -> str:
    """The start of `text`, without the run of token characters the cut may have split: the
    redactor runs later and would not know half a key."""
    if len(text) <= room:
        return text
    cut = text[:room]
    tail = _TOKEN_TAIL.search(cut, max(room - _LONGEST_SECRET, 0))
    return cut[: tail.start()] if tail is not None else cut


def _bounded(piece: Piece, keep_chars: int) -> Piece:
    """`piece` holding at most `keep_chars` characters (a copy of the start of what it said)."""
    room = max(keep_chars - _SECRET_MARGIN, 0)
    texts = (_cut("\n".join(piece.texts), room),) if piece.texts else ()
    value = piece.value
    if isinstance(value, str):
        value = _cut(value, room)
    elif is_mapping(value):  # arguments: their long strings cut, their keys kept
        value = {key: _cut(item, room) if isinstance(item, str) else item for key, item in value.items()}
    if value is not None and not isinstance(value, str) and _size_of(value) > room:
        # Too large a structure to keep by reference (an image's base64 inside a result): the
        # start of its JSON, a copy, so the structure itself is not kept alive.
        value = _cut(attribute_json(value), room)
    return piece._replace(texts=texts, value=value, size=min(piece.size, room))


class KeepBudget:
    """What one span may keep of its entries' words until it ends: `keep_chars` characters (no
    fewer than a cut needs to leave no secret in part). `cut` says whether anything was cut or
    left out, so that the span's content says it was truncated."""

    __slots__ = ("cut", "keep_chars")

    def __init__(self, keep_chars: int) -> None:
        self.keep_chars = max(keep_chars, _MIN_KEEP_CHARS)
        self.cut = False

    def bounded(self, piece: Piece) -> Piece:
        """`piece`, or the start of it when it holds more than the whole budget."""
        if piece.size > self.keep_chars:
            self.cut = True
            return _bounded(piece, self.keep_chars)
        return piece


def attribute_json(value: Any) -> str:
    """The compact JSON everything goes out as (and a structure too large to keep is kept as)."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
