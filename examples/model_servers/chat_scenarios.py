"""The scripted model's answers for the real Gemini CLI and OpenCode, one scenario per name.

Both CLIs get the same conversations; only the shell tool's name and arguments differ
(`gemini_api.py` offers Gemini CLI's `run_shell_command`, `openai_chat.py` OpenCode's `bash`).
A scenario maps a conversation key (text the prompt holds, `prompt_for`) to its steps; a
request is answered with step N, where N is how many model turns the request already holds
(Gemini: `contents` with role `model`; chat completions: `assistant` messages). A step may
fail its first attempts with an HTTP status (`failures`), and then answers.

Usage per step: `prompt_tokens` (cached ones included), `cached_tokens`, `output_tokens` (the
visible answer and calls) and `reasoning_tokens` (thinking). The Gemini API reports them as
`promptTokenCount`, `cachedContentTokenCount`, `candidatesTokenCount` (thoughts excluded) and
`thoughtsTokenCount`; chat completions as `prompt_tokens`, `prompt_tokens_details.cached_tokens`,
`completion_tokens` (reasoning included) and `completion_tokens_details.reasoning_tokens`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

JsonObj = dict[str, Any]

# What a 429 tells the client to wait (its `retry-after` header).
RATE_LIMIT_RETRY_AFTER_S: Final = 1
# The command the `shell` scenario has the CLI run (its output is known: "2 data.txt").
SHELL_COMMAND: Final = "printf 'one\\ntwo\\n' > data.txt && wc -l data.txt"


@dataclass(frozen=True)
class Call:
    """A call of the CLI's shell tool (each server names the tool and shapes the arguments)."""

    call_id: str
    command: str
    description: str


@dataclass(frozen=True)
class Step:
    text: str = ""
    thought: str | None = None
    calls: tuple[Call, ...] = ()
    prompt_tokens: int = 1000
    cached_tokens: int = 0
    output_tokens: int = 20
    reasoning_tokens: int = 0
    failures: tuple[int, ...] = field(default=())


SCENARIOS: Final[dict[str, dict[str, list[Step]]]] = {
    "plain": {"scripted-plain": [Step("The answer is 42.", prompt_tokens=1200, output_tokens=6)]},
    "shell": {
        "scripted-shell": [
            Step(
                "I will count the lines.",
                calls=(Call("call_shell_1", SHELL_COMMAND, "Write data.txt and count its lines"),),
                prompt_tokens=2000,
                output_tokens=35,
            ),
            Step(
                "data.txt has 2 lines: one and two.", prompt_tokens=2300, cached_tokens=1800, output_tokens=12
            ),
        ]
    },
    "thinking": {
        "scripted-thinking": [
            Step(
                "Paris.",
                thought=(
                    "**Recalling the capital**\n\n"
                    "The user asks for the capital of France. That is Paris; answer in one word."
                ),
                prompt_tokens=1500,
                cached_tokens=1000,
                output_tokens=2,
                reasoning_tokens=30,
            )
        ]
    },
    # A command that fails (exit status 1, an error on stderr), then the answer.
    "failing_shell": {
        "scripted-failing-shell": [
            Step(
                calls=(Call("call_fail_1", "cat missing.txt", "Show missing.txt"),),
                prompt_tokens=1800,
                output_tokens=20,
            ),
            Step("missing.txt does not exist.", prompt_tokens=2000, cached_tokens=1600, output_tokens=7),
        ]
    },
    # Every attempt fails with HTTP 500: the CLI retries, then gives up.
    "error_500": {"scripted-error-500": [Step("never served", failures=(500,) * 20)]},
    # The first attempt gets a 429 (with retry-after), the next one the answer.
    "rate_limit_429": {
        "scripted-rate-limit": [Step("Served after a 429.", failures=(429,), output_tokens=5)]
    },
}

PROMPTS: Final = {
    "plain": "scripted-plain: what is the answer?",
    "shell": "scripted-shell: write two lines to data.txt and count them with the shell.",
    "thinking": "scripted-thinking: what is the capital of France?",
    "failing_shell": "scripted-failing-shell: show missing.txt with the shell.",
    "error_500": "scripted-error-500: say hello.",
    "rate_limit_429": "scripted-rate-limit: say hello.",
}


def prompt_for(scenario: str) -> str:
    return PROMPTS[scenario]


def conversation(scenario: str, text: str) -> tuple[str | None, list[Step]]:
    """The scenario's conversation whose key `text` (the request's user text) contains."""
    for key, steps in SCENARIOS[scenario].items():
        if key in text:
            return key, steps
    return None, []
