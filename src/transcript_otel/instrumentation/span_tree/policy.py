"""How a harness's entries make turns and count usage: one `TurnPolicy` per kind of harness.

Harnesses differ in three ways the span tree must know: whether a main `user_message` opens a
turn (weakincentives' Codex bridge has no turn event before the prompt), whether each message
says its own usage (Claude Code's session files: counted once per message id) or a report
tells each turn's (stream-json's `result`), and whether a subagent's entries are named after
the call that launched it (stream-json's `subagent:{call id}`: its parent known exactly).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar


@dataclass(frozen=True, slots=True)
class TurnPolicy:
    """What a harness's entries tell of its turns, usage and subagents."""

    prompt_opens_turn: bool = False
    # Off where the harness reports each turn's usage itself (Claude's result message).
    counts_message_usage: bool = True
    subagents_named_by_call_id: bool = False

    # Presets, one per kind of harness (set below the class).
    SESSION_LOG: ClassVar[TurnPolicy]
    STREAM_JSON: ClassVar[TurnPolicy]
    PROMPT_OPENS_TURN: ClassVar[TurnPolicy]


# The default: turns from the harness's own events, usage counted once per message id (Claude
# Code's and Codex's session files, weakincentives' adapters).
TurnPolicy.SESSION_LOG = TurnPolicy()
# Claude's stream-json (`claude -p`, claude-agent-sdk): each turn's `result` tells its usage.
TurnPolicy.STREAM_JSON = TurnPolicy(counts_message_usage=False, subagents_named_by_call_id=True)
# A harness whose prompt is the first thing a turn says (weakincentives' Codex adapter).
TurnPolicy.PROMPT_OPENS_TURN = TurnPolicy(prompt_opens_turn=True)
