"""The canonical transcript model and its checks.

Entry types, the envelope, entries, summaries, the specification's invariants, and the fields of
`transcript.span` records.
"""
