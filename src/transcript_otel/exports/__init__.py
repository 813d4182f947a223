"""Captured runs written out in other formats: debug bundles, devflow, Markdown, HTML, OTLP replay."""
