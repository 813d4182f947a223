"""`_genai_content`: the GenAI content attributes a span ends with, built from canonical entries.

Every adapter's real fixtures (captured runs, line streams, what the real Claude Code and Codex
CLIs printed) go through `ChatContent`, `AgentContent` and `ToolContent`; what comes out must be
valid against the semantic conventions' own JSON schemas (`fixtures/genai_schemas/`, v1.41.1)
at any length limit, and say what the user saw: the prompt, the answer, each tool's arguments
and result, the finish reason. Then the content policy, redaction, the length and memory
budgets, and details of shapes no adapter writes. When `.venv-phoenix` exists, Arize Phoenix's
own converter reads the attributes back.
"""

from __future__ import annotations

import copy
import json
import subprocess
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import jsonschema  # type: ignore[import-untyped]
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from transcript_otel.genai.attributes import tool_identity
from transcript_otel.genai.chat_content import ChatContent
from transcript_otel.genai.content import (
    AgentContent,
    ToolContent,
    system_instructions_attributes,
    tool_definitions_attributes,
)
from transcript_otel.genai.fit import AttributeBuilder
from transcript_otel.genai.pieces import KEEP_CHARS, attribute_json
from transcript_otel.genai.rules import ContentAttributes, ContentRules
from transcript_otel.mappings.lines import select_adapter
from transcript_otel.otel import attributes as attr
from transcript_otel.records.content import ContentPolicy
from transcript_otel.records.redaction import Redactor

from helpers import FIXTURE_RUNS, FIXTURES, JSONISH, MappedEntry, ReprRaises, mirrored_entries
from phoenix_server import PHOENIX_MISSING
from requirements_switch import missing

SCHEMAS = FIXTURES / "genai_schemas"
REPO = Path(__file__).resolve().parent.parent
PHOENIX_PYTHON = REPO / ".venv-phoenix" / "bin" / "python"

# The attribute → its schema file.
SCHEMA_FILES = {
    attr.GEN_AI_INPUT_MESSAGES: "gen-ai-input-messages.json",
    attr.GEN_AI_OUTPUT_MESSAGES: "gen-ai-output-messages.json",
    attr.GEN_AI_SYSTEM_INSTRUCTIONS: "gen-ai-system-instructions.json",
    attr.GEN_AI_TOOL_DEFINITIONS: "gen-ai-tool-definitions.json",
}
# The schemas accept any part with a `type` (`GenericPart`): the parts we build must match
# their own definition, or a backend would read a text part with no text.
PART_DEFINITIONS = {
    "text": "TextPart",
    "reasoning": "ReasoningPart",
    "tool_call": "ToolCallRequestPart",
    "tool_call_response": "ToolCallResponsePart",
}
ROLES = {"system", "user", "assistant", "tool"}
FINISH_REASONS = {"stop", "length", "content_filter", "tool_call", "error"}
CONTENT_KEYS = {
    *SCHEMA_FILES,
    attr.GEN_AI_TOOL_CALL_ARGUMENTS,
    attr.GEN_AI_TOOL_CALL_RESULT,
    attr.INPUT_VALUE,
    attr.INPUT_MIME_TYPE,
    attr.OUTPUT_VALUE,
    attr.OUTPUT_MIME_TYPE,
    attr.CONTENT_TRUNCATED,
}
LIMITS = (65_536, 4096, 1024, 300, 64)
SECRET = "sk-ant-api03-Zx9Yw8Vu7Ts6Rq5Po4Nm3Lk2Jh1Gf0Ed"
TOOL_TYPES = ("tool_use", "tool_result")


def rules(
    max_length: int = 65_536,
    *,
    policy: ContentPolicy | None = None,
    openinference: bool = True,
    redact: Callable[[str], str] | None = None,
) -> ContentRules:
    return ContentRules(
        policy or ContentPolicy(), redact or Redactor().text, max_length, openinference=openinference
    )


# --- validation -----------------------------------------------------------------------------


@cache
def schema(key: str) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((SCHEMAS / SCHEMA_FILES[key]).read_text())
    return loaded


@cache
def validator(key: str, definition: str | None = None) -> Any:
    """A Draft 2020-12 validator of the attribute's schema, or of one of its `$defs`."""
    document = schema(key)
    if definition is not None:
        document = {"$ref": f"#/$defs/{definition}", "$defs": document["$defs"]}
    return jsonschema.Draft202012Validator(document)


def check_parts(key: str, parts: Any) -> None:
    assert isinstance(parts, list)
    for part in parts:
        definition = PART_DEFINITIONS.get(part.get("type"))
        assert definition is not None, part  # we build no other part
        validator(key, definition).validate(part)
        if part["type"] in ("text", "reasoning"):
            assert part["content"], part  # an empty part is left out


def check_document(key: str, value: str) -> Any:
    """`value` parsed and valid against its schema; known parts and roles as we build them."""
    document = json.loads(value)
    validator(key).validate(document)
    if key == attr.GEN_AI_SYSTEM_INSTRUCTIONS:
        check_parts(key, document)
    elif key == attr.GEN_AI_TOOL_DEFINITIONS:
        for definition in document:
            if definition["type"] == "function":
                validator(key, "FunctionToolDefinition").validate(definition)
    else:
        assert document, "an empty list is not set"
        for message in document:
            assert message["role"] in ROLES
            assert message["parts"], "a message with no parts is left out"
            check_parts(key, message["parts"])
            if key == attr.GEN_AI_OUTPUT_MESSAGES:
                assert message["role"] == "assistant"
                assert message["finish_reason"] in FINISH_REASONS
    return document


def check(found: Mapping[str, Any], max_length: int) -> None:
    """Every content attribute within `max_length` characters and valid: JSON documents against
    the conventions' schemas, JSON values as JSON, mime types telling which."""
    assert set(found) <= CONTENT_KEYS, set(found) - CONTENT_KEYS
    for key, value in found.items():
        if key == attr.CONTENT_TRUNCATED:
            assert value is True
            continue
        assert isinstance(value, str)
        if key not in (attr.INPUT_MIME_TYPE, attr.OUTPUT_MIME_TYPE):  # constants, not content
            assert len(value) <= max_length, (key, len(value))
        if key in SCHEMA_FILES:
            check_document(key, value)
        elif key == attr.GEN_AI_TOOL_CALL_ARGUMENTS:
            json.loads(value)
    for prefix in ("input", "output"):
        value, mime = found.get(f"{prefix}.value"), found.get(f"{prefix}.mime_type")
        assert (value is None) == (mime is None)
        assert mime in (None, "text/plain", "application/json")
        if mime == "application/json":
            json.loads(str(value))
    if found:
        assert set(found) - {attr.CONTENT_TRUNCATED}, "the flag alone is never set"


# --- feeding entries ------------------------------------------------------------------------


def line_entries(adapter: str, path: Path) -> list[MappedEntry]:
    """What a line adapter maps a recorded stdout to."""
    chosen = select_adapter(adapter)
    lines = path.read_text().splitlines(keepends=True)
    mapped = [entry for line in lines for entry in chosen.feed(line)] + chosen.flush()
    return [(entry.entry_type, entry.source, entry.detail) for entry in mapped]


