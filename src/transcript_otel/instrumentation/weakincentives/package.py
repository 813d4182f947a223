"""The instrumented library's versions, declared here and, identically, in the `instruments-any` extra."""

_instruments = ("weakincentives >= 0.18, < 0.28",)
