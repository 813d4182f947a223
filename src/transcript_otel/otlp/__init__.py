"""The OTel SDK and OTLP exporters (the `[otlp]` extra).

`configure()`, the providers and exporters it builds, and the byte-bounded export queues.
"""
