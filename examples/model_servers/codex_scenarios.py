"""The scripted model's answers for the real `codex` CLI (Responses API), one scenario per name.

A scenario maps a conversation key (text a user message of the request holds: the prompt
the scenario was started with) to its steps. A request is answered with the first step
whose `marker` is not yet in the request's input: the step's first call id once codex has
sent that call back, or its answer text once codex holds it. Prompts that use a scenario put
its key in their text (`prompt_for`). Tool names are those codex 0.171 offers for `gpt-5.5`:
`exec_command` (a function), `apply_patch` (a freeform custom tool), the hosted
`web_search`, the client-side `tool_search` for MCP tools, and the WINK tools weakincentives
bridges as dynamic tools.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Final

JsonObj = dict[str, Any]

# The model codex runs as: a slug codex 0.171 has metadata for (with an unknown one it warns
# and offers no apply_patch: the `unknown_model` scenario shows that).
MODEL: Final = "gpt-5.5"
UNKNOWN_MODEL: Final = "gpt-scripted-unknown"
# What a 429 tells the client to wait (its `retry-after` header and its message).
RATE_LIMIT_RETRY_AFTER_S: Final = 1


@dataclass(frozen=True)
class Step:
    """One model response: its output items, usage, and the failed attempts before it.

    `failures`: per attempt, an HTTP status to fail with, "failed" for a `response.failed`
    event, "error_event" for an `error` event that ends the stream, "mid_stream" for a stream
    cut in the first item, or "before_completed" for one cut after every item was sent, before
    `response.completed` (the attempt after the last one answers).
    """

    items: tuple[JsonObj, ...]
    input_tokens: int = 1000
    cached_tokens: int = 0
    cache_write_tokens: int = 0
    output_tokens: int = 20
    reasoning_tokens: int = 0
    failures: tuple[int | str, ...] = field(default=())

    @classmethod
    def say(cls, text: str, *, reasoning: str | None = None, **fields: Any) -> Step:
        return cls((*_reasoning(reasoning), message(text)), **fields)

    @classmethod
    def call(cls, *calls: JsonObj, reasoning: str | None = None, **fields: Any) -> Step:
        return cls((*_reasoning(reasoning), *calls), **fields)

    @property
    def marker(self) -> str:
        """What codex sends back once it has this step: a call's id, else the answer's text."""
        for item in self.items:
            if "call_id" in item:
                return str(item["call_id"])
        return next(str(item["text"]) for item in self.items if item["type"] == "message")


def message(text: str) -> JsonObj:
    return {"type": "message", "text": text}


def _reasoning(summary: str | None) -> tuple[JsonObj, ...]:
    return () if summary is None else ({"type": "reasoning", "summary": summary},)


def shell(call_id: str, command: str) -> JsonObj:
    return function_call(call_id, "exec_command", {"cmd": command})


def function_call(call_id: str, name: str, arguments: JsonObj) -> JsonObj:
    return {"type": "function_call", "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}


def tool_search(call_id: str, query: str) -> JsonObj:
    """Codex's client-side search for deferred tools (how a model finds MCP tools)."""
    arguments = {"query": query, "limit": 8}
    return {"type": "tool_search_call", "call_id": call_id, "execution": "client", "arguments": arguments}


def mcp_call(call_id: str, server: str, tool: str, arguments: JsonObj) -> JsonObj:
    """A call of an MCP tool: its name, in the namespace `mcp__<server>` that `tool_search` returned."""
    return {**function_call(call_id, tool, arguments), "namespace": f"mcp__{server}"}


def collaboration(call_id: str, tool: str, arguments: JsonObj) -> JsonObj:
    """A call of one of the subagent tools codex offers with `multi_agent_v2`."""
    return {**function_call(call_id, tool, arguments), "namespace": "collaboration"}


def code_mode_exec(call_id: str, script: str) -> JsonObj:
    """Code mode's one tool: JavaScript run in a V8 isolate, its nested tools on `tools`."""
    return {"type": "custom_tool_call", "call_id": call_id, "name": "exec", "input": script}


def apply_patch(call_id: str, patch: str) -> JsonObj:
    return {"type": "custom_tool_call", "call_id": call_id, "name": "apply_patch", "input": patch}


def web_search(query: str) -> JsonObj:
    return {"type": "web_search_call", "query": query}


ADD_FILE_PATCH: Final = "*** Begin Patch\n*** Add File: notes.txt\n+written by codex\n*** End Patch\n"


