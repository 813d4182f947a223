"""The real OpenCode CLI (npm `opencode-ai`, pinned in the Makefile) writing its database while
`transcript-otel watch --opencode` reads it, then `transcript-otel import --opencode`.

The model is scripted (`examples/model_servers/openai_chat.py`, scenario `shell`); OpenCode runs
offline as `opencode_offline.py` sets it up (throwaway HOME, XDG folders, TMPDIR, PWD, the
config folder's guard files). One run is shared by the tests: the CLI exits 0 and prints what
it prints unwatched (the recorded fixture), and the watch and the import agree with each other,
with the rows the CLI stored and with what the model served.

Without the CLI (`make agents`) these tests skip, or fail where `TRANSCRIPT_OTEL_REQUIRE_REAL`
requires it (tests/requirements_switch.py).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from live_watch import live_watch
from transcript_otel import check_invariants, read_records
from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent

from requirements_switch import require

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "agents"))

import opencode_cli  # noqa: E402
from captured_run import Recorded, run_cli, scratch_dirs  # noqa: E402
from chat_scenarios import prompt_for  # noqa: E402
from opencode_offline import model_server, offline_environment  # noqa: E402

SCENARIO = "shell"  # (never error_500 live: OpenCode retries it for ~75 s)
TRANSCRIPT_OTEL = [sys.executable, "-m", "transcript_otel.cli"]


@dataclass(frozen=True)
class LiveRun:
    cli: Recorded
    watched: list[dict[str, Any]]
    imported: list[dict[str, Any]]
    import_status: subprocess.CompletedProcess[str]
    rows: dict[str, list[dict[str, Any]]]
    cli_log: str  # OpenCode's own log of the run

    @property
    def served(self) -> list[dict[str, Any]]:
        """The model calls answered, but the title request (whose tokens OpenCode stores nowhere)."""
        return [call for call in self.cli.served if call.get("kind") != "title"]


def _ended_runs(records: list[dict[str, Any]]) -> int:
    return sum(record["event"] == TranscriptEvent.STOP.value for record in records)


def _token_reports(records: list[dict[str, Any]]) -> int:
    return sum(entry.get("entry_type") == "token_usage" for entry in _entries(records))


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> LiveRun:
    cli = require(opencode_cli.cli_path(), "the real OpenCode CLI is not installed (`make agents`)")
    scratch = tmp_path_factory.mktemp("opencode")
    home, work = scratch_dirs(scratch)
    (scratch / "tmp").mkdir()
    with model_server(SCENARIO, scratch) as model:
        environment = {**offline_environment(model, home, work), "TMPDIR": str(scratch / "tmp")}
        with live_watch("--opencode", scratch / "watch.json", scratch / "watched", environment) as watch:
            ran = run_cli(
                [str(cli), "run", "--format", "default", prompt_for(SCENARIO)], model, environment, work
            )
            steps = sum(call.get("kind") != "title" for call in ran.served)
            # Each step's usage is exported as its message completes: the last one too.
            watch.wait_for(_token_reports, lambda reports: reports >= steps)
    watched = watch.records()  # after the watch stopped, which ended the run
    assert _ended_runs(watched) == 1
    imported = subprocess.run(
        [*TRANSCRIPT_OTEL, "import", "--opencode", "--jsonl-dir", str(scratch / "imported")],
        env=environment,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    (run,) = (scratch / "imported").glob("*.jsonl")
    database = opencode_cli.database(home)
    log = "".join(path.read_text() for path in (database.parent / "log").glob("*.log"))
    return LiveRun(ran, watched, list(read_records(run)), imported, opencode_cli.stored(home), log)


def _entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record["context"] for record in records if record["event"] == TranscriptEvent.ENTRY.value]


def _spans(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [record["context"] for record in records if record["event"] == TranscriptEvent.SPAN.value]


def test_the_cli_watched_exits_0_and_prints_what_it_prints_unwatched(live: LiveRun) -> None:
    assert live.cli.exit_code == 0, live.cli.stderr
    recorded = (ROOT / "tests/fixtures/line_streams/opencode" / f"{SCENARIO}.default.txt").read_text()
    assert live.cli.stdout == recorded
    assert "Error" not in live.cli.stderr
    # Its own log says no write of it waited on a lock (its busy timeout is 5 s).
    assert live.cli_log
    assert "locked" not in live.cli_log
    assert "SQLITE_BUSY" not in live.cli_log


def test_the_watch_and_the_import_agree_with_the_rows_the_cli_stored(live: LiveRun) -> None:
    assert live.import_status.returncode == 0, live.import_status.stderr
    for records in (live.watched, live.imported):
        assert check_invariants(records) == []
    said = [(entry["entry_type"], entry["detail"]) for entry in _entries(live.watched)]
    assert said == [(entry["entry_type"], entry["detail"]) for entry in _entries(live.imported)]
    (session,) = live.rows["session"]
    assert {entry["session_id"] for entry in _entries(live.watched)} == {session["id"]}
    texts = [part["data"]["text"] for part in live.rows["part"] if part["data"]["type"] == "text"]
    kinds = {
        kind: [d.get("text") for k, d in said if k == kind] for kind in ("user_message", "assistant_message")
    }
    assert kinds["user_message"] + kinds["assistant_message"] == texts
    (tool,) = [part["data"] for part in live.rows["part"] if part["data"]["type"] == "tool"]
    calls = [(k, d["tool_use_id"]) for k, d in said if k in ("tool_use", "tool_result")]
    assert calls == [("tool_use", tool["callID"]), ("tool_result", tool["callID"])]


def test_the_tokens_are_what_the_model_served_and_the_cost_what_the_cli_stored(live: LiveRun) -> None:
    usage = [call["usage"] for call in live.served]
    (session,) = live.rows["session"]
    for records in (live.watched, live.imported):
        spans = _spans(records)
        chats = [span[fields.ATTRIBUTES] for span in spans if span[fields.NAME] == "chat scripted-chat"]
        assert sum(chat.get("gen_ai.usage.input_tokens", 0) for chat in chats) == sum(
            u["prompt_tokens"] for u in usage
        )
        assert sum(chat.get("gen_ai.usage.output_tokens", 0) for chat in chats) == sum(
            u["completion_tokens"] for u in usage
        )
        (root,) = [span[fields.ATTRIBUTES] for span in spans if span[fields.NAME] == "invoke_agent opencode"]
        assert root["transcript.usage.cost_usd"] == pytest.approx(session["cost"], abs=1e-12)
        assert root["transcript.usage.cache_read.input_tokens"] == session["tokens_cache_read"]
