"""The OTel SDK and OTLP exporters (the `[otlp]` extra).

`configure()`, the providers and exporters it builds, and the byte-bounded export queues.

Internal: no module here is public API; the public names are `transcript_otel`'s (`configure`).
"""
