"""The record every sink writes.

A run's identity, the prepared record and its JSON encoding, and what may leave the process
(content policy, redaction, truncation).
"""
