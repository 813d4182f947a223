"""`export --format devflow`: captured runs as devflow transcripts (seed 003, ADR-011), read back."""

from __future__ import annotations

import gzip
import json
import tracemalloc
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import read_records
from transcript_otel.exports.devflow import turns as devflow_turns
from transcript_otel.exports.devflow.format import (
    GZIP_THRESHOLD,
    DevflowToolCall,
    DevflowTranscript,
    DevflowTurn,
)
from transcript_otel.exports.devflow.reader import read_devflow
from transcript_otel.exports.devflow.writer import devflow_run_id, write_devflow
from transcript_otel.reading.sources import open_run

from helpers import ListRun

RUNS = Path(__file__).parent / "fixtures" / "runs"
START = datetime(2026, 11, 23, 9, 0, tzinfo=UTC)


# -- record sources ---------------------------------------------------------------------


def record(event: str, at: datetime | str, **context: Any) -> dict[str, Any]:
    base = {"prompt_name": "fix-tests", "adapter": "scripted", "session_id": "5e551017-aaaa-bbbb"}
    return {
        "timestamp": at if isinstance(at, str) else at.isoformat(),
        "level": "DEBUG",
        "logger": "transcript_otel",
        "event": event,
        "message": event,
        "context": {**base, **context},
    }


class Run:
    """Builds a run's records: `start()`, `entry(...)`…, `stop()`."""

    def __init__(self) -> None:
        self.records: list[dict[str, Any]] = []
        self.at = START
        self.sequence: dict[str, int] = {}

    def _tick(self) -> datetime:
        self.at += timedelta(milliseconds=5)
        return self.at

    def start(self) -> Run:
        self.records.append(record("transcript.start", self._tick(), run_id="0123456789abcdef"))
        return self

    def entry(self, entry_type: str, detail: dict[str, Any], source: str = "main") -> Run:
        self.sequence[source] = self.sequence.get(source, 0) + 1
        at = self._tick()
        self.records.append(
            record(
                "transcript.entry",
                at,
                entry_type=entry_type,
                sequence_number=self.sequence[source],
                source=source,
                timestamp=at.isoformat(),
                detail=detail,
            )
        )
        return self

    def stop(self) -> Run:
        self.records.append(record("transcript.stop", self._tick(), run_id="0123456789abcdef"))
        return self

    def source(self) -> ListRun:
        return ListRun(self.records)


def export(tmp_path: Path, source: Any, **options: Any) -> DevflowTranscript:
    return read_devflow(write_devflow(source, tmp_path / "out", **options))


def contents(transcript: DevflowTranscript) -> list[tuple[str, str]]:
    return [(turn.role, turn.content) for turn in transcript.turns]


# -- the captured run of every adapter --------------------------------------------------

Call = tuple[str, str, dict[str, Any], str, str]  # id, name, input, output, error


@dataclass
class Turn:
    role: str
    content: str  # ending in "…": a prefix
    calls: list[Call] = field(default_factory=list)
    tokens: tuple[int, int] = (0, 0)


@dataclass
class Expected:
    flow: str
    node: str
    status: str
    tokens: tuple[int, int]
    turns: list[Turn]
    cost: float = 0.0
    error: str = ""


TASK = "## 1. Task (task)\n\nScenario {}: call the echo tool with the text 'hi', then reply."
# What the Codex CLI says of an HTTP 500 from the model (`wink-0.27-codex-failed.jsonl`).
CODEX_500 = "We\u2019re currently experiencing high demand, which may cause temporary errors."


def _agent_call(call_id: str, part: str, key: str) -> Call:
    """A background Agent call of the Claude SDK run: its output, its result's text as recorded."""
    arguments = {
        "description": f"{part} task",
        "prompt": f"{key}: do the {part} part and report back.",
        "subagent_type": "general-purpose",
    }
    return (call_id, "Agent", arguments, _recorded_result("claude-sdk-parallel-subagents.jsonl", call_id), "")


def _recorded_result(run: str, call_id: str) -> str:
    """The text of a call's result in the run's file (the CLI's words)."""
    for record in read_records(RUNS / run):
        context = record["context"]
        sdk_entry = context.get("detail", {}).get("sdk_entry", {})
        if context.get("entry_type") == "tool_result" and sdk_entry.get("tool_use_id") == call_id:
            return "".join(block["text"] for block in sdk_entry["content"])
    raise AssertionError(f"no result of {call_id} in {run}")


def codex_rich(flow: str, unknown_before_mcp_result: bool) -> Expected:
    skipped = Turn("system", "[unknown] (unreadable: not a JSON object: the Codex client skipped this line)")
    mcp = [
        Turn(
            "assistant",
            "",
            [
                (
                    "item_mcp_1",
                    "docs:search",  # an MCP tool is `server:tool`, as `codex exec` names it
                    {"arguments": {"query": "opentelemetry logs"}},
                    "3 documents found",
                    "",
                )
            ],
        ),
        Turn("tool_result", "3 documents found"),
    ]
    return Expected(
        flow,
        "codex_app_server",
        "completed",
        (120, 30),
        [
            Turn("user", TASK.format("rich")),
            Turn("system", "[event] turn started"),
            Turn(
                "assistant",
                "[thinking] Echo the text, then inspect the workspace.",
                [("call_echo_1", "echo", {"text": "hi"}, "hi", "")],
            ),
            Turn("tool_result", "hi"),
            *([] if unknown_before_mcp_result else [skipped]),
            Turn("assistant", "", [("item_cmd_1", "codex:command", {"command": "echo hi"}, "hi\n", "")]),
            Turn("tool_result", "hi\n"),
            Turn(
                "assistant",
                "",
                [
                    (
                        "item_file_1",
                        "codex:file_change",
                        {"changes": [{"path": "a.txt", "kind": "add", "diff": "+hi\n"}]},
                        "add a.txt",
                        "",
                    )
                ],
            ),
            Turn("tool_result", "add a.txt"),
            *([mcp[0], skipped, mcp[1]] if unknown_before_mcp_result else mcp),
            Turn("assistant", "", [("item_web_1", "codex:web_search", {"query": ""}, "search: otel", "")]),
            Turn("tool_result", "search: otel"),
            Turn("system", "[event] compaction…"),
            Turn("system", '[unknown] {"notification":…'),
            Turn("assistant", "Done: hi", tokens=(120, 30)),
        ],
    )


