"""What a span says: the GenAI content attributes, built from canonical entries.

The OpenTelemetry GenAI semantic conventions (v1.41) carry what a model read and wrote as JSON
strings: `gen_ai.input.messages` and `gen_ai.output.messages` (messages `{"role", "parts"}`,
output messages with a `finish_reason`), `gen_ai.system_instructions` and
`gen_ai.tool.definitions`; parts are `{"type": "text", "content"}`, `{"type": "reasoning",
"content"}`, `{"type": "tool_call", "id", "name", "arguments"}` and `{"type":
"tool_call_response", "id", "response"}`. A tool span carries `gen_ai.tool.call.arguments` and
`gen_ai.tool.call.result`. With `ContentRules.openinference`, OpenInference's `input.value` /
`output.value` (and their mime types) are set too: they are what Arize Phoenix shows in its
Input/Output columns and as a session's first input and last output.

Three accumulators, one per span, are fed every entry of their span on the writer thread:
`ChatContent` (a turn's or a subagent's model calls), `AgentContent` (an agent's prompt and
answer) and `ToolContent` (a call's arguments and result). `add()` only reads the few keys
where each adapter writes its words (`_pieces`: WINK Codex notifications, Claude transcript /
stream-json / SDK messages, `codex exec --json` items, RTF1 and chat messages) and keeps
references to those strings, within a character budget; the JSON is built once, by
`attributes()` as the span ends, under `ContentRules`:

* policy: a part whose entry type's mode is not `full` goes without its words (a tool call
  keeps its id and name, a tool response its id with `"response": null`, a text part is left
  out, and a message left with no part too); a policy that is not `full` at all gives nothing;
* redaction: every text, and every string inside arguments and results, goes through
  `rules.redact`;
* size: each attribute's JSON is at most `rules.max_length` characters *and still valid
  against the conventions' schemas* (backends such as Phoenix drop an attribute whole when
  one item does not match): the longest texts are shortened (ending in "…") and the oldest
  input messages left out, never replaced by markers. Then `transcript.content.truncated` is
  `True` (a bool attribute; absent when nothing was cut).

Pure (no OpenTelemetry import) and tolerant: a detail of a shape no adapter writes adds
nothing, and no public function or method raises.
"""

from __future__ import annotations

import json
import math
import re
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import islice
from typing import Any, Final, Literal, NamedTuple

from transcript_otel import attributes as attr
from transcript_otel._genai import tool_identity
from transcript_otel._genai_facts import final_answer
from transcript_otel._serialize import safe_text
from transcript_otel._truncate import truncate_plain
from transcript_otel.content import ContentPolicy

ContentAttributes = dict[str, str | bool]

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

# Texts are shortened to this many characters before any message is left out.
_TEXT_FLOOR: Final = 128
_ELLIPSIS: Final = "…"
# Nesting copied from arguments and results; deeper values become their text.
_MAX_DEPTH: Final = 32

TEXT_PLAIN: Final = "text/plain"
APPLICATION_JSON: Final = "application/json"

# Piece kinds (see `_Piece`).
_USER: Final = "user"
_SYSTEM: Final = "system"
_TEXT: Final = "text"
_REASONING: Final = "reasoning"
_CALL: Final = "tool_call"
_RESPONSE: Final = "tool_response"
_ANSWER: Final = "answer"
_BOUNDARY: Final = "boundary"  # a model call ended (its usage was reported)
_ASSISTANT_KINDS: Final = frozenset({_TEXT, _REASONING, _CALL})

_SYSTEM_ROLES: Final = frozenset({"system", "developer"})
# Codex items that are tool calls: app-server (camelCase) and `codex exec --json` (snake_case).
_COMMAND_ITEMS: Final = frozenset({"commandExecution", "command_execution"})
_FILE_CHANGE_ITEMS: Final = frozenset({"fileChange", "file_change"})
_MCP_ITEMS: Final = frozenset({"mcpToolCall", "mcp_tool_call"})
_WEB_SEARCH_ITEMS: Final = frozenset({"webSearch", "web_search"})
_FALLBACK_TOOL_NAME: Final = "tool"  # what the span tree names a call without a name
# What an agent's prompt and answer come from.
# What an agent span keeps of its run's entries to find its prompt and its answer.
_PROMPT_CANDIDATES: Final = 4
# What a secret may be made of, at the end of a text cut before redaction.
_TOKEN_TAIL: Final = re.compile(r"[A-Za-z0-9+/_=.-]+\Z")
_LONGEST_SECRET: Final = 512
# How deep and how wide `_size_of` looks into a structured value (tool arguments, results).
_SIZE_DEPTH: Final = 6
_SIZE_ITEMS: Final = 64
# Claude content blocks whose data (base64) no backend shows as text.
_MEDIA_BLOCKS: Final = frozenset({"image", "document"})
_ANSWER_CANDIDATES: Final = 4


