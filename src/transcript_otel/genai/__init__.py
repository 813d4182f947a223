"""The GenAI semantic conventions.

Attributes and facts read from entries, the conversation content spans carry (fitted to a
length, redacted), and the GenAI metrics.

Internal: no module here is public API; the public names are `transcript_otel`'s.
"""
