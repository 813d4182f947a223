"""Captured runs written out in other formats: debug bundles, devflow, Markdown, HTML, OTLP replay.

Internal: no module here is public API; what it writes is the `transcript-otel export`
command's.
"""