@dataclass(frozen=True, slots=True)
class ContentRules:
    """How content goes out: which entry types keep their words, the redactor, the length limit."""

    policy: ContentPolicy  # per entry type: `full` keeps content; `metadata`/`none` leave it out
    redact: Callable[[str], str]  # applied to every text that goes out (the pipeline's redactor)
    max_length: int  # max characters of each attribute's value (its JSON string)
    openinference: bool = False  # also `input.value`/`output.value` (+ `.mime_type`)


class _Piece(NamedTuple):
    """One part of a message, as found in an entry: references, no copies."""

    kind: str
    category: str  # the entry type whose content mode decides whether the words go out
    texts: tuple[str, ...] = ()  # the words (joined by newlines when built)
    value: Any = None  # arguments or a structured result (JSON-like); None when there is none
    call_id: str | None = None
    name: str | None = None
    group: str | None = None  # the model response (message id) it belongs to, when known
    size: int = 0  # characters held, about


_CUT_BOUNDARY: Final = _Piece(_BOUNDARY, "token_usage")


# --- reading details ------------------------------------------------------------------------


def _get(value: Any, *keys: str) -> Any:
    """`value[k1][k2]...`, or None where a level is not a mapping."""
    for key in keys:
        # Dicts and absent levels (most lookups) skip the ABC check, which costs ~0.3 µs.
        if type(value) is not dict and (value is None or not isinstance(value, Mapping)):
            return None
        value = value.get(key)
    return value


def _texts(value: Any) -> tuple[str, ...]:
    """The words of a content: a string, or the strings and `text`s of a list of parts/blocks
    (Claude `{"type": "text", "text"}`, OpenAI `output_text`, Codex `inputText`, summaries)."""
    if isinstance(value, str):
        return (value,) if value else ()
    if isinstance(value, list | tuple):
        found = []
        for part in value:
            text = part if isinstance(part, str) else _get(part, "text")
            if isinstance(text, str) and text:
                found.append(text)
        return tuple(found)
    return ()


def _first_texts(detail: Any, *paths: tuple[str, ...]) -> tuple[str, ...]:
    for path in paths:
        texts = _texts(_get(detail, *path))
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
    if isinstance(value, Mapping):
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


def _piece(
    kind: str,
    category: str,
    texts: tuple[str, ...] = (),
    value: Any = None,
    call_id: str | None = None,
    name: str | None = None,
    group: str | None = None,
) -> _Piece:
    size = sum(map(len, texts)) + (0 if value is None else _size_of(value))
    return _Piece(kind, category, texts, value, call_id, name, group, size)


def _message(detail: Mapping[str, Any]) -> Any:
    """Claude's `sdk_entry.message`, else a chat adapter's `message`."""
    message = _get(detail, "sdk_entry", "message")
    return message if isinstance(message, Mapping) else detail.get("message")


def _user_pieces(detail: Mapping[str, Any]) -> list[_Piece]:
    message = _message(detail)
    texts = _texts(_get(message, "content")) or _texts(detail.get("text"))
    if not texts:
        return []
    role = _get(message, "role")
    # A chat adapter's system/developer message and RTF1's PROMPT are the instructions.
    system = (isinstance(role, str) and role in _SYSTEM_ROLES) or detail.get("tag") == "PROMPT"
    return [_piece(_SYSTEM if system else _USER, "user_message", texts)]


def _assistant_pieces(detail: Mapping[str, Any]) -> list[_Piece]:
    message = _message(detail)
    message_id = _get(message, "id")
    group = safe_text(message_id)[0] if isinstance(message_id, str) and message_id else None
    content = _get(message, "content")
    pieces = []
    if isinstance(content, list | tuple):
        # Claude transcript lines keep thinking blocks in the message (stream-json splits them).
        thoughts = tuple(
            t for t in (_get(block, "thinking") for block in content) if isinstance(t, str) and t
        )
        if thoughts:
            pieces.append(_piece(_REASONING, "thinking", thoughts, group=group))
    texts = _texts(content) or _first_texts(
        detail, ("notification", "item", "text"), ("event", "item", "text"), ("text",), ("accumulated_text",)
    )
    if texts:
        pieces.append(_piece(_TEXT, "assistant_message", texts, group=group))
    return pieces


def _thinking_pieces(detail: Mapping[str, Any]) -> list[_Piece]:
    texts = _first_texts(
        detail,
        ("sdk_entry", "thinking"),
        ("notification", "item", "summary"),
        ("notification", "item", "content"),
        ("notification", "item", "text"),
        ("event", "item", "text"),
        ("text",),
    )
    return [_piece(_REASONING, "thinking", texts)] if texts else []


def _codex_item(detail: Mapping[str, Any]) -> Mapping[str, Any] | None:
    """The Codex item a tool entry is about: app-server `notification.item`, exec `event.item`."""
    for item in (_get(detail, "notification", "item"), _get(detail, "event", "item")):
        if isinstance(item, Mapping):
            return item
    return None


def _present(**values: Any) -> dict[str, Any] | None:
    found = {key: value for key, value in values.items() if value is not None and value != ""}
    return found or None


def _arguments(detail: Mapping[str, Any]) -> Any:
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
        if isinstance(container, Mapping):
            for key in ("arguments", "input"):  # WINK-bridged Codex tools; Claude, chat, RTF1
                if container.get(key) is not None:
                    return container[key]
    return None


