"""`transcript-otel show`, `summary` and `validate` on captured runs of every adapter.

Most tests call the command line's `main()` in-process and read what it printed; the
ones about tracebacks and exit statuses run the real `transcript-otel` program.
"""

from __future__ import annotations

import json
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import tracemalloc
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from transcript_otel.cli import main
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.show import follow
from transcript_otel.reading.sources import open_run

from helpers import FIXTURE_RUNS, write_large_run
from session_fixtures import SESSIONS

RUNS = Path(__file__).parent / "fixtures" / "runs"
Capture = pytest.CaptureFixture[str]
CLI = [sys.executable, "-m", "transcript_otel.cli"]


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def entries_of(path: Path) -> list[dict[str, Any]]:
    return [r["context"] for r in records_of(path) if r["event"] == "transcript.entry"]


def cli(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def program(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CLI, *argv], capture_output=True, text=True, timeout=120, env={**os.environ, **(env or {})}
    )


# -- every captured run ---------------------------------------------------------------------


@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=lambda path: path.stem)
def test_show_prints_one_block_per_entry(capsys: Capture, run: Path) -> None:
    status, out, _ = cli(capsys, "show", str(run))
    assert status == 0
    entries = entries_of(run)
    headers = [line for line in out.splitlines() if line.startswith(("[", "[subagent"))]
    assert len(headers) == len(entries)
    for header, entry in zip(headers, entries, strict=True):
        prefix = "" if entry["source"] == "main" else f"[{entry['source']}] "
        assert header.startswith(f"{prefix}[{entry['timestamp'][11:19]}] ")
    assert out.startswith("── ")  # the run's banner
    assert "\x1b[" not in out  # no colour when not a terminal


@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=lambda path: path.stem)
def test_summary_json_agrees_with_the_runs_own_counts(capsys: Capture, run: Path) -> None:
    status, out, _ = cli(capsys, "summary", str(run), "--json")
    assert status == 0
    found = json.loads(out)
    (stop,) = [r["context"] for r in records_of(run) if r["event"] == "transcript.stop"]
    assert found["total_entries"] == stop["total_entries"]
    assert found["entries_by_type"] == stop["entries_by_type"]
    assert found["entries_by_source"] == stop["entries_by_source"]
    assert found["status"] == ("failed" if "error" in stop["entries_by_type"] else "completed")
    assert found["run_id"] == stop["run_id"]
    uses = stop["entries_by_type"].get("tool_use", 0)
    assert sum(tool["calls"] for tool in found["tools"].values()) == uses


def test_summary_counts_every_kind_of_token(capsys: Capture) -> None:
    run = RUNS / "claude-sdk-parallel-subagents.jsonl"
    status, out, _ = cli(capsys, "summary", str(run), "--json")
    assert status == 0
    # All the model served the main agent and its two subagents: 7,400 input, 100 of it read
    # from the cache, none written; 210 output; the CLI's last total cost.
    assert json.loads(out)["tokens"] == {
        "input": 7400,
        "output": 210,
        "cached_input": 100,
        "cache_write_input": 0,
    }
    _, text, _ = cli(capsys, "summary", str(run))
    assert "tokens    7400 input · 210 output · 100 cached input · 0 cache write input · $0.03342" in text


@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=lambda path: path.stem)
def test_validate_passes_every_captured_run(capsys: Capture, run: Path) -> None:
    status, out, err = cli(capsys, "validate", str(run))
    assert (status, out) == (0, "")
    assert err.strip().endswith(": ok")


# -- what show shows ------------------------------------------------------------------------


def test_show_uses_a_symbol_per_role_and_prefixes_subagents(capsys: Capture) -> None:
    _, out, _ = cli(capsys, "show", str(RUNS / "wink-0.27-claude-rich.jsonl"))
    assert "] 👤 USER\n## 1. Task (task)" in out
    assert "] 🤖 THINKING\npondering" in out
    assert '] 🔧 Task\n{"description":"List files"' in out
    assert "] 🔧 Task → result\nsub done" in out
    assert "[subagent:a1b2c3] [14:33:42] 🔧 Bash\n" in out
    assert "] ⚙️ UNKNOWN\n(unreadable: Invalid JSON)" in out