def codex_real_demo(web_search_id: str) -> Expected:
    """weakincentives 0.27 on the real Codex CLI 0.171, the scripted model's `demo` scenario
    (`make demo`'s run, and the one under `opentelemetry-instrument`); `web_search_id`: the id
    the model gave its web search."""

    def call(call_id: str, name: str, arguments: dict[str, Any], output: str, error: str = "") -> Turn:
        return Turn("assistant", "", [(call_id, name, arguments, output, error)])

    def usage(tokens_in: int, tokens_out: int, cached: int, reasoning: int) -> Turn:
        text = f"[usage] tokens: {tokens_in} in, {tokens_out} out, {cached} cached, {reasoning} reasoning"
        return Turn("system", text, tokens=(tokens_in, tokens_out))

    missing = "cat: missing.txt: No such file or directory\n"
    notes = "/home/dev/project/notes.txt"
    docs = "Docs for data files: data files is documented here; this text comes from the offline docs server."
    return Expected(
        "codex-demo",
        "codex_app_server",
        "completed",
        (24300, 183),
        [
            Turn("user", "## 1. Task (task)\n\nDEMO-SCENARIO: please do the task."),
            Turn("system", "[event] turn started"),
            Turn(
                "assistant",
                "[thinking] The task asks for the echo tool first.",
                [("call_demo_echo", "echo", {"text": "hi"}, "hi", "")],
            ),
            Turn("tool_result", "hi"),
            usage(2800, 18, 0, 6),
            Turn(
                "assistant",
                "[thinking] First I will write the data file and count its lines.",
                [
                    (
                        "call_tour_1",
                        "codex:command",
                        {"command": "/bin/bash -lc 'seq 2 > data.txt && wc -l data.txt'"},
                        "2 data.txt\n",
                        "",
                    )
                ],
            ),
            Turn("tool_result", "2 data.txt\n"),
            usage(3000, 45, 0, 14),
            call("call_tour_2", "codex:command", {"command": "/bin/bash -lc 'cat missing.txt'"}, "", missing),
            Turn("tool_result", missing),
            usage(3300, 20, 2900, 0),
            call(
                "call_tour_3",
                "codex:file_change",
                {"changes": [{"path": notes, "kind": {"type": "add"}, "diff": "written by codex\n"}]},
                f"add {notes}",
            ),
            Turn("tool_result", f"add {notes}"),
            Turn("system", "[event] turn diff: diff --git a/notes.txt b/notes.txt\nnew file mode 100644…"),
            usage(3500, 40, 3200, 0),
            usage(3700, 12, 3400, 0),  # the `tool_search` call, which Codex shows no item for
            call("call_tour_5", "docs:lookup", {"arguments": {"topic": "data files"}}, docs),
            Turn("tool_result", docs),
            usage(3900, 18, 3600, 0),
            call(
                web_search_id,
                "codex:web_search",
                {"query": "counting lines in a file"},
                "search: counting lines in a file",
            ),
            Turn("tool_result", "search: counting lines in a file"),
            Turn(
                "assistant",
                "data.txt has 2 lines; missing.txt does not exist; I added notes.txt.",
                tokens=(4100, 30),
            ),
            Turn("system", "[event] turn diff: diff --git a/notes.txt b/notes.txt\nnew file mode 100644…"),
        ],
    )


def claude_rich() -> Expected:
    return Expected(
        "claude-rich",
        "claude_agent_sdk",
        "completed",
        (30, 15),  # no usage entries: each assistant message's own usage, once
        [
            Turn("user", TASK.format("rich")),
            Turn("assistant", "[thinking] I should delegate the listing."),
            Turn(
                "assistant",
                "Delegating to a subagent.",
                [
                    (
                        "toolu_1",
                        "Task",
                        {
                            "description": "List files",
                            "prompt": "List the files",
                            "subagent_type": "general-purpose",
                        },
                        "sub done",
                        "",
                    )
                ],
                (10, 5),
            ),
            Turn("tool_result", "sub done"),
            Turn("assistant", "[thinking] pondering"),
            Turn("system", "[event] compaction: Compacted: listed files via a subagent"),
            Turn("system", "[event] …Conversation compacted"),
            Turn("system", '[unknown] {"sdk_entry":{"type":"mystery","foo":1}}'),
            Turn("system", "[unknown] (unreadable: Invalid JSON…"),
            Turn("assistant", "All done", tokens=(10, 5)),
            Turn("user", "[subagent:a1b2c3] List the files"),
            Turn("assistant", "[subagent:a1b2c3]", [("toolu_sub_1", "Bash", {"command": "ls"}, "a.txt", "")]),
            Turn("tool_result", "[subagent:a1b2c3] a.txt"),
            Turn("assistant", "[subagent:a1b2c3] sub done", tokens=(10, 5)),
        ],
    )


def chat_tool(flow: str, adapter: str, scenario: str, calls: list[tuple[str, str]]) -> Expected:
    outputs = [f"{text}\n\n{text}" for _, text in calls]
    return Expected(
        flow,
        adapter,
        "completed",
        (210, 41),
        [
            Turn("system", TASK.format(scenario)),
            Turn(
                "assistant",
                "",
                [
                    (id_, "echo", {"text": text}, out, "")
                    for (id_, text), out in zip(calls, outputs, strict=True)
                ],
                (100, 20),
            ),
            *(Turn("tool_result", out) for out in outputs),
            Turn("assistant", "The tool said: " + " | ".join(outputs), tokens=(110, 21)),
        ],
    )


