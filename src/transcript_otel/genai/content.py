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
where each adapter writes its words (`genai.pieces`: WINK Codex notifications, Claude transcript /
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

The modules follow the data, one way: `genai.lookup` reads a detail whatever its shape,
`genai.pieces` reads entries into pieces (and holds a span's `KeepBudget`), `genai.fit` builds
JSON within a length, `genai.rules` holds `ContentRules` and the steps every span shares,
`genai.chat_content` holds `ChatContent`; this module the agent and tool spans' content, the
system instructions and tool definitions.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any, Final

from transcript_otel.genai.facts import final_answer
from transcript_otel.genai.fit import AttributeBuilder
from transcript_otel.genai.lookup import is_mapping
from transcript_otel.genai.pieces import (
    KEEP_CHARS,
    KIND_ANSWER,
    KIND_CALL,
    KIND_RESPONSE,
    KIND_SYSTEM,
    KIND_TEXT,
    KIND_USER,
    KeepBudget,
    Piece,
    call_arguments,
    call_response,
    entry_pieces,
    make_piece,
)
from transcript_otel.genai.rules import (
    APPLICATION_JSON,
    TEXT_PLAIN,
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

# What an agent span keeps of its run's entries to find its prompt and its answer.
_PROMPT_CANDIDATES: Final = 4
_ANSWER_CANDIDATES: Final = 4


class AgentContent:
    """An invoke_agent span (run root or subagent): its prompt and final answer. The prompt is the
    first user text (else, for an agent told only by instructions, as WINK's chat adapters do,
    the first system text); the answer the last assistant text, or Claude's `result`.

    It sees every entry of a run, so `add()` only keeps references to the few entries that may
    hold them (the first user messages, the last assistant messages, the last `result`); they
    are read as the span ends."""

    __slots__ = ("_answers", "_budget", "_prompts", "_result")

    def __init__(self, keep_chars: int = KEEP_CHARS) -> None:
        self._prompts: list[Any] = []
        self._answers: deque[Any] = deque(maxlen=_ANSWER_CANDIDATES)
        self._result: Any = None
        self._budget = KeepBudget(keep_chars)

    def add(self, entry_type: str, detail: Any) -> None:
        if entry_type == "assistant_message":
            self._answers.append(detail)
        elif entry_type == "user_message":
            if len(self._prompts) < _PROMPT_CANDIDATES:
                self._prompts.append(detail)
        elif entry_type == "token_usage" and final_answer(detail) is not None:
            self._result, self._answers = detail, deque(maxlen=_ANSWER_CANDIDATES)

    def _prompt(self) -> Piece | None:
        found: Piece | None = None
        for detail in self._prompts:
            for piece in entry_pieces("user_message", detail):
                if piece.kind == KIND_USER:
                    return self._budget.bounded(piece)
                found = found or self._budget.bounded(piece)
        return found

    def _answer(self) -> Piece | None:
        for detail in reversed(self._answers):
            for piece in reversed(entry_pieces("assistant_message", detail)):
                if piece.kind == KIND_TEXT:
                    return self._budget.bounded(piece)
        if self._result is not None:
            for piece in entry_pieces("token_usage", self._result):
                if piece.kind == KIND_ANSWER:
                    return self._budget.bounded(piece)
        return None

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
        builder = AttributeBuilder(rules.redact, rules.max_length, self._budget.cut)
        found: ContentAttributes = {}
        prompt, answer = self._prompt(), self._answer()
        if prompt is not None and rules.keeps(prompt.category):
            text = builder.joined(prompt.texts)
            if rules.openinference:
                put_openinference(found, "input", text, builder)
            role = "system" if prompt.kind == KIND_SYSTEM else "user"
            message = Message(role, [text_part(text)])
            put_attribute(found, attr.GEN_AI_INPUT_MESSAGES, builder.fit([message.json()], "message", None))
        if answer is not None and rules.keeps(answer.category):
            text = builder.joined(answer.texts)
            if rules.openinference:
                put_openinference(found, "output", text, builder)
            reason = (
                safe_text(finish_reason)[0] if isinstance(finish_reason, str) and finish_reason else "stop"
            )
            message = Message("assistant", [text_part(text)])
            put_attribute(
                found, attr.GEN_AI_OUTPUT_MESSAGES, builder.fit([message.json(reason)], "message", None)
            )
        return finished_attributes(found, builder)


class ToolContent:
    """An execute_tool span: its arguments (from `tool_use`; for Codex's own tools, from the
    result's item when the call said none) and its result (from `tool_result`)."""

    __slots__ = ("_arguments", "_budget", "_result")

    def __init__(self, keep_chars: int = KEEP_CHARS) -> None:
        self._arguments: Piece | None = None
        self._result: Piece | None = None
        self._budget = KeepBudget(keep_chars)

    def add(self, entry_type: str, detail: Any) -> None:
        try:
            if not is_mapping(detail):
                return
            # The span knows its call's id and name: only the words are read here.
            if entry_type == "tool_use":
                self._keep_arguments(detail)
            elif entry_type == "tool_result":
                texts, value = call_response(detail)
                self._result = self._budget.bounded(make_piece(KIND_RESPONSE, "tool_result", texts, value))
                if self._arguments is None:
                    self._keep_arguments(detail)
        except Exception:  # a detail no adapter writes (or a hostile one) adds nothing
            return

    def _keep_arguments(self, detail: Mapping[str, Any]) -> None:
        arguments = call_arguments(detail)
        if arguments is not None:
            self._arguments = self._budget.bounded(make_piece(KIND_CALL, "tool_use", value=arguments))

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
        builder = AttributeBuilder(rules.redact, rules.max_length, self._budget.cut)
        found: ContentAttributes = {}
        arguments, result = self._arguments, self._result
        if arguments is not None and rules.keeps(arguments.category):
            encoded = builder.fit_value(builder.value(arguments.value))
            if encoded is not None:
                found[attr.GEN_AI_TOOL_CALL_ARGUMENTS] = encoded
                if rules.openinference:
                    found[attr.INPUT_VALUE] = encoded
                    found[attr.INPUT_MIME_TYPE] = APPLICATION_JSON
        if result is not None and rules.keeps(result.category):
            value = response_content(result, builder)
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
        return finished_attributes(found, builder)


def system_instructions_attributes(text: str | None, rules: ContentRules) -> ContentAttributes:
    """`gen_ai.system_instructions` = `[{"type": "text", "content": text}]` (the words of a user
    message under the policy: the instructions are what the model is told first)."""
    try:
        if not isinstance(text, str) or not text or rules.policy.mode != "full" or rules.max_length <= 0:
            return {}
        if not rules.keeps("user_message"):
            return {}
        builder = AttributeBuilder(rules.redact, rules.max_length, False)
        found: ContentAttributes = {}
        put_attribute(
            found,
            attr.GEN_AI_SYSTEM_INSTRUCTIONS,
            builder.fit([text_part(builder.text(text))], "part", None),
        )
        return finished_attributes(found, builder)
    except Exception:
        return {}


def _definition(definition: Any, builder: AttributeBuilder) -> dict[str, Any] | None:
    """`{"type": "function", "name", "description", "parameters"}` of a tool definition (WINK's
    `{name, description, inputSchema}`, Anthropic's `input_schema`, or the conventions' own)."""
    if not is_mapping(definition):
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
        if is_mapping(parameters):
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
        builder = AttributeBuilder(rules.redact, rules.max_length, False)
        built = [found for found in (_definition(item, builder) for item in definitions) if found is not None]
        if not built:
            return {}
        found: ContentAttributes = {}
        put_attribute(found, attr.GEN_AI_TOOL_DEFINITIONS, builder.fit(built, "definition", "end"))
        return finished_attributes(found, builder)
    except Exception:
        return {}
