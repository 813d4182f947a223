"""The scripted model's answers for the real `claude` CLI, one scenario per name.

A scenario maps a conversation key (text the conversation's first user message holds: the
main prompt, or the prompt a subagent was launched with) to its steps; step N answers a
request that already holds N assistant messages. Prompts that use a scenario put its key
in their text (`prompt_for`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

JsonObj = dict[str, Any]


@dataclass(frozen=True)
class Step:
    """One model answer: its content blocks, stop reason, usage, and the failed attempts before it.

    `failures`: per attempt, an HTTP status to fail with, or "mid_stream" for an SSE `error`
    event after the first content block (the attempt after the last one answers).
    """

    blocks: tuple[JsonObj, ...]
    stop_reason: str = "end_turn"
    output_tokens: int = 20
    input_tokens: int | None = None
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    failures: tuple[int | str, ...] = field(default=())

    @classmethod
    def say(cls, text: str, **fields: Any) -> Step:
        return cls(({"type": "text", "text": text},), **fields)

    @classmethod
    def call(
        cls, *calls: JsonObj, thinking: str | None = None, text: str | None = None, **fields: Any
    ) -> Step:
        blocks: list[JsonObj] = []
        if thinking is not None:
            blocks.append({"type": "thinking", "thinking": thinking})
        if text is not None:
            blocks.append({"type": "text", "text": text})
        return cls((*blocks, *calls), stop_reason="tool_use", **fields)


def bash(call_id: str, command: str) -> JsonObj:
    return {
        "type": "tool_use",
        "id": call_id,
        "name": "Bash",
        "input": {"command": command, "description": "Run it"},
    }


def agent(call_id: str, key: str, subagent_type: str, background: bool | None) -> JsonObj:
    """An Agent call; `background` None leaves `run_in_background` out (the CLI chooses)."""
    arguments: JsonObj = {
        "description": f"{subagent_type} task",
        "prompt": f"{key}: do the {subagent_type} part and report back.",
        "subagent_type": "general-purpose",
    }
    if background is not None:
        arguments["run_in_background"] = background
    return {"type": "tool_use", "id": call_id, "name": "Agent", "input": arguments}


_SUBAGENT_COUNTER: Final = [
    Step.call(
        bash("toolu_sub_count_1", "echo 3"), input_tokens=400, output_tokens=30, cache_read_input_tokens=100
    ),
    Step.say("There are 3 files.", input_tokens=450, output_tokens=12),
]
_SUBAGENT_READER: Final = [
    Step.call(bash("toolu_sub_read_1", "echo readme"), input_tokens=300, output_tokens=25),
    Step.say("The readme says hello.", input_tokens=350, output_tokens=10),
]

SCENARIOS: Final[dict[str, dict[str, list[Step]]]] = {
    # Thinking, text and a Bash call, then the final answer.
    "tools": {
        "TOOLS-SCENARIO": [
            Step.call(
                bash("toolu_main_1", "echo hello from bash"),
                thinking="The user wants a shell command run. I will use Bash.",
                text="Let me run that.",
                input_tokens=1200,
                output_tokens=60,
                cache_creation_input_tokens=800,
            ),
            Step.say(
                "The command printed: hello from bash.",
                input_tokens=1300,
                output_tokens=15,
                cache_read_input_tokens=800,
            ),
        ]
    },
    # A subagent call without `run_in_background`: in -p, Claude Code 2.1.332 runs it in the
    # background ("Async agent launched"), a notification turn later.
    "foreground_subagent": {
        "FG-SUBAGENT-SCENARIO": [
            Step.call(
                agent("toolu_agent_fg", "SUBAGENT-COUNTER", "counter", background=None),
                input_tokens=1000,
                output_tokens=40,
            ),
            Step.say("The counter subagent found 3 files.", input_tokens=1100, output_tokens=12),
        ],
        "SUBAGENT-COUNTER": _SUBAGENT_COUNTER,
    },
    # A subagent asked for with `run_in_background: false`: Claude Code 2.1.332 runs it
    # synchronously, even in -p; its tool_result is the subagent's answer, in the same turn.
    "synchronous_subagent": {
        "SYNC-SUBAGENT-SCENARIO": [
            Step.call(
                agent("toolu_agent_sync", "SUBAGENT-COUNTER", "counter", background=False),
                input_tokens=1000,
                output_tokens=40,
            ),
            Step.say("The counter subagent found 3 files.", input_tokens=1100, output_tokens=12),
        ],
        "SUBAGENT-COUNTER": _SUBAGENT_COUNTER,
    },
    # A background subagent: "Async agent launched" at once, its notification turn later.
    "background_subagent": {
        "BG-SUBAGENT-SCENARIO": [
            Step.call(
                agent("toolu_agent_bg", "SUBAGENT-COUNTER", "counter", background=True),
                input_tokens=1000,
                output_tokens=40,
            ),
            Step.say("I started the counter in the background.", input_tokens=1100, output_tokens=12),
            Step.say("The counter subagent reports 3 files.", input_tokens=1200, output_tokens=14),
        ],
        "SUBAGENT-COUNTER": _SUBAGENT_COUNTER,
    },
    # Two subagents launched in one message (both run in the background): a notification turn each.
    "parallel_subagents": {
        "PARALLEL-SUBAGENTS-SCENARIO": [
            Step.call(
                agent("toolu_agent_a", "SUBAGENT-COUNTER", "counter", background=None),
                agent("toolu_agent_b", "SUBAGENT-READER", "reader", background=None),
                input_tokens=1000,
                output_tokens=80,
            ),
            Step.say("I started both subagents and will report back.", input_tokens=1500, output_tokens=20),
            Step.say(
                "The counter found 3 files; the reader is still working.", input_tokens=1600, output_tokens=15
            ),
            Step.say(
                "Both subagents are done: 3 files, and the readme says hello.",
                input_tokens=1700,
                output_tokens=18,
            ),
        ],
        "SUBAGENT-COUNTER": _SUBAGENT_COUNTER,
        "SUBAGENT-READER": _SUBAGENT_READER,
    },
    # The first attempt fails with a 500, the CLI retries, the second answers.
    "retry_500": {
        "RETRY-SCENARIO": [
            Step.say("Answered after a retry.", input_tokens=900, output_tokens=8, failures=(500,))
        ]
    },
    # The first attempt is refused with 429 (rate limited, with a `retry-after`); the CLI
    # waits and retries, the second answers.
    "rate_limited": {
        "RATE-LIMIT-SCENARIO": [
            Step.say("Answered after the rate limit.", input_tokens=950, output_tokens=9, failures=(429,))
        ]
    },
    # Reasoning the API sends encrypted (a `redacted_thinking` block), then the answer.
    "redacted_thinking": {
        "REDACTED-THINKING-SCENARIO": [
            Step(
                (
                    {"type": "redacted_thinking", "data": "RW5jcnlwdGVkIHJlYXNvbmluZywgc2NyaXB0ZWQu"},
                    {"type": "text", "text": "Answered after thinking I cannot show."},
                ),
                input_tokens=1000,
                output_tokens=40,
            )
        ]
    },
    # The model calls the CLI's WebSearch tool; the CLI asks the API to search (the API's own
    # web_search tool), which answers with its search (server_tool_use), the results
    # (web_search_tool_result) and a summary; the model answers from it.
    "web_search": {
        "WEB-SEARCH-SCENARIO": [
            Step.call(
                {
                    "type": "tool_use",
                    "id": "toolu_search_1",
                    "name": "WebSearch",
                    "input": {"query": "WEB-SEARCH-QUERY weather in Paris"},
                },
                input_tokens=1000,
                output_tokens=30,
            ),
            Step.say("The web says it is sunny in Paris.", input_tokens=1400, output_tokens=12),
        ],
        "WEB-SEARCH-QUERY": [
            Step(
                (
                    {
                        "type": "server_tool_use",
                        "id": "srvtoolu_search_1",
                        "name": "web_search",
                        "input": {"query": "weather in Paris"},
                    },
                    {
                        "type": "web_search_tool_result",
                        "tool_use_id": "srvtoolu_search_1",
                        "content": [
                            {
                                "type": "web_search_result",
                                "title": "Paris weather today",
                                "url": "https://weather.example/paris",
                                "encrypted_content": "RW5jcnlwdGVkIHNlYXJjaCByZXN1bHQu",
                                "page_age": None,
                            }
                        ],
                    },
                    {"type": "text", "text": "Paris is sunny today."},
                ),
                input_tokens=600,
                output_tokens=25,
            )
        ],
    },
    # Every attempt fails: 500 (retried until the CLI gives up), 529 (overloaded), 400 (not retried).
    "fatal_500": {"FATAL-500-SCENARIO": [Step.say("never", failures=(500,) * 50)]},
    "fatal_529": {"FATAL-529-SCENARIO": [Step.say("never", failures=(529,) * 50)]},
    "bad_request": {"BAD-REQUEST-SCENARIO": [Step.say("never", failures=(400,) * 50)]},
    # The stream breaks after the first block; the CLI falls back to a request without streaming.
    "mid_stream_error": {
        "MID-STREAM-SCENARIO": [
            Step.say(
                "Answered after the stream broke.",
                input_tokens=700,
                output_tokens=9,
                failures=("mid_stream",),
            )
        ]
    },
    # Tools forever: with --max-turns 1 the CLI stops after the first tool round.
    "max_turns": {
        "MAX-TURNS-SCENARIO": [
            Step.call(bash("toolu_turn_1", "echo one"), input_tokens=800, output_tokens=30),
            Step.call(bash("toolu_turn_2", "echo two"), input_tokens=850, output_tokens=30),
            Step.say("done", input_tokens=900, output_tokens=5),
        ]
    },
    # A Bash call the CLI's permission mode denies.
    "denied_tool": {
        "DENIED-TOOL-SCENARIO": [
            Step.call(bash("toolu_denied_1", "rm -rf /tmp/nothing-here"), input_tokens=800, output_tokens=30),
            Step.say("I was not allowed to run that.", input_tokens=900, output_tokens=10),
        ]
    },
    # Several prompts on stdin (`--input-format stream-json`): a turn each, or fewer where the CLI
    # takes queued prompts together; each answer costs, the CLI reports its running total.
    "stream_json_input": {
        "STREAM-JSON-INPUT-SCENARIO": [
            Step.say("First answer.", input_tokens=900, output_tokens=10),
            Step.say("Second answer.", input_tokens=1000, output_tokens=12),
            Step.say("Third answer.", input_tokens=1100, output_tokens=14),
        ]
    },
    # Auto-compaction: the first answer reports a context close to the model's window, so the
    # CLI compacts the session before it sends the next prompt (resumed). The summary it is
    # given names the conversation that goes on: after the compaction the summary is the
    # first user message.
    "auto_compact": {
        "AUTO-COMPACT-SCENARIO": [
            Step.call(bash("toolu_big_1", "echo big"), input_tokens=190_000, output_tokens=30),
            Step.say(
                "AUTO-COMPACT-CONTINUED: the user asked for the task, which was answered.",
                input_tokens=190_100,
                output_tokens=20,
            ),
        ],
        "AUTO-COMPACT-CONTINUED": [
            Step.say("Answered after the compaction.", input_tokens=1200, output_tokens=12)
        ],
    },
    # A command that takes a few seconds (in the terminal UI a person types a second prompt
    # meanwhile), then an answer, and one more should the second prompt get a turn of its own.
    "busy_prompt": {
        "BUSY-PROMPT-SCENARIO": [
            Step.call(bash("toolu_busy_1", "sleep 4; echo done"), input_tokens=1000, output_tokens=30),
            Step.say("The command is done.", input_tokens=1100, output_tokens=8),
            Step.say("Here is the answer to the second prompt.", input_tokens=1200, output_tokens=9),
        ]
    },
    # Two prompts to one session: the second arrives while the first turn's subagent still runs.
    "two_prompts": {
        "TWO-PROMPTS-FIRST": [
            Step.call(
                agent("toolu_agent_tp", "SUBAGENT-SLOW", "slow", background=True),
                input_tokens=1000,
                output_tokens=40,
            ),
            Step.say("Started the slow subagent.", input_tokens=1100, output_tokens=10),
            Step.say("Noted.", input_tokens=1200, output_tokens=5),
            Step.say("The slow subagent is done.", input_tokens=1300, output_tokens=8),
        ],
        "SUBAGENT-SLOW": [
            Step.call(bash("toolu_sub_slow_1", "sleep 3; echo slow"), input_tokens=300, output_tokens=20),
            Step.say("Slow work finished.", input_tokens=320, output_tokens=6),
        ],
    },
}


def prompt_for(scenario: str) -> str:
    """A prompt that selects the scenario's main conversation."""
    main_key = next(iter(SCENARIOS[scenario]))
    return f"{main_key}: please do the task."
