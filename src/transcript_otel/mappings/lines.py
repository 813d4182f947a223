"""Line-stream adapters: the stdout of a CLI agent, line by line, to canonical entries.

Every adapter has the seed's small protocol: `feed(line) -> entries` and `flush() ->
entries` (at the end of the stream), is pure (no I/O) and never raises: what it
cannot map is an `unknown` entry holding the line and the reason. Each declares its
`capabilities`, so a consumer knows which entries it may see.

| name | what it reads |
|---|---|
| `rtf1` | `@@RALPH@@ {json}` lines among plain text (`mappings.rtf1`) |
| `codex-json` | `codex exec --json` (`mappings.codex_exec`) |
| `claude-stream-json` | `claude -p --output-format stream-json` (`mappings.claude_stream`) |
| `opencode-json` | `opencode run --format json` (`mappings.opencode_run`) |
| `gemini-stream-json` | `gemini -p --output-format stream-json` (`mappings.gemini_stream`) |
| `gemini-json` | `gemini -p --output-format json` (`mappings.gemini_json`) |
| `plain` | anything: every non-blank line is assistant text |
| `auto` | one of the above, chosen by `select_adapter()` |

Selection (`select_adapter`), deterministic: an explicit name, else the
`TRANSCRIPT_OTEL_LINE_ADAPTER` environment variable, else `auto`, which chooses at
the first non-blank line (so nothing waits): `codex-json` if it is an event of
`codex exec` (`thread.started`, `turn.started`, `item.*`, ...), `claude-stream-json`
if it is a Claude message (`system`, `assistant`, `user`, `result` with a
`session_id`) or a control message (`control_response`, `control_request`: a CLI
driven by claude-agent-sdk opens its stdout with its answer to `initialize`),
`opencode-json` if it is an OpenCode event (`is_opencode_event`), `gemini-stream-json` if
it is Gemini CLI's `init` (with a `session_id`), else `rtf1`, which reads plain text as `plain`
does and also understands `@@RALPH@@` lines wherever they start. (`gemini-json` is never
guessed: `transcript-otel run` chooses it by the command line.)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final, Protocol

from transcript_otel.mappings._entry import MappedEntry, assistant_line
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.mappings.codex_exec import CodexExecAdapter
from transcript_otel.mappings.gemini_json import GeminiJsonAdapter
from transcript_otel.mappings.gemini_stream import GeminiStreamJsonAdapter, starts_stream
from transcript_otel.mappings.opencode_run import OpenCodeJsonAdapter, is_opencode_event
from transcript_otel.mappings.rtf1 import Rtf1Adapter
from transcript_otel.model.entries import EntryType, RawJson
from transcript_otel.records.serialize import parse_json

ADAPTER_VARIABLE: Final = "TRANSCRIPT_OTEL_LINE_ADAPTER"
_CODEX_EVENTS: Final = frozenset(
    {"thread.started", "turn.started", "turn.completed", "turn.failed", "item.started", "item.completed"}
)
_CLAUDE_MESSAGES: Final = frozenset({"system", "assistant", "user", "result"})
# What the CLI prints between itself and claude-agent-sdk: no other stream has these types.
_CLAUDE_CONTROL: Final = frozenset({"control_response", "control_request"})


@dataclass(frozen=True, slots=True)
class Capabilities:
    """Which entries an adapter can produce besides assistant text."""

    roles: bool  # user prompts, thinking, system events
    tool_events: bool  # tool_use / tool_result pairs with call ids
    usage_events: bool  # token_usage
    turns: bool  # its usage entry closes a turn (a model turn ends with its usage report)


class LineAdapter(Protocol):
    @property
    def name(self) -> str: ...

    def feed(self, line: str) -> list[MappedEntry]: ...

    def flush(self) -> list[MappedEntry]: ...


class PlainAdapter:
    """Every non-blank line is assistant text."""

    name: Final = "plain"

    def feed(self, line: str) -> list[MappedEntry]:
        return assistant_line(line)

    def flush(self) -> list[MappedEntry]:
        return []


class ClaudeStreamJsonAdapter:
    """`claude -p --output-format stream-json` lines, through the SDK's message mapping."""

    name: Final = "claude-stream-json"

    def __init__(self) -> None:
        self._mapper = ClaudeStreamMapper()
        self.session_id: str | None = None

    def feed(self, line: str) -> list[MappedEntry]:
        if not line.strip():
            return []
        try:
            message = parse_json(line)
        except (ValueError, RecursionError) as exc:
            return [MappedEntry(EntryType.UNKNOWN.value, {"parse_error": f"invalid JSON: {exc}"}, line)]
        if isinstance(message, dict) and isinstance(message.get("session_id"), str) and message["session_id"]:
            self.session_id = message["session_id"]
        entries = self._mapper.message(message)
        # `raw` is the line as printed where the mapping keeps this message (folded progress
        # frames made before it keep theirs).
        return [entry._replace(raw=line) if _keeps(entry, message) else entry for entry in entries]

    def flush(self) -> list[MappedEntry]:
        return self._mapper.flush()

    def resume_after(self, cost_state: bytes) -> None:
        """The command resumes a session whose totals were `cost_state` (a line of its log): its
        `result`s report those too, and only what comes after is this run's."""
        self._mapper.resume_after(cost_state)


def _keeps(entry: MappedEntry, message: Any) -> bool:
    return isinstance(entry.raw, RawJson) and entry.raw.value is message


