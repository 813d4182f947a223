"""`transcript-otel watch` catching up on a backlog (issue 51, item 5): a session that gained
far more than one read takes (a line longer than a record may be, then a small one) is read
round after round at once, not one read per change the kernel reports or per 5 s sweep, so
the small line is exported about as soon as `import` would have it; and a watch stopped while
passing over a long line starts again at that line's start, never inside it (no fragment
exported as an `unknown` entry).
"""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest

from transcript_otel import TranscriptPipeline, read_records
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.lines import MAX_RECORD_BYTES
from transcript_otel.reading.text import entry_text
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.followed_file import READ_BYTES
from transcript_otel.sessions.importer import import_session
from transcript_otel.sessions.watch import Watcher
from transcript_otel.sessions.watch_state import WatchState
from transcript_otel.sinks import JsonlMirror

from inotify_watches import assert_told_by_the_kernel, inotify_watches, require_inotify
from loopback import subprocess_env
from session_fixtures import codex_day

SOURCE = codex_day("resumed")
CLI = [sys.executable, "-m", "transcript_otel.cli"]
_HUGE_HEAD = b'{"timestamp":"2026-11-27T08:39:30.000Z","type":"response_item","payload":{"type":"message",'
_HUGE_HEAD += b'"role":"user","content":[{"type":"input_text","text":"'
_HUGE_TAIL = b'"}]}}\n'


def _session() -> tuple[str, list[bytes]]:
    (path,) = SOURCE.glob("*.jsonl")
    return path.name, path.read_bytes().splitlines(keepends=True)


def _huge_line(size: int) -> tuple[bytes, bytes]:
    """A session line of `size` bytes, longer than a record may be: its head and its end."""
    return _HUGE_HEAD + b"x" * (size - len(_HUGE_HEAD) - len(_HUGE_TAIL)), _HUGE_TAIL


def _entries(records: list[dict[str, Any]]) -> list[tuple[str, str]]:
    return [
        (r["context"]["entry_type"], entry_text(r["context"]["entry_type"], r["context"]["detail"]))
        for r in records
        if r["event"] == TranscriptEvent.ENTRY.value
    ]


def _mirror(runs: Path) -> list[tuple[str, str]]:
    found = [list(read_records(path)) for path in runs.glob("*.jsonl")] if runs.exists() else []
    ordered = sorted((run for run in found if run), key=lambda run: run[0]["timestamp"])
    return [entry for run in ordered for entry in _entries(run)]


def _imported(session: Path, tmp_path: Path) -> list[tuple[str, str]]:
    (found,) = find_sessions([session])
    return _entries(list(read_records(import_session(found, tmp_path / "imported").path)))


def _rounds(watcher: Watcher, count: int) -> None:
    for _ in range(count):
        watcher.poll_once()


@pytest.fixture
def watcher(tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]) -> Iterator[Watcher]:
    """A watch of `tmp_path/home` told what changed by the kernel (inotify), as on Linux."""
    from opentelemetry import trace

    require_inotify()
    (tmp_path / "home").mkdir()
    before = set(inotify_watches())
    made = Watcher(
        [tmp_path / "home"],
        WatchState(tmp_path / "watch.json"),
        pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
        tracer=trace.get_tracer(__name__),
        kernel_changes=True,
    )
    assert_told_by_the_kernel(before, tmp_path / "home")
    yield made
    made.close()


def test_a_backlog_is_read_round_after_round_not_one_read_per_change(
    watcher: Watcher, tmp_path: Path
) -> None:
    name, lines = _session()
    target = tmp_path / "home" / "project" / name
    target.parent.mkdir()
    target.write_bytes(b"".join(lines[:2]))
    watcher.poll_once()
    head, tail = _huge_line(MAX_RECORD_BYTES + 8 * READ_BYTES)
    with target.open("ab") as out:  # one write: the kernel says once that it changed
        out.write(head + tail + b"".join(lines[2:]))
    # Each round reads at most `READ_BYTES` of a file: as many rounds as that takes, and a few,
    # each at once (no 5 s sweep falls within them: they take well under a second each).
    rounds_needed = target.stat().st_size // READ_BYTES + 3
    with pytest.warns(UserWarning, match="skipped a line longer than"):
        _rounds(watcher, rounds_needed)
    watcher.close()
    assert _mirror(tmp_path / "runs") == _imported(target, tmp_path)


