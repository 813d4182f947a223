"""`transcript-otel replay`: a captured run sent again to a real OTLP receiver looks like the live one.

A live `transcript-otel run` exports to one oteltap receiver over OTLP/HTTP; its JSONL
mirror is then replayed, by the real program, to another. Spans (ids, parents, names,
times, status, events) and log records must be the same; replaying twice must not
make a second trace.
"""

from __future__ import annotations

import asyncio
import json
import sys
from collections import Counter
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from test_cli_run import WRAPPER, agent, wrapper_env

from helpers import FIXTURE_RUNS
from loopback import free_port
from receivers import TapCollector, run_to_completion

RUNS = Path(__file__).parent / "fixtures" / "runs"
REPLAY = [sys.executable, "-m", "transcript_otel.cli", "replay"]


def span_key(span: Any) -> tuple[Any, ...]:
    return (
        span.trace_id.hex(),
        span.span_id.hex(),
        span.parent_span_id.hex(),
        span.name,
        span.kind,
        span.start_time_unix_nano,
        span.end_time_unix_nano,
        span.status.code,
        tuple(sorted((a.key, str(a.value)) for a in span.attributes)),
        # The mirror keeps record times to the microsecond (ISO 8601); span times to the nanosecond.
        tuple((event.name, event.time_unix_nano // 1000) for event in span.events),
    )


def log_key(log: Any) -> tuple[Any, ...]:
    return (
        log.event_name,
        log.time_unix_nano // 1000,
        log.trace_id.hex(),
        log.span_id.hex(),
        log.severity_text,
    )


Command = Callable[[str], list[str]]  # the receiver's endpoint → the command to run


async def _received(
    command: Command, env: dict[str, str], spans: int, logs: int
) -> tuple[int, str, list[Any], list[Any]]:
    async with TapCollector() as tap:
        returncode, _, stderr = await run_to_completion(command(tap.endpoint), 120, env=env)
        if returncode == 0:
            await tap.wait_for(lambda: len(tap.spans) >= spans and len(tap.logs) >= logs, timeout_s=20)
            await asyncio.sleep(0.2)  # anything more than expected would arrive now
        return returncode, stderr.decode(errors="replace"), list(tap.spans), list(tap.logs)


def received(
    command: Command, env: dict[str, str], spans: int, logs: int
) -> tuple[int, str, list[Any], list[Any]]:
    return asyncio.run(_received(command, env, spans, logs))


def replay_to(run: Path) -> Command:
    return lambda endpoint: [*REPLAY, str(run), "--endpoint", endpoint]


def nanos(timestamp: str) -> int:
    return int(datetime.fromisoformat(timestamp).timestamp() * 1_000_000) * 1000


async def _live(command: Command, env: dict[str, str]) -> tuple[int, str, list[Any], list[Any]]:
    """The live run, exporting to a receiver through the OTEL_* variables."""
    async with TapCollector() as tap:
        returncode, _, stderr = await run_to_completion(
            command(tap.endpoint), 120, env={**env, "OTEL_EXPORTER_OTLP_ENDPOINT": tap.endpoint}
        )
        await tap.wait_for(lambda: any(s.name.startswith("invoke_agent") for s in tap.spans), timeout_s=20)
        await asyncio.sleep(0.2)
        return returncode, stderr.decode(errors="replace"), list(tap.spans), list(tap.logs)


def test_a_replayed_run_is_the_live_run_again(tmp_path: Path) -> None:
    def live(endpoint: str) -> list[str]:
        return [*WRAPPER, "--prompt-name", "cli-rtf1", "--", *agent("rtf1")]

    env = {**wrapper_env(tmp_path), "OTEL_EXPORTER_OTLP_PROTOCOL": "http/protobuf"}
    status, stderr, live_spans, live_logs = asyncio.run(_live(live, env))
    assert status == 0, stderr
    (captured,) = (tmp_path / "runs").glob("*.jsonl")
    for attempt in range(2):  # twice: the same trace again, not a second one
        status, stderr, spans, logs = received(replay_to(captured), env, len(live_spans), len(live_logs))
        assert status == 0, stderr
        assert f"sent {len(live_spans)} spans and {len(live_logs)} log records" in stderr, attempt
        assert sorted(map(span_key, spans)) == sorted(map(span_key, live_spans))
        assert sorted(map(log_key, logs)) == sorted(map(log_key, live_logs))
        live_attributes = sorted(
            tuple(sorted((a.key, str(a.value)) for a in log.attributes)) for log in live_logs
        )
        assert sorted(tuple(sorted((a.key, str(a.value)) for a in log.attributes)) for log in logs) == (
            live_attributes
        )


def test_a_run_kept_without_span_records_gets_its_spans_rebuilt(tmp_path: Path) -> None:
    # The captured run as a writer that keeps no span records would have kept it.
    kept = [
        json.loads(line) for line in (RUNS / "claude-sdk-parallel-subagents.jsonl").read_text().splitlines()
    ]
    records = [r for r in kept if r["event"] != "transcript.span"]
    run = tmp_path / "without-spans.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    span_ids = {r["context"]["span_id"] for r in records}
    status, stderr, spans, logs = received(replay_to(run), wrapper_env(tmp_path), len(span_ids), len(records))
    assert status == 0, stderr
    assert {span.span_id.hex() for span in spans} == span_ids
    assert {span.trace_id.hex() for span in spans} == {records[0]["context"]["trace_id"]}
    (root,) = [span for span in spans if span.name == "invoke_agent claude-agent-sdk"]
    assert root.span_id.hex() == records[0]["context"]["span_id"]
    names = Counter(span.name for span in spans)
    assert names["execute_tool Agent"] == 2
    assert {span.parent_span_id for span in spans if span is not root} == {root.span_id}
    assert sorted(log.time_unix_nano for log in logs) == sorted(
        nanos(r["context"].get("timestamp", r["timestamp"])) for r in records
    )


def test_a_run_without_any_ids_replays_to_one_stable_trace(tmp_path: Path) -> None:
    records = [json.loads(line) for line in (RUNS / "wink-0.24-openai-tool.jsonl").read_text().splitlines()]
    for record in records:
        record["context"].pop("trace_id", None)
        record["context"].pop("span_id", None)
    bare = tmp_path / "bare.jsonl"
    bare.write_text("".join(json.dumps(r) + "\n" for r in records))
    traces = []
    for _ in range(2):
        status, stderr, spans, logs = received(replay_to(bare), wrapper_env(tmp_path), 1, len(records))
        assert status == 0, stderr
        (root,) = spans
        assert root.name == "invoke_agent openai-tool"
        assert len(root.events) == len(records)
        assert {log.span_id for log in logs} == {root.span_id}
        traces.append(root.trace_id)
    assert traces[0] == traces[1]


def test_replay_without_an_endpoint_says_so(tmp_path: Path) -> None:
    env = {key: value for key, value in wrapper_env(tmp_path).items() if not key.startswith("OTEL_")}
    returncode, _, stderr = asyncio.run(
        run_to_completion([*REPLAY, str(RUNS / "run-rtf1.jsonl")], 60, env=env)
    )
    assert returncode == 2
    assert stderr.decode() == (
        "transcript-otel replay: no OTLP endpoint: give --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT\n"
    )


def test_every_captured_run_replays_with_its_own_ids(tmp_path: Path) -> None:
    async def replay_all() -> list[tuple[Path, int, str, list[Any], list[Any]]]:
        results = []
        for run in FIXTURE_RUNS:
            async with TapCollector() as tap:
                records = [json.loads(line) for line in run.read_text().splitlines()]
                returncode, _, stderr = await run_to_completion(replay_to(run)(tap.endpoint), 120)
                logged = [r for r in records if r["event"] != "transcript.span"]  # spans go as spans
                await tap.wait_for(lambda: len(tap.logs) >= len(logged), timeout_s=20)  # noqa: B023
                results.append((run, returncode, stderr.decode(), list(tap.spans), list(tap.logs)))
        return results

    for run, returncode, stderr, spans, logs in asyncio.run(replay_all()):
        records = [json.loads(line) for line in run.read_text().splitlines()]
        assert returncode == 0, (run.name, stderr)
        assert {span.span_id.hex() for span in spans} == {r["context"]["span_id"] for r in records}, run.name
        assert sorted(log_key(log)[2:4] for log in logs) == sorted(
            (r["context"]["trace_id"], r["context"]["span_id"])
            for r in records
            if r["event"] != "transcript.span"
        ), run.name


def test_an_empty_run_is_not_replayed(tmp_path: Path) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    returncode, _, stderr = asyncio.run(
        run_to_completion([*REPLAY, str(empty), "--endpoint", "http://127.0.0.1:9"], 60)
    )
    assert returncode == 2
    assert stderr.decode() == "transcript-otel replay: the run has no records: nothing to replay\n"


def test_a_backend_that_refuses_is_a_clear_failure(tmp_path: Path) -> None:
    env = {**wrapper_env(tmp_path), "OTEL_EXPORTER_OTLP_TIMEOUT": "500"}
    endpoint = f"http://127.0.0.1:{free_port()}"
    returncode, _, stderr = asyncio.run(
        run_to_completion([*REPLAY, str(RUNS / "run-rtf1.jsonl"), "--endpoint", endpoint], 60, env=env)
    )
    assert returncode == 1
    message = stderr.decode()
    assert message.startswith(f"transcript-otel replay: the backend at {endpoint} did not take the run: ")
    assert "Traceback" not in message
    assert len(message.splitlines()) == 1  # the exporters' own complaints stay out


def test_each_run_of_a_file_with_several_replays_into_its_own_trace(tmp_path: Path) -> None:
    first, second = RUNS / "run-rtf1.jsonl", RUNS / "wink-0.27-codex-rich.jsonl"
    both = tmp_path / "two-runs.jsonl"
    both.write_text(first.read_text() + second.read_text())
    records = [json.loads(line) for line in both.read_text().splitlines()]
    span_ids = {r["context"]["span_id"] for r in records}
    status, stderr, spans, _ = received(replay_to(both), wrapper_env(tmp_path), len(span_ids), len(records))
    assert status == 0, stderr
    roots = {span.trace_id.hex(): span for span in spans if span.name.startswith("invoke_agent")}
    assert set(roots) == {records[0]["context"]["trace_id"], records[-1]["context"]["trace_id"]}
    by_id = {span.span_id: span for span in spans}
    for span in spans:
        if span not in roots.values():  # under its run's root, directly or through a chat span
            assert by_id[span.parent_span_id].trace_id == span.trace_id, span.name


def test_odd_records_are_replayed_or_skipped_never_fatal(tmp_path: Path) -> None:
    records = [json.loads(line) for line in (RUNS / "wink-0.24-openai-tool.jsonl").read_text().splitlines()]
    entry = dict(records[1], context=dict(records[1]["context"]))
    entry["context"]["detail"] = {"text": "half \ud83d", "id": 123456789012345678901234567890}
    entry["context"]["sequence_number"] = 99
    chat = records[2]["context"]["span_id"]
    root = records[0]["context"]["span_id"]
    cycle = [  # two spans, each the other's parent
        {
            "event": "transcript.span",
            "context": {**records[0]["context"], "span_id": root, "parent_span_id": chat},
        },
        {"event": "transcript.span", "context": {**records[2]["context"], "parent_span_id": root}},
    ]
    odd = [
        entry,
        {"event": ["not", "a", "name"], "context": records[1]["context"]},
        {"event": "transcript.entry", "context": {"prompt_name": "x"}},  # no entry_type
        {"event": "transcript.entry", "context": {**records[1]["context"], "span_id": "not hex"}},
    ]
    path = tmp_path / "odd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in [*records, *cycle, *odd]))
    status, stderr, spans, logs = received(replay_to(path), wrapper_env(tmp_path), 2, len(records) + 1)
    assert status == 0, stderr
    assert "Traceback" not in stderr
    assert {span.span_id.hex() for span in spans} >= {root, chat}
    assert len(logs) >= len(records) + 1  # the odd-but-readable entry too