def _response(detail: Mapping[str, Any]) -> tuple[tuple[str, ...], Any]:
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
            texts = _texts(_get(result, "content")) or _texts(error) or _texts(_get(error, "message"))
            return (texts, None) if texts else ((), result)
        if kind in _WEB_SEARCH_ITEMS:
            return (), item.get("results")
    result = detail.get("result")  # WINK-bridged Codex tools
    if isinstance(result, Mapping):
        texts = _texts(result.get("contentItems"))
        return (texts, None) if texts else ((), result)
    entry = detail.get("sdk_entry")
    if isinstance(entry, Mapping) and "content" in entry:  # Claude: a string or blocks
        content = entry["content"]
        texts = _texts(content)
        return (texts, None) if texts else ((), _without_media(content) or None)
    for key in ("output", "content", "text"):  # RTF1, chat
        texts = _texts(detail.get(key))
        if texts:
            return texts, None
    return (), None


def _without_media(content: Any) -> Any:
    """Claude result blocks with what an image or a document holds (its base64) left out: the
    block says what it was, `{"type": "image"}`."""
    if not isinstance(content, list | tuple):
        return content
    return [{"type": block["type"]} if _get(block, "type") in _MEDIA_BLOCKS else block for block in content]


def _call_piece(detail: Mapping[str, Any]) -> _Piece:
    call_id, name = tool_identity(detail)
    return _piece(_CALL, "tool_use", value=_arguments(detail), call_id=call_id, name=name)


def _response_piece(detail: Mapping[str, Any]) -> _Piece:
    call_id, name = tool_identity(detail)
    texts, value = _response(detail)
    return _piece(_RESPONSE, "tool_result", texts, value, call_id=call_id, name=name)


def _pieces(entry_type: str, detail: Any) -> list[_Piece]:
    """The message parts an entry holds (an empty list for anything else)."""
    if not isinstance(detail, Mapping):
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
        found = [_piece(_ANSWER, "assistant_message", (answer,))] if answer else []
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


def _bounded(piece: _Piece, keep_chars: int) -> _Piece:
    """`piece` holding at most `keep_chars` characters (a copy of the start of what it said)."""
    room = max(keep_chars - _SECRET_MARGIN, 0)
    texts = (_cut("\n".join(piece.texts), room),) if piece.texts else ()
    value = piece.value
    if isinstance(value, str):
        value = _cut(value, room)
    elif isinstance(value, Mapping):  # arguments: their long strings cut, their keys kept
        value = {key: _cut(item, room) if isinstance(item, str) else item for key, item in value.items()}
    if value is not None and not isinstance(value, str) and _size_of(value) > room:
        # Too large a structure to keep by reference (an image's base64 inside a result): the
        # start of its JSON, a copy, so the structure itself is not kept alive.
        value = _cut(_dumps(value), room)
    return piece._replace(texts=texts, value=value, size=min(piece.size, room))


# --- building JSON --------------------------------------------------------------------------


def _dumps(value: Any) -> str:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)


class _Builder:
    """Copies what goes out, redacted and JSON-safe; remembers whether anything was cut."""

    __slots__ = ("_redact", "limit", "truncated")

    def __init__(self, rules: ContentRules, truncated: bool) -> None:
        self._redact = rules.redact
        self.limit = rules.max_length
        self.truncated = truncated

    def text(self, text: Any) -> str:
        return self._redact(safe_text(text)[0])

    def joined(self, texts: tuple[str, ...]) -> str:
        return self.text("\n".join(safe_text(text)[0] for text in texts))

    def value(self, value: Any) -> Any:
        """A JSON-safe copy of `value`, every string redacted. A structure of more than `limit`
        items could not fit anyway: its copy stops there (and counts as cut)."""
        budget = [self.limit]
        return self._copy(value, 0, budget)

    def _copy(self, value: Any, depth: int, budget: list[int]) -> Any:
        budget[0] -= 1
        if isinstance(value, str):
            return self.text(value)
        if value is None or isinstance(value, bool | int):
            return value
        if isinstance(value, float):
            return value if math.isfinite(value) else None
        if depth < _MAX_DEPTH and isinstance(value, Mapping | list | tuple):
            try:
                return self._container(value, depth, budget)
            except Exception:  # a container that cannot be read (the redactor's own errors recur)
                self.truncated = True
        return self.text(value)  # anything else (or nested too deep, or unreadable): its text

    def _container(self, value: Any, depth: int, budget: list[int]) -> Any:
        if isinstance(value, Mapping):
            copied: dict[str, Any] = {}
            for key, item in value.items():
                if budget[0] <= 0:
                    self.truncated = True
                    break
                copied[self.text(key)] = self._copy(item, depth + 1, budget)
            return copied
        items = []
        for item in value:
            if budget[0] <= 0:
                self.truncated = True
                break
            items.append(self._copy(item, depth + 1, budget))
        return items

    def plain(self, text: str) -> str:
        """A text value (not JSON) within the limit."""
        if len(text) > self.limit:
            self.truncated = True
            return truncate_plain(text, self.limit)
        return text

    def fit(self, items: list[Any], shape: _Shape, drop: _Drop) -> str | None:
        """`items` as a JSON array within the limit, or None when even cut it cannot fit."""
        fitted, cut = _fit_array(items, self.limit, shape, drop)
        if fitted is None and shape == "message" and items:
            fitted = _fit_last_message(items[-1], self.limit)
            cut = True
        self.truncated = self.truncated or cut
        return None if fitted is None else _dumps(fitted)

    def fit_value(self, value: Any) -> str | None:
        """One JSON value within the limit (its strings shortened), or None."""
        fitted, cut = _fit_array([value], self.limit + 2, "value", None)  # `[` and `]` not counted
        self.truncated = self.truncated or cut
        return None if fitted is None else _dumps(fitted[0])


