"""Instrumentors: thin `wrapt` patches on the harnesses that feed the mappings.

Each instrumentor is an `opentelemetry-instrumentation` `BaseInstrumentor`,
registered under the `opentelemetry_instrumentor` entry point group, so
`opentelemetry-instrument` finds it; `instrument()`/`uninstrument()` work by hand.

Public: `transcript_otel.instrumentation.weakincentives` (`WeakincentivesInstrumentor`) and
`transcript_otel.instrumentation.claude_agent_sdk` (`ClaudeAgentSdkInstrumentor`); the rest is internal.
"""