CAPABILITIES: Final = {
    "rtf1": Capabilities(roles=True, tool_events=True, usage_events=True, turns=False),
    "codex-json": Capabilities(roles=True, tool_events=True, usage_events=True, turns=True),
    "claude-stream-json": Capabilities(roles=True, tool_events=True, usage_events=True, turns=True),
    "opencode-json": Capabilities(roles=True, tool_events=True, usage_events=True, turns=True),
    "gemini-stream-json": Capabilities(roles=True, tool_events=True, usage_events=True, turns=True),
    "gemini-json": Capabilities(roles=False, tool_events=False, usage_events=True, turns=True),
    "plain": Capabilities(roles=False, tool_events=False, usage_events=False, turns=False),
}
_FACTORIES: Final[dict[str, Callable[[], LineAdapter]]] = {
    "rtf1": Rtf1Adapter,
    "codex-json": CodexExecAdapter,
    "claude-stream-json": ClaudeStreamJsonAdapter,
    "opencode-json": OpenCodeJsonAdapter,
    "gemini-stream-json": GeminiStreamJsonAdapter,
    "gemini-json": GeminiJsonAdapter,
    "plain": PlainAdapter,
}
ADAPTER_NAMES: Final = (*_FACTORIES, "auto")


def _json_type(line: str) -> tuple[str | None, dict[str, Any]]:
    try:
        value = parse_json(line)
    except (ValueError, RecursionError):
        return None, {}
    if isinstance(value, dict) and isinstance(value.get("type"), str):
        return value["type"], value
    return None, {}


def stream_adapter_for(line: str) -> str:
    """The adapter for a stream whose first non-blank line is `line` (the module docstring's rules)."""
    kind, value = _json_type(line)
    if kind is not None and (kind in _CODEX_EVENTS or kind.startswith("item.")):
        return "codex-json"
    if (kind in _CLAUDE_MESSAGES and "session_id" in value) or kind in _CLAUDE_CONTROL:
        return "claude-stream-json"
    if is_opencode_event(value):
        return "opencode-json"
    if starts_stream(kind, value):
        return "gemini-stream-json"
    return "rtf1"


class AutoAdapter:
    """Holds blank lines until the first other one, chooses by it (`stream_adapter_for`), then
    hands on everything."""

    name: Final = "auto"

    def __init__(self) -> None:
        self._held: list[str] = []
        self.chosen: LineAdapter | None = None
        self._resumed_from: bytes | Mapping[str, Any] | None = None

    def resume_after(self, totals: bytes | Mapping[str, Any]) -> None:
        """As the chosen adapter's `resume_after` (told when it is chosen): a Claude session's
        last `cost-state` line (`ClaudeStreamJsonAdapter`), a Codex thread's token totals
        (`CodexExecAdapter`)."""
        if self.chosen is not None:
            resume_after(self.chosen, totals)
        else:
            self._resumed_from = totals

    @property
    def session_id(self) -> str | None:
        session_id = getattr(self.chosen, "session_id", None)
        return session_id if isinstance(session_id, str) else None

    def feed(self, line: str) -> list[MappedEntry]:
        if self.chosen is None:
            if not line.strip():
                self._held.append(line)
                return []
            chosen = self.chosen = _FACTORIES[stream_adapter_for(line)]()
            if self._resumed_from is not None:
                resume_after(chosen, self._resumed_from)
            held, self._held = self._held, []
            return [entry for earlier in held for entry in chosen.feed(earlier)] + chosen.feed(line)
        return self.chosen.feed(line)

    def flush(self) -> list[MappedEntry]:
        return [] if self.chosen is None else self.chosen.flush()


def resume_after(adapter: LineAdapter, totals: bytes | Mapping[str, Any]) -> None:
    """What the run of a resumed session goes on from (a Claude session's last `cost-state`
    line, a Codex thread's token totals), told to the adapter that reads that kind (`auto`:
    to the one it will choose)."""
    if isinstance(adapter, AutoAdapter):
        adapter.resume_after(totals)
    if isinstance(adapter, ClaudeStreamJsonAdapter) and isinstance(totals, bytes):
        adapter.resume_after(totals)
    if isinstance(adapter, CodexExecAdapter) and isinstance(totals, Mapping):
        adapter.resume_after(totals)


def select_adapter(
    name: str | None, environ: dict[str, str] | None = None, default: str | None = None
) -> LineAdapter:
    """The adapter `name`, else the one `TRANSCRIPT_OTEL_LINE_ADAPTER` names, else `default`
    (the one a command line says its output needs), else `auto`.

    Raises `ValueError` naming the known adapters for an unknown name.
    """
    chosen = name or (environ or {}).get(ADAPTER_VARIABLE) or default or "auto"
    if chosen == "auto":
        return AutoAdapter()
    factory = _FACTORIES.get(chosen)
    if factory is None:
        raise ValueError(f"unknown line adapter {chosen!r}; known: {', '.join(ADAPTER_NAMES)}")
    return factory()


def effective_name(adapter: LineAdapter) -> str:
    """`adapter`'s name, or for `auto` the name of the adapter it chose (`plain` until then)."""
    chosen = adapter.chosen if isinstance(adapter, AutoAdapter) else adapter
    return chosen.name if chosen is not None else "plain"


def capabilities_of(adapter: LineAdapter) -> Capabilities:
    """What `adapter` (or, for `auto`, the adapter it chose) can produce."""
    return CAPABILITIES[effective_name(adapter)]
