"""`transcript-otel watch` run as a person runs it, for the tests that watch a real CLI's
terminal UI: started before the session begins, read through its mirror while it runs, stopped
with SIGINT (which it must take as a clean exit)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from transcript_otel import read_records

Found = TypeVar("Found")


class LiveWatch:
    def __init__(self, runs: Path) -> None:
        self.runs = runs

    def records(self) -> list[dict[str, Any]]:
        """Every record the watch has written to its mirror so far."""
        return [record for path in sorted(self.runs.glob("*.jsonl")) for record in read_records(path)]

    def wait_for(
        self, seen: Callable[[list[dict[str, Any]]], Found], enough: Callable[[Found], bool]
    ) -> Found:
        """What `seen` makes of the records, once `enough`: the watch exports within a second,
        this waits up to a minute to outlast a busy machine."""
        for _ in range(600):
            found = seen(self.records())
            if enough(found):
                return found
            time.sleep(0.1)
        raise AssertionError(f"not exported: {seen(self.records())}")


@contextmanager
def live_watch(
    folder: Path | str, state: Path, runs: Path, environment: Mapping[str, str]
) -> Iterator[LiveWatch]:
    """`transcript-otel watch folder` (or an option: `--opencode`), its mirror `runs`, following
    before the block begins."""
    command = [sys.executable, "-m", "transcript_otel.cli", "watch", str(folder), "--state", str(state)]
    env = {**environment, "TRANSCRIPT_OTEL_JSONL_DIR": str(runs)}
    watch = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
    try:
        assert watch.stdout is not None
        assert "following" in watch.stdout.readline()  # it watches before the session begins
        yield LiveWatch(runs)
    finally:
        watch.send_signal(signal.SIGINT)
        assert watch.wait(30) == 0
