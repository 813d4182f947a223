"""The OpenTelemetry API side every layer may use.

Attribute names, the records-lost metric, what the pipeline and the export queues tell each
other, and keeping other instrumentations off our own calls. Nothing here needs the OTel SDK.

Internal: no module here is public API; the public names are `transcript_otel`'s.
"""
