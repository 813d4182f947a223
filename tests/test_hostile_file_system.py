"""`transcript-otel watch` and `import` over folders they do not control (issue 51): links that
loop or alias a folder, FIFOs and devices named like session files, a `--state` that is a link
or a FIFO, a state file that is damaged, and SIGTERM/SIGHUP to an import with workers. Each
case runs the real command in a process of its own on the real file system; every wait has a
deadline that fails the test with what was not seen (a hang is a failure, never a stuck run).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import sys
import threading
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

import pytest

from test_watch_sessions import (
    CLAUDE_PROJECT,
    CODEX_DAY,
    _imported,
    _imported_records,
    _mirror,
    _said,
    _session_file,
)
from transcript_otel import read_records
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.sessions.watch_state import saved_state

from loopback import subprocess_env
from session_fixtures import CODEX

CLI = [sys.executable, "-m", "transcript_otel.cli"]
DEADLINE_S = 60.0
# Another session's name, for a second path to one file.
OTHER_CLAUDE_NAME = "0b6f1d2e-1111-4222-8333-944445555666.jsonl"
OTHER_ROLLOUT_NAME = "rollout-2026-11-27T08-39-20-01a21c28-0000-7000-8000-000000000000.jsonl"


def _wait_for(condition: Callable[[], bool], what: Callable[[], str] | str) -> None:
    """Until `condition`; fails with `what` after `DEADLINE_S` (a slow machine only waits longer)."""
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"not within {DEADLINE_S:.0f} s: {what() if callable(what) else what}")
        time.sleep(0.05)


class _Output:
    """A stream of a process read on a thread of its own, as it comes (never blocking the test)."""

    def __init__(self, stream: Any) -> None:
        self._text: list[str] = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream: Any) -> None:
        for line in stream:
            self._text.append(line)

    @property
    def text(self) -> str:
        return "".join(self._text)

    def finished(self) -> str:
        self._thread.join(DEADLINE_S)
        return self.text

    def warned(self) -> list[str]:
        """The lines said once the stream ended, but the one a watch says per session it takes up."""
        return [line for line in self.finished().splitlines() if not line.startswith(_FOLLOWING)]


# What a watch says of each session it takes up (on stderr, beside its warnings).
_FOLLOWING: Final = "transcript-otel watch: following "


class _Watch:
    """`transcript-otel watch` in a process of its own, its mirror `runs`."""

    def __init__(self, process: subprocess.Popen[str], runs: Path) -> None:
        self.process = process
        self.runs = runs
        assert process.stdout is not None
        assert process.stderr is not None
        self.stdout = _Output(process.stdout)
        self.stderr = _Output(process.stderr)

    def entries(self) -> int:
        """The entries in the mirror so far (a run being written: its whole lines)."""
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a last line being written
            return sum(
                1
                for path in self.runs.glob("*.jsonl")
                for record in read_records(path)
                if record["event"] == TranscriptEvent.ENTRY.value
            )

    def wait_for_entries(self, count: int) -> None:
        _wait_for(
            lambda: self.entries() >= count,
            lambda: (
                f"{count} entries exported (the mirror holds {self.entries()}); stderr: {self.stderr.text}"
            ),
        )

    def wait_for_stderr(self, text: str) -> None:
        _wait_for(lambda: text in self.stderr.text, lambda: f"{text!r} said; stderr: {self.stderr.text}")

    def stop(self, how: signal.Signals = signal.SIGTERM) -> int:
        """The status it exits with after `how` (a watch that ignores it fails the test)."""
        self.process.send_signal(how)
        try:
            return self.process.wait(DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(
                f"the watch did not stop within {DEADLINE_S:.0f} s of {how.name}; stderr: {self.stderr.text}"
            )


@contextmanager
def _watching(tmp_path: Path, *roots: Path, state: Path | None = None) -> Iterator[_Watch]:
    """A watch of `roots` (mirror `tmp_path/runs`, state `state` or `tmp_path/watch.json`), once it
    said it follows them; killed at the end if it is still there."""
    command = [*CLI, "watch", *map(str, roots), "--state", str(state or tmp_path / "watch.json")]
    env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"))
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        watch = _Watch(process, tmp_path / "runs")
        _wait_for(
            lambda: "following" in watch.stdout.text or process.poll() is not None,
            lambda: f"the watch started; stderr: {watch.stderr.text}",
        )
        assert "following" in watch.stdout.text, watch.stderr.finished()
        yield watch
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE_S)


def _run(*arguments: str, timeout_s: float = DEADLINE_S, **env: str) -> subprocess.CompletedProcess[str]:
    """`transcript-otel ARGUMENTS` to its end; one that does not end fails the test."""
    try:
        return subprocess.run(
            [*CLI, *arguments],
            capture_output=True,
            text=True,
            env=subprocess_env(**env),
            timeout=timeout_s,
            check=False,
        )
    except subprocess.TimeoutExpired as expired:
        pytest.fail(
            f"`transcript-otel {' '.join(arguments)}` did not end within {timeout_s:.0f} s: {expired}"
        )


# 1. Links below the folders followed.


@pytest.mark.parametrize("made", ["before-the-watch", "while-it-runs"])
@pytest.mark.parametrize("links", ["loop-and-self", "loop", "aliased-folder", "linked-file", "hard-link"])
def test_links_below_the_folders_make_no_loop_and_each_file_is_exported_once(
    links: str, made: str, tmp_path: Path
) -> None:
    """`proj/loop -> ..` and `self -> .` (a watch spun, exporting nothing, or exported each line 41
    times), a folder linked under another name (its sessions exported twice), a session file
    linked or hard-linked under another session's name: the watch goes into no linked folder
    and exports each file once."""
    home = tmp_path / "home"
    project = home / "proj"
    project.mkdir(parents=True)
    source = _session_file(CLAUDE_PROJECT)
    target = project / source.name

    def make_links() -> None:
        if links.startswith("loop"):
            (project / "loop").symlink_to("..")
        if links == "loop-and-self":
            (home / "self").symlink_to(".")
        if links == "aliased-folder":
            (home / "alias").symlink_to("proj")
        if links in ("linked-file", "hard-link"):
            target.touch()
            (home / "other").mkdir()
            other = home / "other" / OTHER_CLAUDE_NAME
            if links == "linked-file":
                other.symlink_to(target)
            else:
                os.link(target, other)

    expected = _imported(CLAUDE_PROJECT, tmp_path)
    if made == "before-the-watch":
        make_links()
    with _watching(tmp_path, home) as watch:
        if made == "while-it-runs":
            make_links()
        lines = source.read_bytes().splitlines(keepends=True)
        # Half through each path, where there are two (each path's folder is told a change).
        for path, part in ((target, lines[:15]), (home / "other" / OTHER_CLAUDE_NAME, lines[15:])):
            with (path if path.exists() else target).open("ab") as out:
                out.write(b"".join(part))
        watch.wait_for_entries(len(expected))
        assert watch.stop() == 0, watch.stderr.finished()
    assert _said(_mirror(tmp_path / "runs")) == expected  # each line once
    assert len(list((tmp_path / "runs").glob("*.jsonl"))) == 1


# 2. FIFOs and devices named like session files.


def _make_odd(path: Path, what: str) -> None:
    """At `path`: a FIFO, or a link to a device."""
    if what == "fifo":
        os.mkfifo(path)
    else:
        path.symlink_to(what)


_KINDS = {"fifo": "a FIFO", "/dev/zero": "a character device", "/dev/urandom": "a character device"}


def _skipped(path: Path, what: str) -> str:
    return f"transcript-otel: warning: {path}: not a regular file ({_KINDS[what]}): skipped"


@pytest.mark.parametrize(
    ("what", "name"),
    [
        ("fifo", OTHER_CLAUDE_NAME),
        ("fifo", OTHER_ROLLOUT_NAME),
        ("/dev/zero", OTHER_ROLLOUT_NAME),
        ("/dev/urandom", OTHER_CLAUDE_NAME),
    ],
)
def test_import_skips_a_session_named_fifo_or_device_with_one_warning(
    what: str, name: str, tmp_path: Path
) -> None:
    """A FIFO named like a session made `import` wait forever, a link to `/dev/zero` never end, one
    to `/dev/urandom` fill the mirror: each is skipped, said once, and the real session imported."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    real = _session_file(CODEX_DAY)
    shutil.copy(real, folder / real.name)
    odd = folder / name
    _make_odd(odd, what)
    runs = tmp_path / "runs"
    done = _run("import", "--jobs", "1", "--jsonl-dir", str(runs), str(folder))
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [_skipped(odd, what)]
    assert [line.split(" -> ")[0] for line in done.stdout.splitlines()] == [str(folder / real.name)]
    assert len(list(runs.iterdir())) == 1


