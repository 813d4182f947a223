"""The instrumented library's versions, declared here and, identically, in the `instruments-any` extra.

A minimum only: a newer version is instrumented, with one warning (`PatchingInstrumentor`).
"""

_instruments = ("weakincentives >= 0.18",)
LIBRARY = "weakincentives"
# The newest of tests/wink_harness.py's VERSIONS (a test checks they agree).
NEWEST_TESTED = "0.27.0"
# The targets (`module:attribute`) and modules of older versions that NEWEST_TESTED lacks (the
# 0.25 Codex adapter's methods, the older Claude hooks, the OpenAI/LiteLLM adapters of 0.18 to
# 0.24); a test checks this list against NEWEST_TESTED itself.
GONE_BY_NEWEST_TESTED = frozenset(
    {
        "weakincentives.adapters.openai",
        "weakincentives.adapters.litellm",
        "weakincentives.adapters.inner_loop",
        "weakincentives.adapters.tool_executor",
        "weakincentives.adapters.codex_app_server.adapter:CodexAppServerAdapter._start_turn",
        "weakincentives.adapters.codex_app_server.adapter:CodexAppServerAdapter._stream_turn",
        "weakincentives.adapters.codex_app_server.adapter:CodexAppServerAdapter._process_notification",
        "weakincentives.adapters.codex_app_server.adapter:CodexAppServerAdapter._handle_tool_call",
        "weakincentives.adapters.claude_agent_sdk._transcript_collector:TranscriptCollector._emit_entry",
        "weakincentives.adapters.claude_agent_sdk.adapter:create_mcp_server",
    }
)