EXPECTED: dict[str, Expected] = {
    "wink-0.27-codex-rich.jsonl": codex_real_demo("ws_7e8aa20d4a6f4c81989f3ea0599fc97800"),
    "wink-0.25-codex-rich.jsonl": codex_rich("codex-rich", unknown_before_mcp_result=False),
    "wink-0.27-codex-real-demo.jsonl": codex_real_demo("we_resp_scripted_0007_0"),
    "wink-0.27-claude-rich.jsonl": claude_rich(),
    "wink-0.25-claude-rich.jsonl": claude_rich(),
    "wink-0.24-openai-tool.jsonl": chat_tool("openai-tool", "openai", "tool", [("call_1", "hi")]),
    "wink-0.24-litellm-parallel.jsonl": chat_tool(
        "litellm-parallel", "litellm", "parallel", [("call_1", "one"), ("call_2", "two")]
    ),
    "wink-0.24-openai-error.jsonl": Expected(
        "openai-error",
        "openai",
        "failed",
        (0, 0),
        [
            Turn("system", TASK.format("error")),
            Turn(
                "system",
                "[error] PromptEvaluationError: OpenAI request failed.\ncaused by InternalServerError…",
            ),
        ],
        error="PromptEvaluationError: OpenAI request failed.\ncaused by InternalServerError: Error code: 500",
    ),
    # The real Codex CLI on the scripted model's `fatal_500`: every request fails with HTTP 500;
    # codex retries once (the launcher's limit), then fails the turn with its own words for a 500.
    "wink-0.27-codex-failed.jsonl": Expected(
        "codex-fatal_500",
        "codex_app_server",
        "failed",
        (0, 0),
        [
            Turn("user", "## 1. Task (task)\n\nFATAL-500-SCENARIO: please do the task."),
            Turn("system", "[event] turn started"),
            Turn("system", f"[event] retry: Reconnecting... 1/1 ({CODEX_500})"),
            Turn("system", f"[event] api error: {CODEX_500}"),
            Turn("system", f"[error] {CODEX_500}"),
        ],
        error=CODEX_500,
    ),
    "claude-sdk-parallel-subagents.jsonl": Expected(
        "claude-agent-sdk",
        "claude_agent_sdk",
        "completed",
        (7400, 210),  # all the model served the main agent and both subagents
        [
            Turn("user", "PARALLEL-SUBAGENTS-SCENARIO: please do the task."),
            Turn("system", "[event] init: model claude-opus-5-5 · 22 tools · cwd /home/dev/project…"),
            Turn("assistant", "", [_agent_call("toolu_agent_a", "counter", "SUBAGENT-COUNTER")]),
            Turn("system", "[event] background tasks changed: 1 running: counter task"),
            Turn("system", "[event] task started: counter task (general-purpose, in the background)"),
            Turn("tool_result", "Async agent launched successfully.…"),
            Turn("assistant", "", [_agent_call("toolu_agent_b", "reader", "SUBAGENT-READER")]),
            Turn("system", "[event] background tasks changed: 2 running: counter task; reader task"),
            Turn("system", "[event] task started: reader task (general-purpose, in the background)"),
            Turn("tool_result", "Async agent launched successfully.…"),
            Turn("assistant", "I started both subagents and will report back."),
            Turn(
                "assistant",
                "[subagent:toolu_agent_a]",
                [("toolu_sub_count_1", "Bash", {"command": "echo 3", "description": "Run it"}, "3", "")],
                # Each subagent call's usage as its first line printed it (400 + 100 cached in).
                tokens=(500, 1),
            ),
            Turn("system", "[event] task progress: Running Run it…"),
            Turn(
                "assistant",
                "[subagent:toolu_agent_b]",
                [
                    (
                        "toolu_sub_read_1",
                        "Bash",
                        {"command": "echo readme", "description": "Run it"},
                        "readme",
                        "",
                    )
                ],
                tokens=(300, 1),
            ),
            Turn("system", "[event] task progress: Running Run it…"),
            Turn("tool_result", "[subagent:toolu_agent_a] 3"),
            Turn("tool_result", "[subagent:toolu_agent_b] readme"),
            Turn("assistant", "[subagent:toolu_agent_a] There are 3 files.", tokens=(450, 1)),
            Turn("system", "[event] task updated: completed"),
            Turn("system", "[event] task notification: There are 3 files."),
            Turn("system", "[event] background tasks changed: 1 running: reader task"),
            Turn("system", "[event] init…"),
            Turn("assistant", "[subagent:toolu_agent_b] The readme says hello.", tokens=(350, 1)),
            Turn("system", "[event] task updated: completed"),
            Turn("system", "[event] task notification: The readme says hello."),
            Turn("system", "[event] background tasks changed: none running"),
            # The first two results (2,500/100 and 1,600/15) came together after this answer.
            Turn("assistant", "The counter found 3 files; the reader is still working.", tokens=(4100, 115)),
            Turn("system", "[event] init…"),
            Turn(
                "assistant", "Both subagents are done: 3 files, and the readme says hello.", tokens=(1700, 18)
            ),
            # The session's 210 out less the results' 133 and the subagent lines' 4: the rest of
            # the subagents' output, which their streamed lines print as 1 each.
            Turn("system", "[usage] in the session's total, in no line's usage: 73 out", tokens=(0, 73)),
        ],
        cost=0.03342,
    ),
    "run-rtf1.jsonl": Expected(
        "cli-rtf1",
        "cli",
        "completed",
        (1234, 567),
        [
            Turn("assistant", "ralph-demo-agent 0.3.1 starting (RTF1 enabled)"),
            Turn("system", "[event] meta…"),
            Turn("system", "[event] Working directory: /work/repo"),
            Turn("user", "You are a careful coding agent. Fix failing tests without changing their intent."),
            Turn("user", "The admin write test in tests/test_auth.py fails, please fix it."),
            Turn("assistant", "[thinking] Plan: inspect auth layer, reproduce the failure, patch the rule."),
            Turn(
                "assistant",
                "I'll start by finding where authorization is decided.",
                [
                    (
                        "t1",
                        "shell",
                        {"cmd": "rg -n authz -S ."},
                        "src/auth.py:12:def authz(user, action):\n"
                        'src/auth.py:40:    return authz(user, "read")\n',
                        "",
                    )
                ],
            ),
            Turn("tool_result", "src/auth.py:12:def authz(user, action):\n…"),
            Turn("tool_result", "shell: rg -n authz -S . (2 matches)"),  # a result naming no call
            Turn(
                "assistant",
                "Found it: authz() in src/auth.py. Now reproducing the failure.",
                [
                    (
                        "t2",
                        "pytest",
                        {"args": ["-q", "tests/test_auth.py"]},
                        "",
                        "F.\nE   AssertionError: assert False\n1 failed, 1 passed in 0.12s\n",
                    )
                ],
            ),
            Turn("tool_result", "F.\nE   AssertionError: assert False\n1 failed, 1 passed in 0.12s\n"),
            Turn("assistant", 'The admin rule only allows "read"; I will add "write".'),
            Turn("system", "[unknown] (unreadable: invalid JSON: …"),
            Turn(
                "system",
                "[unknown] (unreadable: invalid RTF1 event: unknown event type 'progress')\n@@RALPH@@…",
            ),
            Turn("system", "[unknown] (unreadable: invalid RTF1 event: 'text' needs a string 'text')…"),
            Turn("assistant", "Note: only lines that start with the sentinel count…", tokens=(1234, 567)),
            Turn("assistant", "Done: admin users may now write; tests/test_auth.py passes."),
        ],
    ),
}


