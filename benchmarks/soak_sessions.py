"""The sessions of the watch soak (`soak_watch.py`): the real recorded Claude Code and Codex
sessions of tests/fixtures/sessions/, each a template copied many times under ids of its own.

A template holds its files' lines in the order the CLI wrote them (by time across its files,
file order within one), what an import of it gives (each entry's key: source, type and the line
it came from), the line each entry came from (its file and where the line ends) and the tokens
the CLI recorded for the whole session. A copy is the template with its session's ids (the
file names' UUIDs: Claude Code's session id and Claude Code 2.0's agent ids beside it, each
Codex thread's id) replaced by fresh ones of the same length, so the copy's lines are as long
as the template's and a copy's entries map back to the template's by the reverse replacement.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import tempfile
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from transcript_otel import read_records
from transcript_otel.genai.attributes import session_usage, usage_attributes
from transcript_otel.mappings.claude_cost import summed_model_usage
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session

SESSIONS: Final = Path(__file__).resolve().parents[1] / "tests" / "fixtures" / "sessions"
INPUT, OUTPUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
RUN_INPUT, RUN_OUTPUT = "transcript.usage.input_tokens", "transcript.usage.output_tokens"
# Forks are left out: a fork's calls count in the other session's run, its totals go on from
# the other's (a copy would need its parent copied alongside). Claude Code 2.0 logged no totals.
LEFT_OUT: Final = {
    "claude_code/forked": "a fork: its totals are the other session's too",
    "claude_code/forked_twice": "a fork: its totals are the other session's too",
    "codex/forked": "a fork: its totals go on from the other thread's",
    "claude_code/v2.0.32_tools": "Claude Code 2.0 logged no token totals in its files",
}


@dataclass(frozen=True)
class Template:
    scenario: str  # "claude_code/tools"
    kind: str  # "claude" (below ~/.claude/projects/<project>/) or "codex" (~/.codex/sessions/Y/M/D/)
    paths: tuple[str, ...]  # each file below its project (Claude Code) or day (Codex) folder
    lines: tuple[tuple[int, bytes], ...]  # (file index, line), in the order the CLI wrote them
    ids: tuple[str, ...]  # what a copy replaces
    session_id: str  # the session's id as its runs name it
    entries: Counter[bytes]  # the keys of the entries an import gives
    entry_lines: dict[bytes, tuple[int, int]]  # key -> (file index, where its line ends)
    tokens: tuple[int, int]  # input and output, as the CLI recorded them (an import's run totals)
    chat_tokens: tuple[int, int]  # what an import's `chat` spans count (the same but where the
    # CLI logged a call in its totals only: the terminal UI's `/compact`, docs/harnesses.md)


@dataclass
class Copy:
    template: Template
    ids: dict[str, str]  # the template's id -> this copy's
    folder: Path  # the project (Claude Code) or day (Codex) folder
    written: list[int] = field(default_factory=list)  # bytes written to each file so far

    @property
    def session_id(self) -> str:
        return self.ids.get(self.template.session_id, self.template.session_id)

    def path(self, index: int) -> Path:
        return self.folder / _replaced(self.template.paths[index], self.ids)

    def line(self, number: int) -> tuple[int, bytes]:
        index, line = self.template.lines[number]
        for old, new in self.ids.items():
            line = line.replace(old.encode(), new.encode())
        return index, line

    def back(self, text: str) -> str:
        """`text` of this copy (a line, a source) as the template's."""
        for old, new in self.ids.items():
            text = text.replace(new, old)
        return text


def entry_key(source: str, entry_type: str, raw: object, detail: object) -> bytes:
    """An entry's identity, the line it came from included (the detail where it has no raw)."""
    text = raw if isinstance(raw, str) else json.dumps(detail, sort_keys=True)
    return hashlib.blake2b(f"{source}\0{entry_type}\0{text}".encode(), digest_size=16).digest()