def test_import_of_a_fifo_named_on_its_own_says_it_is_skipped(tmp_path: Path) -> None:
    odd = tmp_path / OTHER_CLAUDE_NAME
    os.mkfifo(odd)
    done = _run("import", "--jsonl-dir", str(tmp_path / "runs"), str(odd))
    assert done.returncode == 1
    assert done.stderr.splitlines() == [
        _skipped(odd, "fifo"),
        f"transcript-otel import: no sessions in {odd}",
    ]


@pytest.mark.parametrize("what", ["fifo", "/dev/zero"])
@pytest.mark.parametrize("when", ["at-first-start", "appears", "replaces-a-session"])
def test_watch_skips_a_session_named_fifo_or_device_with_one_warning_and_goes_on(
    when: str, what: str, tmp_path: Path
) -> None:
    """A FIFO there at the watch's first start kept it from starting; one that appears, or
    replaces a session file, froze it (SIGTERM ignored); a link to `/dev/zero` in a session
    file's place read it forever. Each is skipped with one warning; the others go on."""
    home = tmp_path / "home"
    day = home / "2026" / "11" / "27"
    day.mkdir(parents=True)
    odd = day / OTHER_ROLLOUT_NAME
    if when == "at-first-start":
        _make_odd(odd, what)
    claude = _session_file(CLAUDE_PROJECT)
    codex = _session_file(CODEX_DAY)
    with _watching(tmp_path, home) as watch:
        if when == "appears":
            _make_odd(odd, what)
        if when == "replaces-a-session":
            shutil.copy(codex, odd)
            watch.wait_for_entries(len(_imported(CODEX_DAY, tmp_path / "codex")))
            placed = day / "placed"
            _make_odd(placed, what)
            os.replace(placed, odd)
        watch.wait_for_stderr(f"{odd}: not a regular file")
        (home / "project").mkdir()
        (home / "project" / claude.name).write_bytes(claude.read_bytes())  # another session goes on
        before = len(_imported(CODEX_DAY, tmp_path / "codex")) if when == "replaces-a-session" else 0
        watch.wait_for_entries(before + len(_imported(CLAUDE_PROJECT, tmp_path / "claude")))
        assert watch.stop() == 0
        warned = watch.stderr.warned()
    said = f"{odd}: not a regular file ({_KINDS[what]})"
    assert sum(said in line for line in warned) == 1, warned
    assert [line for line in warned if said not in line] == []


