"""`benchmarks/run.py --against`: how the two sides' JSON figures are named, paired and printed."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "benchmarks"))

import pytest

from ab import AGENT_CLIS, figures, pair, render_pairs, sections_of, side_environment


def _row(name: str, cells: dict[str, float]) -> dict[str, object]:
    return {
        "section": "3a. throughput",
        "name": name,
        "unit": "rate",
        "cells": {key: {"values": [value], "median": value, "notes": {}} for key, value in cells.items()},
    }


def test_rows_give_one_figure_per_cell_named_by_row_and_entry_size() -> None:
    payload = {"rows": [_row("JSONL mirror only: entries/s", {"1kb": 100.0, "50kb": 10.0})], "elapsed_s": 2.0}
    assert figures(payload, {"1kb": "1 KB"}) == {
        ("3a. throughput", "JSONL mirror only: entries/s, 1 KB"): (100.0, "rate"),
        ("3a. throughput", "JSONL mirror only: entries/s, 50kb"): (10.0, "rate"),
        ("the section's process", "elapsed_s"): (2.0, "s"),
    }


def test_other_payloads_are_named_by_their_keys_and_list_items_by_their_labels() -> None:
    payload = {
        "e2e": {
            "phases": {"first": {"instrumented": {"median_s": 0.05, "seconds": [0.05, 0.06], "errors": []}}},
            "ratios": {"first": 1.03},
            "latency_s": {"p99": 0.01},
            "captures": [{"mirror_entries": 253}],  # no identity: per-run detail, left out
            "ok": True,
        },
        "memory": [{"label": "64 MiB bound", "rss_growth_peak": 1024, "error": "x"}],
        "error_free": None,
    }
    assert figures(payload) == {
        ("e2e", "phases / first / instrumented / median_s"): (0.05, "s"),
        ("e2e", "ratios / first"): (1.03, "ratio"),
        ("e2e", "latency_s / p99"): (0.01, "s"),
        ("memory", "64 MiB bound / rss_growth_peak"): (1024.0, "bytes"),
    }


def test_pairing_keeps_rows_of_one_side_and_says_which() -> None:
    both, new, old = ("g", "both"), ("g", "new only"), ("g", "old only")
    current = [{both: (2.0, ""), new: (1.0, "")}, {both: (4.0, ""), new: (1.0, "")}, {both: (9.0, "")}]
    previous = [{both: (1.0, ""), old: (5.0, "")}, {}, {both: (3.0, "")}]  # round 2 failed
    paired = pair(current, previous)
    assert paired == [
        (both, "", [2.0, 4.0, 9.0], [1.0, 3.0], [2.0, 3.0]),
        (new, "", [1.0, 1.0], [], []),
        (old, "", [], [5.0], []),
    ]
    table = render_pairs(paired, "current", "abc1234")
    assert "| both | 4 (2 to 9) | 2 (1 to 3) | 2.000x | 2.500x |" in table
    assert "| new only | 1 | — (not at abc1234) | — | — |" in table
    assert "| old only | — (not in current) | 5 | — | — |" in table


def test_sections_of_reads_a_revisions_run_py_without_running_it(tmp_path: Path) -> None:
    run_py = tmp_path / "run.py"
    run_py.write_text('SECTIONS = ("agent", "e2e")\nON_DEMAND = ("outage10",)\nraise SystemExit(1)\n')
    assert sections_of(run_py) == ("agent", "e2e", "outage10")
    assert sections_of(tmp_path / "missing.py") is None


def test_a_worktree_side_runs_the_agent_clis_the_checkout_installed(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A REV's worktree has no `.agents/`: both sides run the checkout's real CLIs (the sdk
    section failed on every REV round with "no Claude Code CLI at <worktree>/.agents/...")."""
    checkout = Path(__file__).resolve().parent.parent
    monkeypatch.delenv("TRANSCRIPT_OTEL_CLAUDE_CLI", raising=False)
    environment = side_environment(tmp_path)
    assert environment["PYTHONPATH"] == str(tmp_path / "src")
    for variable, installed in AGENT_CLIS.items():
        if (checkout / installed).exists():
            assert environment[variable] == str(checkout / installed)
        else:
            assert variable not in environment
    monkeypatch.setenv("TRANSCRIPT_OTEL_CLAUDE_CLI", "/elsewhere/claude")
    assert side_environment(tmp_path)["TRANSCRIPT_OTEL_CLAUDE_CLI"] == "/elsewhere/claude"
