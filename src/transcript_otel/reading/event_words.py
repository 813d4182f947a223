"""The words of the system events our mappings name themselves (`detail.subtype`), for people.

Codex's session events (a thread started, a turn started or aborted, a fork, a subagent) and
Claude Code's permission mode carry a few fields a reader wants in words, not as JSON. A turn
that started says nothing more than that (its id is for machines). Subtypes not known here
are left to the caller.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Final

from transcript_otel.genai.lookup import nonempty_text


def _joined(*parts: str | None) -> str:
    return " · ".join(part for part in parts if part)


def _thread_started(detail: Mapping[str, Any]) -> str | None:
    if not any(key in detail for key in ("cli_version", "cwd", "originator")):
        return None  # `codex exec`'s `thread.started`: its thread id is the words
    version, originator = nonempty_text(detail.get("cli_version")), nonempty_text(detail.get("originator"))
    codex = f"Codex {version}" if version else "Codex"
    source = detail.get("source")
    spawn = source.get("subagent") if isinstance(source, Mapping) else None
    spawn = spawn.get("thread_spawn") if isinstance(spawn, Mapping) else None
    subagent = None
    if isinstance(spawn, Mapping):
        named = nonempty_text(spawn.get("agent_path")) or nonempty_text(spawn.get("agent_nickname")) or "?"
        parent = nonempty_text(spawn.get("parent_thread_id"))
        subagent = f"subagent {named}" + (f" of thread {parent}" if parent else "")
    cwd, provider = nonempty_text(detail.get("cwd")), nonempty_text(detail.get("model_provider"))
    return _joined(
        f"{codex} ({originator})" if originator else codex,
        subagent,
        f"cwd {cwd}" if cwd else None,
        f"provider {provider}" if provider else None,
    )


def _turn_aborted(detail: Mapping[str, Any]) -> str:
    return nonempty_text(detail.get("reason")) or ""


def _forked(detail: Mapping[str, Any]) -> str:
    parent = nonempty_text(detail.get("forked_from"))
    return f"from {parent}" if parent else ""


def _subagent(detail: Mapping[str, Any]) -> str:
    path, model = nonempty_text(detail.get("agent_path")), nonempty_text(detail.get("model"))
    thread = nonempty_text(detail.get("agent_thread_id"))
    named = path or thread or "?"
    return _joined(f"{named} ({model})" if model else named, f"thread {thread}" if path and thread else None)


def _permission_mode(detail: Mapping[str, Any]) -> str:
    return nonempty_text(detail.get("mode")) or ""


_WORDS: Final[dict[str, Callable[[Mapping[str, Any]], str | None]]] = {
    "thread_started": _thread_started,
    "turn_started": lambda _: "",
    "turn_aborted": _turn_aborted,
    "forked": _forked,
    "subagent_started": _subagent,
    "subagent_completed": _subagent,
    "permission_mode": _permission_mode,
}


def event_words(detail: Mapping[str, Any]) -> str | None:
    """The words of a system event of a subtype known here ("" when the subtype says it all),
    else None (also for a known subtype without the fields told here)."""
    subtype = detail.get("subtype")
    words = _WORDS.get(subtype) if isinstance(subtype, str) else None
    return words(detail) if words is not None else None
