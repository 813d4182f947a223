"""`transcript-otel import --jobs`: sessions imported in worker processes are said and written as
one process imports them (the same lines, in the order the sessions were found, and the same run
files byte for byte); a session that fails, or whose worker dies, is said, and what the others
imported stays.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from transcript_otel.sessions.files import find_sessions

from loopback import subprocess_env
from session_fixtures import CLAUDE, CODEX, SESSIONS

CLI = [sys.executable, "-m", "transcript_otel.cli"]
# Makes the import of the session named by $FAIL_SESSION fail in a way the import never does
# itself: an exception it does not expect, or the death of the process.
_FAILING = """
import os

from transcript_otel.sessions import importer

_import_session = importer.import_session


def _failing(session, directory):
    if str(session.path) == os.environ["FAIL_SESSION"]:
        if os.environ["FAIL_HOW"] == "die":
            os._exit(9)
        raise RuntimeError("not what an import raises")
    return _import_session(session, directory)


importer.import_session = _failing
"""


def _import(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, "import", *args],
        capture_output=True,
        text=True,
        env=subprocess_env(**env),
        timeout=120,
        check=False,
    )


def _sessions(*paths: Path) -> list[str]:
    return [str(session.path) for session in find_sessions(paths)]


def _skipped(stderr: str) -> list[str]:
    """The lines saying which files below the folders are no session log (the recorded stdout
    beside each fixture's session logs)."""
    return [line for line in stderr.splitlines() if line.startswith("transcript-otel import: skipped ")]


def _said(stdout: str) -> list[tuple[str, str]]:
    """Each stdout line's session and run file."""
    return [
        (session, run.split(" (")[0]) for session, run in (line.split(" -> ") for line in stdout.splitlines())
    ]


def test_workers_say_and_write_what_one_process_does(tmp_path: Path) -> None:
    one, two = tmp_path / "one", tmp_path / "two"
    alone = _import(str(SESSIONS), "--jsonl-dir", str(one), "--jobs", "1")
    pooled = _import(str(SESSIONS), "--jsonl-dir", str(two), "--jobs", "2")
    assert alone.returncode == pooled.returncode == 0
    assert alone.stderr.splitlines() == _skipped(alone.stderr)  # nothing else said
    assert pooled.stderr == alone.stderr
    assert pooled.stdout.replace(str(two), "MIRROR") == alone.stdout.replace(str(one), "MIRROR")
    assert [session for session, _ in _said(pooled.stdout)] == _sessions(SESSIONS)
    files = sorted(path.name for path in one.iterdir())
    assert len(files) == len(_sessions(SESSIONS))  # every fixture session, each a run of its own
    assert sorted(path.name for path in two.iterdir()) == files  # and nothing else
    for name in files:
        assert (two / name).read_bytes() == (one / name).read_bytes(), name


def test_a_session_that_fails_is_said_and_the_others_are_imported(tmp_path: Path) -> None:
    sessions = _sessions(CLAUDE, CODEX)
    failing = sessions[1]
    assert _import(failing, "--jsonl-dir", str(tmp_path / "probe"), "--jobs", "1").returncode == 0
    (probed,) = (tmp_path / "probe").iterdir()
    runs = tmp_path / "runs"
    (runs / probed.name / "in the way").mkdir(parents=True)  # its run cannot be put in place
    done = _import(str(CLAUDE), str(CODEX), "--jsonl-dir", str(runs), "--jobs", "2")
    assert done.returncode == 1
    (error,) = [line for line in done.stderr.splitlines() if line not in _skipped(done.stderr)]
    assert error.startswith(f"transcript-otel import: {failing}: [Errno 21] Is a directory")
    said = _said(done.stdout)
    assert [session for session, _ in said] == [session for session in sessions if session != failing]
    written = sorted(str(path) for path in runs.iterdir() if path.name != probed.name)
    assert written == sorted(run for _, run in said)


@pytest.mark.parametrize(
    ("how", "error"),
    [
        ("raise", "not imported: RuntimeError: not what an import raises"),
        ("die", "not imported: a worker process died (killed? out of memory?), stopping the others"),
    ],
)
def test_a_worker_failing_unexpectedly_is_said_and_loses_nothing_imported(
    tmp_path: Path, how: str, error: str
) -> None:
    sessions = _sessions(SESSIONS)
    failing = sessions[4]
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(_FAILING)
    path = os.pathsep.join(p for p in (str(hook), os.environ.get("PYTHONPATH")) if p)
    runs = tmp_path / "runs"
    done = _import(
        str(SESSIONS),
        "--jsonl-dir",
        str(runs),
        "--jobs",
        "2",
        PYTHONPATH=path,
        FAIL_SESSION=failing,
        FAIL_HOW=how,
    )
    assert done.returncode == 1
    said = _said(done.stdout)
    imported = [session for session, _ in said]
    failed = [
        line.removeprefix("transcript-otel import: ")
        for line in done.stderr.splitlines()
        if line not in _skipped(done.stderr)
    ]
    assert f"{failing}: {error}" in failed
    assert all(line.endswith(f": {error}") for line in failed)
    # Each session said once, the imported in the order found; which ones a dead worker took
    # with it depends on timing, so only that every one of them is said.
    assert sorted([*imported, *(line.removesuffix(f": {error}") for line in failed)]) == sorted(sessions)
    assert imported == [session for session in sessions if session in imported]
    if how == "raise":
        assert imported == [session for session in sessions if session != failing]
    assert sorted(map(str, runs.iterdir())) == sorted(run for _, run in said)


def test_jobs_below_one_is_refused(tmp_path: Path) -> None:
    done = _import(str(SESSIONS), "--jsonl-dir", str(tmp_path / "runs"), "--jobs", "0")
    assert done.returncode == 2
    assert "argument -j/--jobs: must be 1 or more, not 0" in done.stderr
    assert done.stdout == ""
    assert not (tmp_path / "runs").exists()


def test_workers_are_spawned_when_this_process_has_other_threads(tmp_path: Path) -> None:
    """Forked workers start with the import loaded (no other thread may hold a lock a fork would
    copy); with one more thread alive they are spawned, and import the same."""
    import threading

    from transcript_otel.cli.import_workers import _worker_start, imports

    alone_in_its_process = subprocess.run(
        [
            sys.executable,
            "-c",
            "from transcript_otel.cli.import_workers import _worker_start\n"
            "print(_worker_start().get_start_method())",
        ],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        check=True,
    )
    assert alone_in_its_process.stdout.strip() == "fork"
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        assert _worker_start().get_start_method() == "spawn"
        sessions = list(find_sessions([CODEX / "resumed", CLAUDE / "tools"]))
        spawned = [outcome.run for outcome in imports(sessions, tmp_path / "spawned", 2)]
    finally:
        stop.set()
        other.join()
    alone = [outcome.run for outcome in imports(sessions, tmp_path / "alone", 1)]
    assert [path.name for path in spawned if path] == [path.name for path in alone if path]
    for one, two in zip(spawned, alone, strict=True):
        assert one is not None
        assert two is not None
        assert one.read_bytes() == two.read_bytes()
