"""The tokens a user reads for a Claude Code or Codex session (each run's `chat` spans, its
summary, the HTML page's header) add up to what the CLI itself recorded, whatever the runs
were cut into: a session with no cost line yet, a watch that ended a run on idle or was
restarted in the middle of a turn (issue 47, items 2 and 4). The sessions are the real CLIs'
recordings (tests/fixtures/sessions), written out in steps as the CLI wrote them.
"""

from __future__ import annotations

import json
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.genai.attributes import session_usage, tool_identity, usage_attributes
from transcript_otel.mappings.claude_cost import summed_model_usage
from transcript_otel.mappings.claude_session import ClaudeSessionMapper
from transcript_otel.mappings.codex_rollout import CodexRolloutMapper
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState, saved_state
from transcript_otel.sinks import JsonlMirror

from loopback import subprocess_env
from session_fixtures import CLAUDE, codex_day

CLI = [sys.executable, "-m", "transcript_otel.cli"]
INPUT, OUTPUT = "gen_ai.usage.input_tokens", "gen_ai.usage.output_tokens"
RUN_INPUT, RUN_OUTPUT = "transcript.usage.input_tokens", "transcript.usage.output_tokens"
COST_STATE = b'"type":"cost-state"'


def _main_file(scenario: str) -> Path:
    (path,) = (CLAUDE / scenario / "home/.claude/projects/-scratch-work").glob("*.jsonl")
    return path


def _claude_totals(session_file: Path) -> tuple[int, int]:
    """The session's input and output tokens as Claude Code recorded them (its last
    `cost-state`: every model call, subagents included), input counting cached tokens."""
    last = [line for line in session_file.read_bytes().splitlines() if COST_STATE in line][-1]
    totals = session_usage({"session_usage": summed_model_usage(json.loads(last)["modelUsage"])})
    return totals[INPUT], totals[OUTPUT]


def _chat_totals(records: list[dict[str, Any]]) -> tuple[int, int]:
    """What the `chat` spans of these records say, summed."""
    chats = [
        r["context"]["attributes"]
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and r["context"]["name"].startswith("chat")
    ]
    return sum(a.get(INPUT, 0) for a in chats), sum(a.get(OUTPUT, 0) for a in chats)


def _summary_tokens(run: Path) -> tuple[int, int]:
    """What `transcript-otel summary` says of the run's tokens."""
    said = subprocess.run(
        [*CLI, "summary", "--json", str(run)],
        env=subprocess_env(),
        capture_output=True,
        check=True,
        text=True,
    )
    tokens = json.loads(said.stdout)["tokens"]
    return tokens.get("input", 0), tokens.get("output", 0)


def _html_header_tokens(run: Path, page: Path) -> tuple[int, int]:
    """The input and output tokens the HTML page's header shows."""
    subprocess.run(
        [*CLI, "export", str(run), "--format", "html", "-o", str(page)], env=subprocess_env(), check=True
    )
    text = page.read_text()

    def shown(name: str) -> int:
        found = re.search(rf'data-field="tokens\.{name}" data-value="(\d+)"', text)
        return int(found.group(1)) if found else 0

    return shown("input"), shown("output")


def _devflow_tokens(run: Path, folder: Path) -> tuple[int, int]:
    """The input and output tokens of the devflow transcript's turns, summed."""
    subprocess.run(
        [*CLI, "export", str(run), "--format", "devflow", "-o", str(folder)], env=subprocess_env(), check=True
    )
    turns = json.loads((folder / "transcript.json").read_text())["turns"]
    return sum(turn.get("tokensIn", 0) for turn in turns), sum(turn.get("tokensOut", 0) for turn in turns)


