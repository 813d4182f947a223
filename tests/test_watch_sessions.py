"""`transcript-otel watch`: a session log written as the real CLIs wrote it (replayed here line by
line from the recorded fixtures, some lines cut in two) is exported as it grows: each line once,
none left out, across restarts, rotation and truncation, with the same entries an import of the
whole file gives.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.mappings.claude_session import ClaudeSessionMapper
from transcript_otel.mappings.codex_rollout import CodexRolloutMapper
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.reading.text import entry_text
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState, saved_state
from transcript_otel.sinks import JsonlMirror

from inotify_watches import assert_told_by_the_kernel, inotify_watches, require_inotify
from loopback import subprocess_env
from session_fixtures import SESSIONS, codex_day

CLAUDE_PROJECT = SESSIONS / "claude_code/tools/home/.claude/projects/-scratch-work"
CODEX_DAY = codex_day("shell")
SUBAGENT_DAY = codex_day("subagent")
CLI = [sys.executable, "-m", "transcript_otel.cli"]


def _session_file(directory: Path) -> Path:
    (path,) = directory.glob("*.jsonl")
    return path


def _said(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (r["context"]["entry_type"], entry_text(r["context"]["entry_type"], r["context"]["detail"]))
        for r in records
        if r["event"] == TranscriptEvent.ENTRY.value
    ]


def _mirror(directory: Path) -> list[dict[str, Any]]:
    """Every record of every run in the mirror, runs in the order they began (a run's file the
    watch has just made holds no record yet: read while it runs, it is passed over)."""
    runs = [records for path in directory.glob("*.jsonl") if (records := list(read_records(path)))]
    return [record for run in sorted(runs, key=lambda run: run[0]["timestamp"]) for record in run]


def _imported_records(source: Path, tmp_path: Path) -> list[dict[str, Any]]:
    (session,) = find_sessions([source])
    return [
        record
        for record in read_records(import_session(session, tmp_path / "imported").path)
        if record["event"] == TranscriptEvent.ENTRY.value
    ]


def _imported(source: Path, tmp_path: Path) -> list[tuple[str, str]]:
    return _said(_imported_records(source, tmp_path))


@pytest.fixture(params=[True, False], ids=["kernel-changes", "polling"])
def watch(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline], request: pytest.FixtureRequest
) -> Iterator[Callable[..., Watcher]]:
    """Watchers of `tmp_path/home`, writing to the mirror `tmp_path/runs`, keeping their state in
    `tmp_path/watch.json` (one after the other: a restart); told what changed by the kernel
    (inotify), or polling as where it cannot."""
    made: list[Watcher] = []
    if request.param:
        require_inotify()

    def start(**options: Any) -> Watcher:
        pipeline = make_pipeline([JsonlMirror(tmp_path / "runs")])
        from opentelemetry import trace

        before = set(inotify_watches()) if request.param else set()
        watcher = Watcher(
            [tmp_path / "home"],
            WatchState(tmp_path / "watch.json"),
            pipeline=pipeline,
            tracer=trace.get_tracer(__name__),
            kernel_changes=request.param,
            **options,
        )
        made.append(watcher)
        if request.param:
            assert_told_by_the_kernel(before, tmp_path / "home")
        return watcher

    yield start
    for watcher in made:
        watcher.close()


def _copy_in_steps(source: Path, target: Path, steps: int) -> Iterator[None]:
    """Writes `source` to `target` in `steps` appends, each cut in the middle of a line."""
    data = source.read_bytes()
    cuts = [len(data) * step // steps for step in range(1, steps + 1)]
    written = 0
    target.parent.mkdir(parents=True, exist_ok=True)
    for cut in cuts:
        with target.open("ab") as out:
            out.write(data[written:cut])
        written = cut
        yield


@pytest.mark.parametrize("source", [CLAUDE_PROJECT, CODEX_DAY], ids=["claude_code", "codex"])
def test_a_growing_session_is_exported_line_by_line_as_an_import_gives_it(
    source: Path, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    (tmp_path / "home").mkdir()
    watcher = watch()
    target = tmp_path / "home" / "project" / _session_file(source).name
    for _ in _copy_in_steps(_session_file(source), target, steps=7):
        watcher.poll_once()
    watcher.close()
    records = _mirror(tmp_path / "runs")
    assert _said(records) == _imported(source, tmp_path)
    assert [r["event"] for r in records].count(TranscriptEvent.START.value) == 1


@pytest.mark.parametrize(
    ("source", "mapper"),
    [(CLAUDE_PROJECT, ClaudeSessionMapper), (CODEX_DAY, CodexRolloutMapper)],
    ids=["claude_code", "codex"],
)
def test_a_line_our_mapping_fails_on_is_kept_and_the_rest_is_exported(
    source: Path, mapper: type[Any], tmp_path: Path, watch: Callable[..., Watcher], monkeypatch: Any
) -> None:
    """A bug of ours on one line (here: the mapping raises on the line of the first tool result)
    loses nothing else: watch and import go on past it, the line is kept whole as an `unknown`
    entry that says why, and a `transcript.error` says it too. (Codex writes a command's result
    twice: its typed event still gives the `tool_result`.)"""
    clean = _imported_records(source, tmp_path / "clean")
    kinds = [r["context"]["entry_type"] for r in clean]
    failing = kinds.index("tool_result")
    line = clean[failing]["context"]["raw"]
    mapped = mapper.line

    def fails_on_the_line(self: Any, text: bytes, *rest: Any) -> Any:
        if text == line.encode():
            raise RuntimeError("a bug of ours")
        return mapped(self, text, *rest)

    monkeypatch.setattr(mapper, "line", fails_on_the_line)
    (tmp_path / "home").mkdir()
    watcher = watch()
    for _ in _copy_in_steps(_session_file(source), tmp_path / "home" / "p" / _session_file(source).name, 5):
        watcher.poll_once()
    watcher.close()
    why = "could not map a session line: RuntimeError: a bug of ours"
    for records in (_mirror(tmp_path / "runs"), _imported_records(source, tmp_path / "failing")):
        entries = [r["context"] for r in records if r["event"] == TranscriptEvent.ENTRY.value]
        assert [e["entry_type"] for e in entries][failing] == "unknown"
        others = [e["entry_type"] for e in entries[:failing] + entries[failing + 1 :]]
        # All the other lines say; Codex tells a command's end again in an event of its own.
        assert others == (kinds if mapper is CodexRolloutMapper else kinds[:failing] + kinds[failing + 1 :])
        assert entries[failing]["raw"] == line
        assert entries[failing]["detail"] == {"mapping_error": why}
    errors = [r for r in _mirror(tmp_path / "runs") if r["event"] == TranscriptEvent.ERROR.value]
    assert [r["context"]["error"] for r in errors] == [why]


@pytest.mark.parametrize(
    ("folder", "target"),
    [
        (str(SUBAGENT_DAY.relative_to(SESSIONS)), str(SUBAGENT_DAY.relative_to(SUBAGENT_DAY.parents[3]))),
        ("claude_code/v2.0.32_tools/home/.claude/projects/-scratch-work", "projects/-scratch-work"),
    ],
    ids=["codex", "claude_code_2.0"],
)
@pytest.mark.parametrize("first_line_in", [1, 3], ids=["first-line-whole", "first-line-in-parts"])
def test_a_subagents_file_beside_its_session_is_watched_as_part_of_it(
    folder: str, target: str, first_line_in: int, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A subagent's own file (a Codex subagent thread's rollout, a Claude Code 2.0 `agent-*.jsonl`)
    appears while the session's grows: its lines go to the session's run, as the import of the
    files gives them. Its first line says whose it is: a file made empty, or whose first line is
    seen part-written, is no session until that line is whole (taken for a session of its own,
    it would write a run under the session's run id)."""
    day = SESSIONS / folder
    root, *children = sorted(day.glob("*.jsonl"), key=lambda path: path.stat().st_size, reverse=True)
    (tmp_path / "home").mkdir()
    watcher = watch()
    copied = tmp_path / "home" / target
    growing = _copy_in_steps(root, copied / root.name, 4)
    next(growing)
    watcher.poll_once()
    first_lines = {child: child.read_bytes().splitlines(keepends=True)[0] for child in children}
    for child in children:
        (copied / child.name).touch()  # made before its first line is written
    watcher.poll_once()
    for part in range(first_line_in):
        for child, first_line in first_lines.items():
            cut = len(first_line) * part // first_line_in, len(first_line) * (part + 1) // first_line_in
            with (copied / child.name).open("ab") as out:
                out.write(first_line[cut[0] : cut[1]])
        watcher.poll_once()
    for _ in growing:
        watcher.poll_once()
    for child, first_line in first_lines.items():
        with (copied / child.name).open("ab") as out:
            out.write(child.read_bytes()[len(first_line) :])
    watcher.poll_once()
    watcher.close()
    records = _mirror(tmp_path / "runs")
    assert [r["event"] for r in records].count(TranscriptEvent.START.value) == 1
    sources = {r["context"]["source"] for r in records if r["event"] == TranscriptEvent.ENTRY.value}
    assert sources == {r["context"]["source"] for r in _imported_records(day, tmp_path)}
    assert len(sources) == 1 + len(children)  # main and each subagent
    assert sorted(_said(records)) == sorted(_imported(day, tmp_path))


