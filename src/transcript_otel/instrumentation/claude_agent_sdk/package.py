"""The instrumented library's versions, declared here and, identically, in the `instruments-any` extra.

A minimum only: a newer version is instrumented, with one warning (`PatchingInstrumentor`).
"""

_instruments = ("claude-agent-sdk >= 0.1.0",)
LIBRARY = "claude-agent-sdk"
# The Makefile's CLAUDE_SDK_NEWEST (a test checks they agree).
NEWEST_TESTED = "0.2.187"
# Every target and module is in NEWEST_TESTED (a test checks it).
GONE_BY_NEWEST_TESTED: frozenset[str] = frozenset()
