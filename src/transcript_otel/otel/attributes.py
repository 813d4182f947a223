"""Attribute names on log records and span events.

The envelope lives under the `transcript.` namespace; GenAI semantic-convention
keys are added where an envelope value maps onto one.
"""

from __future__ import annotations

from typing import Final

NAMESPACE: Final = "transcript"  # every envelope key `k` becomes `transcript.k`

DETAIL: Final = "transcript.detail"
RAW: Final = "transcript.raw"
RUN_ID: Final = "transcript.run_id"
TURN_NUMBER: Final = "transcript.turn"  # a turn's number in its run, on its `chat` span
# Lifecycle records carry their other fields as `transcript.<field>`; nested
# values (entries_by_type, ...) are JSON strings.
# On a `transcript.error` about records the OTLP backend did not take: how many.
FAILED_EXPORT_RECORDS: Final = "transcript.failed_export_records"

# Marks on span events whose long values were cut (log records are never cut).
TRUNCATED_SUFFIX: Final = ".truncated"
ORIGINAL_LENGTH_SUFFIX: Final = ".original_length"

# GenAI semantic conventions (development status; the mapping is in docs/design.md), as of
# `version.SEMCONV_SCHEMA_URL`.
GEN_AI_CONVERSATION_ID: Final = "gen_ai.conversation.id"
GEN_AI_TOOL_CALL_ID: Final = "gen_ai.tool.call.id"
GEN_AI_TOOL_NAME: Final = "gen_ai.tool.name"
GEN_AI_USAGE_INPUT_TOKENS: Final = "gen_ai.usage.input_tokens"
GEN_AI_USAGE_OUTPUT_TOKENS: Final = "gen_ai.usage.output_tokens"
GEN_AI_USAGE_CACHE_READ_INPUT_TOKENS: Final = "gen_ai.usage.cache_read.input_tokens"
# The cache-write count goes out under both names, with the same value: v1.41's `cache_creation`
# (what Phoenix and Langfuse read) and the semantic-conventions-genai repo's newer `cache_write`.
GEN_AI_USAGE_CACHE_CREATION_INPUT_TOKENS: Final = "gen_ai.usage.cache_creation.input_tokens"
GEN_AI_USAGE_CACHE_WRITE_INPUT_TOKENS: Final = "gen_ai.usage.cache_write.input_tokens"
GEN_AI_USAGE_REASONING_OUTPUT_TOKENS: Final = "gen_ai.usage.reasoning.output_tokens"

# Span attributes shared by the span tree (`instrumentation/span_tree/agent_run.py`), the turn facts and the
# GenAI metrics, which read them back from the ending span.
GEN_AI_OPERATION_NAME: Final = "gen_ai.operation.name"
GEN_AI_PROVIDER_NAME: Final = "gen_ai.provider.name"
GEN_AI_REQUEST_MODEL: Final = "gen_ai.request.model"
GEN_AI_RESPONSE_MODEL: Final = "gen_ai.response.model"
GEN_AI_RESPONSE_ID: Final = "gen_ai.response.id"
GEN_AI_RESPONSE_FINISH_REASONS: Final = "gen_ai.response.finish_reasons"
GEN_AI_AGENT_NAME: Final = "gen_ai.agent.name"
GEN_AI_AGENT_ID: Final = "gen_ai.agent.id"
GEN_AI_TOOL_TYPE: Final = "gen_ai.tool.type"
GEN_AI_TOKEN_TYPE: Final = "gen_ai.token.type"
ERROR_TYPE: Final = "error.type"
# A tool span the turn's or run's end closed, its result never seen.
TOOL_RESULT_MISSING: Final = "transcript.tool.result_missing"

# GenAI content (`genai/`): JSON strings in the semantic conventions' shapes (v1.41), on
# chat, agent and tool spans when the content policy keeps everything.
GEN_AI_INPUT_MESSAGES: Final = "gen_ai.input.messages"
GEN_AI_OUTPUT_MESSAGES: Final = "gen_ai.output.messages"
GEN_AI_SYSTEM_INSTRUCTIONS: Final = "gen_ai.system_instructions"
GEN_AI_TOOL_DEFINITIONS: Final = "gen_ai.tool.definitions"
GEN_AI_TOOL_CALL_ARGUMENTS: Final = "gen_ai.tool.call.arguments"
GEN_AI_TOOL_CALL_RESULT: Final = "gen_ai.tool.call.result"
# True on a span whose content attributes were cut (texts shortened, oldest messages left out)
# to fit the length limit or the memory a span may hold; absent otherwise.
CONTENT_TRUNCATED: Final = "transcript.content.truncated"
# OpenInference's values (what Arize Phoenix shows as a span's Input/Output and a session's first
# input and last output), set beside the GenAI attributes when asked for.
INPUT_VALUE: Final = "input.value"
INPUT_MIME_TYPE: Final = "input.mime_type"
OUTPUT_VALUE: Final = "output.value"
OUTPUT_MIME_TYPE: Final = "output.mime_type"