@pytest.mark.parametrize("scenario", ["background_subagent", "tools"])
def test_a_claude_session_with_no_cost_line_counts_each_message_once(scenario: str, tmp_path: Path) -> None:
    """A session still open (the terminal UI writes its cost as it is left): every message's
    usage counts once, a message of tool calls or thinking only too (`background_subagent`: the
    main agent's and the subagent's first calls; `tools`: a message written as thinking, text
    and tool-call lines, each with its usage). Before: summary and header 2,750 / 38 against the
    chat spans' 4,250 / 108 (`background_subagent`); the devflow turns 2,750 / 38 too."""
    source = _main_file(scenario)
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    lines = source.read_bytes().splitlines(keepends=True)
    before_cost = next(i for i, line in enumerate(lines) if COST_STATE in line)
    (project / source.name).write_bytes(b"".join(lines[:before_cost]))
    if source.with_suffix("").is_dir():  # its subagents
        shutil.copytree(source.with_suffix(""), project / source.stem)
    runs = tmp_path / "runs"
    subprocess.run([*CLI, "import", str(project), "--jsonl-dir", str(runs)], env=subprocess_env(), check=True)
    (run,) = runs.glob("*.jsonl")
    expected = _claude_totals(source)
    assert _chat_totals(list(read_records(run))) == expected
    assert _summary_tokens(run) == expected
    assert _html_header_tokens(run, tmp_path / "page.html") == expected
    assert _devflow_tokens(run, tmp_path / "devflow") == expected


@pytest.mark.parametrize(("scenario", "rest"), [("background_subagent", None), ("compacted", (1252, 13))])
def test_a_whole_claude_sessions_devflow_turns_add_up_to_its_totals(
    scenario: str, rest: tuple[int, int] | None, tmp_path: Path
) -> None:
    """A session with its cost line (which counts no call's tokens, only the session's): each
    message's usage is on its turn, and what only the session's totals count (`compacted`: the
    compaction's call) on a last `[usage]` turn, so the turns add up to the CLI's totals.
    Before: the turns counted nothing (`background_subagent`: 0 / 0 against 4,250 / 108)."""
    source = _main_file(scenario)
    project = tmp_path / "home" / "project"
    project.mkdir(parents=True)
    shutil.copy(source, project / source.name)
    if source.with_suffix("").is_dir():  # its subagents
        shutil.copytree(source.with_suffix(""), project / source.stem)
    runs = tmp_path / "runs"
    subprocess.run([*CLI, "import", str(project), "--jsonl-dir", str(runs)], env=subprocess_env(), check=True)
    (run,) = runs.glob("*.jsonl")
    assert _devflow_tokens(run, tmp_path / "devflow") == _claude_totals(source)
    turns = json.loads((tmp_path / "devflow" / "transcript.json").read_text())["turns"]
    rests = [t for t in turns if t["content"].startswith("[usage] in the session's total")]
    assert [(t.get("tokensIn", 0), t.get("tokensOut", 0)) for t in rests] == ([rest] if rest else [])


# -- one session, two runs: the watch ends a run on idle, or is stopped and started again --


def _codex_totals(rollout: Path) -> tuple[int, int]:
    """The thread's input and output tokens as Codex recorded them: the last running total."""
    totals = [
        json.loads(line)["payload"]["info"]["total_token_usage"]
        for line in rollout.read_bytes().splitlines()
        if b'"total_token_usage"' in line
    ]
    counted = usage_attributes({"usage": totals[-1]})
    return counted[INPUT], counted[OUTPUT]


def _in_time_order(files: dict[Path, Path]) -> list[tuple[Path, bytes]]:
    """The lines of the recorded `files` (recording -> where it is written), each with where it
    goes, in the order the CLI wrote them: by time (a line without one at its file's latest),
    file order within a file."""
    timed = []
    for index, (source, target) in enumerate(files.items()):
        latest = ""
        for number, line in enumerate(source.read_bytes().splitlines(keepends=True)):
            latest = max(latest, json.loads(line).get("timestamp") or "")
            timed.append((latest, index, number, target, line))
    return [(target, line) for *_, target, line in sorted(timed, key=lambda found: found[:3])]


def _session_files(source: Path, target: Path) -> dict[Path, Path]:
    """A recorded Claude session's main file and its subagents' files -> where each goes in `target`."""
    files = {source: target / source.name}
    files |= {
        path: target / path.relative_to(source.parent) for path in source.with_suffix("").rglob("*.jsonl")
    }
    return files