def test_every_captured_run_has_its_expectation() -> None:
    assert sorted(EXPECTED) == sorted(path.name for path in RUNS.glob("*.jsonl"))


def _matches(content: str, expected: str) -> bool:
    if "…" not in expected:
        return content == expected
    head, *middle, tail = expected.split("…")
    if not (content.startswith(head) and content.endswith(tail)):
        return False
    position = len(head)
    for part in middle:
        position = content.find(part, position)
        if position < 0:
            return False
        position += len(part)
    return True


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_captured_run_reads_as_its_conversation(tmp_path: Path, name: str) -> None:
    expected = EXPECTED[name]
    transcript = export(tmp_path, open_run(RUNS / name))

    meta = transcript.metadata
    records = list(read_records(RUNS / name))
    first, last = records[0], records[-1]
    assert (meta.flow_id, meta.node_id, meta.status) == (expected.flow, expected.node, expected.status)
    assert (meta.total_tokens_in, meta.total_tokens_out) == expected.tokens
    assert meta.total_cost == pytest.approx(expected.cost)
    assert meta.error.startswith(expected.error)
    assert bool(meta.error) == bool(expected.error)
    assert meta.started_at == datetime.fromisoformat(first["timestamp"])
    assert meta.ended_at == datetime.fromisoformat(last["timestamp"])
    ids = [r["context"].get("session_id") for r in records] + [first["context"]["run_id"]]
    session = next(found for found in ids if found)  # else the run id
    assert transcript.run_id == f"{first['timestamp'][:10]}-{expected.flow}-{session[:8]}"

    assert [turn.id for turn in transcript.turns] == list(range(1, len(transcript.turns) + 1))
    shown = [(turn.role, turn.content) for turn in transcript.turns]
    assert len(shown) == len(expected.turns), shown
    for turn, want in zip(transcript.turns, expected.turns, strict=True):
        assert turn.role == want.role, (turn.id, turn.content)
        assert _matches(turn.content, want.content), (turn.id, turn.content, want.content)
        calls = [(c.id, c.name, c.input, c.output, c.error) for c in turn.tool_calls]
        assert calls == want.calls, turn.id
        assert (turn.tokens_in, turn.tokens_out) == want.tokens, turn.id


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_captured_runs_turns_add_up_to_its_metadata(tmp_path: Path, name: str) -> None:
    transcript = export(tmp_path, open_run(RUNS / name))
    meta = transcript.metadata
    assert sum(t.tokens_in for t in transcript.turns) == meta.total_tokens_in
    assert sum(t.tokens_out for t in transcript.turns) == meta.total_tokens_out


def _unmarked(content: str) -> str:
    """The content without its `[subagent:…] ` marker."""
    return content.split("] ", 1)[-1] if content.startswith("[subagent:") else content


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_captured_run_keeps_every_entry(tmp_path: Path, name: str) -> None:
    """Each message, call and result is there once; paired calls hold their result's text."""
    entries = [r["context"] for r in read_records(RUNS / name) if r["event"] == "transcript.entry"]
    by_type = [e["entry_type"] for e in entries]
    transcript = export(tmp_path, open_run(RUNS / name))
    turns = [(turn.role, _unmarked(turn.content)) for turn in transcript.turns]
    calls = [call for turn in transcript.turns for call in turn.tool_calls]
    results = [content for role, content in turns if role == "tool_result"]
    prompts = [
        content for role, content in turns if role in ("user", "system") and not content.startswith("[")
    ]
    assert len(prompts) == by_type.count("user_message")
    assert len(calls) == by_type.count("tool_use")
    assert len(results) == by_type.count("tool_result")
    for call in calls:
        assert (call.output or call.error) in results
    marked = {"[thinking]", "[event]", "[error]", "[unknown]", "[usage]"}
    for role, content in turns:
        if role == "system" and content.startswith("["):
            assert content.split(" ", 1)[0] in marked, content


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_the_file_has_the_go_types_shape(tmp_path: Path, name: str) -> None:
    """Keys in the Go structs' order, `omitempty` fields left out when empty, times in RFC 3339 UTC."""
    path = write_devflow(open_run(RUNS / name), tmp_path)
    assert path.name == "transcript.json"
    text = path.read_text(encoding="utf-8")
    assert text.startswith('{\n  "runId": ')
    assert text.endswith("\n}\n")
    document = json.loads(text)
    assert text == json.dumps(document, indent=2, ensure_ascii=False) + "\n"  # MarshalIndent's layout
    assert list(document) == ["runId", "metadata", "turns"]
    meta_order = ["flowId", "nodeId", "input", "startedAt", "endedAt", "status"]
    meta_order += ["totalTokensIn", "totalTokensOut", "totalCost", "error"]
    turn_order = ["id", "role", "content", "tokensIn", "tokensOut", "timestamp", "toolCalls", "durationMs"]
    call_order = ["id", "name", "input", "output", "error"]

    def in_order(keys: list[str], order: list[str]) -> bool:
        return keys == [key for key in order if key in keys]

    meta = document["metadata"]
    assert in_order(list(meta), meta_order)
    assert set(meta) <= set(meta_order)
    assert {"flowId", "startedAt", "status", "totalTokensIn", "totalTokensOut", "totalCost"} <= set(meta)
    assert meta["startedAt"].endswith("Z")
    assert meta["endedAt"].endswith("Z")
    for turn in document["turns"]:
        assert in_order(list(turn), turn_order)
        assert set(turn) <= set(turn_order)
        assert turn["timestamp"].endswith("Z")
        for key in ("tokensIn", "tokensOut", "toolCalls", "durationMs"):
            assert turn.get(key, 1), key  # omitempty: never written empty
        for call in turn.get("toolCalls", []):
            assert in_order(list(call), call_order)
            assert set(call) <= set(call_order)
            assert isinstance(call["input"], dict)
            assert all(call.get(key, 1) for key in ("id", "output", "error"))


