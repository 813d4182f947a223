"""Sessions the CLIs logged themselves: Claude Code's and Codex's session files, imported.

Claude Code and Codex write every session to disk as JSONL, with no wrapper around them
(docs/session-logs.md). `files` finds those files, `timeline` reads a session's files (a
Claude session's subagents have their own) as one stream in the order things happened, and
`importer` records that stream as a run, after the fact: the same span tree and entries a
live run gets, at the times the files say, under ids derived from the session, so that an
import made twice is the same run.

Public: `transcript_otel.sessions.watch_state.saved_state`; the rest is internal.
"""
