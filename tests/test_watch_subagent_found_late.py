"""A Claude Code subagent's file made while a `transcript-otel watch` round is under way, the
subagent's whole work and the main agent's answer after it written before the round reaches
its session: the subagent's file is read with the main agent's lines, not at the next round.
Claude Code's cost line after the subagent gives the session's totals, the subagent's calls
included; read before the subagent's messages, it counted them as calls no line told (on the
main agent's turn), and the subagent's own chat span counted them again (issue 51's soak, 10,000
sessions: rounds long enough for that, 54 subagent sessions with the subagent's tokens twice)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.cli.without_sdk import recorded_for_the_mirror
from transcript_otel.genai.attributes import session_usage
from transcript_otel.mappings.claude_cost import summed_model_usage
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.changes import KernelChanges
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState
from transcript_otel.sinks import JsonlMirror

from session_fixtures import CLAUDE

INPUT, OUTPUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
RUN_INPUT, RUN_OUTPUT = "transcript.usage.input_tokens", "transcript.usage.output_tokens"
COPIES = ("11111111-1111-4111-8111-111111111111", "22222222-2222-4222-8222-222222222222")


def _lines(scenario: str, copy: str, home: Path) -> tuple[list[tuple[Path, bytes]], tuple[int, int]]:
    """The session's lines in the order the CLI wrote them, each with the file it goes to in
    `home` under the id `copy`; and the CLI's totals (its last `cost-state`)."""
    root = CLAUDE / scenario / "home/.claude/projects/-scratch-work"
    (main,) = root.glob("*.jsonl")
    timed = []
    for index, source in enumerate(sorted(root.rglob("*.jsonl"))):
        target = home / str(source.relative_to(root)).replace(main.stem, copy)
        latest = ""
        for number, line in enumerate(source.read_bytes().splitlines(keepends=True)):
            latest = max(latest, json.loads(line).get("timestamp") or "")
            timed.append((latest, index, number, target, line.replace(main.stem.encode(), copy.encode())))
    last = [line for line in main.read_bytes().splitlines() if b'"type":"cost-state"' in line][-1]
    totals = session_usage({"session_usage": summed_model_usage(json.loads(last)["modelUsage"])})
    ordered = [(target, line) for *_, target, line in sorted(timed, key=lambda found: found[:3])]
    return ordered, (totals[INPUT], totals[OUTPUT])


def _append(lines: list[tuple[Path, bytes]]) -> None:
    for target, line in lines:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("ab") as out:
            out.write(line)


def _totals(records: list[dict[str, Any]], session: str) -> tuple[tuple[int, int], tuple[int, int]]:
    """The session's chat spans' tokens and its runs' root totals."""
    chat, root = [0, 0], [0, 0]
    for record in records:
        context = record["context"]
        if record["event"] != TranscriptEvent.SPAN.value or context["session_id"] != session:
            continue
        attributes = context.get("attributes") or {}
        if context["name"].startswith("chat"):
            chat[0] += attributes.get(INPUT, 0)
            chat[1] += attributes.get(OUTPUT, 0)
        if not context.get("parent_span_id"):
            root[0] += attributes.get(RUN_INPUT, 0)
            root[1] += attributes.get(RUN_OUTPUT, 0)
    return (chat[0], chat[1]), (root[0], root[1])


@pytest.mark.parametrize(
    "scenario",
    [
        "synchronous_subagent",
        "foreground_subagent",
        "parallel_subagents",
        "background_subagent",
        "interactive_subagents",
    ],
)
def test_a_subagent_file_made_during_a_round_is_read_with_its_session(
    scenario: str,
    tmp_path: Path,
    make_pipeline: Callable[..., TranscriptPipeline],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    if KernelChanges.open() is None:  # (polling finds new files before each round's reads)
        pytest.skip("no inotify here")
    home, runs = tmp_path / "home" / "project", tmp_path / "runs"
    home.mkdir(parents=True)
    state = tmp_path / "watch.json"
    state.write_text(json.dumps({"version": 1, "files": {}}))  # sessions read from their start
    watcher = Watcher(
        [tmp_path / "home"],
        WatchState(state),
        pipeline=make_pipeline([JsonlMirror(runs)]),
        tracer=recorded_for_the_mirror("test").get_tracer(__name__),
        idle_s=float("inf"),
    )
    sessions = {copy: _lines(scenario, copy, home) for copy in COPIES}
    split = {}  # each session's lines before its first subagent's first line, and after
    for copy, (lines, _) in sessions.items():
        first = next(i for i, (target, _) in enumerate(lines) if target.parent.name == "subagents")
        split[copy] = (lines[: first - 1], lines[first - 1 : first], lines[first:])
        _append(split[copy][0])
    watcher.poll_once()
    for _, last, _ in split.values():  # each session changes: both are polled next round
        _append(last)
    real_poll = watcher._poll
    written: list[str] = []

    def poll(path: Path, now: float) -> int:
        # The round's first session read: meanwhile the other's subagent works and ends, and its
        # main agent answers, before the round reaches that session.
        if not written:
            other = next(copy for copy in COPIES if copy != path.stem)
            _append(split[other][2])
            written.append(other)
        return real_poll(path, now)

    monkeypatch.setattr(watcher, "_poll", poll)
    watcher.poll_once()
    monkeypatch.undo()
    for copy in COPIES:
        if copy not in written:
            _append(split[copy][2])
    watcher.poll_once()
    watcher.close()
    records = [r for path in sorted(runs.glob("*.jsonl")) for r in read_records(path)]
    for copy, (_, cli) in sessions.items():
        assert _totals(records, copy) == (cli, cli), copy