@dataclass
class Spans:
    """Each agent's chat and agent content (by source) and each call's tool content (by id)."""

    chats: dict[str, ChatContent] = field(default_factory=dict)
    agents: dict[str, AgentContent] = field(default_factory=dict)
    tools: dict[str | None, ToolContent] = field(default_factory=dict)

    @classmethod
    def of(cls, entries: list[MappedEntry]) -> Spans:
        spans = cls()
        for entry_type, source, detail in entries:
            spans.chats.setdefault(source, ChatContent()).add(entry_type, detail)
            spans.agents.setdefault(source, AgentContent()).add(entry_type, detail)
            if entry_type in TOOL_TYPES:
                call_id, _ = tool_identity(detail)
                spans.tools.setdefault(call_id, ToolContent()).add(entry_type, detail)
        return spans

    def chat(self, content_rules: ContentRules, source: str = "main", reason: str | None = None) -> Any:
        return self.chats[source].attributes(content_rules, reason)

    def agent(self, content_rules: ContentRules, source: str = "main") -> ContentAttributes:
        return self.agents[source].attributes(content_rules)

    def tool(self, content_rules: ContentRules, call_id: str) -> ContentAttributes:
        return self.tools[call_id].attributes(content_rules)

    def everything(self, content_rules: ContentRules) -> Iterator[ContentAttributes]:
        for chat in self.chats.values():
            yield chat.attributes(content_rules, None)
            yield chat.attributes(content_rules, "stop")
        for agent in self.agents.values():
            yield agent.attributes(content_rules)
        for tool in self.tools.values():
            yield tool.attributes(content_rules)


CLAUDE_CODE = sorted((FIXTURES / "claude_code").glob("*.jsonl"))
CODEX_EXEC = sorted((FIXTURES / "codex" / "exec").glob("*.jsonl"))
LINE_STREAMS = [
    ("claude-stream-json", FIXTURES / "line_streams" / "claude-stream-json.jsonl"),
    ("codex-json", FIXTURES / "line_streams" / "codex-json.jsonl"),
    ("codex-json", FIXTURES / "line_streams" / "codex-json-failed.jsonl"),
    ("rtf1", FIXTURES / "line_streams" / "rtf1.txt"),
    ("plain", FIXTURES / "line_streams" / "plain.txt"),
]
ALL_FIXTURES: list[tuple[str, Callable[[], list[MappedEntry]]]] = [
    *((f"runs/{path.name}", lambda path=path: mirrored_entries(path.name)) for path in FIXTURE_RUNS),
    *((f"lines/{path.name}", lambda a=a, path=path: line_entries(a, path)) for a, path in LINE_STREAMS),
    *((f"claude_code/{p.name}", lambda p=p: line_entries("claude-stream-json", p)) for p in CLAUDE_CODE),
    *((f"codex/exec/{p.name}", lambda p=p: line_entries("codex-json", p)) for p in CODEX_EXEC),
]

# Runs that failed before the model said anything (and whose prompt was not in the stream).
SILENT = {
    "claude_code/bad_request.jsonl",
    "claude_code/fatal_500.jsonl",
    "claude_code/fatal_529.jsonl",
    "claude_code/no_api_key.jsonl",
    "claude_code/unknown_flag.jsonl",
    "codex/exec/fatal_500.jsonl",
    "codex/exec/response_failed.jsonl",
}


@pytest.mark.parametrize(("name", "entries"), ALL_FIXTURES, ids=[name for name, _ in ALL_FIXTURES])
def test_every_fixture_gives_schema_valid_content_at_any_length(
    name: str, entries: Callable[[], list[MappedEntry]]
) -> None:
    spans = Spans.of(entries())
    said = False
    for limit in LIMITS:
        for found in spans.everything(rules(limit)):
            check(found, limit)
            said = said or bool(found)
    assert said or name in SILENT, f"{name}: no content at all"


def test_the_schemas_are_the_conventions_own() -> None:
    for key, file in SCHEMA_FILES.items():
        document = schema(key)
        assert document["type"] == "array", file
        jsonschema.Draft202012Validator.check_schema(document)
    # What the conventions require of each part, which the checks rely on.
    text = schema(attr.GEN_AI_INPUT_MESSAGES)["$defs"]["TextPart"]
    assert text["required"] == ["type", "content"]
    output = schema(attr.GEN_AI_OUTPUT_MESSAGES)["$defs"]["OutputMessage"]
    assert set(output["required"]) == {"role", "parts", "finish_reason"}
    with pytest.raises(jsonschema.ValidationError):
        check_document(attr.GEN_AI_INPUT_MESSAGES, '[{"role":"user","parts":[{"type":"text"}]}]')


# --- what each adapter's user sees ----------------------------------------------------------


def messages(found: Mapping[str, Any], key: str) -> list[dict[str, Any]]:
    loaded: list[dict[str, Any]] = json.loads(found[key])
    return loaded


def texts_of(message: Mapping[str, Any], kind: str = "text") -> list[str]:
    return [part["content"] for part in message["parts"] if part["type"] == kind]


def calls_of(found: Mapping[str, Any], key: str = attr.GEN_AI_INPUT_MESSAGES) -> dict[str, dict[str, Any]]:
    """Every tool call part (by id) and the response to it (`"response"`)."""
    calls: dict[str, dict[str, Any]] = {}
    for message in messages(found, key):
        for part in message["parts"]:
            if part["type"] == "tool_call":
                calls[part["id"]] = dict(part)
            elif part["type"] == "tool_call_response" and part.get("id") in calls:
                calls[part["id"]]["response"] = part["response"]
    return calls


def assert_agent(
    found: ContentAttributes, prompt: str | None, answer: str, prompt_role: str = "user"
) -> None:
    check(found, 65_536)
    if prompt is None:
        assert attr.GEN_AI_INPUT_MESSAGES not in found
        assert attr.INPUT_VALUE not in found
    else:
        [message] = messages(found, attr.GEN_AI_INPUT_MESSAGES)
        assert message["role"] == prompt_role
        assert prompt in texts_of(message)[0]
        assert found[attr.INPUT_VALUE] == texts_of(message)[0]
        assert found[attr.INPUT_MIME_TYPE] == "text/plain"
    [output] = messages(found, attr.GEN_AI_OUTPUT_MESSAGES)
    assert texts_of(output) == [answer]
    assert output["finish_reason"] == "stop"
    assert found[attr.OUTPUT_VALUE] == answer
    assert found[attr.OUTPUT_MIME_TYPE] == "text/plain"
    assert attr.CONTENT_TRUNCATED not in found


def assert_tool(found: ContentAttributes, arguments: Any, result: Any) -> None:
    check(found, 65_536)
    if arguments is None:
        assert attr.GEN_AI_TOOL_CALL_ARGUMENTS not in found
    else:
        assert json.loads(str(found[attr.GEN_AI_TOOL_CALL_ARGUMENTS])) == arguments
        assert found[attr.INPUT_VALUE] == found[attr.GEN_AI_TOOL_CALL_ARGUMENTS]
        assert found[attr.INPUT_MIME_TYPE] == "application/json"
    if result is None:
        assert attr.GEN_AI_TOOL_CALL_RESULT not in found
    elif isinstance(result, str):
        assert found[attr.GEN_AI_TOOL_CALL_RESULT] == result
        assert found[attr.OUTPUT_VALUE] == result
        assert found[attr.OUTPUT_MIME_TYPE] == "text/plain"
    else:
        assert json.loads(str(found[attr.GEN_AI_TOOL_CALL_RESULT])) == result
        assert found[attr.OUTPUT_MIME_TYPE] == "application/json"