def test_tool_results_say_how_long_the_call_took(tmp_path: Path) -> None:
    transcript = export(tmp_path, open_run(RUNS / "run-rtf1.jsonl"))
    results = {turn.content[:2]: turn.duration_ms for turn in transcript.turns if turn.role == "tool_result"}
    assert results["F."] == 218  # reported by the agent
    assert results["sh"] == 0  # a result of no known call: no duration
    run = Run().start().entry("tool_use", {"tool_use_id": "c", "tool_name": "t", "input": {}})
    run.at += timedelta(seconds=2)
    run.entry("tool_result", {"tool_use_id": "c", "text": "ok"}).stop()
    paired = export(tmp_path, run.source()).turns[1]
    assert (paired.role, paired.duration_ms) == ("tool_result", 2005)  # from the call to its result


# -- failed, running, empty ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("name", "error"),
    [
        ("wink-0.24-openai-error.jsonl", "PromptEvaluationError: OpenAI request failed."),
        ("wink-0.27-codex-failed.jsonl", CODEX_500),
    ],
)
def test_a_failed_run_is_failed_with_its_error(tmp_path: Path, name: str, error: str) -> None:
    meta = export(tmp_path, open_run(RUNS / name)).metadata
    assert meta.status == "failed"
    assert meta.error.splitlines()[0] == error
    assert meta.ended_at is not None


def test_a_run_without_a_stop_is_running(tmp_path: Path) -> None:
    run = Run().start().entry("user_message", {"text": "go"}).entry("assistant_message", {"text": "on it"})
    path = write_devflow(run.source(), tmp_path)
    document = json.loads(path.read_text())
    assert document["metadata"]["status"] == "running"
    assert "endedAt" not in document["metadata"]
    transcript = read_devflow(path)
    assert transcript.metadata.ended_at is None
    assert contents(transcript) == [("user", "go"), ("assistant", "on it")]


def test_the_first_error_fails_the_run_even_without_a_stop(tmp_path: Path) -> None:
    run = Run().start().entry("error", {"exception": {"type": "Boom", "message": "first"}})
    run.entry("error", {"exception": {"type": "Boom", "message": "second"}})
    meta = export(tmp_path, run.source()).metadata
    assert (meta.status, meta.error) == ("failed", "Boom: first")


