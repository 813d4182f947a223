"""A small run of issue 51's watch soak (benchmarks/soak_watch.py): 200 copies of the recorded
sessions written at random for 30 s under the real `transcript-otel watch`, stopped once with
SIGTERM and killed once with SIGKILL at random moments, each time started again. Whatever the
moments, once the watch has caught up: every entry an import of the sessions gives is in the
mirror, once but for the killed process's last round (docs/harnesses.md's at-least-once), every
file read to its end; the sessions' chat spans an import's and their runs' totals the CLIs', no
token lost; exactly so in the sessions the killed process never wrote to (in the others, spans
it ended in its last round, before keeping its positions, count again: at least once)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

from soak_watch import Options, run_soak


def test_the_watch_soaked_stopped_and_killed_exports_each_line_and_token(tmp_path: Path) -> None:
    soak = run_soak(Options(sessions=200, minutes=0.5, sigterms=1, sigkills=1, scratch=tmp_path))
    verdict = soak.verdict
    assert [p.exit_status for p in soak.processes] == [
        -9 if p.how == "SIGKILL" else 0 for p in soak.processes
    ]
    assert verdict.entries_expected > 2000
    assert (verdict.missing, verdict.strange, verdict.files_not_read_to_their_end) == (0, 0, 0), (
        verdict.examples
    )
    assert verdict.duplicates == verdict.duplicates_allowed, verdict.examples
    # The killed process's runs are taken over after the restart: no token lost anywhere, and
    # where it wrote nothing, none counted twice.
    assert verdict.tokens_under == 0, verdict.token_misses[:5]
    assert [m for m in verdict.token_misses if not m["written_by_the_killed_process"]] == []
    assert soak.mirror["torn_lines"] <= 1  # (the killed process's last record, if it died writing it)