def test_wink_codex_real_demo() -> None:
    spans = Spans.of(mirrored_entries("wink-0.27-codex-real-demo.jsonl"))
    answer = "data.txt has 2 lines; missing.txt does not exist; I added notes.txt."
    assert_agent(spans.agent(rules()), "DEMO-SCENARIO: please do the task.", answer)
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    inputs = messages(chat, attr.GEN_AI_INPUT_MESSAGES)
    assert inputs[0] == {
        "role": "user",
        "parts": [{"type": "text", "content": "## 1. Task (task)\n\nDEMO-SCENARIO: please do the task."}],
    }
    # One assistant message per model call (Codex reports usage after each), then its results.
    assert inputs[1]["parts"] == [
        {"type": "reasoning", "content": "The task asks for the echo tool first."},
        {"type": "tool_call", "id": "call_demo_echo", "name": "echo", "arguments": {"text": "hi"}},
    ]
    assert inputs[2] == {
        "role": "tool",
        "parts": [{"type": "tool_call_response", "id": "call_demo_echo", "response": "hi"}],
    }
    calls = calls_of(chat)
    assert calls["call_tour_1"]["name"] == "codex:command"
    assert (
        calls["call_tour_1"]["arguments"]["command"] == "/bin/bash -lc 'seq 2 > data.txt && wc -l data.txt'"
    )
    assert calls["call_tour_1"]["response"] == "2 data.txt\n"
    assert calls["call_tour_3"]["arguments"]["changes"][0]["path"] == "/home/dev/project/notes.txt"
    assert calls["call_tour_5"] | {"response": "…"} == {
        "type": "tool_call",
        "id": "call_tour_5",
        "name": "docs:lookup",
        "arguments": {"topic": "data files"},
        "response": "…",
    }
    assert calls["we_resp_scripted_0007_0"]["response"] is None  # Codex reported no results
    [output] = messages(chat, attr.GEN_AI_OUTPUT_MESSAGES)
    assert output == {
        "role": "assistant",
        "parts": [{"type": "text", "content": answer}],
        "finish_reason": "stop",
    }
    assert chat[attr.OUTPUT_VALUE] == answer
    # The newest tool result with words (the web search's had none).
    assert str(chat[attr.INPUT_VALUE]).startswith("Docs for data files:")
    assert_tool(spans.tool(rules(), "call_demo_echo"), {"text": "hi"}, "hi")
    assert_tool(
        spans.tool(rules(), "call_tour_2"),
        {"command": "/bin/bash -lc 'cat missing.txt'", "cwd": "/home/dev/project"},
        "cat: missing.txt: No such file or directory\n",
    )
    assert_tool(
        spans.tool(rules(), "call_tour_3"), calls["call_tour_3"]["arguments"], {"status": "completed"}
    )
    assert_tool(spans.tool(rules(), "call_tour_5"), {"topic": "data files"}, calls["call_tour_5"]["response"])
    assert_tool(spans.tool(rules(), "we_resp_scripted_0007_0"), {"query": "counting lines in a file"}, None)


def test_wink_codex_025_rich() -> None:
    spans = Spans.of(mirrored_entries("wink-0.25-codex-rich.jsonl"))
    assert_agent(spans.agent(rules()), "Scenario rich: call the echo tool", "Done: hi")
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    calls = calls_of(chat)
    assert calls["call_echo_1"]["arguments"] == {"text": "hi"}
    assert calls["item_cmd_1"]["response"] == "hi\n"
    assert calls["item_mcp_1"]["name"] == "docs:search"
    assert calls["item_mcp_1"]["response"] == "3 documents found"
    assert texts_of(messages(chat, attr.GEN_AI_OUTPUT_MESSAGES)[0]) == ["Done: hi"]
    assert_tool(spans.tool(rules(), "item_cmd_1"), {"command": "echo hi", "cwd": "/home/dev/project"}, "hi\n")
    assert_tool(spans.tool(rules(), "item_mcp_1"), {"query": "opentelemetry logs"}, "3 documents found")
    # The search's call had an empty query; its completed item says what was searched.
    assert_tool(spans.tool(rules(), "item_web_1"), {"query": "otel"}, None)


@pytest.mark.parametrize("run", ["wink-0.27-claude-rich.jsonl", "wink-0.25-claude-rich.jsonl"])
def test_wink_claude_transcripts(run: str) -> None:
    spans = Spans.of(mirrored_entries(run))
    assert_agent(spans.agent(rules()), "Scenario rich: call the echo tool", "All done")
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    inputs = messages(chat, attr.GEN_AI_INPUT_MESSAGES)
    assert [message["role"] for message in inputs] == ["user", "assistant", "tool"]
    # The transcript keeps thinking blocks in the message; the Task call joins it.
    assert [part["type"] for part in inputs[1]["parts"]] == ["reasoning", "text", "tool_call"]
    assert texts_of(inputs[1], "reasoning") == ["I should delegate the listing."]
    assert calls_of(chat)["toolu_1"]["response"] == "sub done"
    [output] = messages(chat, attr.GEN_AI_OUTPUT_MESSAGES)
    assert texts_of(output, "reasoning") == ["pondering"]
    assert texts_of(output) == ["All done"]
    task = {"description": "List files", "prompt": "List the files", "subagent_type": "general-purpose"}
    assert_tool(spans.tool(rules(), "toolu_1"), task, "sub done")
    # The subagent: its own prompt, answer and calls.
    assert_agent(spans.agent(rules(), "subagent:a1b2c3"), "List the files", "sub done")
    sub_chat = spans.chat(rules(), "subagent:a1b2c3", "stop")
    check(sub_chat, 65_536)
    assert calls_of(sub_chat)["toolu_sub_1"]["response"] == "a.txt"
    assert_tool(spans.tool(rules(), "toolu_sub_1"), {"command": "ls"}, "a.txt")


def test_claude_sdk_parallel_subagents() -> None:
    """The real CLI's run under the SDK: two background subagents, the answer after each finished."""
    spans = Spans.of(mirrored_entries("claude-sdk-parallel-subagents.jsonl"))
    answer = "Both subagents are done: 3 files, and the readme says hello."
    assert_agent(spans.agent(rules()), "PARALLEL-SUBAGENTS-SCENARIO: please do the task.", answer)
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    inputs = messages(chat, attr.GEN_AI_INPUT_MESSAGES)
    # The prompt; each Agent call and its result; the two answers before the last.
    roles = ["user", "assistant", "tool", "assistant", "tool", "assistant", "assistant"]
    assert [message["role"] for message in inputs] == roles
    assert [part.get("id") for part in inputs[1]["parts"]] == ["toolu_agent_a"]
    launched = calls_of(chat)["toolu_agent_a"]["response"]
    assert launched.startswith("Async agent launched successfully.")  # the CLI's words: it runs on
    assert texts_of(messages(chat, attr.GEN_AI_OUTPUT_MESSAGES)[0]) == [answer]
    task = {
        "description": "counter task",
        "prompt": "SUBAGENT-COUNTER: do the counter part and report back.",
        "subagent_type": "general-purpose",
    }
    assert_tool(spans.tool(rules(), "toolu_agent_a"), task, launched)
    # The CLI prints no subagent's prompt: each subagent's content is its answer.
    assert_agent(spans.agent(rules(), "subagent:toolu_agent_a"), None, "There are 3 files.")
    assert_agent(spans.agent(rules(), "subagent:toolu_agent_b"), None, "The readme says hello.")
    assert_tool(
        spans.tool(rules(), "toolu_sub_read_1"), {"command": "echo readme", "description": "Run it"}, "readme"
    )