def _tour(key: str, *first: Step) -> dict[str, list[Step]]:
    """Every kind of item in one turn: `first` (a WINK tool call), reasoning and a command, a
    failing command, a patch, an MCP tool found with `tool_search`, a web search, the answer."""
    return {
        key: [
            *first,
            Step.call(
                shell("call_tour_1", "seq 2 > data.txt && wc -l data.txt"),
                reasoning="First I will write the data file and count its lines.",
                input_tokens=3000,
                output_tokens=45,
                reasoning_tokens=14,
            ),
            Step.call(
                shell("call_tour_2", "cat missing.txt"),
                input_tokens=3300,
                cached_tokens=2900,
                output_tokens=20,
            ),
            Step.call(
                apply_patch("call_tour_3", ADD_FILE_PATCH),
                input_tokens=3500,
                cached_tokens=3200,
                output_tokens=40,
            ),
            Step.call(
                tool_search("call_tour_4", "docs lookup"),
                input_tokens=3700,
                cached_tokens=3400,
                output_tokens=12,
            ),
            Step.call(
                mcp_call("call_tour_5", "docs", "lookup", {"topic": "data files"}),
                input_tokens=3900,
                cached_tokens=3600,
                output_tokens=18,
            ),
            Step(
                (
                    web_search("counting lines in a file"),
                    message("data.txt has 2 lines; missing.txt does not exist; I added notes.txt."),
                ),
                input_tokens=4100,
                cached_tokens=3800,
                output_tokens=30,
            ),
        ]
    }