def test_a_watch_says_each_file_it_skips_however_many(tmp_path: Path) -> None:
    """A watch runs for months: the eleventh file it skips is said as the first was (a reading
    command says ten warnings and counts the others, said only at its end)."""
    home = tmp_path / "home"
    home.mkdir()
    odd = [
        home / f"rollout-2026-11-27T08-39-20-01a21c28-0000-7000-8000-0000000000{n:02d}.jsonl"
        for n in range(12)
    ]
    for path in odd:
        os.mkfifo(path)
    with _watching(tmp_path, home) as watch:
        for path in odd:
            watch.wait_for_stderr(f"{path}: not a regular file (a FIFO)")
        assert watch.stop() == 0
    assert len(watch.stderr.warned()) == len(odd)


# 3. `--state` onto a link, a device or a FIFO.


@pytest.mark.parametrize("state_is", ["link-to-a-file", "link-to-/dev/null", "fifo"])
def test_watch_state_on_a_link_or_fifo_is_never_replaced(state_is: str, tmp_path: Path) -> None:
    """The rule `-o` follows: a link's file is written (the link stays); a FIFO or a device is
    written into as it is, never replaced by a regular file (nor read, which waited forever on a
    FIFO). A link to a file keeps the positions across a restart, as the file itself does."""
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    state = tmp_path / "state"
    kept = tmp_path / "kept" / "watch.json"
    if state_is == "link-to-a-file":
        kept.parent.mkdir()
        state.symlink_to(kept)
    elif state_is == "link-to-/dev/null":
        state.symlink_to("/dev/null")
    else:
        os.mkfifo(state)
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    target = home / "project" / _session_file(CODEX_DAY).name
    for part in (lines[:10], lines[10:]):
        with _watching(tmp_path, home, state=state) as watch:
            before = watch.entries()
            with target.open("ab") as out:
                out.write(b"".join(part))
            watch.wait_for_entries(before + 1)
            assert watch.stop() == 0, watch.stderr.finished()
        if state_is != "fifo":
            assert state.is_symlink()
            assert os.readlink(state) == (str(kept) if state_is == "link-to-a-file" else "/dev/null")
        else:
            assert stat.S_ISFIFO(os.lstat(state).st_mode)
        assert not list(tmp_path.glob("*.partial"))
    if state_is == "link-to-a-file":
        assert str(target) in saved_state(kept)["files"]
        assert _said(_mirror(tmp_path / "runs")) == _imported(CODEX_DAY, tmp_path)  # no line twice
    assert stat.S_ISCHR(os.stat("/dev/null").st_mode)