def fresh_ids(template: Template) -> dict[str, str]:
    """New ids for a copy: a UUID for a UUID, as many hex digits for a Claude Code 2.0 agent id."""
    return {
        old: str(uuid.uuid4()) if len(old) == 36 else secrets.token_hex(len(old) // 2) for old in template.ids
    }


def templates() -> list[Template]:
    """Every recorded session but those `LEFT_OUT`, Claude Code's and Codex's."""
    made: list[Template] = []
    with tempfile.TemporaryDirectory(prefix="soak-templates-") as scratch:
        for kind, below in (("claude", "home/.claude/projects"), ("codex", "codex-home/sessions")):
            cli = "claude_code" if kind == "claude" else "codex"
            for scenario in sorted((SESSIONS / cli).iterdir()):
                name = f"{cli}/{scenario.name}"
                if name not in LEFT_OUT and (scenario / below).is_dir():
                    made.append(_template(name, kind, scenario / below, Path(scratch) / name))
    return made


def _template(scenario: str, kind: str, root: Path, mirror: Path) -> Template:
    files = sorted(root.rglob("*.jsonl"))
    folder = files[0].parent if kind == "codex" else next(p for p in files if _is_uuid(p.stem)).parent
    paths = tuple(str(path.relative_to(folder)) for path in files)
    ids = _ids(kind, files)
    lines = _in_time_order(files)
    (session,) = find_sessions([root])
    records = list(read_records(import_session(session, mirror).path))
    start = next(r for r in records if r["event"] == TranscriptEvent.START.value)
    ends = _line_ends(files)
    entries: Counter[bytes] = Counter()
    entry_lines: dict[bytes, tuple[int, int]] = {}
    for record in records:
        if record["event"] == TranscriptEvent.ENTRY.value:
            context = record["context"]
            key = entry_key(
                context["source"], context["entry_type"], context.get("raw"), context.get("detail")
            )
            entries[key] += 1
            raw = context.get("raw")
            if isinstance(raw, str) and raw in ends:
                entry_lines[key] = ends[raw]
    imported = run_tokens(records)
    recorded = _claude_totals(files) if kind == "claude" else _codex_totals(files)
    if imported != recorded:  # the import is checked against the CLIs by the tests: say it if not
        raise ValueError(f"{scenario}: an import counts {imported} tokens, the CLI recorded {recorded}")
    session_id = start["context"]["session_id"]
    return Template(
        scenario, kind, paths, lines, ids, session_id, entries, entry_lines, recorded, chat_tokens(records)
    )


def chat_tokens(records: list[dict[str, Any]]) -> tuple[int, int]:
    """The input and output tokens of these records' `chat` spans, summed."""
    chats = [
        r["context"].get("attributes", {})
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and str(r["context"].get("name", "")).startswith("chat")
    ]
    return sum(a.get(INPUT, 0) for a in chats), sum(a.get(OUTPUT, 0) for a in chats)


def run_tokens(records: list[dict[str, Any]]) -> tuple[int, int]:
    """What the runs of these records counted: their root spans' `transcript.usage.*` (a run
    whose process was killed wrote none)."""
    roots = [
        r["context"].get("attributes", {})
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and not r["context"].get("parent_span_id")
    ]
    return sum(a.get(RUN_INPUT, 0) for a in roots), sum(a.get(RUN_OUTPUT, 0) for a in roots)


def _ids(kind: str, files: list[Path]) -> tuple[str, ...]:
    if kind == "codex":  # rollout-<time>-<thread id>.jsonl
        return tuple(path.stem[-36:] for path in files)
    main = [path.stem for path in files if _is_uuid(path.stem)]
    beside = [path.stem.removeprefix("agent-") for path in files if path.parent.name != "subagents"]
    return tuple(dict.fromkeys(main + [agent for agent in beside if not _is_uuid(agent)]))


def _is_uuid(text: str) -> bool:
    try:
        return str(uuid.UUID(text)) == text
    except ValueError:
        return False


def _in_time_order(files: list[Path]) -> tuple[tuple[int, bytes], ...]:
    """The lines of `files` in the order the CLI wrote them: by time (a line without one at its
    file's latest), file order within a file (as tests/test_session_token_totals.py replays them)."""
    timed = []
    for index, path in enumerate(files):
        latest = ""
        for number, line in enumerate(path.read_bytes().splitlines(keepends=True)):
            latest = max(latest, json.loads(line).get("timestamp") or "")
            timed.append((latest, index, number, line))
    return tuple((index, line) for _, index, _, line in sorted(timed, key=lambda found: found[:3]))


def _line_ends(files: list[Path]) -> dict[str, tuple[int, int]]:
    """Each line's text -> its file and the offset its newline ends at (the first such line: the
    terminal UI tells its permission mode again at each prompt, a change only is an entry)."""
    ends: dict[str, tuple[int, int]] = {}
    for index, path in enumerate(files):
        offset = 0
        for line in path.read_bytes().splitlines(keepends=True):
            offset += len(line)
            ends.setdefault(line.rstrip(b"\r\n").decode(), (index, offset))
    return ends


def _claude_totals(files: list[Path]) -> tuple[int, int]:
    """Claude Code's last `cost-state` of the session's file: every model call, subagents too."""
    (main,) = [path for path in files if _is_uuid(path.stem)]
    costs = [line for line in main.read_bytes().splitlines() if b'"type":"cost-state"' in line]
    totals = session_usage({"session_usage": summed_model_usage(json.loads(costs[-1])["modelUsage"])})
    return totals.get(INPUT, 0), totals.get(OUTPUT, 0)


def _codex_totals(files: list[Path]) -> tuple[int, int]:
    """Each thread's last running total (`total_token_usage`), summed over the threads."""
    summed = [0, 0]
    for path in files:
        totals = [
            json.loads(line)["payload"]["info"]["total_token_usage"]
            for line in path.read_bytes().splitlines()
            if b'"total_token_usage"' in line
        ]
        if totals:
            counted = usage_attributes({"usage": totals[-1]})
            summed[0] += counted.get(INPUT, 0)
            summed[1] += counted.get(OUTPUT, 0)
    return summed[0], summed[1]


def _replaced(text: str, ids: dict[str, str]) -> str:
    for old, new in ids.items():
        text = text.replace(old, new)
    return text