def test_a_restart_goes_on_where_it_stopped_with_no_line_twice_or_left_out(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    (tmp_path / "home").mkdir()
    target = tmp_path / "home" / "project" / _session_file(CLAUDE_PROJECT).name
    steps = _copy_in_steps(_session_file(CLAUDE_PROJECT), target, steps=6)
    first = watch()
    for _ in range(3):
        next(steps)
        first.poll_once()
    first.close()
    second = watch()  # the same state file: it goes on
    for _ in steps:
        second.poll_once()
    second.close()
    records = _mirror(tmp_path / "runs")
    assert _said(records) == _imported(CLAUDE_PROJECT, tmp_path)
    # Two runs of the session, one per watch, with different ids.
    starts = [r for r in records if r["event"] == TranscriptEvent.START.value]
    assert len({r["context"]["run_id"] for r in starts}) == 2


def test_at_its_first_start_a_watch_takes_sessions_up_from_their_end(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    target = tmp_path / "home" / "project" / _session_file(CODEX_DAY).name
    target.parent.mkdir(parents=True)
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:-3]))  # its past: left to `import`
    watcher = watch()
    assert watcher.poll_once() == 0
    with target.open("ab") as out:
        out.write(b"".join(lines[-3:]))
    assert watcher.poll_once() == 3