def test_claude_result_is_the_answer_when_no_assistant_text_came() -> None:
    *_, result = [
        detail
        for entry_type, _, detail in mirrored_entries("claude-sdk-parallel-subagents.jsonl")
        if entry_type == "token_usage"
    ]
    answer = "Both subagents are done: 3 files, and the readme says hello."
    assert result["sdk_entry"]["result"] == answer  # the CLI's last result repeats its answer
    agent, chat = AgentContent(), ChatContent()
    for content in (agent, chat):
        content.add("user_message", {"text": "Count files"})
        content.add("token_usage", result)
    assert_agent(agent.attributes(rules()), "Count files", answer)
    [output] = messages(chat.attributes(rules(), "stop"), attr.GEN_AI_OUTPUT_MESSAGES)
    assert texts_of(output) == [answer]


def test_wink_024_chat_adapter() -> None:
    spans = Spans.of(mirrored_entries("wink-0.24-openai-tool.jsonl"))
    prompt = "Scenario tool: call the echo tool with the text 'hi', then reply."
    answer = "The tool said: hi\n\nhi"
    # WINK's chat adapters send the prompt as the system message: the agent's prompt all the same.
    assert_agent(spans.agent(rules()), prompt, answer, prompt_role="system")
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    [instructions] = json.loads(str(chat[attr.GEN_AI_SYSTEM_INSTRUCTIONS]))
    assert prompt in instructions["content"]
    inputs = messages(chat, attr.GEN_AI_INPUT_MESSAGES)
    assert [message["role"] for message in inputs] == ["assistant", "tool"]
    assert calls_of(chat)["call_1"] == {
        "type": "tool_call",
        "id": "call_1",
        "name": "echo",
        "arguments": {"text": "hi"},
        "response": "hi\n\nhi",
    }
    assert chat[attr.INPUT_VALUE] == "hi\n\nhi"
    assert chat[attr.OUTPUT_VALUE] == answer
    assert_tool(spans.tool(rules(), "call_1"), {"text": "hi"}, "hi\n\nhi")


def test_claude_stream_json_line_stream() -> None:
    spans = Spans.of(
        line_entries("claude-stream-json", FIXTURES / "line_streams" / "claude-stream-json.jsonl")
    )
    # `claude -p` takes its prompt on the command line: the stream holds none.
    assert_agent(spans.agent(rules()), None, "The counter subagent reports 3 files.")
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    launch = calls_of(chat)["toolu_agent_bg"]
    assert launch["name"] == "Agent"
    assert launch["arguments"]["prompt"] == "SUBAGENT-COUNTER: do the counter part and report back."
    assert launch["response"].startswith("Async agent launched successfully.")
    assert_tool(spans.tool(rules(), "toolu_agent_bg"), launch["arguments"], launch["response"])
    sub = "subagent:toolu_agent_bg"
    assert_agent(spans.agent(rules(), sub), None, "There are 3 files.")
    assert_tool(spans.tool(rules(), "toolu_sub_count_1"), {"command": "echo 3", "description": "Run it"}, "3")
    [output] = messages(spans.chat(rules(), sub, "stop"), attr.GEN_AI_OUTPUT_MESSAGES)
    assert texts_of(output) == ["There are 3 files."]


def test_codex_exec_line_stream() -> None:
    spans = Spans.of(line_entries("codex-json", FIXTURES / "line_streams" / "codex-json.jsonl"))
    answer = "data.txt has 2 lines; missing.txt does not exist; I added notes.txt."
    assert_agent(spans.agent(rules()), None, answer)
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    [first] = messages(chat, attr.GEN_AI_INPUT_MESSAGES)[:1]
    assert texts_of(first, "reasoning") == ["First I will write the data file and count its lines."]
    command = {"command": "/bin/bash -lc 'seq 2 > data.txt && wc -l data.txt'"}
    assert_tool(spans.tool(rules(), "item_1"), command, "2 data.txt\n")
    assert_tool(
        spans.tool(rules(), "item_2"),
        {"command": "/bin/bash -lc 'cat missing.txt'"},
        calls_of(chat)["item_2"]["response"],
    )
    assert calls_of(chat)["item_2"]["response"] == "cat: missing.txt: No such file or directory\n"
    assert_tool(spans.tool(rules(), "item_4"), {"topic": "data files"}, calls_of(chat)["item_4"]["response"])
    assert chat[attr.OUTPUT_VALUE] == answer


def test_codex_exec_failed_turn_keeps_its_last_call_as_output() -> None:
    spans = Spans.of(line_entries("codex-json", FIXTURES / "line_streams" / "codex-json-failed.jsonl"))
    failed = spans.chat(rules(), reason="error")
    check(failed, 65_536)
    [output] = messages(failed, attr.GEN_AI_OUTPUT_MESSAGES)
    assert output["finish_reason"] == "error"
    assert [part["type"] for part in output["parts"]] == ["reasoning", "tool_call"]
    # No text: the output value is its tool calls, as JSON.
    assert failed[attr.OUTPUT_MIME_TYPE] == "application/json"
    assert json.loads(str(failed[attr.OUTPUT_VALUE])) == [
        {"id": "item_1", "name": "codex:command", "arguments": {"command": "/bin/bash -lc 'echo building'"}}
    ]
    # Without a finish reason: the output calls tools.
    [output] = messages(spans.chat(rules()), attr.GEN_AI_OUTPUT_MESSAGES)
    assert output["finish_reason"] == "tool_call"
    assert_tool(spans.tool(rules(), "item_1"), {"command": "/bin/bash -lc 'echo building'"}, "building\n")


@pytest.mark.parametrize(
    "entries",
    [
        lambda: line_entries("rtf1", FIXTURES / "line_streams" / "rtf1.txt"),
        lambda: mirrored_entries("run-rtf1.jsonl"),
    ],
    ids=["line-stream", "mirror"],
)
def test_rtf1(entries: Callable[[], list[MappedEntry]]) -> None:
    spans = Spans.of(entries())
    answer = "Done: admin users may now write; tests/test_auth.py passes."
    # The PROMPT tag is the instructions; the USER tag the prompt.
    assert_agent(
        spans.agent(rules()), "The admin write test in tests/test_auth.py fails, please fix it.", answer
    )
    chat = spans.chat(rules(), reason="stop")
    check(chat, 65_536)
    [instructions] = json.loads(str(chat[attr.GEN_AI_SYSTEM_INSTRUCTIONS]))
    assert instructions == {
        "type": "text",
        "content": "You are a careful coding agent. Fix failing tests without changing their intent.",
    }
    calls = calls_of(chat)
    assert calls["t1"]["arguments"] == {"cmd": "rg -n authz -S ."}
    assert calls["t2"]["response"] == "F.\nE   AssertionError: assert False\n1 failed, 1 passed in 0.12s\n"
    # A TOOL-tagged text belongs to no call: a response without an id.
    orphans = [
        part
        for message in messages(chat, attr.GEN_AI_INPUT_MESSAGES)
        for part in message["parts"]
        if part["type"] == "tool_call_response" and "id" not in part
    ]
    assert orphans == [{"type": "tool_call_response", "response": "shell: rg -n authz -S . (2 matches)"}]
    assert texts_of(messages(chat, attr.GEN_AI_OUTPUT_MESSAGES)[0]) == [answer]
    assert_tool(spans.tool(rules(), "t2"), {"args": ["-q", "tests/test_auth.py"]}, calls["t2"]["response"])


