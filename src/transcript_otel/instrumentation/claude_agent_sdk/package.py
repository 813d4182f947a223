"""The instrumented library's versions, declared here and, identically, in the `instruments-any` extra."""

_instruments = ("claude-agent-sdk >= 0.1.0, < 0.3",)
