"""The Claude Agent SDK adapter.

0.24/0.25 log each Claude Code transcript line as it is (`transcript.collector.entry`):
the `TranscriptCollector._emit_entry` patch maps each line to canonical entries with
`ClaudeTranscriptMapper`, source `main` or `subagent:<id>` from the file it came from.
0.26+ map lines natively (mirrored by `_native`). In every version one turn span covers
`_run_with_prompt_context`: the SDK conversation and the collector's final read.

A session file the 0.26+ collector saw no assistant line in (the CLI had not flushed it when
the collector's last read ran, or could not write it) leaves weakincentives with its fallback:
the answer's text alone. The SDK's `result` message still tells the run's tokens and cost, so
then it is recorded after the fallback, mapped as stream-json's `result` is.

The WINK tools the adapter serves Claude (an in-process MCP server named `wink`, made by
`create_mcp_server(bridged_tools)`) are the run's tool definitions, named as the model
sees them (`mcp__wink__<name>`). Claude Code's own tools and system prompt are not
known here: weakincentives sets no system prompt, and the CLI's `init` message, which
names every tool, is not in the transcript files.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, Final

from transcript_otel.instrumentation._calls import argument, guarded
from transcript_otel.instrumentation._patching import Patch
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation, in_run, observing
from transcript_otel.instrumentation.weakincentives._turns import turn_wrapper
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.claude_stream import ClaudeStreamMapper
from transcript_otel.mappings.claude_transcript import ClaudeTranscriptMapper
from transcript_otel.model.entries import MAIN_SOURCE

ADAPTER_MODULE: Final = "weakincentives.adapters.claude_agent_sdk.adapter"
COLLECTOR_MODULE: Final = "weakincentives.adapters.claude_agent_sdk._transcript_collector"
# 0.26+ build the SDK options here (0.24/0.25 in the adapter module).
OPTIONS_MODULE: Final = "weakincentives.adapters.claude_agent_sdk._sdk_options"
# How Claude Code names a tool of the adapter's MCP server (weakincentives' `MCP_TOOL_PREFIX`).
WINK_TOOL_PREFIX: Final = "mcp__wink__"
ADAPTER_CLASS: Final = "ClaudeAgentSDKAdapter"

# claude-agent-sdk's `ResultMessage` fields printed under the same name by the CLI
# (`model_usage` is printed as `modelUsage`).
_RESULT_FIELDS: Final = (
    "subtype",
    "duration_ms",
    "duration_api_ms",
    "is_error",
    "num_turns",
    "session_id",
    "stop_reason",
    "total_cost_usd",
    "usage",
    "result",
    "errors",
    "api_error_status",
    "terminal_reason",
    "uuid",
)

SPEC: Final = AdapterSpec(default_name="claude_agent_sdk", provider="anthropic", model=nested_model("_model"))


def _transcript_line(run: AgentRun, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """0.24/0.25 `TranscriptCollector._emit_entry(tailer, line)`: one line of a transcript file."""
    source = getattr(argument(args, kwargs, "tailer", 0), "source", MAIN_SOURCE)
    line = argument(args, kwargs, "line", 1)
    mapper = run.mapper(ClaudeTranscriptMapper)
    run.record_mapped(mapper.line(line, source if isinstance(source, str) else MAIN_SOURCE))


def _bridged_tools(run: AgentRun, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`create_mcp_server(bridged_tools, ...)`: the WINK tools served to Claude, as definitions."""
    tools = argument(args, kwargs, "bridged_tools", 0)
    if isinstance(tools, Iterable):
        definitions = [d for d in map(_tool_definition, tools) if d is not None]
        if definitions:
            run.describe_agent(tool_definitions=definitions)


def _tool_definition(tool: Any) -> dict[str, Any] | None:
    """A `BridgedTool`'s `{name, description?, parameters?}`, named as Claude Code offers it."""
    name = getattr(tool, "name", None)
    if not isinstance(name, str) or not name:
        return None
    definition: dict[str, Any] = {"name": WINK_TOOL_PREFIX + name}
    description = getattr(tool, "description", None)
    if isinstance(description, str):
        definition["description"] = description
    schema = getattr(tool, "input_schema", None)
    if isinstance(schema, dict):
        definition["parameters"] = schema
    return definition


def _fallbacks(
    run: AgentRun, wrapped: Callable[..., Any], collector: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """0.26+ `TranscriptCollector._emit_fallbacks()`: where it stands in for a session file
    that showed no assistant line, the SDK's `result` follows its entries."""
    untold: list[MappedEntry] = []
    guarded("the SDK result of an unread session file", _note_untold_result, collector, untold)
    outcome = wrapped(*args, **kwargs)
    if untold:
        guarded("the SDK result of an unread session file", run.record_mapped, untold)
    return outcome


def _note_untold_result(collector: Any, untold: list[MappedEntry]) -> None:
    main = getattr(collector, "_tailers", {}).get(MAIN_SOURCE)
    if "assistant_message" in getattr(main, "observed_types", ()):
        return
    messages = getattr(collector, "_fallback_messages", None) or ()
    result = next((m for m in reversed(messages) if type(m).__name__ == "ResultMessage"), None)
    if result is not None:
        # `raw` stays empty: what the CLI printed is not at hand, only the SDK's parse of it.
        untold.extend(e._replace(raw=None) for e in ClaudeStreamMapper().message(_as_printed(result)))


def _as_printed(result: Any) -> dict[str, Any]:
    """A `ResultMessage` as the CLI's stream-json `result` line it was parsed from."""
    printed: dict[str, Any] = {"type": "result"}
    for name in _RESULT_FIELDS:
        value = getattr(result, name, None)
        if value is not None:
            printed[name] = value
    model_usage = getattr(result, "model_usage", None)
    if model_usage is not None:
        printed["modelUsage"] = model_usage
    return printed


def patches(state: WinkInstrumentation) -> list[Patch]:
    describes_tools = observing(state, "WINK tools", _bridged_tools)
    return [
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}.evaluate", evaluate_wrapper(state, SPEC)),
        Patch(
            ADAPTER_MODULE,
            f"{ADAPTER_CLASS}._run_with_prompt_context",
            turn_wrapper(state, opens=True, closes=True),
        ),
        Patch(
            COLLECTOR_MODULE,
            "TranscriptCollector._emit_entry",
            observing(state, "transcript line", _transcript_line),
        ),
        Patch(COLLECTOR_MODULE, "TranscriptCollector._emit_fallbacks", in_run(state, _fallbacks)),
        # The module-level name each version calls (0.24/0.25 the adapter's, 0.26+ the options').
        Patch(ADAPTER_MODULE, "create_mcp_server", describes_tools),
        Patch(OPTIONS_MODULE, "create_mcp_server", describes_tools),
    ]
