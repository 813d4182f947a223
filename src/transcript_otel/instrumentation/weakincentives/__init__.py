"""OpenTelemetry transcript instrumentation for `weakincentives` 0.18 and newer
(tested to 0.27).

Usage::

    from transcript_otel.instrumentation.weakincentives import WeakincentivesInstrumentor

    WeakincentivesInstrumentor().instrument()  # or: opentelemetry-instrument python agent.py

Each `evaluate()` of the Codex app-server, Claude Agent SDK, ACP and OpenCode
adapters, and of the OpenAI and LiteLLM adapters (0.18 to 0.24), becomes an
`invoke_agent` span with a `chat` span per turn and an `execute_tool` span per tool
call, and its canonical transcript is emitted through the transcript pipeline (log
records, span events, the local JSONL mirror). Versions without a native transcript
(OpenAI/LiteLLM, Codex 0.25, Claude 0.24/0.25) get one built by our mappings; 0.26+
entries are mirrored from weakincentives' own emitter, never duplicated.
Patches apply when a module is imported, also after `instrument()`; a name a
version lacks is skipped. Until the first of them is imported, this module is all the
instrumentor loads (the wrappers load the emitter and the mappings).
"""

from __future__ import annotations

from collections.abc import Collection
from typing import TYPE_CHECKING, Any, ClassVar

from opentelemetry import trace

from transcript_otel.instrumentation._instrumentor import PatchingInstrumentor, Switchable
from transcript_otel.instrumentation.weakincentives.package import (
    GONE_BY_NEWEST_TESTED,
    LIBRARY,
    NEWEST_TESTED,
    _instruments,
)

if TYPE_CHECKING:
    from transcript_otel.instrumentation._patching import PatchSet

__all__ = ["WeakincentivesInstrumentor"]


class WeakincentivesInstrumentor(PatchingInstrumentor):
    """Instruments the weakincentives agentic adapters (a singleton, like every BaseInstrumentor)."""

    patched_modules: ClassVar[tuple[str, ...]] = (
        "weakincentives.runtime.transcript",  # _native
        "weakincentives.adapters.codex_app_server.adapter",  # _codex
        "weakincentives.adapters.codex_app_server.client",
        "weakincentives.adapters.codex_app_server._protocol",
        "weakincentives.adapters.codex_app_server._transcript",
        "weakincentives.adapters.claude_agent_sdk.adapter",  # _claude
        "weakincentives.adapters.claude_agent_sdk._transcript_collector",
        "weakincentives.adapters.claude_agent_sdk._sdk_options",
        "weakincentives.adapters.acp.adapter",  # _acp
        "weakincentives.adapters.acp.client",
        "weakincentives.adapters.acp._transcript",
        "acp.client.connection",
        "weakincentives.adapters.openai",  # _chat
        "weakincentives.adapters.litellm",
        "weakincentives.adapters.inner_loop",
        "weakincentives.adapters.tool_executor",
    )

    library = LIBRARY
    newest_tested = NEWEST_TESTED
    gone_by_newest_tested = GONE_BY_NEWEST_TESTED

    def instrumentation_dependencies(self) -> Collection[str]:
        return _instruments

    def _build(self, tracer: trace.Tracer, **kwargs: Any) -> tuple[Switchable, PatchSet]:
        from transcript_otel.instrumentation._patching import PatchSet
        from transcript_otel.instrumentation.weakincentives import _acp, _chat, _claude, _codex, _native
        from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation

        state = WinkInstrumentation(tracer)
        patches = [
            *_native.patches(state),
            *_codex.patches(state),
            *_claude.patches(state),
            *_acp.patches(state),
            *_chat.patches(state),
        ]
        return state, PatchSet("weakincentives", patches)