SCENARIOS: Final[dict[str, dict[str, list[Step]]]] = {
    # Reasoning, two shell commands (the second fails), then the answer.
    "shell": {
        "SHELL-SCENARIO": [
            Step.call(
                shell("call_shell_1", "echo hello from codex"),
                reasoning="The user wants a command run. I will use exec_command.",
                input_tokens=3000,
                output_tokens=40,
                reasoning_tokens=12,
            ),
            Step.call(
                shell("call_shell_2", "ls /no/such/dir"),
                input_tokens=3200,
                cached_tokens=2800,
                output_tokens=30,
            ),
            Step.say(
                "The first command printed hello; the second failed.",
                input_tokens=3400,
                cached_tokens=3000,
                output_tokens=15,
            ),
        ]
    },
    # apply_patch adds a file.
    "apply_patch": {
        "PATCH-SCENARIO": [
            Step.call(apply_patch("call_patch_1", ADD_FILE_PATCH), input_tokens=2500, output_tokens=50),
            Step.say("I added notes.txt.", input_tokens=2700, cached_tokens=2400, output_tokens=8),
        ]
    },
    # The `lookup` tool of the MCP server `docs` (mcp_docs_server.py), found with `tool_search` first.
    "mcp_tool": {
        "MCP-SCENARIO": [
            Step.call(tool_search("call_search_1", "docs lookup"), input_tokens=2400, output_tokens=15),
            Step.call(
                mcp_call("call_mcp_1", "docs", "lookup", {"topic": "sse"}),
                input_tokens=2600,
                cached_tokens=2300,
                output_tokens=20,
            ),
            Step.say("The docs explain sse.", input_tokens=2800, cached_tokens=2500, output_tokens=8),
        ]
    },
    # Every kind of item in one turn (`codex exec --json`'s line fixture).
    "tour": _tour("TOUR-SCENARIO"),
    # The same with the WINK tool `echo` first (`make demo`'s weakincentives Codex agent).
    "demo": _tour(
        "DEMO-SCENARIO",
        Step.call(
            function_call("call_demo_echo", "echo", {"text": "hi"}),
            reasoning="The task asks for the echo tool first.",
            input_tokens=2800,
            output_tokens=18,
            reasoning_tokens=6,
        ),
    ),
    # A command runs, then every attempt at the next step fails with HTTP 500.
    "tool_then_500": {
        "TOOL-THEN-500-SCENARIO": [
            Step.call(
                shell("call_then_1", "echo building"),
                reasoning="Build first.",
                input_tokens=2000,
                output_tokens=25,
                reasoning_tokens=4,
            ),
            Step.say("never", failures=(500,) * 50),
        ]
    },
    # A plain answer with reasoning.
    "plain": {
        "PLAIN-SCENARIO": [
            Step.say(
                "Hello from the scripted model.",
                reasoning="A greeting is enough.",
                input_tokens=2000,
                output_tokens=10,
                reasoning_tokens=6,
            )
        ]
    },
    # A command that takes a few seconds (in the terminal UI a person types a second prompt
    # meanwhile), then an answer, and one more should the second prompt get a turn of its own.
    "busy_prompt": {
        "BUSY-PROMPT-SCENARIO": [
            Step.call(shell("call_busy_1", "sleep 4; echo done"), input_tokens=2000, output_tokens=20),
            Step.say("The command is done.", input_tokens=2100, cached_tokens=2000, output_tokens=8),
            Step.say("Here is the answer to the second prompt.", input_tokens=2200, output_tokens=9),
        ]
    },
    # A subagent (`multi_agent_v2`'s `collaboration` tools): spawned with a task of its own,
    # waited for, its answer reported. The child's conversation key is the longer one: with
    # `fork_turns` "all" its request would hold the parent's prompt too.
    "subagent": {
        "SUBAGENT-SCENARIO": [
            Step.call(
                collaboration(
                    "call_spawn_1",
                    "spawn_agent",
                    {"task_name": "helper", "message": "SUBAGENT-CHILD-TASK: say hi.", "fork_turns": "none"},
                ),
                input_tokens=2400,
                output_tokens=30,
            ),
            Step.call(
                collaboration("call_wait_1", "wait_agent", {"timeout_ms": 10000}),
                input_tokens=2600,
                cached_tokens=2400,
                output_tokens=12,
            ),
            Step.say("The helper said hi.", input_tokens=2800, cached_tokens=2600, output_tokens=8),
        ],
        "SUBAGENT-CHILD-TASK": [Step.say("Hi from the helper.", input_tokens=1500, output_tokens=6)],
    },
    # Code mode (a model such as gpt-6-sol is given one `exec` tool, JavaScript whose nested
    # tools are on `tools`): a script that runs two commands, one failing, then the answer.
    "code_mode": {
        "CODE-MODE-SCENARIO": [
            Step.call(
                code_mode_exec(
                    "call_code_1",
                    'const ok = await tools.exec_command({cmd: "echo hello from code mode"});\n'
                    'const bad = await tools.exec_command({cmd: "ls /no/such/dir"});\n'
                    "text(ok);\ntext(bad);\n",
                ),
                reasoning="I will run both commands from one script.",
                input_tokens=4000,
                output_tokens=60,
                reasoning_tokens=10,
            ),
            Step.say(
                "The script ran both; the second failed.",
                input_tokens=4400,
                cached_tokens=4000,
                output_tokens=12,
            ),
        ]
    },
    # A hosted web search in the same response as the answer.
    "web_search": {
        "WEB-SEARCH-SCENARIO": [
            Step(
                (
                    web_search("opentelemetry genai conventions"),
                    message("The conventions are in development."),
                ),
                input_tokens=2200,
                output_tokens=25,
            )
        ]
    },
    # The first attempt fails with HTTP 500, the retry answers.
    "retry_500": {
        "RETRY-500-SCENARIO": [Step.say("Answered after a retry.", input_tokens=1800, failures=(500,))]
    },
    # The first attempt is rate limited (HTTP 429, `retry-after`), the retry answers.
    "rate_limited": {
        "RATE-LIMITED-SCENARIO": [
            Step.say("Answered after the rate limit.", input_tokens=1700, failures=(429,))
        ]
    },
    # The first stream ends with an `error` event; the retry answers.
    "stream_error": {
        "STREAM-ERROR-SCENARIO": [
            Step.say(
                "Answered after a stream error.",
                input_tokens=1750,
                output_tokens=8,
                failures=("error_event",),
            )
        ]
    },
    # Every attempt fails with HTTP 500: the turn fails.
    "fatal_500": {"FATAL-500-SCENARIO": [Step.say("never", failures=(500,) * 50)]},
    # The model reports `response.failed`: the turn fails.
    "response_failed": {"RESPONSE-FAILED-SCENARIO": [Step.say("never", failures=("failed",) * 50)]},
    # The stream is cut before `response.completed`; codex reconnects and the retry answers.
    "stream_cut": {
        "STREAM-CUT-SCENARIO": [
            Step.say(
                "Answered after the stream was cut.",
                input_tokens=1900,
                output_tokens=9,
                failures=("mid_stream",),
            )
        ]
    },
    # A command, then a stream cut after its answer was sent, before `response.completed`.
    "stream_cut_late": {
        "STREAM-CUT-LATE-SCENARIO": [
            Step.call(shell("call_late_1", "echo first"), input_tokens=2100, output_tokens=22),
            Step.say(
                "Answered after the stream was cut late.",
                input_tokens=2300,
                cached_tokens=2000,
                output_tokens=11,
                failures=("before_completed",),
            ),
        ]
    },
    # A model slug codex has no metadata for: it warns, and answers all the same.
    "unknown_model": {
        "UNKNOWN-MODEL-SCENARIO": [Step.say("Answered by an unknown model.", input_tokens=1500)]
    },
    # The WINK tool `echo` that weakincentives bridges (app-server only), then the answer.
    "wink_tool": {
        "WINK-TOOL-SCENARIO": [
            Step.call(
                function_call("call_wink_1", "echo", {"text": "hi"}),
                reasoning="I should call the echo tool.",
                input_tokens=2600,
                output_tokens=20,
                reasoning_tokens=5,
            ),
            Step.say("The echo tool said hi.", input_tokens=2700, cached_tokens=2500, output_tokens=7),
        ]
    },
}


# What `codex exec --json` runs (the WINK tool needs weakincentives' bridge), and the app-server.
EXEC_SCENARIOS: Final = (
    "shell",
    "apply_patch",
    "mcp_tool",
    "web_search",
    "plain",
    "retry_500",
    "fatal_500",
    "response_failed",
    "stream_cut",
    "stream_cut_late",
    "rate_limited",
    "stream_error",
    "unknown_model",
    "tour",
    "tool_then_500",
)
APP_SERVER_SCENARIOS: Final = (*EXEC_SCENARIOS[:-2], "wink_tool", "tool_then_500", "demo")
# Those whose turn fails: `codex exec` exits 1, `evaluate()` raises.
FAILING: Final = frozenset({"fatal_500", "response_failed", "tool_then_500"})


def prompt_for(scenario: str) -> str:
    """A prompt that selects the scenario's main conversation."""
    main_key = next(iter(SCENARIOS[scenario]))
    return f"{main_key}: please do the task."
