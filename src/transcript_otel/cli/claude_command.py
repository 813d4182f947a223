"""What a `claude` command line says that its stream-json output does not.

`claude -p PROMPT` never prints its prompt, nor the system prompt it was given: `run` reads
them from the command line. The prompt is the first argument that no option takes, counted
as `claude` 2.1.332 itself scans its arguments (its binary's sets of options that take a
value, a list, or an optional value). Past an option none of those sets knows, which word is
the prompt cannot be told, and none is recorded rather than a wrong one.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class ClaudeCommand:
    """What a `claude` command line says that its stream-json output does not: the prompt (its
    first argument; `claude -p` never prints it), the system prompt it sets
    (`--system-prompt[-file]`) and what it appends to Claude Code's own
    (`--append-system-prompt[-file]`), in that order, joined by a blank line."""

    system_instructions: str | None
    prompt: str | None = None
    # The session it goes on with (`--resume <id>`), or the project's latest (`--continue`): its
    # reports count the runs' before it too (instrumentation/cli_logs.py).
    resumes: str | None = None
    continues: bool = False

    @classmethod
    def of(cls, command: Sequence[str]) -> ClaudeCommand | None:
        """The facts of `command` if it runs `claude`, else None. Never raises."""
        names = [os.path.basename(word) for word in command[:2]]
        if names[:1] == ["claude"]:
            start = 1
        elif len(names) == 2 and names[0] in _LAUNCHERS and names[1] in _CLAUDE_PACKAGES:
            start = 2
        else:
            return None
        found: dict[str, str] = {}
        arguments: list[str] = []
        prompt_known, continues = True, False
        resumes: str | None = None
        words = list(command[start:])
        at = 0
        while at < len(words):
            word = words[at]
            at += 1
            if word == "--":
                arguments += words[at:]  # the rest are arguments
                break
            if not word.startswith("-") or word == "-":
                arguments.append(word)
                continue
            name, equals, value = word.partition("=")
            if not equals:  # the words the option takes, as the CLI takes them
                if not arguments and name not in _KNOWN_CLAUDE_OPTIONS:
                    prompt_known = False
                taken = _taken_words(name, words, at)
                value = " ".join(words[at : at + taken])
                at += taken
            if name in _SYSTEM_PROMPT_OPTIONS:  # given twice, the last one counts (as for the CLI)
                found[name] = value
            resumes = (value or None) if name in _RESUME_OPTIONS else resumes
            continues = continues or name in _CONTINUE_OPTIONS
        parts = [
            text
            for options in _SYSTEM_PROMPT_PARTS
            if (text := _option_text(found, *options)) is not None and text.strip()
        ]
        # `claude mcp ...`, `claude doctor`...: a command, no prompt.
        prompt = arguments[0] if prompt_known and arguments and arguments[0] not in _CLAUDE_COMMANDS else None
        return cls("\n\n".join(parts) if parts else None, prompt or None, resumes, continues)


def _taken_words(option: str, words: Sequence[str], at: int) -> int:
    """How many of `words[at:]` the option takes, as `claude` 2.1's own scan of its arguments
    counts them: the next word for `[value]` unless it is an option, one word for a value,
    and for a list every further word up to the next option."""
    if option in _CLAUDE_OPTIONAL_VALUE_OPTIONS:
        return 1 if at < len(words) and not words[at].startswith("-") else 0
    if option not in _CLAUDE_VALUE_OPTIONS or at >= len(words):
        return 0
    taken = 1
    if option in _CLAUDE_LIST_OPTIONS:
        while at + taken < len(words) and not words[at + taken].startswith("-"):
            taken += 1
    return taken


# The options of `claude` 2.1.332 that take words: the sets its binary scans its arguments with
# (those of `claude --help` and the hidden ones the SDKs and its own launchers pass). A list
# option takes every word up to the next option; a value option (lists included) one.
_CLAUDE_LIST_OPTIONS: Final = frozenset(
    {
        "--allowedTools",
        "--allowed-tools",
        "--disallowedTools",
        "--disallowed-tools",
        "--tools",
        "--add-dir",
        "--mcp-config",
        "--betas",
        "--file",
        "--channels",
        "--dangerously-load-development-channels",
    }
)
_RESUME_OPTIONS: Final = frozenset({"--resume", "-r"})
_CONTINUE_OPTIONS: Final = frozenset({"--continue", "-c"})
_CLAUDE_VALUE_OPTIONS: Final = _CLAUDE_LIST_OPTIONS | frozenset(
    {
        "--prefill",
        "--prefill-b64",
        "--deep-link-repo",
        "--deep-link-last-fetch",
        "--deep-link-cwd-b64",
        "--handle-uri",
        "--settings",
        "--managed-settings",
        "--initialize-fields",
        "--setting-sources",
        "--client-data-url",
        "--watch-artifact",
        "--watch-artifact-no-autoreact",
        "--team-name",
        "--agent-id",
        "--agent-name",
        "--agent-color",
        "--parent-session-id",
        "--lead-verify-key",
        "--agent-type",
        "--model",
        "--agent",
        "--routine",
        "--effort",
        "--fast-mode",
        "--permission-mode",
        "--inherit-permission-mode",
        "--proactivity",
        "--debug-file",
        "--system-prompt",
        "--system-prompt-file",
        "--append-system-prompt",
        "--append-system-prompt-file",
        "--system-prompt-snapshot",
        "--append-subagent-system-prompt",
        "--append-subagent-system-prompt-file",
        "--plan-mode-instructions",
        "--permission-prompt-tool",
        "--permission-prompts",
        "--json-schema",
        "--fallback-model",
        "--advisor",
        "--agents",
        "--name",
        "-n",
        "--plugin-dir",
        "--plugin-dir-no-mcp",
        "--plugin-url",
        "--remote-control-session-name-prefix",
        "--exec",
        "-m",
        "--sdk-url",
        "--thinking",
        "--thinking-display",
        "--max-thinking-tokens",
        "--max-turns",
        "--max-budget-usd",
        "--task-budget",
        "--autocompact",
        "--rewind-files",
        "--resume-session-at",
        "--resume-drops-turn",
        "--workload",
        "--output-format",
        "--input-format",
        "--teammate-mode",
        "--messaging-socket-path",
        "--session-id",
        "--environment",
        "--pool",
        "--ref",
        "--on-branch",
        "--correlation-id",
        "--metadata",
        "--forward-home-settings",
        "--project-config-root",
        "--attach-serve",
        "--runner-declares",
        "--session-began-as-copy",
    }
)
_CLAUDE_OPTIONAL_VALUE_OPTIONS: Final = frozenset(
    {
        "-d",
        "--debug",
        "-r",
        "--resume",
        "--from-pr",
        "-w",
        "--worktree",
        "--teleport",
        "--cloud",
        "--remote",
        "--project",
        "--remote-control",
        "--rc",
        "--prompt-suggestions",
    }
)
# The options of `claude --help` that take no word. Past an option none of these sets knows,
# which word is the prompt cannot be told: no prompt is recorded rather than a wrong one.
_CLAUDE_FLAGS: Final = frozenset(
    {
        "--allow-dangerously-skip-permissions",
        "--ax-screen-reader",
        "--background",
        "--bare",
        "--bg",
        "--brief",
        "--chrome",
        "--continue",
        "--dangerously-skip-permissions",
        "--desktop",
        "--disable-slash-commands",
        "--exclude-dynamic-system-prompt-sections",
        "--fork-session",
        "--forward-subagent-text",
        "--help",
        "--ide",
        "--include-hook-events",
        "--include-partial-messages",
        "--no-chrome",
        "--no-session-persistence",
        "--print",
        "--replay-user-messages",
        "--restricted",
        "--safe-mode",
        "--strict-mcp-config",
        "--tmux",
        "--verbose",
        "--version",
        "-c",
        "-h",
        "-p",
        "-v",
    }
)
_KNOWN_CLAUDE_OPTIONS: Final = (
    _CLAUDE_VALUE_OPTIONS | _CLAUDE_LIST_OPTIONS | _CLAUDE_OPTIONAL_VALUE_OPTIONS | _CLAUDE_FLAGS
)
_CLAUDE_COMMANDS: Final = frozenset(
    {"agents", "attach", "auth", "auto-mode", "doctor", "gateway", "import", "install", "logs", "mcp"}
    | {"plugin", "plugins", "purge", "respawn", "setup-token", "update", "upgrade", "migrate-installer"}
    | {"rm", "stop", "kill", "ultrareview", "remote"}
)


# Programs that run the program named after them (`npx @anthropic-ai/claude-code -p ...`).
_LAUNCHERS: Final = frozenset({"npx", "pnpx", "bunx", "env"})
_CLAUDE_PACKAGES: Final = frozenset({"claude", "@anthropic-ai/claude-code", "claude-code"})
# The system prompt, then what is appended to it: (text option, file option) each.
_SYSTEM_PROMPT_PARTS: Final = (
    ("--system-prompt", "--system-prompt-file"),
    ("--append-system-prompt", "--append-system-prompt-file"),
)
_SYSTEM_PROMPT_OPTIONS: Final = frozenset(name for pair in _SYSTEM_PROMPT_PARTS for name in pair)
# A prompt file larger than this is not read (it is not what a system prompt is).
MAX_SYSTEM_PROMPT_FILE_BYTES: Final = 1 << 20


def _option_text(found: dict[str, str], text_option: str, file_option: str) -> str | None:
    """The text an option gives, or that of the regular file it names (none where it is
    unreadable, too large, or not a regular file: a pipe such as `/dev/stdin` or `<(...)`
    is the agent's to read, not ours)."""
    if text_option in found:
        return found[text_option]
    path = found.get(file_option)
    if not path:
        return None
    try:
        if not stat.S_ISREG(os.stat(path).st_mode):
            return None
        with open(path, "rb") as file:
            data = file.read(MAX_SYSTEM_PROMPT_FILE_BYTES + 1)
    except OSError:
        return None
    if len(data) > MAX_SYSTEM_PROMPT_FILE_BYTES:
        return None
    return data.decode("utf-8", "replace")
