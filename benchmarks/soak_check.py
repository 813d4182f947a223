"""The watch soak's verdict (`soak_watch.py`): each session's entries in the mirror against an
import of its template (each once), the duplicates against what docs/harnesses.md allows after
SIGKILL (the lines of the killed process's last round: written by it past the positions it had
kept, exported again by a later process: the next, or the one after it when the next was stopped
before its first round reached that session), and each session's tokens against the CLI's totals."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from soak_mirror import MirrorRead
from soak_sessions import Copy
from transcript_otel.sessions.watch_state import saved_state


@dataclass
class Verdict:
    sessions: int = 0
    lines: int = 0  # lines the sessions' files hold
    lines_with_entries: int = 0  # of those, lines an import makes entries of
    entries_expected: int = 0
    entries_found: int = 0
    missing: int = 0  # entries an import gives that the mirror lacks
    strange: int = 0  # entries the mirror has that no import gives
    duplicates: int = 0  # entries in the mirror more than once (each copy beyond the first)
    duplicates_allowed: int = 0  # of those: past the killed process's kept positions, written by it
    # entries the killed process wrote past its kept positions (each to be exported again)
    past_kept_at_kill: int = 0
    sessions_with_duplicates: int = 0
    files_not_read_to_their_end: int = 0  # by the state kept at the end
    chat_tokens_exact: int = 0  # sessions whose `chat` spans add up to an import's
    run_tokens_exact: int = 0  # sessions whose runs' totals add up to the CLI's
    tokens_over: int = 0  # sessions whose chat spans or runs count more than the CLI did
    tokens_under: int = 0  # sessions whose chat spans or runs count less: tokens lost
    tokens_expected: list[int] = field(default_factory=lambda: [0, 0])
    chat_tokens_found: list[int] = field(default_factory=lambda: [0, 0])
    run_tokens_found: list[int] = field(default_factory=lambda: [0, 0])
    # sessions whose tokens are off, with whether the killed process had written of them
    token_misses: list[dict[str, Any]] = field(default_factory=list)
    examples: list[str] = field(default_factory=list)  # the first problems, said

    @property
    def passed(self) -> bool:
        return (
            self.missing == 0
            and self.strange == 0
            and self.duplicates == self.duplicates_allowed
            and self.files_not_read_to_their_end == 0
            and self.tokens_under == 0
        )


def verify(
    copies: list[Copy], read: MirrorRead, state: Path, killed: list[int], kept_at_kill: list[dict[str, int]]
) -> Verdict:
    """`killed`: the numbers of the processes killed; `kept_at_kill`: the offsets their state
    kept as each died (path -> offset)."""
    verdict = Verdict(sessions=len(copies))
    kept_at_end = _kept(state)
    for copy in copies:
        template = copy.template
        verdict.lines += len(template.lines)
        verdict.lines_with_entries += len(set(template.entry_lines.values()))
        for index in range(len(template.paths)):
            path = copy.path(index)
            if kept_at_end.get(str(path)) != path.stat().st_size:
                verdict.files_not_read_to_their_end += 1
                _example(
                    verdict, f"{path}: kept at {kept_at_end.get(str(path))} of {path.stat().st_size} bytes"
                )
        found = read.sessions[copy.session_id]
        verdict.entries_expected += sum(template.entries.values())
        verdict.entries_found += sum(found.keys.values())
        missing = template.entries - found.keys
        verdict.missing += sum(missing.values())
        if missing:
            _example(
                verdict, f"{copy.session_id} ({template.scenario}): {sum(missing.values())} entries missing"
            )
        strange = sum(count for key, count in found.keys.items() if key not in template.entries)
        verdict.strange += strange
        if strange:
            _example(verdict, f"{copy.session_id} ({template.scenario}): {strange} entries no import gives")
        _duplicates(verdict, copy, found.keys, found.writers, killed, kept_at_kill)
        # (a run the killed process had open lost its spans, entries of it or not)
        _tokens(verdict, copy, found.chat, found.runs, bool(found.processes & set(killed)))
    return verdict


def _duplicates(
    verdict: Verdict,
    copy: Copy,
    keys: Counter[bytes],
    writers: dict[bytes, list[int]],
    killed: list[int],
    kept_at_kill: list[dict[str, int]],
) -> None:
    """Each entry the mirror has more than once, allowed only where a killed process wrote it past
    the positions it had kept (its last round) and a later process wrote it again."""
    template = copy.template
    extra = {key: count - 1 for key, count in keys.items() if key in template.entries and count > 1}
    verdict.duplicates += sum(extra.values())
    verdict.sessions_with_duplicates += bool(extra)
    for key, wrote in writers.items():
        allowed = 0
        for number, kept in zip(killed, kept_at_kill, strict=True):
            if number in wrote and _past(copy, key, kept):
                verdict.past_kept_at_kill += 1
                if extra.get(key, 0) > 0 and any(later > number for later in wrote):
                    allowed = extra[key]
                else:
                    said = f"written past the kept position by process {number}, not again by a later one"
                    _example(verdict, f"{copy.session_id} ({template.scenario}): {said}: {wrote}")
        verdict.duplicates_allowed += allowed
        if extra.get(key, 0) > allowed:
            said = f"an entry {extra[key] + 1} times, written by processes {wrote}"
            _example(verdict, f"{copy.session_id} ({template.scenario}): {said}")


def _tokens(verdict: Verdict, copy: Copy, chat: list[int], runs: list[int], killed_wrote: bool) -> None:
    template = copy.template
    for total, part in ((verdict.tokens_expected, template.tokens), (verdict.chat_tokens_found, chat)):
        total[0] += part[0]
        total[1] += part[1]
    verdict.run_tokens_found[0] += runs[0]
    verdict.run_tokens_found[1] += runs[1]
    chat_exact = tuple(chat) == template.chat_tokens
    runs_exact = tuple(runs) == template.tokens
    verdict.chat_tokens_exact += chat_exact
    over = any(
        found > limit
        for found, limit in zip([*chat, *runs], [*template.chat_tokens, *template.tokens], strict=True)
    )
    verdict.tokens_over += over
    verdict.tokens_under += any(
        found < limit
        for found, limit in zip([*chat, *runs], [*template.chat_tokens, *template.tokens], strict=True)
    )
    verdict.run_tokens_exact += runs_exact
    if not (chat_exact and runs_exact):
        verdict.token_misses.append(
            {
                "session": copy.session_id,
                "scenario": template.scenario,
                "cli": list(template.tokens),
                "chat_expected": list(template.chat_tokens),
                "chat": chat,
                "runs": runs,
                "written_by_the_killed_process": killed_wrote,
            }
        )


def _past(copy: Copy, key: bytes, kept: dict[str, int]) -> bool:
    """Whether the line of the entry `key` ends past where the state kept its file (an entry of
    no line of its own, a Codex code-mode call's, is taken to be)."""
    line = copy.template.entry_lines.get(key)
    if line is None:
        return True
    index, end = line
    return end > kept.get(str(copy.path(index)), 0)


def kept_positions(state: Path) -> dict[str, int]:
    """The offsets the watch's state keeps, by path (none where it cannot be read)."""
    return _kept(state)


def _kept(state: Path) -> dict[str, int]:
    try:
        files = saved_state(state)["files"]
    except (OSError, ValueError):
        return {}
    return {path: where["offset"] for path, where in files.items()}


def _example(verdict: Verdict, said: str) -> None:
    if len(verdict.examples) < 20:
        verdict.examples.append(said)
