"""The GenAI semantic conventions.

Attributes and facts read from entries, the conversation content spans carry (fitted to a
length, redacted), and the GenAI metrics.
"""
