"""What an `opencode run` command line says that its output does not.

OpenCode prints neither the prompt nor the model, in any output mode: `run` reads them from
the command line, counted as `opencode` 1.18.33 (yargs) reads its arguments. The message is
the positional words (and those after `--`) joined by spaces, as the user typed them (OpenCode
itself wraps each word that holds a space in double quotes before the model gets it); an
option yargs does not know takes the next word as its value, so past one the message cannot be
told and none is recorded. The model comes only from `-m/--model provider/model`: OpenCode's
configured default is not looked up. What OpenCode reads from a piped stdin and appends to the
message is not seen here.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from transcript_otel.mappings.opencode_run import NAME as JSON_ADAPTER

# `opencode run --help` (1.18.33): the options that take one word, and `-f/--file`, which takes
# every word up to the next option (a yargs array).
_VALUE_OPTIONS: Final = frozenset(
    {
        "--log-level", "--command", "-s", "--session", "-m", "--model", "--agent", "--format",
        "--title", "--attach", "-p", "--password", "-u", "--username", "--dir", "--port",
        "--variant",
    }
)  # fmt: skip
_LIST_OPTIONS: Final = frozenset({"-f", "--file"})
_FLAGS: Final = frozenset(
    {
        "-h", "--help", "-v", "--version", "--print-logs", "--pure", "-c", "--continue", "--fork",
        "--share", "--thinking", "-i", "--interactive", "--auto",
    }
)  # fmt: skip
# Programs that run the program named after them (`npx opencode-ai run ...`).
_LAUNCHERS: Final = frozenset({"npx", "pnpx", "bunx", "env"})
_PACKAGES: Final = frozenset({"opencode", "opencode-ai"})


@dataclass(frozen=True, slots=True)
class OpenCodeCommand:
    """The facts of an `opencode run` command line: the message (None where it cannot be told,
    or where `--command` makes it a command's arguments), the model and provider of
    `-m provider/model`, and whether it prints JSON lines (`--format json`)."""

    prompt: str | None
    model: str | None
    provider: str | None
    prints_json: bool

    @property
    def adapter(self) -> str | None:
        """The line adapter that reads its output, where the command line says."""
        return JSON_ADAPTER if self.prints_json else None

    @classmethod
    def of(cls, command: Sequence[str]) -> OpenCodeCommand | None:
        """The facts of `command` if it runs `opencode [OPTIONS] run`, else None. Never raises."""
        names = [os.path.basename(word) for word in command[:2]]
        if names[:1] == ["opencode"]:
            start = 1
        elif len(names) == 2 and names[0] in _LAUNCHERS and names[1] in _PACKAGES:
            start = 2
        else:
            return None
        options: dict[str, str] = {}
        words: list[str] = []
        known = True
        rest = list(command[start:])
        at = 0
        while at < len(rest):
            word = rest[at]
            at += 1
            if word == "--":
                words += rest[at:]
                break
            if not word.startswith("-") or word == "-":
                words.append(word)
                continue
            name, equals, value = word.partition("=")
            if not equals and name in _VALUE_OPTIONS and at < len(rest):
                value, at = rest[at], at + 1
            elif not equals and name in _LIST_OPTIONS:
                while at < len(rest) and not rest[at].startswith("-"):
                    at += 1
            elif name not in _VALUE_OPTIONS | _LIST_OPTIONS | _FLAGS and not name.startswith("--no-"):
                known = False  # yargs gives it the next word: which words are the message is unknown
            options.setdefault(name, value)
        if words[:1] != ["run"]:
            return None  # the terminal UI, `opencode serve`, `opencode export` ...
        message = " ".join(words[1:])
        command_given = "--command" in options
        provider, _, model = (options.get("-m") or options.get("--model") or "").partition("/")
        return cls(
            prompt=message if known and message and not command_given else None,
            model=model or None,
            provider=provider if model else None,
            prints_json=options.get("--format") == "json",
        )