def test_nothing_is_cut_and_no_flag_when_it_fits() -> None:
    spans = Spans.of(mirrored_entries("wink-0.27-codex-real-demo.jsonl"))
    for found in spans.everything(rules()):
        assert attr.CONTENT_TRUNCATED not in found


def test_openinference_values_only_when_asked() -> None:
    spans = Spans.of(mirrored_entries("claude-sdk-parallel-subagents.jsonl"))
    for found in spans.everything(rules(openinference=False)):
        assert not {key for key in found if key.startswith(("input.", "output."))}
    assert attr.GEN_AI_INPUT_MESSAGES in spans.agent(rules(openinference=False))


# --- system instructions and tool definitions -----------------------------------------------


def test_system_instructions() -> None:
    found = system_instructions_attributes("You are terse.", rules())
    check(found, 65_536)
    assert json.loads(str(found[attr.GEN_AI_SYSTEM_INSTRUCTIONS])) == [
        {"type": "text", "content": "You are terse."}
    ]
    assert system_instructions_attributes(None, rules()) == {}
    assert system_instructions_attributes("", rules()) == {}
    long = system_instructions_attributes("x" * 10_000, rules(500))
    check(long, 500)
    assert long[attr.CONTENT_TRUNCATED] is True


WINK_TOOL_SPECS = [  # what WINK hands Codex as dynamic tools (`_schema.py`)
    {
        "name": "echo",
        "description": "Echo the text back.",
        "inputSchema": {
            "type": "object",
            "properties": {"text": {"type": "string", "description": "What to echo."}},
            "required": ["text"],
        },
    },
    {
        "name": "lookup",
        "description": "Look a topic up.",
        "inputSchema": {"type": "object", "properties": {}},
    },
]


def test_tool_definitions() -> None:
    found = tool_definitions_attributes(WINK_TOOL_SPECS, rules())
    check(found, 65_536)
    definitions = json.loads(str(found[attr.GEN_AI_TOOL_DEFINITIONS]))
    assert definitions[0] == {
        "type": "function",
        "name": "echo",
        "description": "Echo the text back.",
        "parameters": WINK_TOOL_SPECS[0]["inputSchema"],
    }
    # Claude's init message names its tools, no more; what is not a definition is skipped.
    names = [{"name": name} for name in ("Task", "Bash", "Read")]
    found = tool_definitions_attributes([*names, {"description": "no name"}, "Bash", {"name": 3}], rules())  # type: ignore[list-item]
    check(found, 65_536)
    assert json.loads(str(found[attr.GEN_AI_TOOL_DEFINITIONS])) == [
        {"type": "function", "name": name} for name in ("Task", "Bash", "Read")
    ]
    assert tool_definitions_attributes(None, rules()) == {}
    assert tool_definitions_attributes([], rules()) == {}


def test_many_tool_definitions_keep_the_first_and_valid_schemas() -> None:
    specs = [
        {
            "name": f"tool_{index}",
            "description": "d" * 500,
            "inputSchema": {"type": "object", "properties": {"description": {"type": "string"}}},
        }
        for index in range(100)
    ]
    for limit in (4096, 600, 150):
        found = tool_definitions_attributes(specs, rules(limit))
        check(found, limit)
        definitions = json.loads(str(found[attr.GEN_AI_TOOL_DEFINITIONS]))
        assert definitions[0]["name"] == "tool_0"
        for definition in definitions:  # only descriptions are shortened: the schema stays one
            if "parameters" in definition:
                assert definition["parameters"]["properties"]["description"] == {"type": "string"}
        assert found[attr.CONTENT_TRUNCATED] is True


# --- content policy -------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["metadata", "none"])
def test_a_policy_that_is_not_full_gives_no_content(mode: str) -> None:
    policy = ContentPolicy(mode)  # type: ignore[arg-type]
    spans = Spans.of(mirrored_entries("wink-0.27-codex-real-demo.jsonl"))
    for found in spans.everything(rules(policy=policy)):
        assert found == {}
    assert system_instructions_attributes("You are terse.", rules(policy=policy)) == {}
    assert tool_definitions_attributes(WINK_TOOL_SPECS, rules(policy=policy)) == {}


def test_excluded_tool_results_leave_null_responses_and_keep_the_rest() -> None:
    policy = ContentPolicy("full", frozenset({"tool_results"}))
    spans = Spans.of(mirrored_entries("wink-0.27-codex-real-demo.jsonl"))
    chat = spans.chat(rules(policy=policy), reason="stop")
    check(chat, 65_536)
    responses = [
        part
        for message in messages(chat, attr.GEN_AI_INPUT_MESSAGES)
        for part in message["parts"]
        if part["type"] == "tool_call_response"
    ]
    assert len(responses) == 6
    assert all(part["response"] is None and part["id"] for part in responses)
    assert calls_of(chat)["call_demo_echo"]["arguments"] == {"text": "hi"}
    assert "DEMO-SCENARIO" in messages(chat, attr.GEN_AI_INPUT_MESSAGES)[0]["parts"][0]["content"]
    # The newest input with words is now the prompt.
    assert "DEMO-SCENARIO" in str(chat[attr.INPUT_VALUE])
    tool = spans.tool(rules(policy=policy), "call_demo_echo")
    assert_tool(tool, {"text": "hi"}, None)
    assert attr.OUTPUT_VALUE not in tool


def test_excluded_arguments_keep_the_calls_ids_and_names() -> None:
    policy = ContentPolicy("full", frozenset({"tool_arguments"}))
    spans = Spans.of(mirrored_entries("claude-sdk-parallel-subagents.jsonl"))
    chat = spans.chat(rules(policy=policy), "subagent:toolu_agent_a", reason="stop")
    check(chat, 65_536)
    assert calls_of(chat)["toolu_sub_count_1"] == {
        "type": "tool_call",
        "id": "toolu_sub_count_1",
        "name": "Bash",
        "response": "3",
    }
    assert_tool(spans.tool(rules(policy=policy), "toolu_sub_count_1"), None, "3")


def test_excluded_user_text_leaves_out_prompts_and_instructions() -> None:
    policy = ContentPolicy("full", frozenset({"user_text"}))
    spans = Spans.of(line_entries("rtf1", FIXTURES / "line_streams" / "rtf1.txt"))
    chat = spans.chat(rules(policy=policy), reason="stop")
    check(chat, 65_536)
    assert attr.GEN_AI_SYSTEM_INSTRUCTIONS not in chat
    assert "user" not in {message["role"] for message in messages(chat, attr.GEN_AI_INPUT_MESSAGES)}
    agent = spans.agent(rules(policy=policy))
    check(agent, 65_536)
    assert attr.GEN_AI_INPUT_MESSAGES not in agent
    assert attr.GEN_AI_OUTPUT_MESSAGES in agent
    assert system_instructions_attributes("You are terse.", rules(policy=policy)) == {}


