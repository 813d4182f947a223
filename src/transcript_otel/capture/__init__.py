"""From the agent's call to the sinks.

`TranscriptEmitter` (`emitter.py`) queues what the agent's thread records into a
`TranscriptPipeline` (`pipeline.py`), which holds its parts, each owning its own state: the
`Backlog` with its byte bound, `SinkWriting` (the sinks and their failures), the
`BackgroundWriter` that drains the one into the other, and the `AgentSide` that emitters and
other producers call. `defaults.py` keeps the process-wide default pipeline; `registry.py`
shuts every pipeline down at exit and resets them in a forked child.

Internal: no module here is public API; the public names are `transcript_otel`'s.
"""
