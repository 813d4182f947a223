"""`codex exec --json` lines to canonical entries.

The Codex CLI's non-interactive mode prints one JSON event per line (the
`ThreadEvent`s of codex-rs `exec/src/exec_events.rs`). The adapter maps:

* `thread.started` → `system_event` (`subtype: thread_started`; its `thread_id` is the
  session id); `turn.started` → `system_event` (`subtype: turn_started`);
* `item.started` of a tool item (`command_execution`, `file_change`, `mcp_tool_call`,
  `web_search`, `collab_tool_call`: the wait for a subagent) → `tool_use`; its
  `item.completed` → `tool_result` (a failure when the status is `failed`/`declined` or the
  exit code is not 0). Codex starts only commands
  and MCP calls: a tool item that arrives completed only gives both entries then;
* `item.completed` of `agent_message` → `assistant_message`, of `reasoning` →
  `thinking`, of `todo_list` → `system_event` (`subtype: todo_list`), of `error` →
  `system_event` (`subtype: warning`: Codex prints warnings so, e.g. a model it has no
  metadata for, and goes on); `item.updated` → nothing (the completed item follows);
* `turn.completed` → `token_usage`, `usage` what its `usage` (the thread's running totals:
  a resumed thread's include the runs' before it) adds to the last totals known (`resume_after`:
  the thread's before this run); `turn.failed` → `error`; a top-level
  `error` → `system_event`, `subtype: retry` for Codex's "Reconnecting... N/M" (a retry
  that may well succeed), else `subtype: api_error` (the `turn.failed` that follows, if
  the turn fails, is the `error`);
* any other event → `unknown`; a line that is not a JSON object → `unknown` with
  `detail.parse_error`. Blank lines are skipped.

The prompt is not in the stream: `ExecCommand` reads it, and the model, from the command
line (and Codex's `config.toml`), for `transcript-otel run` to record.

`detail` is `{"event": event}` plus, for tool entries, `tool_use_id` and `tool_name`
(`codex:command`, `codex:file_change`, `codex:web_search`, `codex:<collab tool>` such as
`codex:wait`, or the MCP tool's name);
`raw` is the line.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry, typed_event
from transcript_otel.model.entries import EntryType

TOOL_ITEMS: Final = {
    "command_execution": "codex:command",
    "file_change": "codex:file_change",
    "web_search": "codex:web_search",
    "mcp_tool_call": None,  # named after the MCP tool
    "collab_tool_call": None,  # a subagent tool (`multi_agent_v2`): `codex:` and the tool it names
}
_COMPLETED_ITEMS: Final = {
    "agent_message": EntryType.ASSISTANT_MESSAGE,
    "reasoning": EntryType.THINKING,
    "todo_list": EntryType.SYSTEM_EVENT,
    "error": EntryType.SYSTEM_EVENT,
}
_ITEM_SUBTYPES: Final = {"todo_list": "todo_list", "error": "warning"}
_LIFECYCLE: Final = {"thread.started": "thread_started", "turn.started": "turn_started"}
_RETRYING: Final = "Reconnecting..."
# Tool items started and not yet completed; a stream that never completes them cannot grow this.
_MAX_STARTED_TOOLS: Final = 10_000


def _item(event: dict[str, Any]) -> dict[str, Any]:
    item = event.get("item")
    return item if isinstance(item, dict) else {}


def _tool_detail(event: dict[str, Any], item: dict[str, Any], item_type: str) -> dict[str, Any]:
    name = TOOL_ITEMS[item_type]
    server, tool = item.get("server"), item.get("tool")
    if item_type == "collab_tool_call":
        name = f"codex:{tool}" if isinstance(tool, str) else "codex:collab"
    elif name is None:
        name = f"{server}:{tool}" if isinstance(server, str) and isinstance(tool, str) else "codex:mcp"
    detail: dict[str, Any] = {"event": event, "tool_name": name}
    if isinstance(item.get("id"), str):
        detail["tool_use_id"] = item["id"]
    return detail


def _counts(usage: Mapping[str, Any]) -> dict[str, int]:
    return {
        key: value for key, value in usage.items() if isinstance(value, int) and not isinstance(value, bool)
    }


def codex_item_failed(item: dict[str, Any]) -> bool:
    """Whether a Codex tool item (`codex exec --json`'s, a rollout's: snake_case) says it failed.
    `genai.attributes.tool_failed` reads a mapped `tool_result` entry instead, of any harness."""
    exit_code = item.get("exit_code")
    return item.get("status") in ("failed", "declined") or (
        isinstance(exit_code, int) and not isinstance(exit_code, bool) and exit_code != 0
    )


class CodexExecAdapter:
    """Maps the lines of one `codex exec --json` run; keeps the thread id and the started tool ids."""

    name: Final = "codex-json"

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._started_tools: set[str] = set()
        self._totals: dict[str, int] = {}  # the thread's token totals last told

    def resume_after(self, totals: Mapping[str, Any]) -> None:
        """The command resumes a thread whose token totals were `totals` (its rollout's last
        `total_token_usage`): only what its turns add to them is this run's."""
        self._totals = _counts(totals)

    def _added(self, usage: Any) -> Any:
        """A turn's `usage` less the totals told before it (none in a run of a new thread: the
        usage as printed)."""
        if not isinstance(usage, Mapping):
            return usage
        before, self._totals = self._totals, _counts(usage)
        if not before:
            return usage
        return {key: max(0, value - before.get(key, 0)) for key, value in self._totals.items()}

    def feed(self, line: str) -> list[MappedEntry]:
        if not line.strip():
            return []
        event = typed_event(line, "a codex exec event")
        if isinstance(event, MappedEntry):
            return [event]
        # `line_entries` inlined: one call less per line on `run`'s capturing thread.
        return [
            MappedEntry(entry_type.value, detail, line if index == 0 else None)
            for index, (entry_type, detail) in enumerate(self._event(event))
        ]

    def flush(self) -> list[MappedEntry]:
        return []

    def _event(self, event: dict[str, Any]) -> list[tuple[EntryType, dict[str, Any]]]:
        kind = event["type"]
        if kind in _LIFECYCLE:
            if kind == "thread.started" and isinstance(event.get("thread_id"), str):
                self.session_id = event["thread_id"]
            return [(EntryType.SYSTEM_EVENT, {"event": event, "subtype": _LIFECYCLE[kind]})]
        if kind == "turn.completed":
            return [(EntryType.TOKEN_USAGE, {"event": event, "usage": self._added(event.get("usage"))})]
        if kind == "turn.failed":
            return [(EntryType.ERROR, {"event": event})]
        if kind == "error":
            message = event.get("message")
            retrying = isinstance(message, str) and message.startswith(_RETRYING)
            return [
                (EntryType.SYSTEM_EVENT, {"event": event, "subtype": "retry" if retrying else "api_error"})
            ]
        item = _item(event)
        item_type = item.get("type") if isinstance(item.get("type"), str) else None
        if kind == "item.updated" and item_type is not None:
            return []
        if kind in ("item.started", "item.completed") and item_type in TOOL_ITEMS:
            return self._tool(kind, event, item, str(item_type))
        if kind == "item.completed" and item_type in _COMPLETED_ITEMS:
            detail: dict[str, Any] = {"event": event}
            if item_type in _ITEM_SUBTYPES:
                detail["subtype"] = _ITEM_SUBTYPES[str(item_type)]
            return [(_COMPLETED_ITEMS[str(item_type)], detail)]
        if kind == "item.started" and item_type in _COMPLETED_ITEMS:
            return []  # the completed item carries it
        return [(EntryType.UNKNOWN, {"event": event})]

    def _tool(
        self, kind: str, event: dict[str, Any], item: dict[str, Any], item_type: str
    ) -> list[tuple[EntryType, dict[str, Any]]]:
        item_id = item.get("id")
        detail = _tool_detail(event, item, item_type)
        if kind == "item.started":
            if isinstance(item_id, str) and len(self._started_tools) < _MAX_STARTED_TOOLS:
                self._started_tools.add(item_id)
            return [(EntryType.TOOL_USE, detail)]
        entries: list[tuple[EntryType, dict[str, Any]]] = []
        if isinstance(item_id, str) and item_id in self._started_tools:
            self._started_tools.discard(item_id)
        else:
            entries.append((EntryType.TOOL_USE, dict(detail)))  # completed without being started
        detail["is_error"] = codex_item_failed(item)
        entries.append((EntryType.TOOL_RESULT, detail))
        return entries