def test_excluded_assistant_text_and_thinking() -> None:
    policy = ContentPolicy("full", frozenset({"assistant_text", "thinking"}))
    spans = Spans.of(mirrored_entries("wink-0.27-claude-rich.jsonl"))
    chat = spans.chat(rules(policy=policy), reason="stop")
    check(chat, 65_536)
    # The answer was words only: no output; the first call keeps its Task call.
    assert attr.GEN_AI_OUTPUT_MESSAGES not in chat
    assert attr.OUTPUT_VALUE not in chat
    inputs = messages(chat, attr.GEN_AI_INPUT_MESSAGES)
    assert [[part["type"] for part in message["parts"]] for message in inputs] == [
        ["text"],
        ["tool_call"],
        ["tool_call_response"],
    ]
    agent = spans.agent(rules(policy=policy))
    assert attr.GEN_AI_OUTPUT_MESSAGES not in agent
    assert attr.GEN_AI_INPUT_MESSAGES in agent


# --- redaction ------------------------------------------------------------------------------


def test_a_planted_secret_never_goes_out() -> None:
    chat, agent, tool = ChatContent(), AgentContent(), ToolContent()
    planted: list[tuple[str, Any]] = [
        ("user_message", {"text": f"use the key {SECRET} please"}),
        ("thinking", {"text": f"the key is {SECRET}"}),
        (
            "tool_use",
            {"tool_use_id": "t1", "tool_name": "shell", "input": {"env": {"KEY": SECRET}, SECRET: 1}},
        ),
        ("tool_result", {"tool_use_id": "t1", "tool_name": "shell", "output": f"KEY={SECRET}\n"}),
        ("assistant_message", {"text": f"Done with {SECRET}."}),
    ]
    for entry_type, detail in planted:
        for content in (chat, agent, tool):
            content.add(entry_type, detail)
    outputs = [
        chat.attributes(rules(), "stop"),
        agent.attributes(rules()),
        tool.attributes(rules()),
        system_instructions_attributes(f"never say {SECRET}", rules()),
        tool_definitions_attributes(
            [{"name": "t", "description": SECRET, "inputSchema": {"default": SECRET}}], rules()
        ),
    ]
    for found in outputs:
        check(found, 65_536)
        assert found
        for value in found.values():
            assert SECRET not in str(value)
            assert SECRET[:12] not in str(value)
    everything = json.dumps(outputs)
    assert everything.count("[REDACTED:anthropic_key:") >= 15
    # Every value through the rules' own function: a user's rule applies too.
    shout = chat.attributes(rules(redact=str.upper), "stop")
    check(shout, 65_536)
    assert "USE THE KEY" in str(shout[attr.GEN_AI_INPUT_MESSAGES])


def test_a_secret_across_the_memory_cut_is_not_kept_in_part() -> None:
    # A text longer than a span keeps is kept cut; a secret where it is cut must not leave a
    # fragment the redactor could no longer recognise.
    chat = ChatContent()
    text = "a" * (KEEP_CHARS - 20) + SECRET + "b" * 1000
    chat.add("assistant_message", {"text": text})
    found = chat.attributes(rules(10 * KEEP_CHARS), "stop")
    check(found, 10 * KEEP_CHARS)
    output = str(found[attr.GEN_AI_OUTPUT_MESSAGES])
    assert "sk-" not in output
    assert found[attr.CONTENT_TRUNCATED] is True


def test_a_redactor_that_raises_gives_nothing() -> None:
    def broken(text: str) -> str:
        raise RuntimeError("no")

    spans = Spans.of(mirrored_entries("wink-0.24-openai-tool.jsonl"))
    for found in spans.everything(rules(redact=broken)):
        assert found == {}
    assert system_instructions_attributes("x", rules(redact=broken)) == {}
    assert tool_definitions_attributes(WINK_TOOL_SPECS, rules(redact=broken)) == {}


# --- size -----------------------------------------------------------------------------------


def big_turn() -> ChatContent:
    chat = ChatContent()
    chat.add("user_message", {"text": "start " + "x" * 1_000_000})
    for index in range(400):
        arguments = {"cmd": f"echo {index}", "blob": "y" * 2000}
        chat.add("tool_use", {"tool_use_id": f"c{index}", "tool_name": "shell", "input": arguments})
        chat.add(
            "tool_result",
            {"tool_use_id": f"c{index}", "tool_name": "shell", "output": f"out {index} " + "z" * 3000},
        )
        chat.add("token_usage", {"usage": {"input_tokens": 1}})
    chat.add("assistant_message", {"text": "final answer " + "w" * 50_000})
    return chat


@pytest.mark.parametrize("limit", [65_536, 4096, 2048, 500, 100])
def test_a_huge_turn_is_cut_to_fit_and_stays_valid(limit: int) -> None:
    found = big_turn().attributes(rules(limit), "stop")
    check(found, limit)
    assert found[attr.CONTENT_TRUNCATED] is True
    inputs = messages(found, attr.GEN_AI_INPUT_MESSAGES)
    # The newest messages are kept; the oldest are left out.
    assert inputs[-1]["parts"][0]["id"] == "c399"
    assert len(inputs) < 800
    [output] = messages(found, attr.GEN_AI_OUTPUT_MESSAGES)
    [text] = texts_of(output)
    assert text.startswith("final answer"[: max(len(text) - 1, 0)])
    assert text.endswith("…") == (limit < 50_000)
    assert str(found[attr.OUTPUT_VALUE]).startswith("final answer")


def test_long_texts_are_shortened_before_messages_are_left_out() -> None:
    chat = ChatContent()
    chat.add("user_message", {"text": "PROMPT " + "p" * 20_000})
    chat.add("tool_use", {"tool_use_id": "c1", "tool_name": "shell", "input": {"cmd": "ls " + "q" * 10_000}})
    chat.add("tool_result", {"tool_use_id": "c1", "output": "r" * 30_000})
    chat.add("assistant_message", {"text": "ok"})
    found = chat.attributes(rules(4096), "stop")
    check(found, 4096)
    inputs = messages(found, attr.GEN_AI_INPUT_MESSAGES)
    assert [message["role"] for message in inputs] == ["user", "assistant", "tool"]
    prompt = inputs[0]["parts"][0]["content"]
    assert prompt.startswith("PROMPT ppp")
    assert prompt.endswith("…")
    assert inputs[1]["parts"][0]["arguments"]["cmd"].startswith("ls qqq")
    assert len(str(found[attr.GEN_AI_INPUT_MESSAGES])) > 3500  # the room is used
    assert texts_of(messages(found, attr.GEN_AI_OUTPUT_MESSAGES)[0]) == ["ok"]


