"""The real Gemini CLI (npm, pinned in the Makefile) under `transcript-otel run`, offline.

The model is scripted (`examples/model_servers/gemini_api.py`, in `gemini_offline`'s throwaway
HOME and TMPDIR); the agent is the real `gemini` 0.61.0. Scenario `shell` runs three times, each
once for the whole module: `--output-format stream-json` under `run` and directly (the agent
must behave the same instrumented), and `--output-format json` under `run`. The tests compare
the JSONL mirror (entries and `transcript.span` records) with what the model served and what the
CLI printed; `test_mapping_gemini.py` and `test_cli_run_gemini.py` cover every recorded scenario.

Without the CLI (`make agents`) these tests skip, or fail where the Makefile requires them
(`TRANSCRIPT_OTEL_REQUIRE_REAL`, tests/requirements_switch.py).
"""

from __future__ import annotations

import json
import sys
from functools import partial
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from transcript_otel.model.invariants import check_invariants
from transcript_otel.reading.digest import RunDigest

from requirements_switch import require

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import gemini_cli  # noqa: E402
from captured_run import CapturedRun, Recorded, record_mirrored  # noqa: E402
from chat_scenarios import prompt_for  # noqa: E402
from gemini_cli import (  # noqa: E402
    MAIN_MODEL,
    SHELL_ENTRY_TYPES,
    printed_totals,
    record,
    served_usage,
    span_usage,
)

PROMPT_NAME = "gemini-cli"
WRAPPER = (sys.executable, "-m", "transcript_otel.cli", "run", "--prompt-name", PROMPT_NAME, "--")
SCENARIO = "shell"
# What differs from run to run in what the CLI prints: ids, times, durations.
VARYING = frozenset({"timestamp", "session_id", "tool_id", "duration_ms"})


def require_cli() -> Path:
    reason = f"the real Gemini CLI is not installed (`make agents`, or {gemini_cli.CLI_VARIABLE})"
    return require(gemini_cli.cli_path(), reason)


def captured(output_format: str, scratch: Path) -> CapturedRun:
    recorded, records = record_mirrored(
        partial(record, output_format=output_format), SCENARIO, scratch, WRAPPER
    )
    return CapturedRun.of(SCENARIO, recorded, records, prompt_name=PROMPT_NAME)


@pytest.fixture(scope="module")
def stream_run(tmp_path_factory: pytest.TempPathFactory) -> CapturedRun:
    require_cli()
    return captured("stream-json", tmp_path_factory.mktemp("stream-json"))


@pytest.fixture(scope="module")
def direct_run(tmp_path_factory: pytest.TempPathFactory) -> Recorded:
    require_cli()
    return record(SCENARIO, tmp_path_factory.mktemp("direct"))


@pytest.fixture(scope="module")
def json_run(tmp_path_factory: pytest.TempPathFactory) -> CapturedRun:
    require_cli()
    return captured("json", tmp_path_factory.mktemp("json"))


def without_varying(value: Any) -> Any:
    if isinstance(value, dict):
        return {key: without_varying(item) for key, item in value.items() if key not in VARYING}
    return value


def test_the_cli_behaves_the_same_under_run(stream_run: CapturedRun, direct_run: Recorded) -> None:
    assert stream_run.exit_code == direct_run.exit_code == 0, stream_run.stderr[-2000:]
    direct = [json.loads(line) for line in direct_run.stdout.splitlines()]
    assert [without_varying(m) for m in stream_run.messages] == [without_varying(m) for m in direct]
    assert [(s["model"], s["status"]) for s in stream_run.served] == [
        (s["model"], s["status"]) for s in direct_run.served
    ]


def test_the_mirror_has_the_prompt_the_paired_call_and_the_answer(stream_run: CapturedRun) -> None:
    assert check_invariants(stream_run.records) == []
    entries = stream_run.entries
    assert [e["entry_type"] for e in entries] == SHELL_ENTRY_TYPES
    assert entries[1]["detail"]["text"] == prompt_for(SCENARIO)
    call, result = entries[3]["detail"], entries[4]["detail"]
    assert call["tool_name"] == result["tool_name"] == "run_shell_command"
    assert call["tool_use_id"] == result["tool_use_id"]
    assert call["input"]["command"] == "printf 'one\\ntwo\\n' > data.txt && wc -l data.txt"
    assert (result["content"], result["is_error"]) == ("2 data.txt", False)  # the real shell's count
    assert entries[5]["detail"]["text"] == "data.txt has 2 lines: one and two."
    usage = entries[6]["detail"]
    assert usage["model"] == MAIN_MODEL
    assert usage["usage"] == served_usage(stream_run.served, MAIN_MODEL)
    assert usage["session_usage"] == printed_totals(stream_run.served)


def test_the_spans_are_the_run_the_main_models_chat_and_the_shell_call(stream_run: CapturedRun) -> None:
    root = stream_run.root
    assert root["attributes"]["gen_ai.provider.name"] == "gcp.gemini"
    assert root["attributes"]["gen_ai.conversation.id"] == stream_run.messages[0]["session_id"]
    assert span_usage(root, "transcript.usage.") == printed_totals(stream_run.served)  # router included
    (chat,) = stream_run.chat_spans()
    assert chat["name"] == f"chat {MAIN_MODEL}"
    assert stream_run.parent(chat)["span_id"] == root["span_id"]
    attributes = chat["attributes"]
    assert attributes["gen_ai.operation.name"] == "chat"
    assert attributes["gen_ai.provider.name"] == "gcp.gemini"
    assert attributes["gen_ai.request.model"] == attributes["gen_ai.response.model"] == MAIN_MODEL
    assert span_usage(chat) == served_usage(stream_run.served, MAIN_MODEL)
    (tool,) = stream_run.named("execute_tool")
    assert tool["name"] == "execute_tool run_shell_command"
    assert tool["attributes"]["gen_ai.tool.call.id"] == stream_run.entries[3]["detail"]["tool_use_id"]
    assert stream_run.parent(tool)["span_id"] == chat["span_id"]
    assert tool["status"] == "UNSET"
    digest = RunDigest.of(stream_run.records)
    assert digest.tokens["input"] == printed_totals(stream_run.served)["input_tokens"]


def test_json_output_gives_the_prompt_the_last_answer_and_the_usage(json_run: CapturedRun) -> None:
    assert json_run.exit_code == 0, json_run.stderr[-2000:]
    assert check_invariants(json_run.records) == []
    document = json.loads(json_run.stdout)  # passed through whole: one object, no newline after it
    assert not json_run.stdout.endswith("\n")
    assert [(e["entry_type"], e["detail"].get("text")) for e in json_run.entries] == [
        ("user_message", prompt_for(SCENARIO)),  # from the command line
        ("assistant_message", document["response"]),
        ("token_usage", None),
    ]
    (chat,) = json_run.chat_spans()
    assert chat["name"] == f"chat {MAIN_MODEL}"
    assert span_usage(chat) == served_usage(json_run.served, MAIN_MODEL)
    assert span_usage(json_run.root, "transcript.usage.") == printed_totals(json_run.served)
    assert json_run.root["attributes"]["gen_ai.conversation.id"] == document["session_id"]
