"""The canonical transcript model and its checks.

Entry types, the envelope, entries, summaries, the specification's invariants, and the fields of
`transcript.span` records.

Internal: no module here is public API; the public names are `transcript_otel`'s (it re-exports the model's).
"""