def test_texts_with_escapes_and_wide_characters_fit() -> None:
    chat = ChatContent()
    awkward = '"\\\n\t\x01é漢字🙂' * 3000
    chat.add("user_message", {"text": awkward})
    chat.add("tool_use", {"tool_use_id": "c1", "tool_name": "t", "input": {"k": awkward, "n": [awkward] * 3}})
    chat.add("tool_result", {"tool_use_id": "c1", "output": awkward})
    chat.add("assistant_message", {"text": awkward + "\ud800"})  # a lone surrogate OTLP cannot carry
    for limit in (300, 2000, 20_000):
        found = chat.attributes(rules(limit), "stop")
        check(found, limit)
        for value in found.values():
            str(value).encode("utf-8")
    tool = ToolContent()
    tool.add("tool_use", {"tool_use_id": "c1", "tool_name": "t", "input": {"k": awkward}})
    tool.add("tool_result", {"tool_use_id": "c1", "output": awkward})
    found = tool.attributes(rules(1000))
    check(found, 1000)
    assert json.loads(str(found[attr.GEN_AI_TOOL_CALL_ARGUMENTS]))["k"].endswith("…")
    assert len(str(found[attr.GEN_AI_TOOL_CALL_RESULT])) <= 1000


def test_one_message_with_too_many_parts_keeps_its_newest() -> None:
    chat = ChatContent()
    for index in range(500):
        chat.add("tool_use", {"tool_use_id": f"call_{index}", "tool_name": "shell", "input": {"i": index}})
    found = chat.attributes(rules(2000))
    check(found, 2000)
    [output] = messages(found, attr.GEN_AI_OUTPUT_MESSAGES)
    assert output["finish_reason"] == "tool_call"
    assert output["parts"][-1]["id"] == "call_499"
    assert len(output["parts"]) < 500


def test_huge_arguments_results_and_agent_texts_fit() -> None:
    tool = ToolContent()
    tool.add(
        "tool_use",
        {"tool_use_id": "c", "tool_name": "write", "input": {"path": "a", "content": "c" * 500_000}},
    )
    tool.add(
        "tool_result",
        {"tool_use_id": "c", "sdk_entry": {"tool_use_id": "c", "content": [{"type": "image"}] * 5000}},
    )
    for limit in (4096, 100):
        found = tool.attributes(rules(limit))
        check(found, limit)
        assert found[attr.CONTENT_TRUNCATED] is True
        assert json.loads(str(found[attr.GEN_AI_TOOL_CALL_ARGUMENTS]))["path"] == "a"
    wide = ToolContent()
    wide.add(
        "tool_use", {"tool_use_id": "c", "tool_name": "t", "input": {f"key_{i}": i for i in range(10_000)}}
    )
    found = wide.attributes(rules(1000))  # keys are never cut: too many cannot fit at all
    check(found, 1000)
    agent = AgentContent()
    agent.add("user_message", {"text": "p" * 1_000_000})
    agent.add("assistant_message", {"text": "a" * 1_000_000})
    found = agent.attributes(rules(4096))
    check(found, 4096)
    assert found[attr.CONTENT_TRUNCATED] is True
    assert len(str(found[attr.INPUT_VALUE])) <= 4096


def test_what_a_span_keeps_is_bounded() -> None:
    chat = ChatContent()
    big = "q" * (KEEP_CHARS + 1000)
    for index in range(50):
        chat.add("tool_result", {"tool_use_id": f"c{index}", "output": big})
        chat.add("user_message", {"text": "u" * 10_000})
    # Internal, on purpose: the budget is what this test is about.
    assert sum(piece.size for piece in chat._pieces) <= KEEP_CHARS
    many = ChatContent()
    for index in range(10_000):
        many.add("user_message", {"text": f"m{index}"})
    assert len(many._pieces) <= 2048
    found = many.attributes(rules(65_536))
    check(found, 65_536)
    assert found[attr.CONTENT_TRUNCATED] is True
    assert messages(found, attr.GEN_AI_INPUT_MESSAGES)[-1]["parts"][0]["content"] == "m9999"


# --- details of any shape -------------------------------------------------------------------

ENTRY_TYPES = (
    "user_message",
    "assistant_message",
    "thinking",
    "tool_use",
    "tool_result",
    "token_usage",
    "system_event",
    "error",
    "unknown",
)
# The keys the readers look at, so that generated details reach them.
READ_KEYS = (
    "sdk_entry",
    "message",
    "content",
    "role",
    "id",
    "text",
    "thinking",
    "tag",
    "notification",
    "event",
    "item",
    "type",
    "summary",
    "callId",
    "tool",
    "arguments",
    "input",
    "result",
    "contentItems",
    "output",
    "tool_use_id",
    "tool_name",
    "name",
    "command",
    "changes",
    "query",
    "aggregatedOutput",
    "error",
    "results",
    "is_error",
)
DETAILS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats()
    | st.text(max_size=8)
    | st.sampled_from(
        [
            "text",
            "thinking",
            "result",
            "commandExecution",
            "mcpToolCall",
            "webSearch",
            "fileChange",
            "PROMPT",
            "system",
        ]
    ),
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.sampled_from(READ_KEYS), children, max_size=5)
        | st.dictionaries(st.text(max_size=4), children, max_size=2)
    ),
    max_leaves=25,
)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.tuples(st.sampled_from(ENTRY_TYPES), DETAILS | JSONISH), max_size=12),
    st.sampled_from([40, 300, 5000]),
)
def test_details_of_any_shape_never_raise_and_stay_valid(entries: list[tuple[str, Any]], limit: int) -> None:
    chat, agent, tool = ChatContent(), AgentContent(), ToolContent()
    for entry_type, detail in entries:
        for content in (chat, agent, tool):
            content.add(entry_type, detail)
    check(chat.attributes(rules(limit), None), limit)
    check(chat.attributes(rules(limit), "stop"), limit)
    check(agent.attributes(rules(limit)), limit)
    check(tool.attributes(rules(limit)), limit)


@settings(max_examples=300, deadline=None)
@given(st.lists(DETAILS, max_size=6), st.sampled_from([40, 300, 5000]))
def test_what_fits_goes_out_as_the_json_of_the_whole_byte_for_byte(items: list[Any], limit: int) -> None:
    """An array (or a value) whose JSON fits goes out as `attribute_json` of it, uncut; what does
    not fit is cut to the limit or left out."""
    builder = AttributeBuilder(lambda text: text, limit, False)
    copied = [builder.value(item) for item in items]
    whole = attribute_json(copied)
    builder.truncated = False  # what `value()` itself stopped short is not what is asked here
    fitted = builder.fit(copy.deepcopy(copied), "part", "start")  # a cut shortens in place
    if len(whole) <= limit:
        assert fitted == whole
        assert not builder.truncated
    else:
        assert fitted is None or len(fitted) <= limit
        assert builder.truncated
    for item in copied:
        builder.truncated = False
        one = builder.fit_value(copy.deepcopy(item))
        if len(attribute_json(item)) <= limit:
            assert one == attribute_json(item)
            assert not builder.truncated
        else:
            assert one is None or len(one) <= limit
            assert builder.truncated


# Values a tool's arguments or result may hold, without floats: every character, surrogates too.
FLOATLESS = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.text(st.characters(codec=None, exclude_categories=()), max_size=12),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=20,
)


@settings(max_examples=300, deadline=None)
@given(FLOATLESS, st.booleans())
def test_content_goes_out_as_the_stdlibs_compact_json_of_it(value: Any, with_float: bool) -> None:
    """Content is encoded by orjson unless a float is in it, and is the same text either way:
    the stdlib's, whatever the characters or the size of the integers."""
    builder = AttributeBuilder(lambda text: text, 10**9, False)
    copied = builder.value([value, 1.5e-05] if with_float else value)
    assert builder.fit_value(copied) == attribute_json(copied)
    assert builder.fit([copied, copied], "part", None) == attribute_json([copied, copied])