class _Watch:
    """The real `transcript-otel watch` of `home`, started and stopped (SIGINT) as a person
    or systemd does, its mirror `runs`, its state `watch.json`."""

    def __init__(self, tmp_path: Path, *options: str) -> None:
        self.home, self.runs, self.state = tmp_path / "home", tmp_path / "runs", tmp_path / "watch.json"
        self.home.mkdir(exist_ok=True)
        self._command = [*CLI, "watch", str(self.home), "--state", str(self.state), *options]
        self._process: subprocess.Popen[str] | None = None

    def start(self) -> None:
        env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(self.runs))
        self._process = subprocess.Popen(self._command, env=env, stdout=subprocess.PIPE, text=True)
        assert self._process.stdout is not None
        assert "following" in self._process.stdout.readline()

    def stop(self, how: signal.Signals = signal.SIGINT) -> None:
        assert self._process is not None
        self._process.send_signal(how)
        assert self._process.wait(60) == (-signal.SIGKILL if how == signal.SIGKILL else 0)
        self._process = None

    def write(self, lines: list[tuple[Path, bytes]]) -> None:
        """Appends `lines` to their files, then waits until the watch has exported them."""
        _append(lines)
        self.wait_exported({target for target, _ in lines})

    def wait_exported(self, files: set[Path]) -> None:
        """Waits until the watch has exported what `files` hold (its state says so: it keeps a
        position once the lines before it are written)."""
        sizes = {str(target): target.stat().st_size for target in files}
        _wait_for(lambda: all(self._exported_to(path) == size for path, size in sizes.items()))

    def _exported_to(self, path: str) -> int | None:
        try:
            position = saved_state(self.state)["files"].get(path)
        except (OSError, ValueError):
            return None
        return position["offset"] if position else None

    def run_ended(self) -> bool:
        return any(r["event"] == TranscriptEvent.STOP.value for r in self.records())

    def records(self) -> list[dict[str, Any]]:
        return [r for path in sorted(self.runs.glob("*.jsonl")) for r in read_records(path)]

    def run_files(self) -> list[Path]:
        return sorted(self.runs.glob("*.jsonl"))


def _append(lines: list[tuple[Path, bytes]]) -> None:
    """Each line appended to its file, one write each, as the CLIs write them."""
    for target, line in lines:
        target.parent.mkdir(parents=True, exist_ok=True)
        with target.open("ab") as out:
            out.write(line)


def _wait_for(condition: Callable[[], bool], timeout_s: float = 60.0) -> None:
    """Waits for `condition`, a minute at most (a busy machine only waits longer)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, "the watch did not export the lines written"
        time.sleep(0.05)


def _root_totals(records: list[dict[str, Any]]) -> tuple[int, int]:
    """What the runs' root spans say (`transcript.usage.*`), summed."""
    roots = [
        r["context"]["attributes"]
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and not r["context"].get("parent_span_id")
    ]
    return sum(a.get(RUN_INPUT, 0) for a in roots), sum(a.get(RUN_OUTPUT, 0) for a in roots)


def _runs_add_up(watch: _Watch, expected: tuple[int, int]) -> None:
    """Two runs; their chat spans, root spans and summaries add up to the CLI's own totals."""
    runs = watch.run_files()
    assert len(runs) == 2
    assert _chat_totals(watch.records()) == expected
    assert _root_totals(watch.records()) == expected
    summaries = [_summary_tokens(run) for run in runs]
    assert (sum(s[0] for s in summaries), sum(s[1] for s in summaries)) == expected


def test_a_claude_session_split_by_idle_counts_each_token_once(tmp_path: Path) -> None:
    """`--idle` ends the run between two prompts of a terminal session, which writes its cost
    line only as it is left (after the second): the second run holds its own turn's tokens,
    not the session's whole total again. Before: 2,900 / 34 against the CLI's 1,900 / 22."""
    source = _main_file("interactive_two_prompts")
    lines = _in_time_order({source: tmp_path / "home" / "project" / source.name})
    second_prompt = next(i for i, (_, line) in enumerate(lines) if b'"And now?"' in line) - 4
    watch = _Watch(tmp_path, "--idle", "1")
    watch.start()
    try:
        watch.write(lines[:second_prompt])
        _wait_for(watch.run_ended)  # idle: the first run ended
        watch.write(lines[second_prompt:])
    finally:
        watch.stop()
    _runs_add_up(watch, _claude_totals(source))


