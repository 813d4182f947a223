"""GenAI content on a run's spans: what to keep as entries are placed, what spans end with.

Where the content settings (`pipeline.genai_content`) and the content policy let content go
beside the transcript, every span of an `AgentRun` keeps references to what its entries
said (`genai.content`: a chat span its conversation, an `invoke_agent` span its prompt and
answer, an `execute_tool` span its arguments and result). As a span ends, on the writer,
they become the conventions' content attributes (`gen_ai.input.messages`, ...), redacted
and cut to the settings' length, and, for a chat span with events on, the
`gen_ai.client.inference.operation.details` event.

Content is off, and nothing is kept, when the policy is not `full` (`metadata`/`none`:
entries keep no text, so spans may not either), when the capture variable says
`NO_CONTENT`, or when spans are not recorded and no event is wanted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final, Protocol

from transcript_otel.genai.chat_content import ChatContent
from transcript_otel.genai.content import (
    AgentContent,
    ToolContent,
    system_instructions_attributes,
    tool_definitions_attributes,
)
from transcript_otel.genai.rules import ContentRules
from transcript_otel.otel import attributes as attr

if TYPE_CHECKING:
    from transcript_otel.capture.pipeline import TranscriptPipeline

SpanContent = ChatContent | AgentContent | ToolContent

OPERATION_DETAILS_EVENT: Final = "gen_ai.client.inference.operation.details"
# What the operation-details event repeats of its chat span (beside the content and usage).
_EVENT_SPAN_KEYS: Final = (
    attr.GEN_AI_OPERATION_NAME,
    attr.GEN_AI_PROVIDER_NAME,
    attr.GEN_AI_REQUEST_MODEL,
    attr.GEN_AI_RESPONSE_MODEL,
    attr.GEN_AI_RESPONSE_ID,
    attr.GEN_AI_RESPONSE_FINISH_REASONS,
    attr.GEN_AI_CONVERSATION_ID,
)
# Content attributes whose values are JSON documents: the event carries them as structures.
_JSON_CONTENT_KEYS: Final = frozenset(
    {
        attr.GEN_AI_INPUT_MESSAGES,
        attr.GEN_AI_OUTPUT_MESSAGES,
        attr.GEN_AI_SYSTEM_INSTRUCTIONS,
        attr.GEN_AI_TOOL_DEFINITIONS,
    }
)
_GEN_AI_PREFIX: Final = "gen_ai."


class HoldsContent(Protocol):
    content: SpanContent | None


@dataclass(slots=True)
class AgentDescription:
    """What the harness told the model before the conversation (`AgentRun.describe_agent()`)."""

    system_instructions: str | None = None
    tool_definitions: Sequence[Mapping[str, Any]] | None = None
    # The attributes last made, and of which instructions, definitions and rules (by identity).
    _said: tuple[tuple[object, ...], dict[str, Any]] | None = field(default=None, repr=False, compare=False)

    def attributes(self, rules: ContentRules) -> dict[str, Any]:
        """`gen_ai.system_instructions` and `gen_ai.tool.definitions`, made once for the root and
        every main turn that says the same (a CLI offers its two dozen tools at each)."""
        said_of = (self.system_instructions, self.tool_definitions, rules)
        if self._said is not None and all(a is b for a, b in zip(self._said[0], said_of, strict=True)):
            return self._said[1]
        said = {
            **system_instructions_attributes(self.system_instructions, rules),
            **tool_definitions_attributes(self.tool_definitions, rules),
        }
        self._said = (said_of, said)
        return said


def content_rules(pipeline: TranscriptPipeline, spans_recorded: bool) -> ContentRules | None:
    """How this run's spans carry content, or None when they carry none (and keep nothing)."""
    settings = pipeline.genai_content
    on_spans = settings.on_spans and spans_recorded
    if pipeline.content_policy.mode != "full" or not (on_spans or settings.in_events):
        return None
    return ContentRules(
        pipeline.content_policy,
        pipeline.redactor.text,
        settings.max_length,
        openinference=settings.openinference and on_spans,
    )


def add_content(entry_type: str, detail: Any, *slots: HoldsContent | None) -> None:
    """Keep the entry in what each slot's span will say (slots without content are passed over)."""
    for slot in slots:
        if slot is not None and slot.content is not None:
            slot.content.add(entry_type, detail)


def span_content(
    content: SpanContent,
    rules: ContentRules,
    finish_reason: str | None,
    description: AgentDescription | None,
) -> dict[str, Any]:
    """The content attributes a span ends with; `description` for the root and the main turns."""
    if isinstance(content, ChatContent):
        found: dict[str, Any] = content.attributes(rules, finish_reason)
    else:
        found = content.attributes(rules)
    if description is not None:
        found.update(description.attributes(rules))
    return found


def operation_details(
    span_attributes: Mapping[str, Any] | None, final: Mapping[str, Any], content: Mapping[str, Any]
) -> dict[str, Any]:
    """The `gen_ai.client.inference.operation.details` event's attributes for a chat span: its
    operation, models, response and usage, and its content as structures (not JSON strings)."""
    details: dict[str, Any] = {}
    if span_attributes is not None:
        details.update((key, span_attributes[key]) for key in _EVENT_SPAN_KEYS if key in span_attributes)
    details.update(final)
    for key, value in content.items():
        if not key.startswith(_GEN_AI_PREFIX):
            continue  # OpenInference values are for spans
        details[key] = json.loads(value) if key in _JSON_CONTENT_KEYS and isinstance(value, str) else value
    return details
