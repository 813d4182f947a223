"""From the agent's call to the sinks.

`TranscriptEmitter`, the bounded backlog and its background writer, and the process-wide default
pipeline.

Internal: no module here is public API; the public names are `transcript_otel`'s.
"""
