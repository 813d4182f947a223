"""The record every sink writes.

A run's identity, the prepared record and its JSON encoding, and what may leave the process
(content policy, redaction, truncation).

Internal: no module here is public API; the public names are `transcript_otel`'s.
"""