_Shape = Literal["message", "part", "definition", "value"]
_Drop = Literal["start", "end"] | None


class _Leaf(NamedTuple):
    """A string that may be shortened: `container[key]`, `length` characters of JSON (quotes aside)."""

    container: Any
    key: Any
    length: int


def _encoded_length(text: str) -> int:
    """Characters of `text` in JSON, without its quotes (escapes count: `\\n` is 2, `\\u0001` 6)."""
    return len(_dumps(text)) - 2


def _leaf(container: Any, key: Any, text: str) -> _Leaf:
    return _Leaf(container, key, _encoded_length(text))


def _prefix(text: str, room: int) -> str:
    """The start of `text` that takes at most `room` characters of JSON (about the longest)."""
    end = min(len(text), room)
    while end > 0:
        over = _encoded_length(text[:end]) - room
        if over <= 0:
            return text[:end]
        end -= over  # each character left out takes at least one of JSON with it
    return ""


def _string_leaves(value: Any, found: list[_Leaf]) -> None:
    """Every string inside an argument or result (all of them are words)."""
    items: Iterable[tuple[Any, Any]]
    if isinstance(value, dict):
        items = value.items()
    elif isinstance(value, list):
        items = enumerate(value)
    else:
        return
    for key, item in items:
        if isinstance(item, str):
            if item:
                found.append(_leaf(value, key, item))
        else:
            _string_leaves(item, found)


def _part_leaves(part: Any, found: list[_Leaf]) -> None:
    if not isinstance(part, dict):
        return
    kind = part.get("type")
    if kind in ("text", "reasoning") and isinstance(part.get("content"), str):
        found.append(_leaf(part, "content", part["content"]))
    elif kind == "tool_call":
        _leaves_under(part, "arguments", found)
    elif kind == "tool_call_response":
        _leaves_under(part, "response", found)


def _leaves_under(container: dict[str, Any], key: str, found: list[_Leaf]) -> None:
    value = container.get(key)
    if isinstance(value, str):
        if value:
            found.append(_leaf(container, key, value))
    else:
        _string_leaves(value, found)


def _description_leaves(value: Any, found: list[_Leaf], depth: int = 0) -> None:
    """A JSON schema's `description` strings: shortening anything else could break the schema."""
    if depth > _MAX_DEPTH:
        return
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "description" and isinstance(item, str) and item:
                found.append(_leaf(value, key, item))
            else:
                _description_leaves(item, found, depth + 1)
    elif isinstance(value, list):
        for item in value:
            _description_leaves(item, found, depth + 1)


def _leaves(item: Any, shape: _Shape) -> list[_Leaf]:
    """The strings of `item` that may be shortened: words, never ids, names, roles or types."""
    found: list[_Leaf] = []
    if shape == "message":
        for part in _get(item, "parts") or ():
            _part_leaves(part, found)
    elif shape == "part":
        _part_leaves(item, found)
    elif shape == "definition":
        _description_leaves(item, found)
    elif isinstance(item, str):
        found.append(_leaf([item], 0, item))  # a bare string cannot be shortened in place
    else:
        _string_leaves(item, found)
    return found


def _array_length(encoded: list[str]) -> int:
    return sum(map(len, encoded)) + max(len(encoded) - 1, 0) + 2


def _spare(leaves: list[_Leaf], floor: int) -> int:
    """What shortening every leaf to `floor` characters of JSON (and "…") saves, at least."""
    return sum(leaf.length - floor - 1 for leaf in leaves if leaf.length > floor + 1)


def _shorten(leaves: list[_Leaf], excess: int, floor: int) -> None:
    """Cut the longest leaves to one length (no shorter than `floor`) that saves `excess`."""
    low, high = floor, max(leaf.length for leaf in leaves)
    while low < high:  # the longest length that still saves enough
        middle = (low + high + 1) // 2
        if _spare(leaves, middle) >= excess:
            low = middle
        else:
            high = middle - 1
    for leaf in leaves:
        if leaf.length > low + 1:
            leaf.container[leaf.key] = _prefix(leaf.container[leaf.key], low) + _ELLIPSIS


