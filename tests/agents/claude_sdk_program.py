"""A claude-agent-sdk program with no transcript-otel code at all (run under opentelemetry-instrument).

    claude_sdk_program.py PROMPT

Runs one `query()` against the `claude` found first on PATH (or `$CLAUDE_CLI` where the SDK
has a `cli_path` option, since newer SDKs prefer their bundled CLI) and prints the class names
of the messages it received, one JSON list. The CLI gets this program's environment.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import sys
from typing import Any

from claude_agent_sdk import ClaudeAgentOptions, query


async def main(prompt: str) -> list[str]:
    fields: dict[str, Any] = {}
    if "cli_path" in {field.name for field in dataclasses.fields(ClaudeAgentOptions)}:
        fields["cli_path"] = os.environ["CLAUDE_CLI"]
    return [
        type(message).__name__ async for message in query(prompt=prompt, options=ClaudeAgentOptions(**fields))
    ]


if __name__ == "__main__":
    print(json.dumps(asyncio.run(main(sys.argv[1]))))
