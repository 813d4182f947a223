"""Token usage an agent counts kind by kind, as the GenAI conventions count it.

OpenCode counts the prompt's fresh tokens apart from what the cache read and wrote, and the
answer apart from its reasoning, in its `step_finish` tokens (`opencode_run`, `opencode_rows`)
as in the ACP `Usage` it answers a prompt with (`acp`). The conventions' input is the whole
prompt the model got, their output the answer with its reasoning.
"""

from __future__ import annotations


def conventions_usage(
    fresh: int | None,
    output: int | None,
    cache_read: int | None,
    cache_write: int | None,
    reasoning: int | None,
    *,
    reasoning_key: str = "reasoning_output_tokens",
) -> dict[str, int]:
    """The usage in the names `genai.attributes` reads; a count the agent did not give is left
    out (`reasoning_key`: the name a mapping gives the reasoning tokens)."""
    usage: dict[str, int] = {}
    if fresh is not None:
        usage["input_tokens"] = fresh + (cache_read or 0) + (cache_write or 0)
    if output is not None:
        usage["output_tokens"] = output + (reasoning or 0)
    for name, count in (
        ("cached_input_tokens", cache_read),
        ("cache_write_input_tokens", cache_write),
        (reasoning_key, reasoning),
    ):
        if count is not None:
            usage[name] = count
    return usage