def test_show_ends_a_failed_run_with_failed_and_a_good_one_with_stopped(capsys: Capture) -> None:
    _, out, _ = cli(capsys, "show", str(RUNS / "wink-0.27-codex-failed.jsonl"))
    assert out.rstrip().splitlines()[-1].startswith("── failed · 5 entries · ")
    _, out, _ = cli(capsys, "show", str(RUNS / "wink-0.27-codex-failed.jsonl"), "--type", "user_message")
    assert out.rstrip().splitlines()[-1].startswith("── failed · ")  # the error is not shown, still counts
    _, out, _ = cli(capsys, "show", str(RUNS / "wink-0.27-codex-rich.jsonl"))
    assert out.rstrip().splitlines()[-1].startswith("── stopped · 26 entries · ")


def test_show_labels_a_chat_system_prompt_and_usage(capsys: Capture) -> None:
    _, out, _ = cli(capsys, "show", str(RUNS / "wink-0.24-openai-tool.jsonl"))
    assert "] ⚙️ SYSTEM\n## 1. Task (task)" in out
    assert "] ⚙️ USAGE\ntokens: 100 in, 20 out, 5 cached, 3 reasoning" in out
    assert "] 🔧 echo → result\nhi" in out


def test_show_marks_failures(capsys: Capture) -> None:
    _, out, _ = cli(capsys, "show", str(RUNS / "run-rtf1.jsonl"), "--color", "always")
    assert "\x1b[31;1m[" in out  # the failed pytest call's header is red
    _, out, _ = cli(capsys, "show", str(RUNS / "wink-0.24-openai-error.jsonl"))
    assert "] ⚙️ ERROR\nPromptEvaluationError: OpenAI request failed." in out


def test_show_filters_by_type_source_and_time(capsys: Capture) -> None:
    run = str(RUNS / "claude-sdk-parallel-subagents.jsonl")
    _, out, _ = cli(capsys, "show", run, "--type", "tool_use")
    assert out.count("] 🔧 ") == 4
    assert "→ result" not in out
    _, out, _ = cli(capsys, "show", run, "--source", "subagent")
    headers = [line for line in out.splitlines() if line.startswith("[")]
    assert len(headers) == 6  # each subagent's Bash call, its result, its answer
    assert all(line.startswith("[subagent:toolu_agent_") for line in headers)
    _, out, _ = cli(capsys, "show", run, "--source", "subagent:toolu_agent_a", "--type", "assistant_message")
    assert len([line for line in out.splitlines() if line.startswith("[")]) == 1
    status, out, err = cli(capsys, "show", run, "--since", "2030-01-01T00:00:00Z")
    assert status == 0
    assert "(no entries to show)" in err
    assert "] " not in "".join(line for line in out.splitlines() if line.startswith("["))


def test_show_shortens_long_texts_unless_full(tmp_path: Path, capsys: Capture) -> None:
    records = records_of(RUNS / "wink-0.24-openai-tool.jsonl")
    for record in records:
        if record["event"] == "transcript.entry" and record["context"]["entry_type"] == "assistant_message":
            record["context"]["detail"]["text"] = "x" * 10_000
    run = tmp_path / "long.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, out, _ = cli(capsys, "show", str(run))
    assert "… (6000 more characters; --full shows all)" in out
    _, out, _ = cli(capsys, "show", str(run), "--full")
    assert "x" * 10_000 in out


# -- finding runs ---------------------------------------------------------------------------