def test_a_run_with_no_records_cannot_be_exported(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no transcript records"):
        write_devflow(ListRun([]), tmp_path)
    assert list(tmp_path.iterdir()) == []


def test_a_run_with_no_entries_is_an_empty_transcript(tmp_path: Path) -> None:
    path = write_devflow(Run().start().stop().source(), tmp_path)
    assert '"turns": []' in path.read_text()
    transcript = read_devflow(path)
    assert transcript.turns == ()
    assert transcript.metadata.status == "completed"
    assert transcript.metadata.started_at == START + timedelta(milliseconds=5)


# -- mapping details ----------------------------------------------------------------------


def test_tool_calls_join_the_assistant_turn_they_belong_to(tmp_path: Path) -> None:
    run = Run().start().entry("user_message", {"message": {"role": "user", "content": "hi"}, "text": "hi"})
    run.entry("assistant_message", {"text": "Let me look."})
    run.entry("tool_use", {"tool_use_id": "a", "tool_name": "ls", "input": {"path": "."}})
    run.entry("tool_use", {"tool_use_id": "b", "tool_name": "cat", "input": "README"})  # not an object
    run.entry("tool_result", {"tool_use_id": "b", "text": "# Readme"})
    run.entry("tool_use", {"tool_use_id": "c", "tool_name": "rm", "input": ["x"]})  # after a result: new turn
    run.entry("tool_result", {"tool_use_id": "a", "text": "a.txt"})
    run.entry("tool_result", {"tool_use_id": "c", "text": "denied", "is_error": True})
    run.entry("tool_use", {"tool_name": "noid", "input": None})
    run.stop()
    transcript = export(tmp_path, run.source())
    assert contents(transcript) == [
        ("user", "hi"),
        ("assistant", "Let me look."),
        ("tool_result", "# Readme"),
        ("assistant", ""),
        ("tool_result", "a.txt"),
        ("tool_result", "denied"),
        ("assistant", ""),
    ]
    turns = transcript.turns
    assert turns[1].tool_calls == (
        DevflowToolCall("ls", {"path": "."}, "a", output="a.txt"),
        DevflowToolCall("cat", {"value": "README"}, "b", output="# Readme"),
    )
    assert turns[3].tool_calls == (DevflowToolCall("rm", {"value": ["x"]}, "c", error="denied"),)
    assert turns[6].tool_calls == (DevflowToolCall("noid", {}),)


def test_calls_pair_within_their_source_and_subagents_are_marked(tmp_path: Path) -> None:
    run = Run().start()
    run.entry("tool_use", {"tool_use_id": "x", "tool_name": "main_tool", "input": {}})
    run.entry("tool_use", {"tool_use_id": "x", "tool_name": "sub_tool", "input": {}}, source="subagent:s1")
    run.entry("thinking", {"text": "hmm"}, source="subagent:s1")
    run.entry("tool_result", {"tool_use_id": "x", "text": "from sub"}, source="subagent:s1")
    run.entry("tool_result", {"tool_use_id": "x", "text": "from main"})
    run.stop()
    transcript = export(tmp_path, run.source())
    assert contents(transcript) == [
        ("assistant", ""),
        ("assistant", "[subagent:s1]"),
        ("assistant", "[subagent:s1] [thinking] hmm"),
        ("tool_result", "[subagent:s1] from sub"),
        ("tool_result", "from main"),
    ]
    assert transcript.turns[0].tool_calls[0].output == "from main"
    assert transcript.turns[1].tool_calls[0].output == "from sub"


def test_usage_goes_on_its_response_or_on_a_system_turn(tmp_path: Path) -> None:
    run = Run().start().entry("user_message", {"text": "q"})
    run.entry("token_usage", {"usage": {"input_tokens": 7, "output_tokens": 0}})  # before any answer
    run.entry("assistant_message", {"text": "a"})
    run.entry("token_usage", {"usage": {"input_tokens": 10, "output_tokens": 3}})
    run.entry("token_usage", {"usage": {"input_tokens": 1, "output_tokens": 1}})  # same response
    run.entry("token_usage", {"usage": {}})  # nothing to count: no turn
    run.stop()
    transcript = export(tmp_path, run.source())
    assert [(t.role, t.content, t.tokens_in, t.tokens_out) for t in transcript.turns] == [
        ("user", "q", 0, 0),
        ("system", "[usage] tokens: 7 in, 0 out", 7, 0),
        ("assistant", "a", 11, 4),
    ]
    assert (transcript.metadata.total_tokens_in, transcript.metadata.total_tokens_out) == (18, 4)


def test_a_chat_system_message_is_a_system_turn(tmp_path: Path) -> None:
    run = Run().start()
    run.entry("user_message", {"message": {"role": "system", "content": "Be brief."}, "text": "Be brief."})
    run.entry("user_message", {"message": {"role": "developer", "content": "No tools."}})
    run.entry("user_message", {"message": {"role": "user", "content": "Hi"}})
    run.stop()
    assert contents(export(tmp_path, run.source())) == [
        ("system", "Be brief."),
        ("system", "No tools."),
        ("user", "Hi"),
    ]


def test_text_that_utf8_cannot_hold_survives_the_round_trip(tmp_path: Path) -> None:
    run = Run().start().entry("assistant_message", {"text": "caf\u00e9 \U0001f600 bad\udc80"}).stop()
    path = write_devflow(run.source(), tmp_path)
    path.read_bytes().decode("utf-8")  # valid UTF-8
    assert "café" in path.read_text(encoding="utf-8")  # readable, not \u-escaped
    assert read_devflow(path).turns[0].content == "caf\u00e9 \U0001f600 bad\udc80"


def test_overrides_of_flow_run_id_and_node(tmp_path: Path) -> None:
    source = Run().start().entry("user_message", {"text": "go"}).stop().source()
    default = export(tmp_path, source)
    assert default.run_id == "2026-11-23-fix-tests-5e551017"
    assert (default.metadata.flow_id, default.metadata.node_id) == ("fix-tests", "scripted")
    chosen = export(tmp_path, source, flow_id="Ticket to PR", node_id="generate-spec")
    assert chosen.run_id == "2026-11-23-Ticket-to-PR-5e551017"
    assert (chosen.metadata.flow_id, chosen.metadata.node_id) == ("Ticket to PR", "generate-spec")
    named = export(tmp_path, source, run_id="2025-01-15-ticket-to-pr-TK421", node_id="")
    assert (named.run_id, named.metadata.node_id) == ("2025-01-15-ticket-to-pr-TK421", "")
    with pytest.raises(ValueError, match="run id is empty"):
        write_devflow(source, tmp_path, run_id="")


# -- run ids ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("flow", "identifier", "suffix", "run_id"),
    [
        ("ticket-to-pr", "TK421", None, "2025-01-15-ticket-to-pr-TK421"),
        ("review-pr", "123", None, "2025-01-15-review-pr-123"),
        ("manual", "run", "001", "2025-01-15-manual-run-001"),
        ("Fix tests!", "a1b2/../c3", "  2 ", "2025-01-15-Fix-tests-a1b2-c3-2"),
        ("codex_rich", "abc", None, "2025-01-15-codex_rich-abc"),
    ],
)
def test_run_id_format(flow: str, identifier: str, suffix: str | None, run_id: str) -> None:
    assert devflow_run_id(datetime(2025, 1, 15, 10, 30, tzinfo=UTC), flow, identifier, suffix) == run_id


def test_run_id_date_is_the_utc_date() -> None:
    late = datetime(2025, 1, 15, 23, 30, tzinfo=timezone(timedelta(hours=-5)))
    assert devflow_run_id(late, "f", "i") == "2025-01-16-f-i"
    assert devflow_run_id(datetime(2025, 1, 15, 23, 30), "f", "i") == "2025-01-15-f-i"


@pytest.mark.parametrize(
    ("flow", "identifier", "suffix"), [("--", "x", None), ("f", "", None), ("f", "i", "/")]
)
def test_run_id_parts_need_a_letter_or_digit(flow: str, identifier: str, suffix: str | None) -> None:
    with pytest.raises(ValueError, match="no letter or digit"):
        devflow_run_id(START, flow, identifier, suffix)


# -- files: where, gzip at 100 KB, atomically ---------------------------------------------


def _sized(size_hint: int) -> ListRun:
    return Run().start().entry("assistant_message", {"text": "x" * size_hint}).stop().source()


