"""What a `gemini` command line says that its output does not, for `transcript-otel run`.

Gemini CLI 0.61.0 (`gemini --help`) takes the prompt from `-p/--prompt` or its positional words
(joined by spaces), the output format from `-o/--output-format` (`text`, the default, `json`,
`stream-json`) and the model from `-m/--model`, read as its yargs reads them
(`mappings.yargs_words`). Only stream-json repeats the prompt: for the other formats `run`
records it from here. A subcommand (`gemini mcp ...`) runs no prompt. What the CLI reads from a
piped stdin and puts before the prompt is not seen here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from transcript_otel.mappings.gemini_json import NAME as JSON_ADAPTER
from transcript_otel.mappings.gemini_stream import NAME as STREAM_ADAPTER
from transcript_otel.mappings.yargs_words import scan_yargs

# `gen_ai.provider.name` of the Gemini API (API-key auth; Vertex AI would be `gcp.vertex_ai`).
PROVIDER: Final = "gcp.gemini"
_ADAPTERS: Final = {"json": JSON_ADAPTER, "stream-json": STREAM_ADAPTER}
# The options of `gemini` 0.61.0 (`gemini --help`) that take one word, those that take every
# word up to the next option (yargs arrays), and its booleans.
_VALUE_OPTIONS: Final = frozenset(
    {
        "-m", "--model", "-p", "--prompt", "-i", "--prompt-interactive", "-w", "--worktree",
        "--approval-mode", "-r", "--resume", "--session-file", "--session-id", "--delete-session",
        "-o", "--output-format",
    }
)  # fmt: skip
_LIST_OPTIONS: Final = frozenset(
    {
        "--policy", "--admin-policy", "--allowed-mcp-server-names", "--allowed-tools", "-e",
        "--extensions", "--include-directories",
    }
)  # fmt: skip
_FLAGS: Final = frozenset(
    {
        "-d", "--debug", "--skip-trust", "-s", "--sandbox", "-y", "--yolo", "--acp",
        "--experimental-acp", "-l", "--list-extensions", "--list-sessions", "--screen-reader",
        "--raw-output", "--accept-raw-output-risk", "-v", "--version", "-h", "--help",
    }
)  # fmt: skip
_SUBCOMMANDS: Final = frozenset(
    {"mcp", "extensions", "extension", "skills", "skill", "hooks", "hook", "gemma"}
)
_LAUNCHERS: Final = frozenset({"npx", "pnpx", "bunx", "env"})
_PACKAGES: Final = frozenset({"gemini", "@google/gemini-cli"})


@dataclass(frozen=True, slots=True)
class GeminiCommand:
    """What a `gemini` command line says: the prompt typed (`-p`, else the positional words;
    None where an option `gemini` 0.61.0 does not know makes them unclear), the output format
    and the model asked for."""

    typed_prompt: str | None
    output_format: str
    model: str | None

    @property
    def prompt(self) -> str | None:
        """The prompt for `run` to record: the typed one, where the output does not print it
        (every format but stream-json)."""
        return None if self.output_format == "stream-json" else self.typed_prompt

    @property
    def provider(self) -> str:
        return PROVIDER

    @property
    def adapter(self) -> str | None:
        """The line adapter for its output format (None for `text`: the plain reading)."""
        return _ADAPTERS.get(self.output_format)

    @classmethod
    def of(cls, command: Sequence[str]) -> GeminiCommand | None:
        """The facts of `command` if it runs `gemini` on a prompt, else None. Never raises."""
        first = os.path.basename(command[0]) if command else ""
        if first == "gemini":
            start = 1
        elif first in _LAUNCHERS and len(command) > 1 and _package(command[1]) in _PACKAGES:
            start = 2
        else:
            return None
        options, positional, known = scan_yargs(command[start:], _VALUE_OPTIONS, _LIST_OPTIONS, _FLAGS)
        if positional[:1] and positional[0] in _SUBCOMMANDS:
            return None
        typed = options.get("-p", options.get("--prompt")) or (" ".join(positional) if known else None)
        output_format = options.get("-o", options.get("--output-format")) or "text"
        return cls(typed or None, output_format, options.get("-m", options.get("--model")) or None)


def _package(word: str) -> str:
    """An npm package named as a launcher names it, without its `@version`."""
    if word.startswith("@"):
        return "@" + word[1:].partition("@")[0]
    return os.path.basename(word.partition("@")[0])
