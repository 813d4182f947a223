"""OpenTelemetry transcript instrumentation for the `claude-agent-sdk` package (0.1 to 0.2).

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

`instrument(prompt_name=...)` names the runs (default `claude-agent-sdk`).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.instrumentation.instrumentor import BaseInstrumentor  # type: ignore[attr-defined]

from transcript_otel.instrumentation._patching import PatchSet
from transcript_otel.instrumentation.claude_agent_sdk import _client, _messages, _query
from transcript_otel.instrumentation.claude_agent_sdk._state import SdkInstrumentation
from transcript_otel.instrumentation.claude_agent_sdk.package import _instruments
from transcript_otel.version import __version__

__all__ = ["DEFAULT_PROMPT_NAME", "ClaudeAgentSdkInstrumentor"]

DEFAULT_PROMPT_NAME: Final = "claude-agent-sdk"


class ClaudeAgentSdkInstrumentor(BaseInstrumentor):  # type: ignore[misc]
    """Instruments `query()` and `ClaudeSDKClient` (a singleton, like every BaseInstrumentor)."""

    # Class attributes: BaseInstrumentor is a singleton whose __init__ re-runs.
    _state: SdkInstrumentation | None = None
    _patches: PatchSet | None = None

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _instrument(self, **kwargs: Any) -> None:
        tracer = trace.get_tracer(__name__, __version__, kwargs.get("tracer_provider"))
        prompt_name = kwargs.get("prompt_name")
        state = SdkInstrumentation(
            tracer, prompt_name if isinstance(prompt_name, str) and prompt_name else DEFAULT_PROMPT_NAME
        )
        patch_set = PatchSet(
            "claude_agent_sdk", [*_query.patches(state), *_client.patches(state), *_messages.patches(state)]
        )
        patch_set.activate()
        type(self)._state, type(self)._patches = state, patch_set

    def _uninstrument(self, **kwargs: Any) -> None:
        cls = type(self)
        if cls._state is not None:
            cls._state.active = False
        if cls._patches is not None:
            cls._patches.deactivate()
        cls._state = cls._patches = None

    @property
    def applied_patches(self) -> list[str]:
        """`module:attribute` of every patch in place (what this claude-agent-sdk version offers)."""
        return [] if self._patches is None else self._patches.applied