@pytest.fixture
def mirror(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "runs"
    directory.mkdir()
    for index, run in enumerate(FIXTURE_RUNS):
        copy = directory / run.name
        shutil.copy(run, copy)
        os.utime(copy, (1_800_000_000 + index, 1_800_000_000 + index))
    monkeypatch.setenv("TRANSCRIPT_OTEL_JSONL_DIR", str(directory))
    return directory


def test_a_run_is_found_by_run_id_session_id_or_last(mirror: Path, capsys: Capture) -> None:
    # These files are not named by their start time: `last` is the run whose first record is latest.
    newest = max(FIXTURE_RUNS, key=lambda run: datetime.fromisoformat(records_of(run)[0]["timestamp"]))
    _, by_last, _ = cli(capsys, "summary", "last", "--json")
    assert json.loads(by_last)["run_id"] == records_of(newest)[0]["context"]["run_id"]
    stop = records_of(RUNS / "run-rtf1.jsonl")[-1]["context"]
    _, by_run_id, _ = cli(capsys, "summary", stop["run_id"], "--json")
    assert json.loads(by_run_id)["prompt_name"] == "cli-rtf1"
    _, by_name, _ = cli(capsys, "summary", "openai-tool", "--json")
    assert json.loads(by_name)["prompt_name"] == "openai-tool"


def _imported(session: Path, runs: Path) -> Path:
    """`transcript-otel import SESSION` into `runs`: the run's file."""
    before = set(runs.glob("*.jsonl")) if runs.exists() else set()
    done = program("import", str(session), "--jsonl-dir", str(runs))
    assert done.returncode == 0, done.stderr
    (run,) = set(runs.glob("*.jsonl")) - before
    return run


def _began(run: Path) -> str:
    """When the run's session began: its start record's time (ISO 8601, UTC)."""
    began: str = records_of(run)[0]["timestamp"]
    return began


def test_last_is_the_run_that_started_last_not_the_file_written_last(tmp_path: Path) -> None:
    """After an import, `show last` is the session that began last, though an older one's run
    was written later (issue 47: a 16:53 Codex run shown instead of the 17:07 Claude one)."""
    runs = tmp_path / "runs"
    (claude,) = (SESSIONS / "claude_code/tools/home/.claude/projects/-scratch-work").glob("*.jsonl")
    (codex,) = (SESSIONS / "codex/shell/codex-home").rglob("rollout-*.jsonl")
    # Which session began last depends on when each was recorded: read it from the runs.
    imported = sorted((_imported(claude, runs), _imported(codex, runs)), key=_began)
    assert _began(imported[0]) < _began(imported[1])
    earlier, later = imported  # the earlier one's run is written last
    os.utime(later, (1_800_000_000, 1_800_000_000))
    os.utime(earlier, (1_800_000_100, 1_800_000_100))
    env = {"TRANSCRIPT_OTEL_JSONL_DIR": str(runs)}
    shown = program("show", "last", env=env)
    assert shown.returncode == 0, shown.stderr
    assert shown.stdout == program("show", str(later), env=env).stdout
    summary = json.loads(program("summary", "last", "--json", env=env).stdout)
    assert summary["run_id"] == records_of(later)[0]["context"]["run_id"]


def test_last_tells_runs_of_one_second_apart_by_their_first_records(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    runs.mkdir()
    records = records_of(RUNS / "run-rtf1.jsonl")
    for name, started, run_id, mtime in (
        ("20261127T084330Z_cli_b.jsonl", "2026-11-27T08:43:30.100000+00:00", "first", 1_800_000_100),
        ("20261127T084330Z_cli_a.jsonl", "2026-11-27T08:43:30.900000+00:00", "second", 1_800_000_000),
    ):
        for record in records:
            record["context"]["run_id"] = run_id
        records[0]["timestamp"] = started
        (runs / name).write_text("".join(json.dumps(record) + "\n" for record in records))
        os.utime(runs / name, (mtime, mtime))
    summary = program("summary", "last", "--json", env={"TRANSCRIPT_OTEL_JSONL_DIR": str(runs)})
    assert json.loads(summary.stdout)["run_id"] == "second"


def test_an_unknown_or_ambiguous_run_is_a_clear_error(mirror: Path, capsys: Capture) -> None:
    status, out, err = cli(capsys, "show", "no-such-run")
    assert (status, out) == (2, "")
    hint = "(give a file, a run id, or 'last')"
    assert err == f"transcript-otel show: no run 'no-such-run' in {mirror} {hint}\n"
    status, _, err = cli(capsys, "show", "wink-0.2")
    assert status == 2
    assert f"'wink-0.2' matches 9 runs in {mirror}: " in err


@pytest.mark.filterwarnings("always")  # each command is a process of its own for a user
def test_an_otlp_json_export_is_read_as_a_run(tmp_path: Path, capsys: Capture) -> None:
    def log(event: str, attributes: dict[str, Any], nanos: int) -> dict[str, Any]:
        return {
            "timeUnixNano": str(nanos),
            "severityText": "INFO",
            "eventName": event,
            "body": {"stringValue": event},
            "traceId": "5b8efff798038103d269b633813fc60c",
            "spanId": "eee19b7ec3c1b174",
            "attributes": [{"key": k, "value": {"stringValue": v}} for k, v in attributes.items()],
        }

    envelope = {
        "transcript.prompt_name": "review",
        "transcript.adapter": "cli",
        "transcript.entry_type": "assistant_message",
        "transcript.source": "main",
        "transcript.timestamp": "2026-11-23T09:00:01+00:00",
        "transcript.detail": '{"text": "Looks good."}',
    }
    entry = log("transcript.entry", envelope, 1_795_424_401_000_000_000)
    entry["attributes"].append({"key": "transcript.sequence_number", "value": {"intValue": "1"}})
    request = {"resourceLogs": [{"scopeLogs": [{"logRecords": [entry]}]}]}
    export = tmp_path / "logs.json"
    export.write_text(json.dumps(request) + "\n")
    status, out, _ = cli(capsys, "show", str(export))
    assert status == 0
    assert "[09:00:01] 🤖 ASSISTANT\nLooks good.\n" in out
    # Lines of the wrong shape around it: each skipped with a warning naming it, no traceback.
    wrong = [
        {"resourceLogs": "nope"},
        {"resourceLogs": [{"scopeLogs": 5}]},
        {"resourceLogs": [None]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": "x"}]}]}]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [{"attributes": [{"key": 1, "value": []}]}]}]}]},
        {"resourceLogs": [{"scopeLogs": [{"logRecords": [7]}]}]},
    ]
    export.write_text("".join(json.dumps(line) + "\n" for line in [*wrong, request]))
    for command in (["show"], ["summary"], ["validate"], ["export", "--format", "markdown"]):
        status, out, err = cli(capsys, command[0], str(export), *command[1:])
        assert status in (0, 1), command  # validate: 1, for the run's missing start and stop
        assert "Traceback" not in err
        for number in range(1, len(wrong) + 1):  # validate counts them among its problems (stdout)
            assert f"{export}:{number}: skipped the rest of the line: " in err + out
    status, out, _ = cli(capsys, "show", str(export))
    assert "Looks good." in out  # the good line after them is still read


# -- bad input ------------------------------------------------------------------------------


def test_an_empty_run(tmp_path: Path, capsys: Capture) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    assert cli(capsys, "show", str(empty)) == (0, "", "(no entries to show)\n")
    status, out, _ = cli(capsys, "summary", str(empty), "--json")
    assert status == 0
    assert json.loads(out)["status"] == "incomplete"
    assert json.loads(out)["total_entries"] == 0
    status, out, _ = cli(capsys, "validate", str(empty))
    assert status == 1
    assert "no records" in out


def test_a_partial_last_line_loses_nothing_before_it(tmp_path: Path, capsys: Capture) -> None:
    lines = (RUNS / "wink-0.27-codex-rich.jsonl").read_bytes().splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_bytes(b"".join(lines[:-2]) + lines[-2][:40])  # the writer died mid-line
    status, out, err = cli(capsys, "show", str(cut))
    assert status == 0
    kept_entries = sum(b'"event":"transcript.entry"' in line for line in lines[:-2])
    assert len([line for line in out.splitlines() if line.startswith("[")]) == kept_entries
    assert f"{cut}:{len(lines) - 1}: skipped partial last line" in err
    status, out, _ = cli(capsys, "validate", str(cut))
    assert status == 1
    assert f"{cut}:{len(lines) - 1}: skipped partial last line (not a record)" in out
    status, out, _ = cli(capsys, "summary", str(cut), "--json")
    assert json.loads(out)["status"] == "incomplete"


def test_validate_json_says_where_which_invariant_and_what(tmp_path: Path, capsys: Capture) -> None:
    records = [json.loads(line) for line in (RUNS / "wink-0.27-codex-rich.jsonl").read_text().splitlines()]
    entries = [index for index, record in enumerate(records) if record["event"] == "transcript.entry"]
    records[entries[2]]["context"]["sequence_number"] = records[entries[1]]["context"]["sequence_number"]
    broken = tmp_path / "broken.jsonl"
    broken.write_text("".join(json.dumps(record) + "\n" for record in records))
    status, out, _ = cli(capsys, "validate", str(broken), "--json")
    verdict = json.loads(out)
    assert status == 1
    assert (verdict["run"], verdict["records"], verdict["ok"]) == (str(broken), len(records), False)
    problem = verdict["problems"][0]  # the repeated number, then those that follow it
    assert verdict["problems_total"] == len(verdict["problems"]) >= 1
    assert problem["location"] == f"{broken}:{entries[2] + 1}"
    assert (problem["invariant"], problem["invariant_name"]) == (2, "sequence monotonicity")
    status, out, _ = cli(capsys, "validate", str(RUNS / "wink-0.27-codex-rich.jsonl"), "--json")
    assert status == 0
    assert json.loads(out)["ok"] is True
    assert json.loads(out)["problems"] == []


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (b"\x00\xff\xfe garbage \x80\n\x01\x02", "skipped"),
        (b"PK\x03\x04 not really a zip", "skipped"),
        (b'{"event": "transcript.entry", "context": {"entry_type": 5}}\n', "malformed transcript entry"),
    ],
    ids=["binary", "fake-zip", "bad-envelope"],
)
def test_corrupt_input_is_told_without_a_traceback(tmp_path: Path, content: bytes, expected: str) -> None:
    corrupt = tmp_path / "corrupt.jsonl"
    corrupt.write_bytes(content)
    records = expected == "malformed transcript entry"  # a record, with a bad envelope
    for command in ("show", "summary", "validate"):
        result = program(command, str(corrupt))
        assert "Traceback" not in result.stderr, (command, result.stderr)
        if records:
            assert result.returncode == (1 if command == "validate" else 0), (command, result.stderr)
        else:  # nothing in it is a record: corrupt input, exit 2, the reason last
            assert result.returncode == 2, (command, result.stderr)
            reason = f"{corrupt} is not a transcript: not one record could be read from it"
            assert result.stderr.splitlines()[-1] == f"transcript-otel {command}: {reason}"
    assert expected in program("show", str(corrupt)).stdout + program("show", str(corrupt)).stderr


def test_a_megabyte_of_random_bytes_is_a_few_lines_and_exit_2(tmp_path: Path) -> None:
    noise = tmp_path / "noise.bin"
    noise.write_bytes(random.Random(7).randbytes(1 << 20))
    for command in (["show"], ["summary"], ["export", "--format", "markdown"]):
        result = program(*command, str(noise))
        assert result.returncode == 2
        lines = result.stderr.splitlines()
        assert len(lines) <= 12  # ten warnings, how many more, the reason
        assert lines[-2].endswith("more warnings like these not shown")
        assert lines[-1].endswith("is not a transcript: not one record could be read from it")


def test_a_missing_run_or_a_directory_exits_2_without_a_traceback(tmp_path: Path) -> None:
    for spec in (str(tmp_path), "/no/such/file.jsonl"):
        result = program("summary", spec, env={"TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "none")})
        assert result.returncode == 2
        assert result.stderr.startswith("transcript-otel summary: ")
        assert "Traceback" not in result.stderr


def test_every_command_has_useful_help() -> None:
    for command, words in {
        "show": ("symbol per role", "--follow", "--source", "--type", "--since", "examples:"),
        "summary": ("tokens in and out", "--json"),
        "validate": ("seven", "1 envelope completeness", "exits 1"),
    }.items():
        result = program(command, "--help")
        assert result.returncode == 0
        text = " ".join(result.stdout.split())  # argparse wraps lines to the terminal
        for word in words:
            assert word in text, (command, word)
        assert "'last' is the newest run" in text


def test_show_piped_into_a_closed_reader_exits_quietly(tmp_path: Path) -> None:
    large = write_large_run(tmp_path / "large.jsonl", 5_000)
    pipeline = subprocess.run(
        f"{sys.executable} -m transcript_otel.cli show {large} | head -n 3",
        shell=True,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert pipeline.returncode == 0
    assert len(pipeline.stdout.splitlines()) == 3
    assert "Traceback" not in pipeline.stderr
    assert "BrokenPipe" not in pipeline.stderr


# -- long and live runs ---------------------------------------------------------------------


def test_a_100000_entry_run_streams_through_summary_and_show(tmp_path: Path) -> None:
    large = write_large_run(tmp_path / "large.jsonl")
    size = large.stat().st_size
    tracemalloc.start()
    try:
        digest = RunDigest.of(open_run(large).records())
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert digest.as_dict()["total_entries"] == 100_000
    assert digest.tools["shell"].calls == 20_000
    assert digest.tools["shell"].failures == 2_000
    assert peak < size / 10, (peak, size)
    result = program("show", str(large), "--type", "tool_result", "--source", "subagent")
    assert result.returncode == 0


def test_follow_shows_a_run_while_it_is_written_and_stops_at_its_end(tmp_path: Path) -> None:
    lines = (RUNS / "wink-0.24-openai-tool.jsonl").read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(lines[0] + lines[1][:25])  # the start, and half a line being written
    started = threading.Event()

    def agent() -> None:
        started.wait(timeout=30)
        with open(live, "ab") as handle:
            handle.write(lines[1][25:])
            handle.flush()
            for line in lines[2:]:
                handle.write(line)
                handle.flush()

    writer = threading.Thread(target=agent)
    writer.start()
    seen = []
    for record in follow(live, poll_s=0.01):
        seen.append(record)
        started.set()
    writer.join(timeout=30)
    assert [r["event"] for r in seen] == [json.loads(line)["event"] for line in lines]


def test_a_lone_surrogate_or_a_zoneless_time_is_shown_not_fatal(tmp_path: Path, capsys: Capture) -> None:
    records = records_of(RUNS / "wink-0.24-openai-tool.jsonl")
    records[1]["context"]["detail"] = {"text": "half \ud83d a pair"}
    records[2]["context"]["timestamp"] = "2026-11-23T14:33:14.500000"  # no zone: UTC
    run = tmp_path / "odd.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = program("show", str(run))
    assert result.returncode == 0, result.stderr
    assert "half \\ud83d a pair" in result.stdout
    assert len([line for line in result.stdout.splitlines() if line.startswith("[")]) == 6
    for fmt in ("markdown", "jsonl", "html"):
        exported = program("export", str(run), "--format", fmt)
        assert exported.returncode == 0, (fmt, exported.stderr)
    status, out, _ = cli(capsys, "summary", str(run), "--json")
    assert status == 0
    assert json.loads(out)["total_entries"] == 6


def test_a_run_is_found_by_the_session_id_it_learned_late(mirror: Path, capsys: Capture) -> None:
    stop = records_of(RUNS / "claude-sdk-parallel-subagents.jsonl")[-1]["context"]
    assert stop["session_id"] not in "".join(path.name for path in mirror.iterdir())
    status, out, _ = cli(capsys, "summary", stop["session_id"], "--json")
    assert status == 0
    assert json.loads(out)["run_id"] == stop["run_id"]


def test_follow_reads_a_replaced_file_again(tmp_path: Path) -> None:
    lines = (RUNS / "wink-0.24-openai-tool.jsonl").read_bytes().splitlines(keepends=True)
    live = tmp_path / "live.jsonl"
    live.write_bytes(lines[0])
    started = threading.Event()

    def rotate() -> None:
        started.wait(timeout=30)
        replacement = tmp_path / "new.jsonl"
        replacement.write_bytes(b"".join(lines))
        os.replace(replacement, live)

    writer = threading.Thread(target=rotate)
    writer.start()

    def read() -> list[str]:
        seen = []
        for record in follow(live, poll_s=0.01):
            seen.append(record["event"])
            started.set()
        return seen

    with pytest.warns(UserWarning, match="was replaced or truncated: reading it again"):
        seen = read()
    writer.join(timeout=30)
    assert seen == ["transcript.start"] + [json.loads(line)["event"] for line in lines]


def test_codex_exec_runs_read_as_words(tmp_path: Path, capsys: Capture) -> None:
    from transcript_otel.mappings.codex_exec import CodexExecAdapter

    adapter = CodexExecAdapter()
    lines = (
        (Path(__file__).parent / "fixtures" / "line_streams" / "codex-json.jsonl").read_text().splitlines()
    )
    entries = [entry for line in lines for entry in adapter.feed(line)]
    records = [
        {
            "timestamp": "2026-11-23T09:00:00+00:00",
            "event": "transcript.entry",
            "context": {
                "prompt_name": "codex",
                "adapter": "cli",
                "entry_type": entry.entry_type,
                "sequence_number": number,
                "source": "main",
                "timestamp": "2026-11-23T09:00:00+00:00",
                "detail": entry.detail,
            },
        }
        for number, entry in enumerate(entries, start=1)
    ]
    run = tmp_path / "codex.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, out, _ = cli(capsys, "show", str(run))
    assert "] 🤖 THINKING\nFirst I will write the data file and count its lines." in out
    assert '] 🔧 codex:command\n{"command":"/bin/bash -lc \'seq 2 > data.txt && wc -l data.txt\'"}' in out
    assert "] 🔧 codex:command → result\n2 data.txt" in out
    assert "] 🔧 codex:command → failed\ncat: missing.txt: No such file or directory" in out
    assert "] 🔧 codex:file_change → result\nadd /scratch/work/notes.txt" in out
    assert "] 🔧 docs:lookup → result\nDocs for data files:" in out
    assert "] 🤖 ASSISTANT\ndata.txt has 2 lines" in out


# -- what an agent printed cannot act on the reader's terminal --------------------------------------

HOSTILE = {
    "clear the screen": "\x1b[2J\x1b[H",
    "set the window title": "\x1b]0;pwned\x07",
    "a hyperlink": "\x1b]8;;https://example.invalid\x1b\\click\x1b]8;;\x1b\\",
    "overwrite the line above": "rm -rf ~ finished\n\x1b[1A\x1b[2Kall tests passed",
    "a carriage return": "rm -rf ~ finished\rall tests passed",
    "a C1 control": "\x9b2J",
}


def hostile_run(tmp_path: Path) -> Path:
    records = records_of(RUNS / "wink-0.24-openai-tool.jsonl")
    for record in records:
        context = record["context"]
        if record["event"] == "transcript.entry" and context["entry_type"] == "assistant_message":
            context["detail"]["text"] = "\n".join(HOSTILE.values())
    records[0]["context"]["prompt_name"] = "prompt\x1b[2J"
    run = tmp_path / "hostile.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    return run


@pytest.mark.parametrize(
    "argv",
    [
        ("show", "--color", "never"),
        ("show", "--color", "always"),
        ("summary",),
        ("export", "--format", "markdown"),
    ],
)
def test_control_sequences_in_a_transcript_are_shown_not_acted_on(
    argv: tuple[str, ...], tmp_path: Path, capsys: Capture
) -> None:
    run = hostile_run(tmp_path)
    if argv[0] == "export":
        output = tmp_path / "run.md"
        status, _, _ = cli(capsys, "export", str(run), *argv[1:], "-o", str(output))
        out = output.read_text()
    else:
        status, out, _ = cli(capsys, argv[0], str(run), *argv[1:])
    assert status == 0
    ours = re.sub(r"\x1b\[[0-9;]*m", "", out) if "always" in argv else out  # our own colours only
    assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f]", ours)
    if argv[0] != "summary":
        assert "rm -rf ~ finished\\rall tests passed" in out  # both halves there, as text
        assert "\\x1b[2J\\x1b[H" in out
    assert "prompt\\x1b[2J" in out


_OTLP_KEYS = st.sampled_from(
    [
        "resourceLogs",
        "scopeLogs",
        "logRecords",
        "attributes",
        "key",
        "value",
        "eventName",
        "timeUnixNano",
        "stringValue",
        "intValue",
        "arrayValue",
        "kvlistValue",
        "values",
        "traceId",
        "body",
    ]
)
_OTLP_SHAPED = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=4) | st.just("transcript.entry"),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(_OTLP_KEYS, children, max_size=4),
    max_leaves=16,
)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document=st.dictionaries(_OTLP_KEYS, _OTLP_SHAPED, min_size=1, max_size=3))
def test_no_otlp_json_document_makes_a_reading_command_raise(
    document: dict[str, Any], tmp_path: Path, capsys: Capture
) -> None:
    export = tmp_path / "fuzzed.json"
    export.write_text(json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [document]}]}]}) + "\n")
    for command in ("show", "summary"):
        status, _, _ = cli(capsys, command, str(export))
        assert status in (0, 2)
    export.write_text(json.dumps(document) + "\n")
    status, _, _ = cli(capsys, "summary", str(export))
    assert status in (0, 2)


def test_the_version_and_bad_numbers_are_answered_in_one_line(capsys: Capture) -> None:
    with pytest.raises(SystemExit) as shown:
        main(["--version"])
    assert shown.value.code == 0
    assert capsys.readouterr().out == "transcript-otel 0.1.0\n"
    with pytest.raises(SystemExit) as refused:
        main(["validate", "run.jsonl", "--max", "-3"])
    assert refused.value.code == 2
    assert capsys.readouterr().err.splitlines()[-1].endswith("argument --max: must be 0 or more, not -3")