# 4. SIGTERM and SIGHUP to an import.

# Makes each session's import stop after its third line, as on a session too large to end soon,
# once it has said its process's id in $STUCK_IN (the test waits for those).
_STUCK = """
import os
import time

from transcript_otel.sessions import importer

_apply = importer.SessionRecorder.apply


def _stuck(self, timed):
    _apply(self, timed)
    if timed.number == 3 and os.environ.get("STUCK_IN"):
        open(os.path.join(os.environ["STUCK_IN"], str(os.getpid())), "w").close()
        while True:
            time.sleep(0.05)


importer.SessionRecorder.apply = _stuck
"""


def _running(pid: int) -> bool:
    """Whether `pid` is a process that has not ended (a zombie has)."""
    try:
        with open(f"/proc/{pid}/stat") as status:
            return status.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


@pytest.mark.parametrize("jobs", ["1", "2"])
@pytest.mark.parametrize("to", ["the-import", "its-process-group"])
@pytest.mark.parametrize("how", [signal.SIGTERM, signal.SIGHUP], ids=["SIGTERM", "SIGHUP"])
def test_sigterm_or_sighup_stops_an_import_and_its_workers_and_leaves_no_partial_file(
    how: signal.Signals, to: str, jobs: str, tmp_path: Path
) -> None:
    """systemd stops a service with SIGTERM (`kill` to the import alone, or to all its processes
    as systemd does), a closed terminal sends SIGHUP to its process group: the import stops as
    on Ctrl-C (it died at once, its workers went on writing and `.importing*` files stayed),
    saying so, exiting 128 + the signal, with no worker left and no partial file."""
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_STUCK)
    stuck = tmp_path / "stuck"
    stuck.mkdir()
    runs = tmp_path / "runs"
    env = subprocess_env(
        PYTHONPATH=os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p),
        STUCK_IN=str(stuck),
    )
    sessions = [str(CODEX / "shell"), str(CODEX / "resumed")]
    process = subprocess.Popen(
        [*CLI, "import", "--jobs", jobs, "--jsonl-dir", str(runs), *sessions],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    importing: list[int] = []
    try:
        _wait_for(lambda: len(list(stuck.iterdir())) == int(jobs), "each job importing")
        importing = [int(path.name) for path in stuck.iterdir()]
        if to == "the-import":
            process.send_signal(how)
        else:
            os.killpg(process.pid, how)
        try:
            _, stderr = process.communicate(timeout=DEADLINE_S)
        except subprocess.TimeoutExpired:
            pytest.fail(f"the import did not end within {DEADLINE_S:.0f} s of {how.name}")
        assert process.returncode == 128 + how, stderr
        assert stderr.splitlines()[-1] == (
            f"transcript-otel import: stopped by {how.name}: the sessions not listed above were not imported"
        ), stderr
        _wait_for(
            lambda: not any(_running(pid) for pid in importing),
            lambda: f"no worker left: {[pid for pid in importing if _running(pid)]} still run",
        )
        assert [path.name for path in runs.rglob("*")] == []  # nothing half-written stays
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(DEADLINE_S)
        for pid in importing:
            if _running(pid):
                os.kill(pid, signal.SIGKILL)


# 7. The state file.


def _state(files: dict[str, Any], version: Any = 1) -> str:
    return json.dumps({"version": version, "files": files, "gone": {}})


@pytest.mark.parametrize(
    ("bad", "unusable"),
    [
        ({"inode": [1]}, "bad inode"),
        ({"inode": "12"}, "bad inode"),
        ({"offset": 2**63}, "bad offset"),
        ({"offset": 2**200}, "bad offset"),
        ({"offset": -5}, "bad offset"),
        ({"lines": -1}, "bad lines"),
        ({"offset": True}, "bad offset"),
        ("not an entry", "not an entry"),
        ({"offset": json.loads("[" * 500 + "]" * 500)}, "bad offset"),
    ],
    ids=lambda value: repr(value)[:30],
)
def test_a_bad_state_entry_is_dropped_alone_with_one_warning_and_the_good_ones_kept(
    bad: Any, unusable: str, tmp_path: Path
) -> None:
    """An entry of the state the watch cannot use (a traceback, exit 2 and a systemd crash-loop,
    or a session never exported again) is dropped, said once: its file is read again from its
    start (nothing of it lost); the other entries are kept (what their files gained while no
    watch ran is exported, no line twice)."""
    home = tmp_path / "home"
    (home / "a").mkdir(parents=True)
    (home / "b").mkdir()
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    kept = home / "a" / _session_file(CODEX_DAY).name
    kept.write_bytes(b"".join(lines[:10]))
    dropped = home / "b" / _session_file(CLAUDE_PROJECT).name
    dropped.write_bytes(_session_file(CLAUDE_PROJECT).read_bytes())
    entry = (
        {"inode": dropped.stat().st_ino, "offset": 100, "lines": 1, **bad} if isinstance(bad, dict) else bad
    )
    good = {"inode": kept.stat().st_ino, "offset": len(b"".join(lines[:10])), "lines": 10}
    (tmp_path / "watch.json").write_text(_state({str(kept): good, str(dropped): entry}))
    with kept.open("ab") as out:
        out.write(b"".join(lines[10:]))  # while no watch ran
    tail_lines = {line.rstrip(b"\n").decode() for line in lines[10:]}
    tail = [r for r in _imported_records(CODEX_DAY, tmp_path / "a") if r["context"]["raw"] in tail_lines]
    whole_b = _imported(CLAUDE_PROJECT, tmp_path / "b")
    with _watching(tmp_path, home) as watch:
        watch.wait_for_entries(len(tail) + len(whole_b))
        assert watch.stop() == 0
        warned = watch.stderr.warned()
    assert warned == [
        f"transcript-otel: warning: {tmp_path / 'watch.json'}: 1 entry unusable, dropped "
        f"(its file is read again from its start): {dropped} ({unusable})"
    ]
    assert sorted(_said(_mirror(tmp_path / "runs"))) == sorted(_said(tail) + whole_b)  # each line once
    saved = saved_state(tmp_path / "watch.json")["files"]
    assert saved[str(dropped)]["offset"] == dropped.stat().st_size


@pytest.mark.parametrize(
    ("content", "why"),
    [
        (b"\x00\x01 not JSON", "not JSON"),
        (_state({}, version=99).encode(), "version 99, not 1"),
        (_state({}, version="1").encode(), "version '1', not 1"),
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b"[1, 2]", "not an object"),
        (json.dumps({"version": 1, "files": [1]}).encode(), "its files are not an object"),
    ],
    ids=["garbage", "version-99", "version-string", "deep-nesting", "a-list", "files-a-list"],
)
def test_an_unusable_state_file_is_said_once_and_the_watch_starts_as_at_its_first_start(
    content: bytes, why: str, tmp_path: Path
) -> None:
    """A state that is not one this watch wrote was silently a first start (the lines written
    while no watch ran skipped without a word), or a traceback: it is said, once, and the watch
    starts (sessions taken up from their end, as at a first start) and goes on."""
    home = tmp_path / "home"
    (home / "a").mkdir(parents=True)
    lines = _session_file(CODEX_DAY).read_bytes().splitlines(keepends=True)
    target = home / "a" / _session_file(CODEX_DAY).name
    target.write_bytes(b"".join(lines[:-3]))
    (tmp_path / "watch.json").write_bytes(content)
    with _watching(tmp_path, home) as watch:
        with target.open("ab") as out:
            out.write(b"".join(lines[-3:]))
        watch.wait_for_entries(1)
        assert watch.stop() == 0
        warned = watch.stderr.warned()
    assert warned == [
        f"transcript-otel: warning: {tmp_path / 'watch.json'}: unusable ({why}): started as at a first "
        "start, each session taken up from its end"
    ]
    saved = saved_state(tmp_path / "watch.json")
    assert saved["files"][str(target)]["offset"] == target.stat().st_size