class Exploding(Mapping[str, Any]):
    """A mapping every read of which fails."""

    def __getitem__(self, key: str) -> Any:
        raise RuntimeError("boom")

    def __iter__(self) -> Iterator[str]:
        raise RuntimeError("boom")

    def __len__(self) -> int:
        raise RuntimeError("boom")


class Shouty(str):
    """A str subclass whose own methods must not run."""

    def __eq__(self, other: object) -> bool:
        raise RuntimeError("boom")

    __hash__ = str.__hash__


def test_hostile_details_never_raise() -> None:
    chat, agent, tool = ChatContent(), AgentContent(), ToolContent()
    deep: Any = "deep"
    for _ in range(100):
        deep = [deep]
    hostile: list[tuple[Any, Any]] = [
        ("user_message", Exploding()),
        ("user_message", {"sdk_entry": Exploding()}),
        ("assistant_message", {"message": {"content": [Exploding(), {"text": "lost"}]}}),
        ("assistant_message", {"message": {"content": [{"text": Shouty("shout")}]}}),
        (
            "tool_use",
            {
                "tool_use_id": "c",
                "tool_name": "t",
                "input": {"a": ReprRaises(), "b": Exploding(), "c": float("nan")},
            },
        ),
        ("tool_result", {"tool_use_id": "c", "output": Shouty("done")}),
        ("thinking", {"text": ["not", "a", "string"]}),
        (None, None),
        (3, []),
        ("tool_use", {"tool_use_id": "d", "input": deep}),
    ]
    for entry_type, detail in hostile:
        for content in (chat, agent, tool):
            content.add(entry_type, detail)
    for limit in (50, 65_536):
        for found in (
            chat.attributes(rules(limit), "stop"),
            agent.attributes(rules(limit)),
            tool.attributes(rules(limit)),
        ):
            check(found, limit)
    # An entry that cannot be read adds nothing; the others still count.
    said = str(chat.attributes(rules(), "stop").get(attr.GEN_AI_INPUT_MESSAGES))
    assert "shout" in said
    assert "lost" not in said
    assert chat.attributes(rules(0), "stop") == {}
    assert chat.attributes(rules(-1), "stop") == {}


# --- Phoenix reads them back ----------------------------------------------------------------

PHOENIX_READER = """
import json, sys
from phoenix.trace.gen_ai.conversion import get_openinference_attributes
spans = json.load(sys.stdin)
print(json.dumps([get_openinference_attributes(span) for span in spans]))
"""


@pytest.mark.phoenix
def test_phoenix_converter_reads_every_message() -> None:
    if not PHOENIX_PYTHON.exists():
        missing(PHOENIX_MISSING)
    sent: list[dict[str, Any]] = []
    for _, entries in ALL_FIXTURES:
        spans = Spans.of(entries())
        for limit in (65_536, 300):
            for chat in spans.chats.values():
                sent.append({"gen_ai.operation.name": "chat", **chat.attributes(rules(limit), "stop")})
            for agent in spans.agents.values():
                sent.append({"gen_ai.operation.name": "invoke_agent", **agent.attributes(rules(limit))})
            for tool in spans.tools.values():
                found = tool.attributes(rules(limit, openinference=False))  # Phoenix's own output.value
                sent.append({"gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "t", **found})
    sent.append({"gen_ai.operation.name": "chat", **tool_definitions_attributes(WINK_TOOL_SPECS, rules())})
    sent.append({"gen_ai.operation.name": "chat", **system_instructions_attributes("Be terse.", rules())})
    done = subprocess.run(
        [str(PHOENIX_PYTHON), "-c", PHOENIX_READER],
        input=json.dumps(sent),
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    read: list[dict[str, Any]] = json.loads(done.stdout)
    for span, converted in zip(sent, read, strict=True):
        inputs = len(json.loads(span.get(attr.GEN_AI_INPUT_MESSAGES, "[]")))
        inputs += 1 if attr.GEN_AI_SYSTEM_INSTRUCTIONS in span else 0
        outputs = len(json.loads(span.get(attr.GEN_AI_OUTPUT_MESSAGES, "[]")))
        for prefix, count in (("llm.input_messages", inputs), ("llm.output_messages", outputs)):
            roles = {key for key in converted if key.startswith(prefix) and key.endswith(".message.role")}
            assert len(roles) == count, (span, converted)  # one invalid item would drop them all
        if attr.GEN_AI_TOOL_DEFINITIONS in span:
            assert "llm.tools.0.tool.json_schema" in converted
        if isinstance(span.get(attr.GEN_AI_TOOL_CALL_ARGUMENTS), str):
            assert "tool.parameters" in converted
        if attr.GEN_AI_TOOL_CALL_RESULT in span:
            assert converted["output.value"] == span[attr.GEN_AI_TOOL_CALL_RESULT]


def test_images_in_tool_results_are_neither_kept_nor_sent() -> None:
    # A turn of screenshots: each result holds a 256 KiB base64 image. The chat span keeps what
    # the block was, not its data, and the memory it holds stays small.
    import tracemalloc

    chat = ChatContent()
    tracemalloc.start()
    try:
        before, _ = tracemalloc.get_traced_memory()
        for number in range(100):
            data = f"{number:08d}" + "A" * (256 * 1024)
            image = {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": data}}
            call = {"type": "tool_use", "id": f"t{number}", "name": "screenshot", "input": {}}
            chat.add("tool_use", {"sdk_entry": call})
            chat.add(
                "tool_result",
                {"sdk_entry": {"type": "tool_result", "tool_use_id": f"t{number}", "content": [image]}},
            )
            del data, image  # only the chat content could hold them now
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert held - before < 4 * 1024 * 1024
    chat.add("assistant_message", {"text": "Done."})
    found = chat.attributes(rules(65536), "stop")
    messages = json.loads(str(found[attr.GEN_AI_INPUT_MESSAGES]))
    responses = [p["response"] for m in messages for p in m["parts"] if p["type"] == "tool_call_response"]
    assert responses
    assert all(response == [{"type": "image"}] for response in responses)


def test_an_agent_description_is_made_into_attributes_once_until_it_changes() -> None:
    """The root and each main turn end with the same instructions and tool definitions: made once
    (a CLI's init message offers two dozen tools, each query; work counted, not timed)."""
    from transcript_otel.instrumentation.span_tree.span_content import AgentDescription

    tools = tuple({"name": f"tool_{n}", "description": "does a thing"} for n in range(24))
    description = AgentDescription("be brief", tools)
    run_rules = rules()
    first = description.attributes(run_rules)
    assert json.loads(first["gen_ai.tool.definitions"])[0]["name"] == "tool_0"
    assert description.attributes(run_rules) is first
    description.tool_definitions = tools[:1]  # the harness told it again, otherwise
    again = description.attributes(run_rules)
    assert again is not first
    assert [tool["name"] for tool in json.loads(again["gen_ai.tool.definitions"])] == ["tool_0"]
    assert description.attributes(rules(max_length=100)) is not again  # other rules: made for them
