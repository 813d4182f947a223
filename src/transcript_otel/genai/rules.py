"""How content goes out (`ContentRules`: the policy, the redactor, the length limit) and the
steps every span's attributes take under those rules: whether an entry type keeps its words
(`ContentRules.keeps`), the conventions' text parts and messages, a tool response's content, OpenInference's
`input.value` / `output.value`, and `transcript.content.truncated` when anything was cut.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final, Literal

from transcript_otel.genai.fit import AttributeBuilder
from transcript_otel.genai.pieces import Piece
from transcript_otel.otel import attributes as attr
from transcript_otel.records.content import ContentPolicy

ContentAttributes = dict[str, str | bool]

TEXT_PLAIN: Final = "text/plain"
APPLICATION_JSON: Final = "application/json"


@dataclass(frozen=True, slots=True)
class ContentRules:
    """How content goes out: which entry types keep their words, the redactor, the length limit."""

    policy: ContentPolicy  # per entry type: `full` keeps content; `metadata`/`none` leave it out
    redact: Callable[[str], str]  # applied to every text that goes out (the pipeline's redactor)
    max_length: int  # max characters of each attribute's value (its JSON string)
    openinference: bool = False  # also `input.value`/`output.value` (+ `.mime_type`)

    def keeps(self, entry_type: str) -> bool:
        """Whether the words of `entry_type`'s category go out (its mode is `full`)."""
        return self.policy.mode_for(entry_type) == "full"


def text_part(text: str, kind: str = "text") -> dict[str, Any]:
    return {"type": kind, "content": text}


class Message:
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


def response_content(piece: Piece, builder: AttributeBuilder) -> Any:
    if piece.texts:
        return builder.joined(piece.texts)
    return None if piece.value is None else builder.value(piece.value)


def put_attribute(found: ContentAttributes, key: str, value: str | None) -> None:
    if value is not None:
        found[key] = value


def put_openinference(
    found: ContentAttributes, prefix: Literal["input", "output"], value: Any, builder: AttributeBuilder
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


def finished_attributes(found: ContentAttributes, builder: AttributeBuilder) -> ContentAttributes:
    if not found:
        return {}
    if builder.truncated:
        found[attr.CONTENT_TRUNCATED] = True
    return found