def _fit_array(items: list[Any], limit: int, shape: _Shape, drop: _Drop) -> tuple[list[Any] | None, bool]:
    """`items` (built here: changed in place) shortened to encode in at most `limit` characters:
    `(items, whether anything was cut)`, or `(None, True)`. Texts are shortened to `_TEXT_FLOOR`
    before whole items are left out (from `drop`'s end); then to nothing."""
    items = list(items)
    encoded = [_dumps(item) for item in items]
    if _array_length(encoded) <= limit:
        return items, False
    if not items:
        return None, True
    bare = isinstance(items[0], str) if shape == "value" and len(items) == 1 else False
    leaves = [_leaves(item, shape) for item in items]
    for floor in (_TEXT_FLOOR, 0):
        spare = [_spare(found, floor) for found in leaves]
        while drop is not None and len(items) > 1 and _array_length(encoded) - sum(spare) > limit:
            index = 0 if drop == "start" else -1
            for column in (items, encoded, leaves, spare):
                del column[index]
        excess = _array_length(encoded) - limit
        if excess <= 0:
            return items, True
        if excess <= sum(spare):
            everything = [leaf for found in leaves for leaf in found]
            _shorten(everything, excess, floor)
            if bare:  # the value was a string: its shortened copy is in its leaf's box
                items = [everything[0].container[0]]
            if len(_dumps(items)) <= limit:
                return items, True
            return None, True  # cannot happen (see `_spare`); never return too much
    return None, True


def _fit_last_message(message: Any, limit: int) -> list[Any] | None:
    """The last message alone, with as many of its newest parts as fit: for a message whose
    parts alone are more than the limit can hold."""
    if not isinstance(message, dict) or not isinstance(message.get("parts"), list):
        return None
    shell = {**message, "parts": []}
    room = limit - len(_dumps([shell])) + 2  # its parts' JSON replaces the shell's `[]`
    parts, _ = _fit_array(message["parts"], room, "part", "start") if room > 2 else (None, True)
    if not parts:
        return None
    fitted = [{**message, "parts": parts}]
    return fitted if len(_dumps(fitted)) <= limit else None


def _text_part(text: str, kind: str = "text") -> dict[str, Any]:
    return {"type": kind, "content": text}


class _Message:
    __slots__ = ("group", "parts", "role")

    def __init__(self, role: str, parts: list[dict[str, Any]] | None = None) -> None:
        self.role = role
        self.parts: list[dict[str, Any]] = parts or []
        self.group: str | None = None

    def json(self, finish_reason: str | None = None) -> dict[str, Any]:
        found: dict[str, Any] = {"role": self.role, "parts": self.parts}
        if finish_reason is not None:
            found["finish_reason"] = finish_reason
        return found


def _full(rules: ContentRules, category: str) -> bool:
    return rules.policy.mode_for(category) == "full"


