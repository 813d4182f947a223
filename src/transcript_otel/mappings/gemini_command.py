"""What a `gemini` command line says that its output does not, for `transcript-otel run`.

Gemini CLI 0.61.0 (`gemini --help`) takes the prompt from `-p/--prompt` or its positional words
(joined by spaces), the output format from `-o/--output-format` (`text`, the default, `json`,
`stream-json`) and the model from `-m/--model`. Only stream-json repeats the prompt: for the
other formats `run` records it from here. A subcommand (`gemini mcp ...`) runs no prompt.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from transcript_otel.mappings.gemini_json import NAME as JSON_ADAPTER
from transcript_otel.mappings.gemini_stream import NAME as STREAM_ADAPTER

# `gen_ai.provider.name` of the Gemini API (API-key auth; Vertex AI would be `gcp.vertex_ai`).
PROVIDER: Final = "gcp.gemini"
_ADAPTERS: Final = {"json": JSON_ADAPTER, "stream-json": STREAM_ADAPTER}
# The options of `gemini` 0.61.0 that take one word, and those that take every word up to the
# next option (yargs arrays).
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
_SUBCOMMANDS: Final = frozenset(
    {"mcp", "extensions", "extension", "skills", "skill", "hooks", "hook", "gemma"}
)
_LAUNCHERS: Final = frozenset({"npx", "pnpx", "bunx", "env"})
_PACKAGES: Final = frozenset({"gemini", "@google/gemini-cli"})


@dataclass(frozen=True, slots=True)
class GeminiCommand:
    """The prompt (`-p`, else the positional words), the output format and the model asked for."""

    prompt: str | None
    output_format: str
    model: str | None

    @property
    def adapter(self) -> str | None:
        """The line adapter for its output format (None for `text`: the plain reading)."""
        return _ADAPTERS.get(self.output_format)

    @property
    def unprinted_prompt(self) -> str | None:
        """The prompt where the output does not print it (every format but stream-json)."""
        return None if self.output_format == "stream-json" else self.prompt

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
        options, positional = _scanned(command[start:])
        if positional[:1] and positional[0] in _SUBCOMMANDS:
            return None
        prompt = options.get("-p", options.get("--prompt")) or " ".join(positional) or None
        output_format = options.get("-o", options.get("--output-format")) or "text"
        model = options.get("-m", options.get("--model")) or None
        return cls(prompt, output_format, model)


def _scanned(words: Sequence[str]) -> tuple[dict[str, str], list[str]]:
    """The first value of each option, and the positional words, as yargs reads `words`: an
    option takes the next word (`--name=value`: its own), a list option every word up to the
    next option; after `--`, every word is positional."""
    options: dict[str, str] = {}
    positional: list[str] = []
    pending = list(reversed(words))  # the next word last: taken with pop()
    while pending:
        word = pending.pop()
        if word == "--":
            positional.extend(reversed(pending))
            break
        if not word.startswith("-") or word == "-":
            positional.append(word)
            continue
        name, equals, value = word.partition("=")
        if not equals and name in _VALUE_OPTIONS and pending:
            value = pending.pop()
        elif not equals and name in _LIST_OPTIONS:
            while pending and not pending[-1].startswith("-"):
                pending.pop()
        options.setdefault(name, value)
    return options, positional


def _package(word: str) -> str:
    """An npm package named as a launcher names it, without its `@version`."""
    if word.startswith("@"):
        return "@" + word[1:].partition("@")[0]
    return os.path.basename(word.partition("@")[0])
