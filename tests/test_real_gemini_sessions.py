"""The real Gemini CLI (npm, pinned in the Makefile) writing its session while `transcript-otel
watch --gemini` follows it, and `transcript-otel import --gemini` afterwards.

The model is scripted (`examples/model_servers/gemini_api.py`, scenario `shell`: a text, a
`run_shell_command` call, the answer), the CLI runs offline in a throwaway HOME
(`gemini_offline.py`). One live run is shared by the tests: the watch's and the import's runs
agree with each other, with the session the CLI stored and with what the model served.

Without the CLI (`make agents`) these tests skip, or fail where the Makefile requires them
(`TRANSCRIPT_OTEL_REQUIRE_REAL`, tests/requirements_switch.py).
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, NamedTuple

import pytest

from transcript_otel import check_invariants, read_records
from transcript_otel.model import span_records as fields
from transcript_otel.model.entries import TranscriptEvent

from loopback import subprocess_env
from requirements_switch import require

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "examples" / "model_servers"))

sys.path.insert(0, str(ROOT / "tests" / "agents"))

from captured_run import run_cli  # noqa: E402
from chat_scenarios import prompt_for  # noqa: E402
from gemini_offline import model_server, offline_environment  # noqa: E402

INSTALLED_CLI = ROOT / ".agents" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
CLI = [sys.executable, "-m", "transcript_otel.cli"]
SCENARIO = "shell"
ARGUMENTS = ("--output-format", "stream-json", "--approval-mode", "yolo")
SPAN_USAGE = {
    "gen_ai.usage.input_tokens": "promptTokenCount",
    "gen_ai.usage.output_tokens": "candidatesTokenCount",
    "gen_ai.usage.cache_read.input_tokens": "cachedContentTokenCount",
    "gen_ai.usage.reasoning.output_tokens": "thoughtsTokenCount",
}
STORED_USAGE = {
    "gen_ai.usage.input_tokens": "input",
    "gen_ai.usage.output_tokens": "output",
    "gen_ai.usage.cache_read.input_tokens": "cached",
    "gen_ai.usage.reasoning.output_tokens": "thoughts",
}


def with_thoughts_in_output(counts: dict[str, int]) -> dict[str, int]:
    """Gemini counts thoughts apart from the answer's tokens; the conventions (and every harness
    here) count them within the output tokens."""
    output, thoughts = "gen_ai.usage.output_tokens", "gen_ai.usage.reasoning.output_tokens"
    return {**counts, output: counts[output] + counts[thoughts]}


class LiveRun(NamedTuple):
    exit_code: int
    stdout: str
    served: list[dict[str, Any]]
    session: Path  # the file the CLI wrote
    watched: list[dict[str, Any]]  # the watch's mirror, every record
    imported: list[dict[str, Any]]  # the import's run
    import_stdout: str


def _records(folder: Path) -> list[dict[str, Any]]:
    return [record for path in sorted(folder.glob("*.jsonl")) for record in read_records(path)]


def _entries(records: list[dict[str, Any]]) -> list[tuple[str, Any]]:
    return [
        (r["context"]["entry_type"], r["context"]["detail"])
        for r in records
        if r["event"] == TranscriptEvent.ENTRY.value
    ]


def _wait_for_entries(folder: Path, wanted: int) -> None:
    """Waits (up to two minutes on a busy machine) until the watch's mirror holds `wanted`
    entries; no time is asserted."""
    deadline = time.monotonic() + 120
    while len(_entries(_records(folder))) < wanted:
        assert time.monotonic() < deadline, f"the watch exported {_entries(_records(folder))}"
        time.sleep(0.1)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> LiveRun:
    cli = require(
        INSTALLED_CLI if INSTALLED_CLI.exists() else None,
        "the real Gemini CLI is not installed (`make agents`)",
    )
    scratch = tmp_path_factory.mktemp("gemini")
    home, work, tmp = scratch / "home", scratch / "work", scratch / "tmp"
    for folder in (home, work, tmp):
        folder.mkdir()
    watch_env = subprocess_env(HOME=str(home), TRANSCRIPT_OTEL_JSONL_DIR=str(scratch / "watched"))
    watch_env.pop("GEMINI_CLI_HOME", None)
    watch = subprocess.Popen(
        [*CLI, "watch", "--gemini", "--state", str(scratch / "watch.json")],
        env=watch_env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        # Before the CLI's first run its folder is not there: the watch waits for it.
        assert f"waiting for {home / '.gemini' / 'tmp'}" in watch.stdout.readline()
        with model_server(SCENARIO, scratch) as model:
            environment = offline_environment(model, home) | {"PWD": str(work), "TMPDIR": str(tmp)}
            command = [
                str(cli),
                "-p",
                prompt_for(SCENARIO),
                "--output-format",
                "stream-json",
                "--approval-mode",
                "yolo",
            ]
            done = run_cli(command, model, environment, work, timeout=300)
        (session,) = (home / ".gemini" / "tmp").glob("*/chats/session-*.jsonl")
        imported_dir = scratch / "imported"
        imported = subprocess.run(
            [*CLI, "import", "--gemini", "--jobs", "1", "--jsonl-dir", str(imported_dir)],
            env=watch_env,
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert imported.returncode == 0, imported.stderr
        _wait_for_entries(scratch / "watched", len(_entries(_records(imported_dir))))
    finally:
        watch.send_signal(signal.SIGINT)
        stopped = watch.wait(60)
    assert stopped == 0, watch.stderr.read() if watch.stderr else ""
    return LiveRun(
        done.exit_code,
        done.stdout,
        done.served,
        session,
        _records(scratch / "watched"),
        _records(imported_dir),
        imported.stdout,
    )


def test_the_cli_ran_its_tool_and_answered(live: LiveRun) -> None:
    assert live.exit_code == 0
    kinds = [json.loads(line)["type"] for line in live.stdout.splitlines() if line.startswith("{")]
    assert kinds.count("tool_use") == kinds.count("tool_result") == 1


def test_the_watch_and_the_import_agree_with_each_other_and_the_stored_session(live: LiveRun) -> None:
    assert check_invariants(live.imported) == []
    assert check_invariants(live.watched) == []
    assert _entries(live.watched) == _entries(live.imported)
    messages: dict[str, dict[str, Any]] = {}
    for line in live.session.read_text().splitlines():
        record = json.loads(line)
        if isinstance(record.get("id"), str):
            messages[record["id"]] = record  # the last record per id
    prompts = [
        m["content"][0]["text"]
        for m in messages.values()
        if m["type"] == "user" and "text" in m["content"][0]
    ]
    answers = [m for m in messages.values() if m["type"] == "gemini"]
    entries = _entries(live.imported)
    assert [d["text"] for kind, d in entries if kind == "user_message"] == [prompt_for(SCENARIO)] == prompts
    assert [d["text"] for kind, d in entries if kind == "assistant_message"] == [
        m["content"] for m in answers
    ]
    calls = [call for m in answers for call in m.get("toolCalls", [])]
    assert [d["tool_use_id"] for kind, d in entries if kind == "tool_use"] == [call["id"] for call in calls]
    assert [d["tool_use_id"] for kind, d in entries if kind == "tool_result"] == [
        call["id"] for call in calls
    ]


@pytest.mark.parametrize("which", ["watched", "imported"])
def test_the_chat_spans_count_what_the_model_served_and_the_cli_stored(live: LiveRun, which: str) -> None:
    records = getattr(live, which)
    chats = [
        r["context"]
        for r in records
        if r["event"] == TranscriptEvent.SPAN.value and r["context"][fields.NAME].startswith("chat")
    ]
    counted = {name: sum(span[fields.ATTRIBUTES].get(name, 0) for span in chats) for name in SPAN_USAGE}
    main_calls = [call for call in live.served if call.get("kind") == "stream" and call.get("status") == 200]
    served = {name: sum(call["usage"].get(key, 0) for call in main_calls) for name, key in SPAN_USAGE.items()}
    stored_records: dict[str, Any] = {}
    for line in live.session.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "gemini":
            stored_records[record["id"]] = record["tokens"]
    stored = {name: sum(t.get(key, 0) for t in stored_records.values()) for name, key in STORED_USAGE.items()}
    assert counted == with_thoughts_in_output(served) == with_thoughts_in_output(stored)
    assert counted["gen_ai.usage.input_tokens"] > 0