def test_a_watch_restarted_while_a_claude_subagent_runs_counts_each_token_once(tmp_path: Path) -> None:
    """SIGINT while a background subagent works, and a new start after it and the session
    ended: the run after the restart counts what came after, the session's cost line included,
    not what the first run counted (nor the subagent's last message twice, read with the
    main agent's cost line in one round). Before: chat spans 2,600 / 82 + 4,700 / 120,
    summaries 2,600 / 82 + 4,250 / 108, against the CLI's 4,250 / 108."""
    source = _main_file("background_subagent")
    files = _session_files(source, tmp_path / "home" / "project")
    lines = _in_time_order(files)
    subagent_call = next(i for i, (_, line) in enumerate(lines) if b"msg_scripted_0003" in line) + 1
    watch = _Watch(tmp_path)
    watch.start()
    try:
        watch.write(lines[:subagent_call])
    finally:
        watch.stop()
    _append(lines[subagent_call:])  # while no watch runs
    watch.start()
    try:
        watch.wait_exported(set(files.values()))
    finally:
        watch.stop()
    _runs_add_up(watch, _claude_totals(source))
    # The subagent's Bash call was made before the restart, its result came after: named.
    assert sorted(_tool_entries(watch.records())) == [
        ("tool_result", "toolu_agent_bg", "Agent"),
        ("tool_result", "toolu_sub_count_1", "Bash"),
        ("tool_use", "toolu_agent_bg", "Agent"),
        ("tool_use", "toolu_sub_count_1", "Bash"),
    ]


def _tool_entries(records: list[dict[str, Any]]) -> list[tuple[str, str | None, str | None]]:
    """Each tool call and result exported: its entry type, call id and tool name."""
    return [
        (r["context"]["entry_type"], *tool_identity(r["context"]["detail"]))
        for r in records
        if r["event"] == TranscriptEvent.ENTRY.value
        and r["context"]["entry_type"] in ("tool_use", "tool_result")
    ]


@pytest.mark.parametrize(
    "stopped_before",
    [b'"type":"CommandExecution"', b'"type":"function_call_output"'],
    ids=["before-the-typed-result", "before-the-history-output"],
)
def test_a_watch_restarted_in_the_middle_of_a_codex_turn_counts_each_token_once(
    stopped_before: bytes, tmp_path: Path
) -> None:
    """Stopped in the middle of a turn, after a command's call (or its typed result) and before
    the `token_count` that repeats the call's usage: the run after the restart goes on with the
    turn (its model's calls on a chat span of its own), counts no usage twice, and gives each
    call one result, named, and no second call. Before (stopped before the history output):
    chat spans 3,000 / 40 + 0 / 0, summaries 3,000 / 40 + 9,600 / 85 against the thread's
    9,600 / 85, and the command's output again as an unnamed result."""
    (rollout,) = codex_day("shell").glob("*.jsonl")
    lines = _in_time_order({rollout: tmp_path / "home" / "day" / rollout.name})
    stop = next(i for i, (_, line) in enumerate(lines) if stopped_before in line)
    watch = _Watch(tmp_path)
    for part in (lines[:stop], lines[stop:]):
        watch.start()
        try:
            watch.write(part)
        finally:
            watch.stop()
    _runs_add_up(watch, _codex_totals(rollout))
    calls = ["call_shell_1", "call_shell_2"]
    assert sorted(_tool_entries(watch.records())) == sorted(
        (kind, call, "codex:command") for call in calls for kind in ("tool_use", "tool_result")
    )


