"""The real weakincentives OpenAI and LiteLLM adapters (0.18 and 0.24), end to end.

Each version's driver process evaluates prompts through the adapters' public
`evaluate()`, with the real `openai` client (Responses API) and the real `litellm`
(Chat Completions) talking to a scripted server (`examples/fake_agents/
fake_chat_server.py`): a plain answer, a tool call then an answer, two tool calls in
one response, and a server failure. 0.18 calls `configure()`; 0.24 runs under
`opentelemetry-instrument` with no code of ours. Assertions are on what a user sees:
the JSONL mirror, the log records and spans a real OTLP receiver got, the results.
"""

from __future__ import annotations

from typing import Any

import pytest

from transcript_otel.model.invariants import check_invariants

from wink_harness import CHAT_VERSIONS, WinkRun, attributes, run_driver

pytestmark = pytest.mark.wink

_RUNS: dict[str, WinkRun] = {}
ADAPTERS = ("openai", "litellm")
PROMPT_TEXT = "Scenario tool: call the echo tool with the text 'hi', then reply."


@pytest.fixture(scope="module", params=CHAT_VERSIONS)
def run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> WinkRun:
    version: str = request.param
    if version not in _RUNS:
        workdir = tmp_path_factory.mktemp(f"wink-chat-{version}")
        arguments = ("--configure", "--adapter", "chat")
        _RUNS[version] = run_driver(version, workdir, arguments, zero_code=version == CHAT_VERSIONS[-1])
    return _RUNS[version]


@pytest.fixture(params=ADAPTERS)
def adapter(request: pytest.FixtureRequest) -> str:
    name: str = request.param
    return name


def _entries(run: WinkRun, prompt: str) -> list[dict[str, Any]]:
    return [e for e in run.entries(prompt) if e["source"] == "main"]


def test_the_agent_results_are_unaffected(run: WinkRun, adapter: str) -> None:
    results = run.results
    assert results[f"{adapter}-text"]["text"] == "Hello from the scripted model."
    assert results[f"{adapter}-tool"]["text"].startswith("The tool said: hi")
    assert results[f"{adapter}-parallel"]["ok"], results[f"{adapter}-parallel"]
    assert results[f"{adapter}-error"]["ok"] is False
    assert results[f"{adapter}-error"]["error_type"] == "PromptEvaluationError"
    assert "Traceback" not in run.stderr


def test_every_run_keeps_the_invariants_and_has_no_transcript_errors(run: WinkRun) -> None:
    assert set(run.mirror) == set(run.results)
    for prompt, records in run.mirror.items():
        assert check_invariants(records) == [], prompt
        events = [r["event"] for r in records]
        assert events[0] == "transcript.start"
        assert events[-1] == "transcript.stop"
        assert "transcript.error" not in events, [r for r in records if r["event"] == "transcript.error"]


def test_a_tool_round_then_an_answer_is_captured_in_order(run: WinkRun, adapter: str) -> None:
    entries = _entries(run, f"{adapter}-tool")
    assert [e["entry_type"] for e in entries] == [
        "user_message",  # the rendered prompt, sent as the system message
        "tool_use",
        "token_usage",  # the first response's
        "tool_result",
        "assistant_message",
        "token_usage",  # the final response's
    ]
    prompt, use, first_usage, result, answer, last_usage = entries
    assert prompt["detail"]["message"]["role"] == "system"
    assert PROMPT_TEXT in prompt["detail"]["text"]
    assert prompt["adapter"] == adapter
    assert use["detail"]["tool_name"] == "echo"
    assert use["detail"]["tool_use_id"] == "call_1"
    assert use["detail"]["input"] == {"text": "hi"}
    assert result["detail"]["tool_use_id"] == "call_1"
    assert result["detail"]["tool_name"] == "echo"
    assert result["detail"]["message"]["role"] == "tool"  # as sent, before the adapter rewrote it
    assert "hi" in result["detail"]["content"]
    assert answer["detail"]["text"] == run.results[f"{adapter}-tool"]["text"]
    assert first_usage["detail"]["usage"] == {
        "input_tokens": 100,
        "output_tokens": 20,
        "total_tokens": 120,
        "cached_input_tokens": 5,
        "reasoning_output_tokens": 3,
    }
    assert last_usage["detail"]["usage"]["input_tokens"] == 110
    assert last_usage["detail"]["model"] == "fake-tool"


