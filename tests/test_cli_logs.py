"""Where a run that resumes a Codex thread begins its count: the thread's totals in its
rollout before the run started (`cli_logs.resumed_thread_usage`), read from the recorded
`resumed` fixture (two real `codex exec` runs of one thread, 2000 input tokens each)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from transcript_otel.instrumentation.cli_logs import resumed_thread_usage
from transcript_otel.mappings.session_lines import timestamp_ns

RESUMED = Path(__file__).parent / "fixtures" / "sessions" / "codex" / "resumed" / "codex-home"
THREAD = "01a24bd0-a98e-7cb3-a106-8b99e83fd1e2"
# Between the first run's last line (14:44:56.021) and the second's first (14:44:56.441).
SECOND_RUN_STARTED = "2026-12-06T14:44:56.400Z"


def at(moment: str) -> int:
    found = timestamp_ns(moment)
    assert found is not None
    return found


def input_tokens(thread: str, started: str, codex_home: Path = RESUMED) -> int | None:
    totals = resumed_thread_usage(thread, at(started), {"CODEX_HOME": str(codex_home)})
    return None if totals is None else int(totals["input_tokens"])


def test_the_totals_a_thread_had_when_the_run_started_and_not_those_it_wrote_since() -> None:
    assert input_tokens(THREAD, SECOND_RUN_STARTED) == 2000  # the rollout ends at 4000
    assert input_tokens(THREAD, "2026-12-06T14:44:57.000Z") == 4000
    assert input_tokens(THREAD, "2026-12-06T14:44:55.000Z") is None  # a run before any turn


@pytest.mark.parametrize(
    "thread",
    [
        "01a24bd0-0000-0000-0000-000000000000",  # no rollout: a thread the run started
        "../01a24bd0-a98e-7cb3-a106-8b99e83fd1e2",  # names no file of the sessions folder
        "*",
    ],
)
def test_a_thread_without_a_rollout_has_no_totals(thread: str) -> None:
    assert input_tokens(thread, SECOND_RUN_STARTED) is None


def test_a_line_that_only_quotes_the_totals_name_is_passed_over(tmp_path: Path) -> None:
    home = tmp_path / "codex-home"
    shutil.copytree(RESUMED, home)
    (rollout,) = home.glob(f"sessions/*/*/*/rollout-*-{THREAD}.jsonl")
    lines = rollout.read_bytes().splitlines(keepends=True)
    quoting = (
        b'{"timestamp":"2026-12-06T14:44:56.100Z","type":"response_item","payload":{"type":"message",'
        b'"role":"user","content":[{"type":"input_text","text":"what is \\"total_token_usage\\"?"}]}}\n'
    )
    first_run_end = next(i for i, line in enumerate(lines) if b'"task_complete"' in line) + 1
    rollout.write_bytes(b"".join([*lines[:first_run_end], quoting, *lines[first_run_end:]]))
    assert input_tokens(THREAD, SECOND_RUN_STARTED, home) == 2000