@pytest.mark.parametrize(
    "counted",
    [
        {},
        {"tokens": {"input_tokens": -1}, "cost_usd": 0.0, "report": None, "messages": []},
        {"tokens": {"input_tokens": True}, "cost_usd": 0.0, "report": None, "messages": []},
        {"tokens": {}, "cost_usd": float("nan"), "report": None, "messages": []},
        {"tokens": {}, "cost_usd": 0.0, "report": [1], "messages": []},
        {"tokens": {}, "cost_usd": 0.0, "report": None, "messages": [1]},
        {"tokens": {}, "cost_usd": 0.0, "report": None, "messages": [], "open_calls": {"main": [["a"]]}},
    ],
)
def test_what_a_claude_mapper_cannot_go_on_from_is_refused_and_changes_nothing(
    counted: dict[str, Any],
) -> None:
    """A state file edited by hand: the mapper says it cannot go on from it (the watch then
    goes on from the session's last cost line, as at a first start), and counts as before."""
    mapper = ClaudeSessionMapper()
    before = mapper.counted()
    assert not mapper.go_on(counted)
    assert mapper.counted() == before


@pytest.mark.parametrize(
    "counted",
    [
        {},
        {
            "usage_records": 1,
            "compaction_shown": False,
            "message_starts_turn": False,
            "calls": [],
            "answered": [],
        },
        {
            "usage_records": True,
            "compaction_shown": False,
            "message_starts_turn": False,
            "calls": [["a"]],
            "answered": [],
        },
        {
            "usage_records": True,
            "compaction_shown": False,
            "message_starts_turn": False,
            "calls": [],
            "answered": [""],
        },
    ],
)
def test_what_a_codex_mapper_cannot_go_on_from_is_refused_and_changes_nothing(
    counted: dict[str, Any],
) -> None:
    mapper = CodexRolloutMapper()
    before = mapper.counted()
    assert not mapper.go_on(counted)
    assert mapper.counted() == before