class _Watch:
    """The `watch` command over `home`, its stderr in a file."""

    def __init__(self, home: Path, tmp_path: Path) -> None:
        self.log = tmp_path / "watch.stderr"
        self._stderr: IO[str] = self.log.open("a")
        command = [*CLI, "watch", str(home), "--state", str(tmp_path / "watch.json")]
        env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"))
        self.process = subprocess.Popen(
            command, env=env, stdout=subprocess.PIPE, stderr=self._stderr, text=True
        )
        assert self.process.stdout is not None
        assert "following" in self.process.stdout.readline()

    def said(self) -> str:
        return self.log.read_text()

    def stop(self) -> None:
        self.process.send_signal(signal.SIGTERM)
        try:
            assert self.process.wait(timeout=60) == 0, self.said()
        finally:
            self._stderr.close()


def _wait_for(condition: Callable[[], bool], what: str, timeout_s: float) -> float:
    """How long `condition` took to hold."""
    started = time.monotonic()
    while not condition():
        assert time.monotonic() - started < timeout_s, f"not within {timeout_s:.1f} s: {what}"
        time.sleep(0.1)
    return time.monotonic() - started


def test_a_small_line_after_a_huge_one_is_exported_about_as_soon_as_import_has_it(tmp_path: Path) -> None:
    name, lines = _session()
    home = tmp_path / "home"
    target = home / "project" / name
    target.parent.mkdir(parents=True)
    head, tail = _huge_line(45_000_000)  # as in the issue: 45 MB
    whole = b"".join(lines[:2]) + head + tail + b"".join(lines[2:])
    (tmp_path / "alone").mkdir()
    (tmp_path / "alone" / name).write_bytes(whole)
    started = time.monotonic()
    subprocess.run(
        [*CLI, "import", str(tmp_path / "alone" / name), "--jsonl-dir", str(tmp_path / "imported")],
        env=subprocess_env(),
        check=True,
        capture_output=True,
    )
    import_s = time.monotonic() - started
    expected = _imported(tmp_path / "alone" / name, tmp_path)

    watch = _Watch(home, tmp_path)
    try:
        target.write_bytes(whole)
        # Generous (a busy machine): before, one read of 1 MiB per 5 s sweep took minutes.
        _wait_for(
            lambda: len(_mirror(tmp_path / "runs")) >= len(expected), "the lines after it", 5 * import_s + 20
        )
    finally:
        watch.stop()
    assert _mirror(tmp_path / "runs") == expected


def test_a_watch_stopped_inside_a_line_it_passes_over_starts_again_at_that_lines_start(
    tmp_path: Path,
) -> None:
    name, lines = _session()
    home = tmp_path / "home"
    target = home / "project" / name
    target.parent.mkdir(parents=True)
    head, tail = _huge_line(MAX_RECORD_BYTES + 2 * READ_BYTES)
    watch = _Watch(home, tmp_path)
    try:
        target.write_bytes(b"".join(lines[:2]) + head)  # its end not written yet: passed over so far
        _wait_for(lambda: "skipped a line longer than" in watch.said(), "the long line passed over", 60)
    finally:
        watch.stop()
    with target.open("ab") as out:
        out.write(tail + b"".join(lines[2:]))
    expected = _imported(target, tmp_path)
    watch = _Watch(home, tmp_path)
    try:
        _wait_for(lambda: len(_mirror(tmp_path / "runs")) >= len(expected), "the lines after it", 60)
        time.sleep(1)  # anything more it would export
    finally:
        watch.stop()
    exported = _mirror(tmp_path / "runs")
    assert [entry for entry in exported if entry[0] == "unknown"] == []
    assert exported == expected