def test_gzip_from_100_kib_on(tmp_path: Path) -> None:
    probe = write_devflow(_sized(1000), tmp_path / "probe")
    overhead = probe.stat().st_size - 1000
    under = write_devflow(_sized(GZIP_THRESHOLD - 1 - overhead), tmp_path / "under")
    at = write_devflow(_sized(GZIP_THRESHOLD - overhead), tmp_path / "at")
    over = write_devflow(_sized(3 * GZIP_THRESHOLD), tmp_path / "over")

    assert under.name == "transcript.json"
    assert under.stat().st_size == GZIP_THRESHOLD - 1
    assert at.name == "transcript.json.gz"
    assert len(gzip.decompress(at.read_bytes())) == GZIP_THRESHOLD
    assert over.name == "transcript.json.gz"
    assert over.stat().st_size < GZIP_THRESHOLD  # compressed
    assert GZIP_THRESHOLD == 100 * 1024
    for path in (under, at, over):
        assert read_devflow(path).turns[0].role == "assistant"
    assert sorted(p.name for p in (tmp_path / "at").iterdir()) == ["transcript.json.gz"]


def test_a_new_export_replaces_the_other_form(tmp_path: Path) -> None:
    small = write_devflow(_sized(10), tmp_path)
    large = write_devflow(_sized(2 * GZIP_THRESHOLD), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["transcript.json.gz"]
    small = write_devflow(_sized(10), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["transcript.json"]  # a stale .gz would be read first
    assert read_devflow(small).turns[0].content == "x" * 10
    assert not large.exists()


def test_an_explicit_file_name_decides_the_form(tmp_path: Path) -> None:
    plain = write_devflow(_sized(2 * GZIP_THRESHOLD), tmp_path / "deep" / "run.json")
    assert plain == tmp_path / "deep" / "run.json"
    json.loads(plain.read_bytes())  # not gzipped, however large
    packed = write_devflow(_sized(10), tmp_path / "run.json.gz")
    assert packed.read_bytes()[:2] == b"\x1f\x8b"  # gzipped, however small
    assert read_devflow(packed).turns[0].content == "x" * 10
    assert sorted(p.name for p in tmp_path.iterdir()) == ["deep", "run.json.gz"]


def test_a_failed_export_leaves_the_previous_file_and_no_temporary(tmp_path: Path) -> None:
    previous = write_devflow(_sized(10), tmp_path)
    before = previous.read_bytes()

    class Breaks:
        def __init__(self) -> None:
            self.passes = 0

        def records(self) -> Iterator[dict[str, Any]]:
            self.passes += 1
            records = Run().start().entry("user_message", {"text": "new"}).stop().records
            yield from records[: 2 if self.passes == 2 else 3]
            if self.passes == 2:
                raise OSError("disk went away")

    with pytest.raises(OSError, match="disk went away"):
        write_devflow(Breaks(), tmp_path)
    assert [p.name for p in tmp_path.iterdir()] == ["transcript.json"]
    assert previous.read_bytes() == before


# -- memory: a long run streams through -----------------------------------------------------


class GeneratedRun:
    """`groups` times (assistant message, tool call, usage, the call's result), made as they are read."""

    def __init__(self, groups: int, hang_first_call: bool = False) -> None:
        self.groups = groups
        self.hang_first_call = hang_first_call

    def records(self) -> Iterator[dict[str, Any]]:
        yield record("transcript.start", START, run_id="feedc0de")
        sequence = 0
        for group in range(self.groups):
            for entry_type, detail in (
                ("assistant_message", {"text": f"step {group}: " + "words " * 40}),
                ("tool_use", {"tool_use_id": f"c{group}", "tool_name": "run", "input": {"n": group}}),
                ("token_usage", {"usage": {"input_tokens": 3, "output_tokens": 2}}),
                ("tool_result", {"tool_use_id": f"c{group}", "text": f"result {group} " + "out " * 20}),
            ):
                if self.hang_first_call and group == 0 and entry_type == "tool_result":
                    continue
                sequence += 1
                at = (START + timedelta(microseconds=sequence)).isoformat()
                yield record(
                    "transcript.entry",
                    at,
                    entry_type=entry_type,
                    sequence_number=sequence,
                    source="main",
                    timestamp=at,
                    detail=detail,
                )
        yield record("transcript.stop", START + timedelta(seconds=1), run_id="feedc0de")


def test_a_100000_entry_run_round_trips_in_bounded_memory(tmp_path: Path) -> None:
    groups = 25_000  # 100,000 entries
    tracemalloc.start()
    try:
        path = write_devflow(GeneratedRun(groups), tmp_path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    size = len(gzip.decompress(path.read_bytes()))
    assert path.name == "transcript.json.gz"
    assert size > 20_000_000
    assert peak < size / 10, (peak, size)

    transcript = read_devflow(path)
    assert len(transcript.turns) == 2 * groups
    assert (transcript.metadata.total_tokens_in, transcript.metadata.total_tokens_out) == (
        3 * groups,
        2 * groups,
    )
    last_call, last_result = transcript.turns[-2:]
    assert last_call.content.startswith(f"step {groups - 1}: ")
    assert last_call.tool_calls[0].output == last_result.content
    assert last_call.tool_calls[0].input == {"n": groups - 1}
    assert (last_call.tokens_in, last_call.tokens_out) == (3, 2)


def test_a_call_that_never_gets_its_result_does_not_hold_the_run(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(devflow_turns, "_MAX_HELD_TURNS", 50)
    written: list[int] = []
    real_write: Callable[[Any, Any], None] = devflow_turns.TurnWriter._write

    def write(self: Any, turn: Any) -> None:
        written.append(len(self._held))
        real_write(self, turn)

    monkeypatch.setattr(devflow_turns.TurnWriter, "_write", write)
    transcript = export(tmp_path, GeneratedRun(500, hang_first_call=True))
    assert max(written) <= 50
    assert len(transcript.turns) == 999
    assert [turn.id for turn in transcript.turns] == list(range(1, 1000))
    assert transcript.turns[0].tool_calls[0] == DevflowToolCall("run", {"n": 0}, "c0")  # no output
    assert transcript.turns[1].tool_calls[0].output.startswith("result 1 ")


# -- reading devflow files ----------------------------------------------------------------

SEED_EXAMPLE = {
    "runId": "2025-01-15-ticket-to-pr-TK421",
    "metadata": {
        "flowId": "ticket-to-pr",
        "nodeId": "generate-spec",
        "input": {"ticketId": "TK-421"},
        "startedAt": "2025-01-15T10:30:00Z",
        "endedAt": "2025-01-15T10:45:32Z",
        "status": "completed",
        "totalTokensIn": 5200,
        "totalTokensOut": 8400,
        "totalCost": 0.12,
    },
    "turns": [
        {"id": 1, "role": "system", "content": "You are an expert...", "timestamp": "2025-01-15T10:30:00Z"},
        {
            "id": 2,
            "role": "user",
            "content": "Generate a spec for TK-421...",
            "tokensIn": 1500,
            "timestamp": "2025-01-15T10:30:01Z",
        },
        {
            "id": 3,
            "role": "assistant",
            "content": "# Technical Specification...",
            "tokensOut": 2500,
            "timestamp": "2025-01-15T10:30:45.123456789Z",
            "toolCalls": [
                {"name": "read_file", "input": {"path": "api/handler.go"}, "output": "package api..."}
            ],
        },
    ],
}


def test_reads_the_seed_example(tmp_path: Path) -> None:
    path = tmp_path / "transcript.json"
    path.write_text(json.dumps(SEED_EXAMPLE))
    transcript = read_devflow(path)
    assert transcript.run_id == "2025-01-15-ticket-to-pr-TK421"
    meta = transcript.metadata
    assert (meta.flow_id, meta.node_id, meta.input, meta.status) == (
        "ticket-to-pr",
        "generate-spec",
        {"ticketId": "TK-421"},
        "completed",
    )
    assert (meta.total_tokens_in, meta.total_tokens_out, meta.total_cost) == (5200, 8400, 0.12)
    assert meta.ended_at == datetime(2025, 1, 15, 10, 45, 32, tzinfo=UTC)
    assert transcript.turns[1] == DevflowTurn(
        2,
        "user",
        "Generate a spec for TK-421...",
        datetime(2025, 1, 15, 10, 30, 1, tzinfo=UTC),
        tokens_in=1500,
    )
    assert transcript.turns[2].timestamp.microsecond == 123456  # nanoseconds, as Go writes them
    assert transcript.turns[2].tool_calls == (
        DevflowToolCall("read_file", {"path": "api/handler.go"}, output="package api..."),
    )


def test_reads_what_go_writes_for_zero_values(tmp_path: Path) -> None:
    document = json.loads(json.dumps(SEED_EXAMPLE))
    document["metadata"]["endedAt"] = "0001-01-01T00:00:00Z"  # time.Time is never omitted
    document["turns"] = None  # a nil slice
    path = tmp_path / "t.json.gz"
    path.write_bytes(gzip.compress(json.dumps(document).encode()))
    transcript = read_devflow(path)
    assert transcript.metadata.ended_at is None
    assert transcript.turns == ()


def _broken(document: dict[str, Any], where: str, value: Any) -> dict[str, Any]:
    broken: dict[str, Any] = json.loads(json.dumps(document))
    *path, last = where.split(".")
    target: Any = broken
    for key in path:
        target = target[int(key)] if key.isdigit() else target[key]
    if value is KeyError:
        del target[last]
    else:
        target[int(last) if last.isdigit() else last] = value
    return broken


@pytest.mark.parametrize(
    ("where", "value", "message"),
    [
        ("runId", KeyError, "runId: missing"),
        ("runId", 7, "runId: expected a string, got int"),
        ("metadata", [], "metadata: expected an object, got list"),
        ("metadata.flowId", KeyError, "metadata.flowId: missing"),
        (
            "metadata.status",
            "done",
            "metadata.status: 'done' is not one of running, completed, failed, canceled",
        ),
        ("metadata.startedAt", "yesterday", "metadata.startedAt: not an RFC 3339 time: 'yesterday'"),
        (
            "metadata.startedAt",
            "2025-01-15T10:30:00",
            "metadata.startedAt: an RFC 3339 time needs a time zone",
        ),
        ("metadata.totalTokensIn", "5200", "metadata.totalTokensIn: expected an integer, got str"),
        ("metadata.totalCost", True, "metadata.totalCost: expected a number, got bool"),
        ("metadata.input", "x", "metadata.input: expected an object, got str"),
        ("turns", {}, "turns: expected an array, got dict"),
        ("turns.1", "hello", "turns[1]: expected an object, got str"),
        (
            "turns.1.role",
            "robot",
            "turns[1].role: 'robot' is not one of system, user, assistant, tool_result",
        ),
        ("turns.0.content", None, "turns[0].content: expected a string, got null"),
        ("turns.2.id", 2.5, "turns[2].id: expected an integer, got float 2.5"),
        ("turns.2.timestamp", KeyError, "turns[2].timestamp: missing"),
        ("turns.2.toolCalls.0.name", KeyError, "turns[2].toolCalls[0].name: missing"),
        ("turns.2.toolCalls.0.input", [1], "turns[2].toolCalls[0].input: expected an object, got list"),
        ("turns.2.toolCalls.0.output", 3, "turns[2].toolCalls[0].output: expected a string, got int"),
    ],
)
def test_malformed_fields_are_named(tmp_path: Path, where: str, value: Any, message: str) -> None:
    path = tmp_path / "transcript.json"
    path.write_text(json.dumps(_broken(SEED_EXAMPLE, where, value)))
    with pytest.raises(ValueError, match="^" + str(path).replace(".", r"\.")) as caught:
        read_devflow(path)
    assert message in str(caught.value)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "not JSON"),
        (b'{"runId": "x", "metadata": ', "not JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[1, 2]", "the document: expected an object, got list"),
        (gzip.compress(b'{"runId": "x"}')[:-6], "not a readable gzip file"),
        (b"\x1f\x8bnot gzip at all", "not a readable gzip file"),
    ],
)
def test_unreadable_files_are_named(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "transcript.json.gz"
    path.write_bytes(data)
    with pytest.raises(ValueError, match=str(path).replace(".", r"\.")) as caught:
        read_devflow(path)
    assert message in str(caught.value)