def test_a_plain_answer_is_a_prompt_an_answer_and_its_usage(run: WinkRun, adapter: str) -> None:
    entries = _entries(run, f"{adapter}-text")
    assert [e["entry_type"] for e in entries] == ["user_message", "assistant_message", "token_usage"]
    assert entries[1]["detail"]["text"] == "Hello from the scripted model."
    assert all(e["session_id"] == run.results[f"{adapter}-text"]["session_id"] for e in entries)


def test_two_tool_calls_in_one_response_are_two_tool_spans(run: WinkRun, adapter: str) -> None:
    prompt = f"{adapter}-parallel"
    entries = _entries(run, prompt)
    assert [e["entry_type"] for e in entries] == [
        "user_message",
        "tool_use",
        "tool_use",
        "token_usage",
        "tool_result",
        "tool_result",
        "assistant_message",
        "token_usage",
    ]
    calls = {
        e["detail"]["tool_use_id"]: e["detail"]["input"] for e in entries if e["entry_type"] == "tool_use"
    }
    assert calls == {"call_1": {"text": "one"}, "call_2": {"text": "two"}}
    first_chat = next(s for s in run.children(run.root_span(prompt)) if s.name.startswith("chat"))
    tools = run.children(first_chat)
    assert [(s.name, attributes(s)["gen_ai.tool.call.id"]) for s in tools] == [
        ("execute_tool echo", "call_1"),
        ("execute_tool echo", "call_2"),
    ]


def test_each_round_is_a_chat_span_with_its_usage_and_tools(run: WinkRun, adapter: str) -> None:
    prompt = f"{adapter}-tool"
    root = run.root_span(prompt)
    found = attributes(root)
    assert found["gen_ai.operation.name"] == "invoke_agent"
    assert found["gen_ai.agent.name"] == prompt
    assert found["gen_ai.provider.name"] == "openai"
    model = "fake-tool" if adapter == "openai" else "openai/fake-tool"
    assert found["gen_ai.request.model"] == model
    assert found["gen_ai.conversation.id"] == run.results[prompt]["session_id"]
    assert found["transcript.adapter"] == adapter
    # The run's totals under the root's own names: the chat spans below count the tokens, once.
    assert (found["transcript.usage.input_tokens"], found["transcript.usage.output_tokens"]) == (210, 41)
    assert not [key for key in found if key.startswith("gen_ai.usage.")]
    chats = run.children(root)
    assert [s.name for s in chats] == [f"chat {model}", f"chat {model}"]
    assert [attributes(s)["transcript.turn"] for s in chats] == [1, 2]
    assert [attributes(s)["gen_ai.usage.input_tokens"] for s in chats] == [100, 110]
    assert [attributes(s)["gen_ai.usage.cache_read.input_tokens"] for s in chats] == [5, 5]
    (tool,) = run.children(chats[0])
    assert tool.name == "execute_tool echo"
    assert run.children(chats[1]) == []
    # The entries sit on the spans they belong to.
    by_type = {e["entry_type"]: e["span_id"] for e in _entries(run, prompt)}
    assert by_type["tool_use"] == by_type["tool_result"] == tool.span_id.hex()
    assert by_type["assistant_message"] == chats[1].span_id.hex()


def test_a_failed_request_is_an_error_entry_and_an_error_span(run: WinkRun, adapter: str) -> None:
    prompt = f"{adapter}-error"
    entries = _entries(run, prompt)
    assert [e["entry_type"] for e in entries] == ["user_message", "error"]
    exception = entries[1]["detail"]["exception"]
    assert exception["type"] == "PromptEvaluationError"
    assert exception["message"]
    root = run.root_span(prompt)
    (chat,) = run.children(root)
    assert chat.status.code == 2  # ERROR
    assert attributes(chat)["error.type"] == "PromptEvaluationError"
    assert root.status.code == 2
    assert [event.name for event in root.events if event.name == "exception"] == ["exception"]


def test_log_records_match_the_mirror(run: WinkRun) -> None:
    for prompt in run.results:
        run.assert_entries_exported(prompt)
