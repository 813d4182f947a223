"""OpenTelemetry transcript instrumentation for the `claude-agent-sdk` package (0.1.0 and
newer; tested up to `package.NEWEST_TESTED`).

Usage::

    from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor

    ClaudeAgentSdkInstrumentor().instrument()  # or: opentelemetry-instrument python agent.py

Each `query()` call, and each `ClaudeSDKClient` connection, becomes a run: an
`invoke_agent` span (current when the SDK starts the CLI, so the SDK hands it to the
CLI as `TRACEPARENT`), a `chat` span per turn (a prompt and everything until its
result), an `execute_tool {name}` span per tool call, and an `invoke_agent` span per
subagent nested under the `Task`/`Agent` call that launched it. Every message the CLI
prints becomes canonical entries (`mappings.claude_stream`) on those spans, in the
OTel logs and in the JSONL mirror; the prompts the program sends are `user_message`
entries. A conversation that the weakincentives Claude adapter runs is left to its
own instrumentation.

`instrument(prompt_name=...)` names the runs (default `claude-agent-sdk`). Until one of
the patched SDK modules is imported, this module is all the instrumentor loads (the
wrappers load the emitter and the mappings).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar, Final

from opentelemetry import trace

from transcript_otel.instrumentation._instrumentor import PatchingInstrumentor, Switchable
from transcript_otel.instrumentation.claude_agent_sdk.package import (
    GONE_BY_NEWEST_TESTED,
    LIBRARY,
    NEWEST_TESTED,
    _instruments,
)

if TYPE_CHECKING:
    from transcript_otel.instrumentation._patching import PatchSet

__all__ = ["DEFAULT_PROMPT_NAME", "ClaudeAgentSdkInstrumentor"]

DEFAULT_PROMPT_NAME: Final = "claude-agent-sdk"


class ClaudeAgentSdkInstrumentor(PatchingInstrumentor):
    """Instruments `query()` and `ClaudeSDKClient` (a singleton, like every BaseInstrumentor)."""

    patched_modules: ClassVar[tuple[str, ...]] = (
        "claude_agent_sdk._internal.client",  # _query, _messages
        "claude_agent_sdk.client",  # _client
        "claude_agent_sdk._internal.message_parser",  # _messages
    )

    library = LIBRARY
    entry_module = "claude_agent_sdk"  # its __init__ imports all three (0.1.0 to 0.2.187)
    newest_tested = NEWEST_TESTED
    gone_by_newest_tested = GONE_BY_NEWEST_TESTED

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _build(self, tracer: trace.Tracer, **kwargs: Any) -> tuple[Switchable, PatchSet]:
        from transcript_otel.instrumentation._patching import PatchSet
        from transcript_otel.instrumentation.claude_agent_sdk import _client, _messages, _query
        from transcript_otel.instrumentation.claude_agent_sdk._state import SdkInstrumentation

        prompt_name = kwargs.get("prompt_name")
        state = SdkInstrumentation(
            tracer, prompt_name if isinstance(prompt_name, str) and prompt_name else DEFAULT_PROMPT_NAME
        )
        patches = [*_query.patches(state), *_client.patches(state), *_messages.patches(state)]
        return state, PatchSet("claude_agent_sdk", patches)