def test_at_its_first_start_a_line_still_being_written_is_taken_whole_once_it_is(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    target = tmp_path / "home" / "project" / _session_file(CODEX_DAY).name
    target.parent.mkdir(parents=True)
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:-3]) + lines[-3][:10])  # the CLI is writing a line
    watcher = watch()
    assert watcher.poll_once() == 0
    with target.open("ab") as out:
        out.write(lines[-3][10:] + b"".join(lines[-2:]))
    assert watcher.poll_once() == 3
    watcher.close()
    said = _said(_mirror(tmp_path / "runs"))  # what the import gives for those lines, nothing unreadable
    assert said
    assert said == _imported(CODEX_DAY, tmp_path)[-len(said) :]


def _written_anew(target: Path, data: bytes) -> None:
    """`target` replaced by a file (another inode) holding `data`, as a rewrite or a copy put back does."""
    written = target.with_name("new")
    written.write_bytes(data)
    os.replace(written, target)


def _rewritten(lines: list[bytes]) -> bytes:
    """The same lines written otherwise (as `codex migrate-rollouts` rewrites a rollout's)."""
    return b"".join(line.replace(b'":', b'": ') for line in lines)


def test_a_rewritten_file_goes_on_after_the_lines_read_and_a_shorter_one_from_its_start(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A session file is its session's log (its name says whose): replaced by one holding at
    least the lines read (a copy put back, `codex migrate-rollouts` rewriting an old rollout),
    it goes on after them, none exported twice; replaced by one holding fewer, or truncated,
    it is another record, read from its start in a run of its own."""
    (tmp_path / "home").mkdir()
    target = tmp_path / "home" / "project" / _session_file(CODEX_DAY).name
    target.parent.mkdir()
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    watcher = watch()
    target.write_bytes(b"".join(lines[:-2]))
    assert watcher.poll_once() == len(lines) - 2
    _written_anew(target, b"".join(lines[:-2]))
    assert watcher.poll_once() == 0  # the same lines
    _written_anew(target, _rewritten(lines))  # and two more
    assert watcher.poll_once() == 2
    half = b"".join(lines[: len(lines) // 2])
    _written_anew(target, half)  # fewer lines: another record
    assert watcher.poll_once() == len(lines) // 2
    target.write_bytes(half[: len(half) // 2].rsplit(b"\n", 1)[0] + b"\n")  # shorter: truncated
    assert watcher.poll_once() == len(half[: len(half) // 2].rsplit(b"\n", 1)[0].splitlines())
    watcher.close()
    records = _mirror(tmp_path / "runs")
    starts = [r for r in records if r["event"] == TranscriptEvent.START.value]
    assert len({r["context"]["run_id"] for r in starts}) == 3
    first_run = records[
        : next(i for i, r in enumerate(records) if r["event"] == TranscriptEvent.STOP.value) + 1
    ]
    assert _said(first_run) == _imported(CODEX_DAY, tmp_path)  # every line once


@pytest.mark.parametrize("first_start", [False, True], ids=["restart", "first-start"])
def test_a_file_rewritten_while_no_watch_ran_goes_on_after_the_lines_read(
    first_start: bool, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """`codex migrate-rollouts --apply` run while the watch was stopped (or before its first
    start took the file up at its end): the lines before are not exported again."""
    (tmp_path / "home").mkdir()
    target = tmp_path / "home" / "project" / _session_file(CODEX_DAY).name
    target.parent.mkdir()
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    if first_start:
        target.write_bytes(b"".join(lines[:-2]))
        watcher = watch()
    else:
        watcher = watch()
        target.write_bytes(b"".join(lines[:-2]))
        assert watcher.poll_once() == len(lines) - 2
        watcher.close()
        watcher = watch()
    _written_anew(target, _rewritten(lines))
    assert watcher.poll_once() == 2


@pytest.mark.parametrize("link", ["loop", "aliased-folder"])
def test_a_linked_folder_is_not_gone_into(link: str, tmp_path: Path, watch: Callable[..., Watcher]) -> None:
    """`proj/loop -> ..` (each line was exported 41 times: proj/loop/proj/loop/...), a folder
    linked under another name (its sessions twice): only the folders themselves are watched."""
    project = tmp_path / "home" / "proj"
    project.mkdir(parents=True)
    watcher = watch()
    if link == "loop":
        (project / "loop").symlink_to("..")
    else:
        (tmp_path / "home" / "alias").symlink_to("proj")
    for _ in _copy_in_steps(_session_file(CLAUDE_PROJECT), project / _session_file(CLAUDE_PROJECT).name, 3):
        watcher.poll_once()
    watcher.close()
    assert _said(_mirror(tmp_path / "runs")) == _imported(CLAUDE_PROJECT, tmp_path)
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 1
    assert _state_files(tmp_path) == {str(project / _session_file(CLAUDE_PROJECT).name)}


@pytest.mark.parametrize("link", ["symlink", "hard-link"])
def test_a_session_file_under_two_paths_is_followed_once(
    link: str, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A session file linked, or hard-linked, under another session's name in another folder is
    one file (one device and inode): its lines are exported once, whichever path they are
    written through (polling, each path was a session of its own, every line exported twice)."""
    project, other = tmp_path / "home" / "proj", tmp_path / "home" / "other"
    project.mkdir(parents=True)
    other.mkdir()
    source = _session_file(CLAUDE_PROJECT)
    target = project / source.name
    target.touch()
    alias = other / "0b6f1d2e-1111-4222-8333-944445555666.jsonl"
    if link == "symlink":
        alias.symlink_to(target)
    else:
        os.link(target, alias)
    watcher = watch()
    lines = source.read_bytes().splitlines(keepends=True)
    for number, line in enumerate(lines):
        with (target if number % 2 else alias).open("ab") as out:
            out.write(line)
        watcher.poll_once()
    watcher.close()
    assert _said(_mirror(tmp_path / "runs")) == _imported(CLAUDE_PROJECT, tmp_path)
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 1


def test_new_sessions_and_subagents_are_found_in_new_directories(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    (tmp_path / "home").mkdir()
    watcher = watch()
    project = SESSIONS / "claude_code/parallel_subagents/home/.claude/projects/-scratch-work"
    main = _session_file(project)
    target = tmp_path / "home" / "a-new-project" / main.name
    target.parent.mkdir()
    target.write_bytes(main.read_bytes())
    assert watcher.poll_once() == len(main.read_bytes().splitlines())
    subagents = main.with_suffix("") / "subagents"
    copied = target.with_suffix("") / "subagents"
    copied.mkdir(parents=True)
    sub_lines = 0
    for path in subagents.glob("agent-*.jsonl"):
        (copied / path.name).write_bytes(path.read_bytes())
        sub_lines += len(path.read_bytes().splitlines())
    assert watcher.poll_once() == sub_lines
    watcher.close()
    sources = {r["context"]["source"] for r in _mirror(tmp_path / "runs") if r["event"] == "transcript.entry"}
    assert len([s for s in sources if s.startswith("subagent:")]) == 2


def test_an_idle_session_has_its_run_ended(tmp_path: Path, watch: Callable[..., Watcher]) -> None:
    (tmp_path / "home").mkdir()
    watcher = watch(idle_s=0.0)
    target = tmp_path / "home" / "project" / _session_file(CODEX_DAY).name
    target.parent.mkdir()
    target.write_bytes(_session_file(CODEX_DAY).read_bytes())
    assert watcher.poll_once() > 0
    time.sleep(0.01)  # past an idle time of 0
    watcher.poll_once()
    watcher._pipeline.flush(10.0)
    events = [r["event"] for r in _mirror(tmp_path / "runs")]
    assert events[-1] == TranscriptEvent.STOP.value


def _state_files(tmp_path: Path) -> set[str]:
    return set(saved_state(tmp_path / "watch.json")["files"])


def test_a_deleted_session_is_forgotten_and_the_others_go_on(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """The CLIs delete old sessions (Claude Code after `cleanupPeriodDays`): a deleted session's
    run ends, the state file stops naming its files (during a run and across a restart), and a
    watch that runs for months does not hold every session it ever saw."""
    (tmp_path / "home").mkdir()
    watcher = watch()
    codex = tmp_path / "home" / "codex" / _session_file(CODEX_DAY).name
    claude = tmp_path / "home" / "claude" / _session_file(CLAUDE_PROJECT).name
    for source, target in ((CODEX_DAY, codex), (CLAUDE_PROJECT, claude)):
        target.parent.mkdir()
        target.write_bytes(_session_file(source).read_bytes())
    assert watcher.poll_once() > 0
    assert _state_files(tmp_path) == {str(codex), str(claude)}
    codex.unlink()
    assert watcher.poll_once() == 0
    assert _state_files(tmp_path) == {str(claude)}
    runs = {r["context"]["session_id"]: r["event"] for r in _mirror(tmp_path / "runs")}
    codex_session = next(iter(session for session in runs if session in codex.name))
    assert runs[codex_session] == TranscriptEvent.STOP.value  # its run ended
    lines = _session_file(CLAUDE_PROJECT).read_bytes().splitlines(keepends=True)
    with claude.open("ab") as out:
        out.write(lines[-1])  # the other session goes on
    assert watcher.poll_once() == 1
    watcher.close()
    # Deleted while no watch ran: gone from the state at the next start.
    claude.unlink()
    watch().close()
    assert _state_files(tmp_path) == set()


@pytest.mark.parametrize("restart", [False, True], ids=["running", "restarted"])
def test_a_session_moved_away_and_back_goes_on_where_it_was(
    restart: bool, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """`codex archive` moves a rollout out of the sessions folder and `codex unarchive` back, to
    the same path with the same inode (measured with 0.171.0): back, the session goes on where
    it was, its lines exported once, while the watch ran or across a restart."""
    target = tmp_path / "home" / "2026" / _session_file(CODEX_DAY).name
    archived = tmp_path / "archived" / target.name
    archived.parent.mkdir()
    (tmp_path / "home").mkdir()
    watcher = watch()
    steps = _copy_in_steps(_session_file(CODEX_DAY), target, steps=2)
    next(steps)
    watcher.poll_once()
    target.rename(archived)
    watcher.poll_once()
    assert _state_files(tmp_path) == set()  # forgotten: no longer followed
    if restart:
        watcher.close()
        watcher = watch()
    archived.rename(target)
    next(steps)
    watcher.poll_once()
    watcher.close()
    assert _said(_mirror(tmp_path / "runs")) == _imported(CODEX_DAY, tmp_path)


def test_a_shorter_file_back_at_its_path_is_read_from_its_start(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A file at a gone file's path is that session's log again (its name is the session's):
    it goes on where the gone one was unless it is shorter, then it is another (rewritten)."""
    target = tmp_path / "home" / "2026" / _session_file(CODEX_DAY).name
    target.parent.mkdir(parents=True)
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    target.write_bytes(b"".join(lines[:5]))
    watcher = watch()
    with target.open("ab") as out:
        out.write(b"".join(lines[5:]))
    watcher.poll_once()
    target.unlink()
    watcher.poll_once()
    target.write_bytes(b"".join(lines[:4]))
    assert watcher.poll_once() == 4


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float = 60.0) -> None:
    """Waits for `condition` (no timing asserted: a slow machine only waits longer)."""
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"not within {timeout_s} s: {what}"
        time.sleep(0.05)


def test_the_watch_command_exports_live_and_goes_on_after_sigterm(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    runs = tmp_path / "runs"
    env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(runs))
    command = [*CLI, "watch", str(home), "--state", str(tmp_path / "watch.json")]
    source = codex_day("resumed")
    target = home / "project" / _session_file(source).name
    lines = _session_file(source).read_bytes().splitlines(keepends=True)
    # Stopped between the session's two turns (`codex exec` and its `resume`): the run after the
    # restart holds the second turn whole, as the import does.
    half = max(i for i, line in enumerate(lines) if b'"task_started"' in line)

    def entries() -> int:
        return (
            sum(1 for r in _mirror(runs) if r["event"] == TranscriptEvent.ENTRY.value) if runs.exists() else 0
        )

    for part in (lines[:half], lines[half:]):
        watcher = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
        assert watcher.stdout is not None
        assert "following" in watcher.stdout.readline()
        before = entries()
        target.parent.mkdir(exist_ok=True)
        with target.open("ab") as out:
            out.write(b"".join(part))
        _wait_for(lambda before=before: entries() > before, "the appended lines exported")  # type: ignore[misc]
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(timeout=60) == 0, watcher.stderr.read() if watcher.stderr else ""
    assert _said(_mirror(runs)) == _imported(source, tmp_path)


def _chat_tokens_and_cost(records: list[dict[str, Any]]) -> tuple[int, float]:
    chats = [
        r["context"]["attributes"]
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and r["context"]["name"].startswith("chat")
    ]
    tokens = sum(a.get("gen_ai.usage.input_tokens", 0) for a in chats)
    return tokens, round(sum(a.get("transcript.usage.cost_usd", 0.0) for a in chats), 9)


def test_a_forked_session_is_watched_as_its_import_gives_it(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A fork (`--fork-session`) begins its file with a copy of the other session's lines, then
    goes on: the watch gives the runs the import gives, the copy in neither fork's tokens nor
    cost. The CLI writes two lines of the fork's file, then the copy at once: the fork is told
    apart when the first line of the copy is read, not when the file is first seen."""
    project = SESSIONS / "claude_code/forked/home/.claude/projects/-scratch-work"
    fork, parent = sorted(project.glob("*.jsonl"), key=lambda path: path.stat().st_size, reverse=True)
    target = tmp_path / "home" / "project"
    target.mkdir(parents=True)
    watcher = watch()
    watcher.poll_once()
    (target / parent.name).write_bytes(parent.read_bytes())
    watcher.poll_once()
    lines = fork.read_bytes().splitlines(keepends=True)
    copied = max(i for i, line in enumerate(lines) if b"requestSessionId" in line) + 2  # and its attachment
    # As the CLI writes it (watched every 0.5 ms): two lines of its own, then the copy at once.
    for part in (lines[:2], lines[2:copied]):
        with (target / fork.name).open("ab") as out:
            out.write(b"".join(part))
        watcher.poll_once()
    for line in lines[copied:]:
        with (target / fork.name).open("ab") as out:
            out.write(line)
        watcher.poll_once()
    watcher.close()
    watched = [list(read_records(path)) for path in (tmp_path / "runs").glob("*.jsonl")]
    imported = [
        list(read_records(import_session(session, tmp_path / "imported" / session.path.stem).path))
        for session in find_sessions([project])
    ]

    def runs(records: list[list[dict[str, Any]]]) -> list[tuple[list[tuple[str, str]], int, float]]:
        """Each run's entries, input tokens and cost."""
        digests = [(_said(run), RunDigest.of(run)) for run in records]
        return sorted((said, d.tokens.get("input", 0), round(d.cost_usd, 9)) for said, d in digests)

    assert runs(watched) == runs(imported)
    assert [(tokens, cost) for _, tokens, cost in runs(imported)] == [(1000, 0.00424), (900, 0.0038)]


def test_a_session_taken_up_part_way_counts_only_what_comes_after(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """Claude's `cost-state` lines are running totals: a watch restarted between the two runs of
    a resumed session counts the second run's tokens and cost once, not the session's again."""
    from opentelemetry.sdk.trace import TracerProvider

    project = SESSIONS / "claude_code/resumed/home/.claude/projects/-scratch-work"
    lines = _session_file(project).read_bytes().splitlines(keepends=True)
    first_run_end = next(i for i, line in enumerate(lines) if b'"type":"cost-state"' in line) + 1
    target = tmp_path / "home" / "project" / _session_file(project).name
    target.parent.mkdir(parents=True)
    tracer = TracerProvider().get_tracer(__name__)  # spans that record, for their records
    for part in (lines[:first_run_end], lines[first_run_end:]):
        watcher = Watcher(
            [tmp_path / "home"],
            WatchState(tmp_path / "watch.json"),
            pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
            tracer=tracer,
        )
        with target.open("ab") as out:
            out.write(b"".join(part))
        watcher.poll_once()
        watcher.close()
    (session,) = find_sessions([project])
    imported = list(read_records(import_session(session, tmp_path / "imported").path))
    assert _chat_tokens_and_cost(_mirror(tmp_path / "runs")) == _chat_tokens_and_cost(imported)
    # Each run's own totals too (its root, `summary`): together, the session's once.
    watched = [RunDigest.of(list(read_records(path))) for path in (tmp_path / "runs").glob("*.jsonl")]
    assert sorted(digest.tokens["input"] for digest in watched) == [900, 1000]
    assert sum(digest.cost_usd for digest in watched) == pytest.approx(RunDigest.of(imported).cost_usd)


def test_a_session_file_replaced_by_a_shorter_one_is_counted_again_from_its_start(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> None:
    """A session file replaced by one holding fewer lines (a copy of it from before) is a record
    read from its start: its run counts all of that file's tokens and cost, not from where the
    old file ended."""
    from opentelemetry.sdk.trace import TracerProvider

    project = SESSIONS / "claude_code/resumed/home/.claude/projects/-scratch-work"
    lines = _session_file(project).read_bytes().splitlines(keepends=True)
    earlier = b"".join(lines[: len(lines) // 2])
    target = tmp_path / "home" / "project" / _session_file(project).name
    target.parent.mkdir(parents=True)
    runs = tmp_path / "runs"
    watcher = Watcher(
        [tmp_path / "home"],
        WatchState(tmp_path / "watch.json"),
        pipeline=make_pipeline([JsonlMirror(runs)]),
        tracer=TracerProvider().get_tracer(__name__),
    )
    target.write_bytes(b"".join(lines))
    watcher.poll_once()
    _written_anew(target, earlier)
    watcher.poll_once()
    watcher.close()
    alone = tmp_path / "earlier" / target.name
    alone.parent.mkdir()
    alone.write_bytes(earlier)
    (session,) = find_sessions([alone])
    whole = _chat_tokens_and_cost(list(read_records(import_session(session, tmp_path / "imported").path)))
    records = _mirror(runs)
    starts = [i for i, r in enumerate(records) if r["event"] == TranscriptEvent.START.value]
    assert len(starts) == 2
    assert _chat_tokens_and_cost(records[starts[1] :]) == whole


# While a test counts: each path opened, and each folder listed (`sys.addaudithook`: a hook
# stays for the process, so it records only while a test asks).
_LOOKED_AT: list[tuple[str, str]] | None = None


def _record_looks(event: str, args: tuple[Any, ...]) -> None:
    if _LOOKED_AT is not None and event in ("open", "os.scandir") and isinstance(args[0], str | Path):
        _LOOKED_AT.append((event, str(args[0])))


sys.addaudithook(_record_looks)


def test_an_empty_session_file_is_not_read_again_every_round(
    tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A file just made, empty, is not known to be a session until its first line is whole; one
    that stays empty (`touch rollout-....jsonl`) was read, and its folder listed, every round (an
    idle watch's CPU went from 1 % to 5 %). It is looked at again once it changes."""
    global _LOOKED_AT
    day = tmp_path / "home" / "2026" / "11" / "27"
    day.mkdir(parents=True)
    empty = day / _session_file(CODEX_DAY).name
    empty.touch()
    watcher = watch()
    _LOOKED_AT = []
    try:
        for _ in range(40):
            watcher.poll_once()
        looked = list(_LOOKED_AT)
    finally:
        _LOOKED_AT = None
    assert looked.count(("open", str(empty))) <= 1
    assert looked.count(("os.scandir", str(day))) <= 1
    empty.write_bytes(_session_file(CODEX_DAY).read_bytes())
    assert watcher.poll_once() > 0
    watcher.close()
    assert _said(_mirror(tmp_path / "runs")) == _imported(CODEX_DAY, tmp_path)


def _watched_while_copied(watcher: Watcher, source: Path, target: Path) -> None:
    for _ in _copy_in_steps(source, target, steps=3):
        watcher.poll_once()


@pytest.mark.parametrize("source", [CLAUDE_PROJECT, CODEX_DAY], ids=["claude_code", "codex"])
def test_a_line_with_bytes_that_are_not_utf8_is_watched_as_its_import_gives_it(
    source: Path, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A prompt holding a byte that is not UTF-8 is the prompt, U+FFFD for the byte, as `import`
    reads it (a Claude one was an `unknown` entry), and the watch says so once for the file."""
    broken = tmp_path / "broken" / _session_file(source).name
    broken.parent.mkdir()
    broken.write_bytes(_session_file(source).read_bytes().replace(b"please do", b"pl\xe9ase do"))
    (tmp_path / "home").mkdir()
    watcher = watch()
    target = tmp_path / "home" / "project" / broken.name
    with pytest.warns(TranscriptReadWarning, match="not UTF-8") as warned:
        _watched_while_copied(watcher, broken, target)
    assert sum("not UTF-8" in str(warning.message) for warning in warned) == 1
    watcher.close()
    said = _said(_mirror(tmp_path / "runs"))
    assert any(kind == "user_message" and text.endswith(": pl\ufffdase do the task.") for kind, text in said)
    assert said == _imported(broken.parent, tmp_path)


def _runs(records: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The records of each run (each begins with its start record; two runs of a session that
    began at one time share a file, one after the other), the run with fewer records first (runs
    that began at one time are in no certain order in the mirror)."""
    runs: list[list[dict[str, Any]]] = []
    for record in records:
        if record["event"] == TranscriptEvent.START.value:
            runs.append([])
        runs[-1].append(record)
    return sorted(runs, key=len)


@pytest.mark.parametrize("stopped", [False, True], ids=["between-polls", "while-no-watch-ran"])
def test_a_file_truncated_and_written_longer_is_read_again_from_its_start(
    stopped: bool, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """Truncated and written anew in place (the same inode), longer than where it was read to:
    it was read on from that byte (a fragment of a line exported as an `unknown` entry, the
    lines written anew before it lost). The bytes before that byte changed (as the state kept
    them, for a watch started again): it is read again from its start, a run of its own, and
    the watch says so."""
    target = tmp_path / "home" / "2026" / _session_file(CODEX_DAY).name
    target.parent.mkdir(parents=True)
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    watcher = watch()
    target.write_bytes(b"".join(lines[:5]))
    assert watcher.poll_once() == 5
    inode = target.stat().st_ino
    if stopped:  # (another watch: what it knows of the file is the state's)
        watcher.close()
        watcher = watch()
    target.write_bytes(_rewritten(lines))  # (O_TRUNC: the same file)
    assert target.stat().st_ino == inode
    with pytest.warns(TranscriptReadWarning, match="written anew in place") as warned:
        gained = watcher.poll_once()
    assert gained == len(lines)
    assert len(warned) == 1
    watcher.close()
    first, again = _runs(_mirror(tmp_path / "runs"))
    assert _said(first) == _said(_imported_records(CODEX_DAY, tmp_path))[: len(_said(first))]
    assert _said(again) == _imported(CODEX_DAY, tmp_path)  # whole: no fragment, no line lost


@pytest.mark.parametrize("source", [CLAUDE_PROJECT, CODEX_DAY], ids=["claude_code", "codex"])
@pytest.mark.parametrize("stopped", [False, True], ids=["between-polls", "while-no-watch-ran"])
def test_a_file_replaced_by_another_sessions_longer_file_is_that_sessions_run(
    stopped: bool, source: Path, tmp_path: Path, watch: Callable[..., Watcher]
) -> None:
    """A session's file replaced by another session's longer file (another inode, holding more
    lines than were read) had that session's lines after the first ones appended to the old
    run. Its first lines name another session: it is read from its start, a run of that
    session's own, and the watch says so."""
    original = _session_file(source)
    session_id = original.stem[-36:]
    other_id = f"{session_id[:-2]}99"
    other = tmp_path / "other" / original.name.replace(session_id, other_id)
    other.parent.mkdir()
    other.write_bytes(original.read_bytes().replace(session_id.encode(), other_id.encode()))
    target = tmp_path / "home" / "2026" / original.name
    target.parent.mkdir(parents=True)
    lines = original.read_bytes().splitlines(keepends=True)
    watcher = watch()
    target.write_bytes(b"".join(lines[:5]))
    assert watcher.poll_once() == 5
    if stopped:  # (another watch: what it knows of the file is the state's)
        watcher.close()
        watcher = watch()
    _written_anew(target, other.read_bytes())
    with pytest.warns(TranscriptReadWarning, match=f"replaced by another session's file \\({other_id}"):
        gained = watcher.poll_once()
    assert gained == len(lines)
    watcher.close()
    first, replaced = _runs(_mirror(tmp_path / "runs"))
    starts = [run[0]["context"] for run in (first, replaced)]
    assert [start["session_id"] for start in starts] == [session_id, other_id]
    assert _said(first) == _imported(source, tmp_path)[: len(_said(first))]
    assert _said(replaced) == _imported(other.parent, tmp_path)


def test_after_sigkill_the_watch_command_exports_every_line_at_least_once(tmp_path: Path) -> None:
    """Killed (SIGKILL: no clean stop), the watch has kept the positions of the lines it wrote;
    started again, it exports what was written meanwhile: no line is lost (the lines of its
    last round may be exported twice, docs/harnesses.md)."""
    home = tmp_path / "home"
    runs = tmp_path / "runs"
    state = tmp_path / "watch.json"
    env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(runs))
    command = [*CLI, "watch", str(home), "--state", str(state)]
    source = codex_day("resumed")
    target = home / "project" / _session_file(source).name
    target.parent.mkdir(parents=True)
    lines = _session_file(source).read_bytes().splitlines(keepends=True)
    half = max(i for i, line in enumerate(lines) if b'"task_started"' in line)

    def started() -> subprocess.Popen[str]:
        process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True
        )
        assert process.stdout is not None
        assert "following" in process.stdout.readline()
        return process

    def kept() -> bool:
        return state.exists() and bool(saved_state(state)["files"])

    watcher = started()
    try:
        target.write_bytes(b"".join(lines[:half]))
        _wait_for(kept, "the first lines' position kept")
    finally:
        watcher.kill()
        watcher.wait(timeout=60)
    with target.open("ab") as out:  # while no watch runs
        out.write(b"".join(lines[half:]))
    watcher = started()
    imported = Counter(_imported(source, tmp_path))
    try:  # (each line at least once: none of the import's is missing)
        _wait_for(lambda: not imported - Counter(_said(_mirror(runs))), "every line exported")
    finally:
        watcher.send_signal(signal.SIGTERM)
        assert watcher.wait(timeout=60) == 0