# Options of `codex exec` that take a value (codex-cli 0.171 `codex exec --help`).
_VALUE_OPTIONS: Final = frozenset(
    {
        "-m", "--model", "-c", "--config", "-p", "--profile", "-C", "--cd", "-s", "--sandbox",
        "-i", "--image", "--output-schema", "--color", "-o", "--output-last-message",
        "--add-dir", "--local-provider", "--enable", "--disable",
    }
)  # fmt: skip
_EXEC_COMMANDS: Final = frozenset({"exec", "e"})
# Programs that run the program named after them (`npx codex exec ...`).
_LAUNCHERS: Final = frozenset({"npx", "pnpx", "bunx", "env"})


@dataclass(frozen=True, slots=True)
class ExecCommand:
    """What a `codex exec` command line says that its `--json` stream does not: the prompt (None
    when it comes on stdin) and the model (the `-m`/`-c model=` option, else the profile's or
    the top-level `model` of `$CODEX_HOME/config.toml`)."""

    prompt: str | None
    model: str | None
    # `exec resume <thread>|--last`: it goes on with a thread, whose running totals it prints.
    resumes: bool = False

    @classmethod
    def of(cls, command: Sequence[str], environ: Mapping[str, str]) -> ExecCommand | None:
        """The facts of `command` if it runs `codex [OPTIONS] exec`, else None. Never raises."""
        names = [os.path.basename(word) for word in command[:2]]
        if names[:1] == ["codex"]:
            start = 1
        elif len(names) == 2 and names[0] in _LAUNCHERS and names[1] in ("codex", "@openai/codex"):
            start = 2
        else:
            return None
        options: dict[str, str] = {}
        positional: list[str] = []
        words = iter(command[start:])
        for word in words:
            if word == "--":
                positional.extend(words)
            elif word in _VALUE_OPTIONS:
                _option(options, word, next(words, ""))
            elif word.startswith("--") and "=" in word:
                _option(options, *word.split("=", 1))
            elif not word.startswith("-") or word == "-":
                positional.append(word)
        if not positional or positional[0] not in _EXEC_COMMANDS:
            return None  # another subcommand, or the interactive CLI
        arguments = positional[1:]
        resumes = arguments[:1] == ["resume"]
        if resumes:  # `exec resume SESSION_ID [PROMPT]`, `exec resume --last [PROMPT]`
            arguments = arguments[1:] if "--last" in command[start:] else arguments[2:]
        prompt = arguments[0] if arguments and arguments[0] != "-" else None
        model = options.get("-m") or options.get("--model") or options.get("model")
        profile = options.get("-p") or options.get("--profile")
        return cls(prompt, model or _configured_model(environ, profile), resumes)


def _option(options: dict[str, str], name: str, value: str) -> None:
    """The first value of each option; of `-c key=value` overrides, only `model`'s."""
    if name not in ("-c", "--config"):
        options.setdefault(name, value)
        return
    key, _, value = value.partition("=")
    if key.strip() == "model":
        try:
            parsed: Any = tomllib.loads(f"value = {value}")["value"]
        except tomllib.TOMLDecodeError:
            parsed = value.strip()
        if isinstance(parsed, str):
            options.setdefault("model", parsed)


def _configured_model(environ: Mapping[str, str], profile: str | None) -> str | None:
    home = environ.get("CODEX_HOME") or os.path.join(environ.get("HOME") or os.path.expanduser("~"), ".codex")
    try:
        config = tomllib.loads(Path(home, "config.toml").read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return None
    profile = profile or config.get("profile")
    profiles = config.get("profiles")
    chosen = profiles.get(profile) if isinstance(profiles, dict) and isinstance(profile, str) else None
    for table in (chosen, config):
        if isinstance(table, dict) and isinstance(table.get("model"), str):
            return str(table["model"])
    return None
