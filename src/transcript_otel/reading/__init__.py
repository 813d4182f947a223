"""Reading captured runs back: finding them, their words, their aggregates, showing and checking them.

Public: `transcript_otel.reading.sources.open_run`; the rest is internal (the package re-exports
the readers it offers: `read_records`, `reconstruct_transcript`, `summarize`, ...).
"""