def test_a_subagent_file_read_again_from_its_start_counts_nothing_twice(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """A subagent's file replaced by a shorter copy is read again from its start, in a run of
    its own; the session's counts go on (the main file was not read again): the messages it
    holds again, and the cost line after, add nothing. Before: the chat spans 4,750 / 138 in
    all against the CLI's 4,250 / 108 (the subagent's first message counted again)."""
    from opentelemetry.sdk.trace import TracerProvider

    source = _main_file("background_subagent")
    (subagent,) = source.with_suffix("").rglob("*.jsonl")
    target = tmp_path / "home" / "project" / source.name
    copied = target.parent / subagent.relative_to(source.parent)
    copied.parent.mkdir(parents=True)
    lines = source.read_bytes().splitlines(keepends=True)
    cost = next(i for i, line in enumerate(lines) if COST_STATE in line)
    watcher = Watcher(
        [tmp_path / "home"],
        WatchState(tmp_path / "watch.json"),
        pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
        tracer=TracerProvider().get_tracer(__name__),
    )
    try:
        watcher.poll_once()
        target.write_bytes(b"".join(lines[:cost]))
        copied.write_bytes(subagent.read_bytes())
        watcher.poll_once()
        shorter = copied.with_name("shorter")
        shorter.write_bytes(b"".join(subagent.read_bytes().splitlines(keepends=True)[:14]))
        shorter.replace(copied)  # another file, holding fewer lines
        watcher.poll_once()
        with target.open("ab") as out:
            out.write(b"".join(lines[cost:]))
        watcher.poll_once()
    finally:
        watcher.close()
    records = [r for path in (tmp_path / "runs").glob("*.jsonl") for r in read_records(path)]
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 2
    assert _chat_totals(records) == _claude_totals(source)


@pytest.mark.parametrize("stopped_after", ["assistant", "last-prompt", "atis-latch"])
def test_a_compacted_session_restarted_after_its_last_answer_counts_each_token_once(
    stopped_after: str, tmp_path: Path
) -> None:
    """SIGINT after the last answer of a compacted session (its cost line, from the compaction,
    came before that answer) and a new start before the session's last cost line: the first
    run's summary counts the answer its cost line does not cover, the second what comes after.
    Before: summaries 2,900 / 34 + 0 / 0 against the CLI's 3,252 / 37 (the chat spans were
    right); the watch soak found it."""
    source = _main_file("compacted")
    files = _session_files(source, tmp_path / "home" / "project")
    lines = _in_time_order(files)
    # Stopped after the session's last line of that type: its last answer, or a line the CLI
    # writes after it and before its last cost line.
    at = 1 + max(i for i, (_, line) in enumerate(lines) if json.loads(line).get("type") == stopped_after)
    assert json.loads(lines[-1][1]).get("type") == "cost-state"
    watch = _Watch(tmp_path)
    for stretch in (lines[:at], lines[at:]):
        watch.start()
        try:
            watch.write(stretch)
        finally:
            watch.stop()
    _runs_add_up(watch, _claude_totals(source))


def _after_the_boundary() -> list[int]:
    """Each line of the recorded compacted session (in the order the CLI wrote them) from its
    compaction's boundary to the last before the cost line after it."""
    said = [json.loads(line) for _, line in _in_time_order({_main_file("compacted"): Path()})]
    boundary = next(i for i, line in enumerate(said) if line.get("subtype") == "compact_boundary")
    cost = next(i for i in range(boundary, len(said)) if said[i].get("type") == "cost-state")
    return list(range(boundary, cost))


@pytest.mark.parametrize("stopped_after", _after_the_boundary())
def test_a_watch_stopped_inside_a_compaction_counts_its_tokens_in_chat_spans(
    stopped_after: int, tmp_path: Path
) -> None:
    """SIGTERM (systemd's stop) after any line from a compaction's boundary up to the cost line
    that holds its model call (the terminal UI logs that call in the cost only), and a new start:
    the runs' chat spans, root spans and summaries add up to the CLI's totals. Before: the chat
    spans 1,252 / 13 against the CLI's 3,252 / 37 (the compaction's 2,000 / 24 on no chat span:
    the run after the restart had no turn open for it)."""
    source = _main_file("compacted")
    files = _session_files(source, tmp_path / "home" / "project")
    lines = _in_time_order(files)
    watch = _Watch(tmp_path)
    for stretch in (lines[: stopped_after + 1], lines[stopped_after + 1 :]):
        watch.start()
        try:
            watch.write(stretch)
        finally:
            watch.stop(signal.SIGTERM)
    _runs_add_up(watch, _claude_totals(source))


@pytest.mark.parametrize(
    ("scenario", "killed_after"),
    [
        ("background_subagent", b"msg_scripted_0003"),  # a subagent working, its call's span open
        ("interactive_two_prompts", b'"type":"assistant"'),  # the first answer, its turn open
        ("compacted", None),  # every line, the run open until idle
    ],
    ids=["subagent-working", "mid-turn", "all-written"],
)
def test_a_watch_killed_and_started_again_counts_each_token_once(
    scenario: str, killed_after: bytes | None, tmp_path: Path
) -> None:
    """SIGKILL once the lines written so far are exported and their positions kept: the killed
    process's root span and open chat spans are never exported; the run that takes the session
    over after the restart reports what they had counted, so the runs' chat spans, root spans and
    summaries add up to the CLI's totals. Before: chat spans 1,650 / 26 against the CLI's
    4,250 / 108 (a subagent working), 1,000 / 12 against 1,900 / 22 (mid-turn); every line
    written before the kill: no run after the restart, the killed run's totals in no root span."""
    source = _main_file(scenario)
    files = _session_files(source, tmp_path / "home" / "project")
    lines = _in_time_order(files)
    at = (
        len(lines)
        if killed_after is None
        else 1 + next(i for i, (_, line) in enumerate(lines) if killed_after in line)
    )
    watch = _Watch(tmp_path)
    watch.start()
    try:
        watch.write(lines[:at])
    finally:
        watch.stop(signal.SIGKILL)
    _append(lines[at:])  # while no watch runs
    watch.start()
    try:
        watch.wait_exported(set(files.values()))
    finally:
        watch.stop(signal.SIGTERM)
    _runs_add_up(watch, _claude_totals(source))
    # The run taking over begins where the killed one got to (its records then at their lines'
    # times), not at the restart.
    killed, taking_over = sorted(
        (list(read_records(run)) for run in watch.run_files()),
        key=lambda records: any(r["event"] == TranscriptEvent.STOP.value for r in records),
    )
    assert taking_over[0]["timestamp"] == max(r["timestamp"] for r in killed)
