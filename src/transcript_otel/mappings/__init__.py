"""Mappings: pure functions (and small stateful folders) from native events to canonical entries.

They do no I/O and never raise on bad input: what they cannot map becomes an
`unknown` entry that keeps the input and says why.

Internal: no module here is public API; the public names are `transcript_otel`'s.
"""

from transcript_otel.mappings._entry import MappedEntry

__all__ = ["MappedEntry"]