def _call_part(piece: _Piece, builder: _Builder, full: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call"}
    if piece.call_id is not None:
        part["id"] = piece.call_id
    part["name"] = piece.name or _FALLBACK_TOOL_NAME
    if full and piece.value is not None:
        part["arguments"] = builder.value(piece.value)
    return part


def _response_content(piece: _Piece, builder: _Builder) -> Any:
    if piece.texts:
        return builder.joined(piece.texts)
    return None if piece.value is None else builder.value(piece.value)


def _response_part(piece: _Piece, builder: _Builder, full: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response"}
    if piece.call_id is not None:
        part["id"] = piece.call_id
    part["response"] = _response_content(piece, builder) if full else None
    return part


def _assistant_part(piece: _Piece, builder: _Builder, full: bool) -> dict[str, Any] | None:
    if piece.kind == _CALL:
        return _call_part(piece, builder, full)
    if full and piece.texts:
        return _text_part(builder.joined(piece.texts), piece.kind)
    return None


def _put(found: ContentAttributes, key: str, value: str | None) -> None:
    if value is not None:
        found[key] = value


def _openinference(
    found: ContentAttributes, prefix: Literal["input", "output"], value: Any, builder: _Builder
) -> None:
    """`input.value`/`output.value`: text as it is (cut), anything else as JSON."""
    if value is None or value == "":
        return
    if isinstance(value, str):
        found[f"{prefix}.value"] = builder.plain(value)
        found[f"{prefix}.mime_type"] = TEXT_PLAIN
        return
    encoded = builder.fit_value(value)
    if encoded is not None:
        found[f"{prefix}.value"] = encoded
        found[f"{prefix}.mime_type"] = APPLICATION_JSON


def _finished(found: ContentAttributes, builder: _Builder) -> ContentAttributes:
    if not found:
        return {}
    if builder.truncated:
        found[attr.CONTENT_TRUNCATED] = True
    return found


def _copy_json(value: Any) -> Any:
    """A copy of what `_Builder.value` made (dicts, lists, scalars), to cut apart from the original."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _text_of(parts: Iterable[dict[str, Any]]) -> str | None:
    texts = [part["content"] for part in parts if part.get("type") == "text"]
    return "\n".join(texts) if texts else None


def _input_value(messages: list[_Message]) -> Any:
    """The newest user text or tool result among the input messages."""
    for message in reversed(messages):
        for part in reversed(message.parts):
            if message.role == "user" and part.get("type") == "text":
                return _text_of(message.parts)
            if message.role == "tool" and part.get("response") is not None:
                return _copy_json(part["response"])
    return None


def _output_value(message: _Message) -> Any:
    """The answer's text, else its tool calls."""
    text = _text_of(message.parts)
    if text is not None:
        return text
    calls = [
        {key: _copy_json(part[key]) for key in ("id", "name", "arguments") if key in part}
        for part in message.parts
        if part.get("type") == "tool_call"
    ]
    return calls or None


# --- the accumulators -----------------------------------------------------------------------


class ChatContent:
    """A chat span's conversation (one turn of the main agent, or one subagent's model calls), in
    order. Keeps at most `keep_chars` characters and `keep_pieces` parts, the newest (older
    ones are left out, and the content counts as cut)."""

    __slots__ = ("_chars", "_cut", "_keep_chars", "_keep_pieces", "_pieces")

    def __init__(self, keep_chars: int = KEEP_CHARS, keep_pieces: int = KEEP_PIECES) -> None:
        self._pieces: deque[_Piece] = deque()
        self._chars = 0
        self._keep_chars = max(keep_chars, _MIN_KEEP_CHARS)
        self._keep_pieces = max(keep_pieces, 2)
        self._cut = False

    def add(self, entry_type: str, detail: Any) -> None:
        """Keep what the entry says (references to its strings); called on every entry of the span."""
        try:
            for piece in _pieces(entry_type, detail):
                self._keep(piece)
        except Exception:  # a detail no adapter writes (or a hostile one) adds nothing
            return

    def _keep(self, piece: _Piece) -> None:
        if piece.kind == _BOUNDARY and (not self._pieces or self._pieces[-1].kind == _BOUNDARY):
            return
        if piece.size > self._keep_chars:
            piece = _bounded(piece, self._keep_chars)
            self._cut = True
        pieces = self._pieces
        pieces.append(piece)
        self._chars += piece.size
        while (self._chars > self._keep_chars or len(pieces) > self._keep_pieces) and len(pieces) > 1:
            self._chars -= pieces.popleft().size
            self._cut = True

    def attributes(self, rules: ContentRules, finish_reason: str | None = None) -> ContentAttributes:
        """`gen_ai.input.messages` (every message but the last assistant one),
        `gen_ai.output.messages` (that one, with `finish_reason`; when None: `tool_call` if it
        calls tools, else `stop`), `gen_ai.system_instructions` when the turn held any, the
        OpenInference values with `rules.openinference`; {} when nothing may go out."""
        try:
            return self._attributes(rules, finish_reason)
        except Exception:
            return {}

    def _attributes(self, rules: ContentRules, finish_reason: str | None) -> ContentAttributes:
        if rules.policy.mode != "full" or rules.max_length <= 0:
            return {}
        builder = _Builder(rules, self._cut)
        system: list[dict[str, Any]] = []
        messages: list[_Message] = []
        current: _Message | None = None
        answer: _Piece | None = None
        for piece in self._pieces:
            kind = piece.kind
            if kind == _BOUNDARY:
                current = None
                continue
            if kind == _ANSWER:
                answer = piece
                continue
            full = _full(rules, piece.category)
            if kind == _SYSTEM:
                if full:
                    system.append(_text_part(builder.joined(piece.texts)))
            elif kind == _USER:
                messages.append(_Message("user", [_text_part(builder.joined(piece.texts))] if full else []))
                current = None
            elif kind == _RESPONSE:
                messages.append(_Message("tool", [_response_part(piece, builder, full)]))
                current = None
            elif kind in _ASSISTANT_KINDS:
                if current is None or (piece.group and current.group and piece.group != current.group):
                    current = _Message("assistant")
                    messages.append(current)
                current.group = piece.group or current.group
                part = _assistant_part(piece, builder, full)
                if part is not None:
                    current.parts.append(part)
        inputs, output = _split(messages)
        if output is None and answer is not None and _full(rules, answer.category):
            output = _Message("assistant", [_text_part(builder.joined(answer.texts))])
        return self._encode(rules, builder, system, inputs, output, finish_reason)

    @staticmethod
    def _encode(
        rules: ContentRules,
        builder: _Builder,
        system: list[dict[str, Any]],
        inputs: list[_Message],
        output: _Message | None,
        finish_reason: str | None,
    ) -> ContentAttributes:
        found: ContentAttributes = {}
        if rules.openinference:  # before the messages are cut in place
            _openinference(found, "input", _input_value(inputs), builder)
            if output is not None:
                _openinference(found, "output", _output_value(output), builder)
        if system:
            _put(found, attr.GEN_AI_SYSTEM_INSTRUCTIONS, builder.fit(system, "part", None))
        if inputs:
            encoded = builder.fit([message.json() for message in inputs], "message", "start")
            _put(found, attr.GEN_AI_INPUT_MESSAGES, encoded)
        if output is not None:
            reason = safe_text(finish_reason)[0] if isinstance(finish_reason, str) and finish_reason else None
            if reason is None:
                calls = any(part.get("type") == "tool_call" for part in output.parts)
                reason = "tool_call" if calls else "stop"
            _put(found, attr.GEN_AI_OUTPUT_MESSAGES, builder.fit([output.json(reason)], "message", None))
        return _finished(found, builder)


def _split(messages: list[_Message]) -> tuple[list[_Message], _Message | None]:
    """(input messages, output message): the output is the last assistant message, unless a user
    spoke after it (then the model has not answered). Tool results after it answer its own
    calls: no model call of this span read them, so they are in neither."""
    last = None
    for index in range(len(messages) - 1, -1, -1):
        if messages[index].role == "assistant":
            last = index
            break
        if messages[index].role == "user":
            break
    if last is None:
        return [message for message in messages if message.parts], None
    output = messages[last]
    inputs = [message for message in messages[:last] if message.parts]
    return inputs, output if output.parts else None


class AgentContent:
    """An invoke_agent span (run root or subagent): its prompt and final answer. The prompt is the
    first user text (else, for an agent told only by instructions, as WINK's chat adapters do,
    the first system text); the answer the last assistant text, or Claude's `result`.

    It sees every entry of a run, so `add()` only keeps references to the few entries that may
    hold them (the first user messages, the last assistant messages, the last `result`); they
    are read as the span ends."""

    __slots__ = ("_answers", "_cut", "_keep_chars", "_prompts", "_result")

    def __init__(self, keep_chars: int = KEEP_CHARS) -> None:
        self._prompts: list[Any] = []
        self._answers: deque[Any] = deque(maxlen=_ANSWER_CANDIDATES)
        self._result: Any = None
        self._keep_chars = max(keep_chars, _MIN_KEEP_CHARS)
        self._cut = False

    def add(self, entry_type: str, detail: Any) -> None:
        if entry_type == "assistant_message":
            self._answers.append(detail)
        elif entry_type == "user_message":
            if len(self._prompts) < _PROMPT_CANDIDATES:
                self._prompts.append(detail)
        elif entry_type == "token_usage" and final_answer(detail) is not None:
            self._result, self._answers = detail, deque(maxlen=_ANSWER_CANDIDATES)

    def _prompt(self) -> _Piece | None:
        found: _Piece | None = None
        for detail in self._prompts:
            for piece in _pieces("user_message", detail):
                if piece.kind == _USER:
                    return self._bounded(piece)
                found = found or self._bounded(piece)
        return found

    def _answer(self) -> _Piece | None:
        for detail in reversed(self._answers):
            for piece in reversed(_pieces("assistant_message", detail)):
                if piece.kind == _TEXT:
                    return self._bounded(piece)
        if self._result is not None:
            for piece in _pieces("token_usage", self._result):
                if piece.kind == _ANSWER:
                    return self._bounded(piece)
        return None

    def _bounded(self, piece: _Piece) -> _Piece:
        if piece.size > self._keep_chars:
            self._cut = True
            return _bounded(piece, self._keep_chars)
        return piece

    def attributes(self, rules: ContentRules, finish_reason: str = "stop") -> ContentAttributes:
        """`gen_ai.input.messages` `[prompt]`, `gen_ai.output.messages` `[answer]` (with
        `finish_reason`), and with `rules.openinference` the two texts as `input.value` and
        `output.value`; {} when nothing may go out."""
        try:
            return self._attributes(rules, finish_reason)
        except Exception:
            return {}

    def _attributes(self, rules: ContentRules, finish_reason: str) -> ContentAttributes:
        if rules.policy.mode != "full" or rules.max_length <= 0:
            return {}
        builder = _Builder(rules, self._cut)
        found: ContentAttributes = {}
        prompt, answer = self._prompt(), self._answer()
        if prompt is not None and _full(rules, prompt.category):
            text = builder.joined(prompt.texts)
            if rules.openinference:
                _openinference(found, "input", text, builder)
            role = "system" if prompt.kind == _SYSTEM else "user"
            message = _Message(role, [_text_part(text)])
            _put(found, attr.GEN_AI_INPUT_MESSAGES, builder.fit([message.json()], "message", None))
        if answer is not None and _full(rules, answer.category):
            text = builder.joined(answer.texts)
            if rules.openinference:
                _openinference(found, "output", text, builder)
            reason = (
                safe_text(finish_reason)[0] if isinstance(finish_reason, str) and finish_reason else "stop"
            )
            message = _Message("assistant", [_text_part(text)])
            _put(found, attr.GEN_AI_OUTPUT_MESSAGES, builder.fit([message.json(reason)], "message", None))
        return _finished(found, builder)


class ToolContent:
    """An execute_tool span: its arguments (from `tool_use`; for Codex's own tools, from the
    result's item when the call said none) and its result (from `tool_result`)."""

    __slots__ = ("_arguments", "_cut", "_keep_chars", "_result")

    def __init__(self, keep_chars: int = KEEP_CHARS) -> None:
        self._arguments: _Piece | None = None
        self._result: _Piece | None = None
        self._keep_chars = max(keep_chars, _MIN_KEEP_CHARS)
        self._cut = False

    def add(self, entry_type: str, detail: Any) -> None:
        try:
            if not isinstance(detail, Mapping):
                return
            # The span knows its call's id and name: only the words are read here.
            if entry_type == "tool_use":
                self._keep_arguments(detail)
            elif entry_type == "tool_result":
                texts, value = _response(detail)
                self._result = self._bounded(_piece(_RESPONSE, "tool_result", texts, value))
                if self._arguments is None:
                    self._keep_arguments(detail)
        except Exception:  # a detail no adapter writes (or a hostile one) adds nothing
            return

    def _keep_arguments(self, detail: Mapping[str, Any]) -> None:
        arguments = _arguments(detail)
        if arguments is not None:
            self._arguments = self._bounded(_piece(_CALL, "tool_use", value=arguments))

    def _bounded(self, piece: _Piece) -> _Piece:
        if piece.size > self._keep_chars:
            self._cut = True
            return _bounded(piece, self._keep_chars)
        return piece

    def attributes(self, rules: ContentRules) -> ContentAttributes:
        """`gen_ai.tool.call.arguments` (JSON: an object as the tool got it, anything else as its
        JSON), `gen_ai.tool.call.result` (text as it is, anything else as JSON); with
        `rules.openinference` the same as `input.value` / `output.value`."""
        try:
            return self._attributes(rules)
        except Exception:
            return {}

    def _attributes(self, rules: ContentRules) -> ContentAttributes:
        if rules.policy.mode != "full" or rules.max_length <= 0:
            return {}
        builder = _Builder(rules, self._cut)
        found: ContentAttributes = {}
        arguments, result = self._arguments, self._result
        if arguments is not None and _full(rules, arguments.category):
            encoded = builder.fit_value(builder.value(arguments.value))
            if encoded is not None:
                found[attr.GEN_AI_TOOL_CALL_ARGUMENTS] = encoded
                if rules.openinference:
                    found[attr.INPUT_VALUE] = encoded
                    found[attr.INPUT_MIME_TYPE] = APPLICATION_JSON
        if result is not None and _full(rules, result.category):
            value = _response_content(result, builder)
            if isinstance(value, str) and value:
                text = builder.plain(value)
                found[attr.GEN_AI_TOOL_CALL_RESULT] = text
                if rules.openinference:
                    found[attr.OUTPUT_VALUE] = text
                    found[attr.OUTPUT_MIME_TYPE] = TEXT_PLAIN
            elif value is not None and not isinstance(value, str):
                encoded = builder.fit_value(value)
                if encoded is not None:
                    found[attr.GEN_AI_TOOL_CALL_RESULT] = encoded
                    if rules.openinference:
                        found[attr.OUTPUT_VALUE] = encoded
                        found[attr.OUTPUT_MIME_TYPE] = APPLICATION_JSON
        return _finished(found, builder)


def system_instructions_attributes(text: str | None, rules: ContentRules) -> ContentAttributes:
    """`gen_ai.system_instructions` = `[{"type": "text", "content": text}]` (the words of a user
    message under the policy: the instructions are what the model is told first)."""
    try:
        if not isinstance(text, str) or not text or rules.policy.mode != "full" or rules.max_length <= 0:
            return {}
        if not _full(rules, "user_message"):
            return {}
        builder = _Builder(rules, False)
        found: ContentAttributes = {}
        _put(
            found,
            attr.GEN_AI_SYSTEM_INSTRUCTIONS,
            builder.fit([_text_part(builder.text(text))], "part", None),
        )
        return _finished(found, builder)
    except Exception:
        return {}


def _definition(definition: Any, builder: _Builder) -> dict[str, Any] | None:
    """`{"type": "function", "name", "description", "parameters"}` of a tool definition (WINK's
    `{name, description, inputSchema}`, Anthropic's `input_schema`, or the conventions' own)."""
    if not isinstance(definition, Mapping):
        return None
    name = definition.get("name")
    if not isinstance(name, str) or not name:
        return None
    kind = definition.get("type")
    found: dict[str, Any] = {"type": safe_text(kind)[0] if isinstance(kind, str) and kind else "function"}
    found["name"] = safe_text(name)[0]
    description = definition.get("description")
    if isinstance(description, str) and description:
        found["description"] = builder.text(description)
    for key in ("parameters", "inputSchema", "input_schema"):
        parameters = definition.get(key)
        if isinstance(parameters, Mapping):
            found["parameters"] = builder.value(parameters)
            break
    return found


def tool_definitions_attributes(
    definitions: Sequence[Mapping[str, Any]] | None, rules: ContentRules
) -> ContentAttributes:
    """`gen_ai.tool.definitions`: the tools the model was offered, by name (with description and
    parameters where known); when they do not fit, the last ones are left out."""
    try:
        if not definitions or rules.policy.mode != "full" or rules.max_length <= 0:
            return {}
        builder = _Builder(rules, False)
        built = [found for found in (_definition(item, builder) for item in definitions) if found is not None]
        if not built:
            return {}
        found: ContentAttributes = {}
        _put(found, attr.GEN_AI_TOOL_DEFINITIONS, builder.fit(built, "definition", "end"))
        return _finished(found, builder)
    except Exception:
        return {}
