"""The span tree of one instrumented run (`AgentRun`).

* `invoke_agent {prompt}`: the root span (`gen_ai.agent.name` = prompt name,
  `gen_ai.conversation.id` = session id, provider, model, token totals);
* `chat {model}`: one per turn (the prompt sent to the model and everything until the turn
  completes), with the turn's model, response facts (`TurnFacts`) and token usage, ERROR and
  `error.type` when the turn failed;
* `execute_tool {name}`: from a `tool_use` entry to the `tool_result` with the same call id,
  ERROR when the result says the tool failed; a `Task`/`Agent` call is a transfer to the
  subagent it names;
* `invoke_agent {subagent type}`: a subagent's entries (source `subagent:<id>`), nested under
  the `Task`/`Agent` tool call that launched it, with a `chat` span of its model calls.

Spans keep the agent's times: a span starts at the timestamp of the entry (or call) that
opened it and ends at that of the entry (or call) that ended it, once the span events of
everything emitted inside it are added.

`AgentRun` (`agent_run`) is what the agent's thread calls; its `SpanTree` (`tree`) is what the
writer changes, made of objects that each own their state: the `SpanBook` (`book`: the root
span and the facts spans open with), the `TurnTracker` (`turns`), the `ToolTracker` (`tools`:
tool calls and subagents), the `UsageLedger` (`usage`), the `ContentKeeper` (`content`), the
`SpanEnder` (`completion`: each span ended once) and the `EntryPlacer` (`placement`: each
entry's span, by the harness's `TurnPolicy`, `policy`). `slots` has one type per kind of
open span, `details` the readers of entry details.
"""
