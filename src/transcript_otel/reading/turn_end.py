"""Whether a run's last turn ended, or the run stopped in the middle of it.

Codex tells when each turn starts (`turn_started`) and when one is aborted (`turn_aborted`:
the person pressed Esc or Ctrl-C); a turn that completes ends on the model's answer. A run
whose last turn was aborted, or whose main thread was last waiting on a prompt or a tool
(killed, or cut off, mid-turn), stopped mid-turn: its stop record does not make it
completed. Runs of harnesses that never tell a turn's start are not judged here.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.model.entries import MAIN_SOURCE

# The main thread's entries after which the model still owes an answer.
_AWAITING_ANSWER: Final = frozenset({"user_message", "tool_use", "tool_result", "thinking"})


class TurnEnd:
    """Fed a run's entries in order (`add`); `mid_turn` says whether it stopped mid-turn."""

    __slots__ = ("_aborted", "_awaiting", "_told")

    def __init__(self) -> None:
        self._told = False  # the harness tells when turns start
        self._aborted = False
        self._awaiting = False

    def add(self, entry_type: str, source: str, detail: Mapping[str, Any]) -> None:
        if source != MAIN_SOURCE:
            return
        subtype = detail.get("subtype") if entry_type == "system_event" else None
        if subtype == "turn_started":
            self._told, self._aborted, self._awaiting = True, False, True
        elif subtype == "turn_aborted":
            self._aborted = True
        elif entry_type == "error":
            self._awaiting = False  # a failed turn ended: the run says `failed`
        elif entry_type in _AWAITING_ANSWER:
            self._awaiting = True
        elif entry_type == "assistant_message":
            self._awaiting = False

    @property
    def mid_turn(self) -> bool:
        return self._told and (self._aborted or self._awaiting)
