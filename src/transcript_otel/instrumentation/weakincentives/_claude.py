"""The Claude Agent SDK adapter.

0.24/0.25 log each Claude Code transcript line as it is (`transcript.collector.entry`):
the `TranscriptCollector._emit_entry` patch maps each line to canonical entries with
`ClaudeTranscriptMapper`, source `main` or `subagent:<id>` from the file it came from.
0.26+ map lines natively (mirrored by `_native`). In every version one turn span covers
`_run_with_prompt_context`: the SDK conversation and the collector's final read.
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.instrumentation._agent_run import AgentRun
from transcript_otel.instrumentation._calls import argument
from transcript_otel.instrumentation._patching import Patch
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation, observing
from transcript_otel.instrumentation.weakincentives._turns import turn_wrapper
from transcript_otel.mappings.claude_transcript import ClaudeTranscriptMapper
from transcript_otel.model import MAIN_SOURCE

ADAPTER_MODULE: Final = "weakincentives.adapters.claude_agent_sdk.adapter"
COLLECTOR_MODULE: Final = "weakincentives.adapters.claude_agent_sdk._transcript_collector"
ADAPTER_CLASS: Final = "ClaudeAgentSDKAdapter"

SPEC: Final = AdapterSpec(default_name="claude_agent_sdk", provider="anthropic", model=nested_model("_model"))


def _transcript_line(run: AgentRun, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """0.24/0.25 `TranscriptCollector._emit_entry(tailer, line)`: one line of a transcript file."""
    source = getattr(argument(args, kwargs, "tailer", 0), "source", MAIN_SOURCE)
    line = argument(args, kwargs, "line", 1)
    mapper = run.mapper(ClaudeTranscriptMapper)
    run.record_mapped(mapper.line(line, source if isinstance(source, str) else MAIN_SOURCE))


def patches(state: WinkInstrumentation) -> list[Patch]:
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
    ]
