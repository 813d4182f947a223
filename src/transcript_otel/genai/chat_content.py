"""A chat span's content (`ChatContent`): the conversation of a turn of the main agent or of a
subagent's model calls, kept as pieces while the span runs, then grouped into the conventions'
messages: `gen_ai.input.messages`, `gen_ai.output.messages` (the last assistant message, with
its finish reason), `gen_ai.system_instructions`, and with `ContentRules.openinference` the
newest input and the answer as OpenInference's values.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable
from typing import Any, Final

from transcript_otel.genai.fit import AttributeBuilder
from transcript_otel.genai.pieces import (
    ASSISTANT_KINDS,
    KEEP_CHARS,
    KEEP_PIECES,
    KIND_ANSWER,
    KIND_BOUNDARY,
    KIND_CALL,
    KIND_RESPONSE,
    KIND_SYSTEM,
    KIND_USER,
    KeepBudget,
    Piece,
    entry_pieces,
)
from transcript_otel.genai.rules import (
    ContentAttributes,
    ContentRules,
    Message,
    finished_attributes,
    put_attribute,
    put_openinference,
    response_content,
    text_part,
)
from transcript_otel.otel import attributes as attr
from transcript_otel.records.serialize import safe_text

_FALLBACK_TOOL_NAME: Final = "tool"  # what the span tree names a call without a name


def _call_part(piece: Piece, builder: AttributeBuilder, full: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call"}
    if piece.call_id is not None:
        part["id"] = piece.call_id
    part["name"] = piece.name or _FALLBACK_TOOL_NAME
    if full and piece.value is not None:
        part["arguments"] = builder.value(piece.value)
    return part


def _response_part(piece: Piece, builder: AttributeBuilder, full: bool) -> dict[str, Any]:
    part: dict[str, Any] = {"type": "tool_call_response"}
    if piece.call_id is not None:
        part["id"] = piece.call_id
    part["response"] = response_content(piece, builder) if full else None
    return part


def _assistant_part(piece: Piece, builder: AttributeBuilder, full: bool) -> dict[str, Any] | None:
    if piece.kind == KIND_CALL:
        return _call_part(piece, builder, full)
    if full and piece.texts:
        return text_part(builder.joined(piece.texts), piece.kind)
    return None


def _copy_json(value: Any) -> Any:
    """A copy of what `AttributeBuilder.value` made (dicts, lists, scalars), to cut apart from the
    original."""
    if isinstance(value, dict):
        return {key: _copy_json(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_copy_json(item) for item in value]
    return value


def _text_of(parts: Iterable[dict[str, Any]]) -> str | None:
    texts = [part["content"] for part in parts if part.get("type") == "text"]
    return "\n".join(texts) if texts else None


def _input_value(messages: list[Message]) -> Any:
    """The newest user text or tool result among the input messages."""
    for message in reversed(messages):
        for part in reversed(message.parts):
            if message.role == "user" and part.get("type") == "text":
                return _text_of(message.parts)
            if message.role == "tool" and part.get("response") is not None:
                return _copy_json(part["response"])
    return None


def _output_value(message: Message) -> Any:
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


class ChatContent:
    """A chat span's conversation (one turn of the main agent, or one subagent's model calls), in
    order. Keeps at most `keep_chars` characters and `keep_pieces` parts, the newest (older
    ones are left out, and the content counts as cut)."""

    __slots__ = ("_budget", "_chars", "_keep_pieces", "_pieces")

    def __init__(self, keep_chars: int = KEEP_CHARS, keep_pieces: int = KEEP_PIECES) -> None:
        self._pieces: deque[Piece] = deque()
        self._chars = 0
        self._budget = KeepBudget(keep_chars)
        self._keep_pieces = max(keep_pieces, 2)

    def add(self, entry_type: str, detail: Any) -> None:
        """Keep what the entry says (references to its strings); called on every entry of the span."""
        try:
            for piece in entry_pieces(entry_type, detail):
                self._keep(piece)
        except Exception:  # a detail no adapter writes (or a hostile one) adds nothing
            return

    def _keep(self, piece: Piece) -> None:
        if piece.kind == KIND_BOUNDARY and (not self._pieces or self._pieces[-1].kind == KIND_BOUNDARY):
            return
        budget = self._budget
        piece = budget.bounded(piece)
        pieces = self._pieces
        pieces.append(piece)
        self._chars += piece.size
        while (self._chars > budget.keep_chars or len(pieces) > self._keep_pieces) and len(pieces) > 1:
            self._chars -= pieces.popleft().size
            budget.cut = True

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
        builder = AttributeBuilder(rules.redact, rules.max_length, self._budget.cut)
        system: list[dict[str, Any]] = []
        messages: list[Message] = []
        current: Message | None = None
        answer: Piece | None = None
        for piece in self._pieces:
            kind = piece.kind
            if kind == KIND_BOUNDARY:
                current = None
                continue
            if kind == KIND_ANSWER:
                answer = piece
                continue
            full = rules.keeps(piece.category)
            if kind == KIND_SYSTEM:
                if full:
                    system.append(text_part(builder.joined(piece.texts)))
            elif kind == KIND_USER:
                messages.append(Message("user", [text_part(builder.joined(piece.texts))] if full else []))
                current = None
            elif kind == KIND_RESPONSE:
                messages.append(Message("tool", [_response_part(piece, builder, full)]))
                current = None
            elif kind in ASSISTANT_KINDS:
                if current is None or (piece.group and current.group and piece.group != current.group):
                    current = Message("assistant")
                    messages.append(current)
                current.group = piece.group or current.group
                part = _assistant_part(piece, builder, full)
                if part is not None:
                    current.parts.append(part)
        inputs, output = _split(messages)
        if output is None and answer is not None and rules.keeps(answer.category):
            output = Message("assistant", [text_part(builder.joined(answer.texts))])
        return self._encode(rules, builder, system, inputs, output, finish_reason)

    @staticmethod
    def _encode(
        rules: ContentRules,
        builder: AttributeBuilder,
        system: list[dict[str, Any]],
        inputs: list[Message],
        output: Message | None,
        finish_reason: str | None,
    ) -> ContentAttributes:
        found: ContentAttributes = {}
        if rules.openinference:  # before the messages are cut in place
            put_openinference(found, "input", _input_value(inputs), builder)
            if output is not None:
                put_openinference(found, "output", _output_value(output), builder)
        if system:
            put_attribute(found, attr.GEN_AI_SYSTEM_INSTRUCTIONS, builder.fit(system, "part", None))
        if inputs:
            encoded = builder.fit([message.json() for message in inputs], "message", "start")
            put_attribute(found, attr.GEN_AI_INPUT_MESSAGES, encoded)
        if output is not None:
            reason = safe_text(finish_reason)[0] if isinstance(finish_reason, str) and finish_reason else None
            if reason is None:
                calls = any(part.get("type") == "tool_call" for part in output.parts)
                reason = "tool_call" if calls else "stop"
            put_attribute(
                found, attr.GEN_AI_OUTPUT_MESSAGES, builder.fit([output.json(reason)], "message", None)
            )
        return finished_attributes(found, builder)


def _split(messages: list[Message]) -> tuple[list[Message], Message | None]:
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
