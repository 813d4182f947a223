"""The span tree of one instrumented run (`AgentRun`).

The root `invoke_agent` span, a `chat` span per turn, `execute_tool` spans and subagents'
`invoke_agent` spans; entries placed in them as the writer writes them; their GenAI content,
usage and model facts; how and when each ends.
"""
