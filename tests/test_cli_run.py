"""`transcript-otel run -- CMD`: a real wrapper process around a scripted agent process.

`tests/agents/line_agent.py FORMAT` prints the fixture of FORMAT
(`tests/fixtures/line_streams/`) line by line. The tests check what a user sees: the
wrapper's stdout is the agent's byte for byte, its stderr passes through, its exit
status is the agent's (signals included), and the transcript is in the JSONL mirror
and, over OTLP/HTTP, in a real receiver (spans and log records).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from transcript_otel import read_records
from transcript_otel.cli.run_command import FORWARDED_SIGNALS
from transcript_otel.model.invariants import check_invariants

from loopback import free_port, subprocess_env
from receivers import TapCollector, run_to_completion

TESTS = Path(__file__).resolve().parent
AGENT = TESTS / "agents" / "line_agent.py"
FIXTURES = TESTS / "fixtures" / "line_streams"
FIXTURE_FILES = {
    "rtf1": "rtf1.txt",
    "codex-json": "codex-json.jsonl",
    "codex-json-failed": "codex-json-failed.jsonl",
    "claude-stream-json": "claude-stream-json.jsonl",
    "plain": "plain.txt",
}
WRAPPER = [sys.executable, "-m", "transcript_otel.cli", "run"]


def wrapper_env(tmp_path: Path, **more: str) -> dict[str, str]:
    return subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"), **more)


def agent(fmt: str, *options: str) -> list[str]:
    return [sys.executable, str(AGENT), fmt, *options]


def mirror(tmp_path: Path) -> list[dict[str, Any]]:
    (path,) = (tmp_path / "runs").glob("*.jsonl")
    records = list(read_records(path))
    assert check_invariants(records) == []
    return records


def entries(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == "transcript.entry"]


def run_wrapper(
    tmp_path: Path, fmt: str, *options: str, adapter: str | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[bytes]:
    chosen = [] if adapter is None else ["--adapter", adapter]
    command = [*WRAPPER, *chosen, "--prompt-name", f"cli-{fmt}", "--", *agent(fmt, *options)]
    return subprocess.run(
        command, capture_output=True, env=wrapper_env(tmp_path), timeout=timeout, check=False
    )


# -- every format, chosen automatically ---------------------------------------------------------

# What each fixture holds (see tests/fixtures/line_streams/README.md).
EXPECTED_TYPES = {
    "rtf1": {
        "assistant_message": 6,
        "system_event": 2,
        "thinking": 1,
        "token_usage": 1,
        "tool_result": 3,
        "tool_use": 2,
        "unknown": 3,
        "user_message": 2,
    },
    "codex-json": {
        "assistant_message": 1,
        "system_event": 2,
        "thinking": 1,
        "token_usage": 1,
        "tool_result": 5,
        "tool_use": 5,
        "unknown": 2,
    },
    # The turn's failure is an error; the retry and the final API error are system events.
    "codex-json-failed": {"error": 1, "system_event": 4, "thinking": 1, "tool_result": 1, "tool_use": 1},
    "claude-stream-json": {
        "assistant_message": 3,
        "system_event": 8,  # two inits, task events (progress folded), the notification
        "token_usage": 2,
        "tool_result": 2,
        "tool_use": 2,
        "unknown": 2,
    },
    "plain": {"assistant_message": 9},
}


@pytest.mark.parametrize("fmt", sorted(FIXTURE_FILES))
def test_output_passes_through_and_the_transcript_is_captured(fmt: str, tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, fmt)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert result.stdout == (FIXTURES / FIXTURE_FILES[fmt]).read_bytes()
    captured = entries(mirror(tmp_path))
    assert Counter(entry["entry_type"] for entry in captured) == EXPECTED_TYPES[fmt]
    assert {entry["prompt_name"] for entry in captured} == {f"cli-{fmt}"}
    assert {entry["adapter"] for entry in captured} == {"cli"}


@pytest.mark.parametrize("fmt", ["rtf1", "claude-stream-json"])
def test_the_explicit_adapter_reads_the_same(fmt: str, tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, fmt, adapter=fmt)
    assert result.returncode == 0
    assert Counter(e["entry_type"] for e in entries(mirror(tmp_path))) == EXPECTED_TYPES[fmt]


def test_the_plain_adapter_reads_rtf1_as_text(tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, "rtf1", adapter="plain")
    assert result.returncode == 0
    lines = (FIXTURES / "rtf1.txt").read_text().splitlines()
    assert [e["detail"]["text"] for e in entries(mirror(tmp_path))] == [
        line for line in lines if line.strip()
    ]


# -- spans and log records over OTLP ------------------------------------------------------------


def test_spans_and_log_records_reach_a_real_receiver(tmp_path: Path) -> None:
    async def run() -> tuple[int, list[Any], list[Any]]:
        async with TapCollector() as tap:
            env = wrapper_env(
                tmp_path,
                OTEL_EXPORTER_OTLP_ENDPOINT=tap.endpoint,
                OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            )
            command = [*WRAPPER, "--prompt-name", "cli-rtf1", "--", *agent("rtf1")]
            returncode, _, stderr = await run_to_completion(command, 60, env=env)
            assert returncode == 0, stderr.decode(errors="replace")
            await tap.wait_for(lambda: any(span.name == "invoke_agent cli-rtf1" for span in tap.spans))
            await asyncio.sleep(0.2)
            return returncode, list(tap.spans), list(tap.logs)

    _, spans, logs = asyncio.run(run())
    by_id = {span.span_id: span for span in spans}
    (root,) = [span for span in spans if span.name == "invoke_agent cli-rtf1"]
    attributes = {a.key: a.value.string_value for a in root.attributes}
    assert attributes["transcript.line_adapter"] == "rtf1"  # chosen by auto
    tools = [span for span in spans if span.name.startswith("execute_tool ")]
    assert sorted(span.name for span in tools) == ["execute_tool pytest", "execute_tool shell"]
    for tool in tools:
        assert (
            by_id[tool.parent_span_id].name == "chat gpt-4.1-mini"
        )  # named after the model its usage line reports
        assert by_id[by_id[tool.parent_span_id].parent_span_id] is root
        assert tool.end_time_unix_nano > tool.start_time_unix_nano
    failed = next(span for span in tools if span.name == "execute_tool pytest")
    assert failed.status.code == 2  # ERROR: the fixture's pytest call ends with status "fail"
    records = mirror(tmp_path)
    # The mirror keeps each span as the receiver got it (what `replay` rebuilds them from).
    kept = {r["context"]["span_id"]: r["context"] for r in records if r["event"] == "transcript.span"}
    assert kept.keys() == {span.span_id.hex() for span in spans}
    for span in spans:
        record = kept[span.span_id.hex()]
        assert record["name"] == span.name
        assert record["trace_id"] == span.trace_id.hex()
        assert record["parent_span_id"] == (span.parent_span_id.hex() or None)
        assert (record["start_time_unix_nano"], record["end_time_unix_nano"]) == (
            span.start_time_unix_nano,
            span.end_time_unix_nano,
        )
        assert record["status"] == ("ERROR" if span.status.code == 2 else "UNSET")
    assert len(logs) == len(records) - len(kept)
    assert {log.trace_id for log in logs} == {root.trace_id}


# -- exit status, stderr, signals ---------------------------------------------------------------


@pytest.mark.parametrize("status", [0, 1, 3, 42])
def test_the_wrapper_exits_with_the_commands_status(status: int, tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, "plain", "--exit", str(status), "--stderr", "warning: careful")
    assert result.returncode == status
    assert result.stderr == b"warning: careful"
    records = mirror(tmp_path)
    assert records[-1]["event"] == "transcript.stop"


def test_a_failing_command_is_a_failed_run(tmp_path: Path) -> None:
    async def run() -> list[Any]:
        async with TapCollector() as tap:
            env = wrapper_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=tap.endpoint)
            command = [*WRAPPER, "--prompt-name", "failing", "--", *agent("plain", "--exit", "3")]
            returncode, _, _ = await run_to_completion(command, 60, env=env)
            assert returncode == 3
            await tap.wait_for(lambda: any(span.name == "invoke_agent failing" for span in tap.spans))
            return list(tap.spans)

    (root,) = [span for span in asyncio.run(run()) if span.name == "invoke_agent failing"]
    assert root.status.code == 2
    assert root.status.message == "transcript_otel.cli.run_command.CommandFailed"
    (error,) = [r["context"] for r in mirror(tmp_path) if r["context"].get("entry_type") == "error"]
    assert error["detail"]["exception"] == {"type": "CommandFailed", "message": "exited with status 3"}
    summary = subprocess.run(
        [*WRAPPER[:-1], "summary", str(next((tmp_path / "runs").glob("*.jsonl")))],
        capture_output=True,
        text=True,
        check=True,
    )
    assert summary.stdout.startswith("failing · cli · failed\n")
    assert "errors    CommandFailed: exited with status 3\n" in summary.stdout


def start_wrapper(tmp_path: Path, *options: str) -> subprocess.Popen[bytes]:
    command = [*WRAPPER, "--prompt-name", "signals", "--", *agent("plain", *options)]
    return subprocess.Popen(
        command,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=wrapper_env(tmp_path),
        start_new_session=True,  # its own process group, like a job in a terminal
    )


def wait_for_output(process: subprocess.Popen[bytes]) -> None:
    """Until the agent has printed its whole fixture through the wrapper."""
    expected = (FIXTURES / "plain.txt").read_bytes()
    assert process.stdout is not None
    received = b""
    while len(received) < len(expected):
        chunk = os.read(process.stdout.fileno(), 1 << 16)
        assert chunk, "the agent printed nothing"
        received += chunk
    assert received == expected


@pytest.mark.parametrize(
    ("send", "signum"),
    [
        # e.g. `kill`, a supervisor, a terminal closing: forwarded to the command, once
        *(("to the wrapper", signum) for signum in FORWARDED_SIGNALS),
        ("to the process group", signal.SIGINT),  # as a terminal's Ctrl-C reaches a pipeline
    ],
)
def test_signals_reach_the_command_and_its_status_is_kept(
    send: str, signum: signal.Signals, tmp_path: Path
) -> None:
    process = start_wrapper(tmp_path, "--wait-for-signal")
    try:
        wait_for_output(process)
        if send == "to the wrapper":
            process.send_signal(signum)
        else:
            os.killpg(process.pid, signum)
        _, stderr = process.communicate(timeout=20)
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGKILL)  # nothing outlives a failed test
    assert process.returncode == 128 + signum
    assert f"got signal {int(signum)}".encode() in stderr
    assert mirror(tmp_path)[-1]["event"] == "transcript.stop"


def test_a_command_killed_by_a_signal_kills_the_wrapper_the_same_way(tmp_path: Path) -> None:
    command = [*WRAPPER, "--prompt-name", "killed", "--", "/bin/sh", "-c", "echo bye; kill -KILL $$"]
    result = subprocess.run(command, capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False)
    assert result.returncode == -signal.SIGKILL
    assert result.stdout == b"bye\n"
    recorded = [(e["entry_type"], e["detail"]) for e in entries(mirror(tmp_path))]
    assert recorded == [
        ("assistant_message", {"text": "bye"}),
        ("error", {"exception": {"type": "CommandFailed", "message": "killed by SIGKILL"}}),
    ]


SLEEPER = "import os, time; print(os.getpid(), flush=True); time.sleep(600)"


def running(pid: int) -> bool:
    """Running (not a zombie waiting for its parent)."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


def gone(pid: int) -> bool:
    for _ in range(3000):
        if not running(pid):
            return True
        time.sleep(0.01)
    return False


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="the processes are read from /proc")
@pytest.mark.parametrize("killed", ["wrapper", "relay"])
def test_the_command_does_not_outlive_a_wrapper_or_relay_killed_with_sigkill(
    killed: str, tmp_path: Path
) -> None:
    """SIGKILL to the wrapper left the relay and the command running; the relay hears the
    wrapper end and ends the command. SIGKILL to the relay: the kernel ends the command
    (PR_SET_PDEATHSIG), and the wrapper ends as its relay did."""
    wrapper = subprocess.Popen(
        [*WRAPPER, "--", sys.executable, "-c", SLEEPER],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=wrapper_env(tmp_path),
        start_new_session=True,
    )
    assert wrapper.stdout is not None
    command = int(wrapper.stdout.readline())
    (relay,) = [int(p) for p in Path(f"/proc/{wrapper.pid}/task/{wrapper.pid}/children").read_text().split()]
    try:
        os.kill(wrapper.pid if killed == "wrapper" else relay, signal.SIGKILL)
        assert wrapper.wait(timeout=60) == -signal.SIGKILL
        assert gone(command)
        assert gone(relay)
    finally:
        for pid in (command, relay):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        wrapper.wait(timeout=60)


# -- hostile output ------------------------------------------------------------------------------


def test_binary_garbage_and_a_10_mb_line_pass_through_and_are_recorded(tmp_path: Path) -> None:
    result = run_wrapper(tmp_path, "plain", "--binary", "--huge-line")
    assert result.returncode == 0
    expected = subprocess.run(
        agent("plain", "--binary", "--huge-line"), capture_output=True, check=True
    ).stdout
    assert result.stdout == expected  # byte for byte, garbage included
    texts = [e["detail"]["text"] for e in entries(mirror(tmp_path))]
    pieces = [text for text in texts if set(text) == {"x"}]
    assert sum(map(len, pieces)) == 10 * 2**20  # recorded whole, in pieces of at most 1 MiB
    assert max(map(len, pieces)) <= 2**20
    assert any("\\x" in text for text in texts)  # undecodable bytes kept, escaped


def test_a_failing_mirror_is_reported_after_the_commands_own_stderr(tmp_path: Path) -> None:
    blocker = tmp_path / "not-a-directory"
    blocker.write_text("a file where the mirror directory should be")
    command = [*WRAPPER, "--", *agent("plain", "--stderr", "warning: careful\n")]
    env = subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(blocker / "runs"))
    result = subprocess.run(command, capture_output=True, env=env, timeout=60, check=False)
    assert result.returncode == 0
    assert result.stdout == (FIXTURES / FIXTURE_FILES["plain"]).read_bytes()
    # The command's stderr first, untouched; then, once it is over, what capture could not do.
    own, _, ours = result.stderr.decode().partition("warning: careful\n")
    assert own == ""
    assert ours.startswith("transcript-otel: sink 'jsonl': ")
    assert "NotADirectoryError" in ours


def test_records_a_dead_backend_never_took_are_counted_after_the_command(tmp_path: Path) -> None:
    command = [*WRAPPER, "--", *agent("plain", "--stderr", "warning: careful\n")]
    env = wrapper_env(
        tmp_path,
        OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{free_port()}",  # nobody listens
        OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
        OTEL_EXPORTER_OTLP_TIMEOUT="500",  # fails well within the 5 s shutdown
    )
    result = subprocess.run(command, capture_output=True, env=env, timeout=60, check=False)
    assert result.returncode == 0
    stderr = result.stderr.decode()
    assert stderr.startswith("warning: careful\ntranscript-otel: ")
    # No exporter retries in the middle; one line per signal names what the backend never took.
    lost = [line for line in stderr.splitlines() if "did not reach the OTLP backend" in line]
    assert sorted(line.split()[2] for line in lost) == ["log", "spans"]  # "N log records", "N spans"
    assert all("the JSONL mirror has them" in line for line in lost)
    assert len(entries(mirror(tmp_path))) == EXPECTED_TYPES["plain"]["assistant_message"]


def test_a_command_that_cannot_run_is_reported_with_the_shells_status(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-such-agent")
    result = subprocess.run(
        [*WRAPPER, "--", missing], capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False
    )
    assert result.returncode == 127
    assert result.stderr.decode().startswith(f"transcript-otel run: cannot run '{missing}': ")


def test_usage_errors_are_clear(tmp_path: Path) -> None:
    no_command = subprocess.run([*WRAPPER], capture_output=True, env=wrapper_env(tmp_path), check=False)
    assert no_command.returncode == 2
    assert b"give the agent command after --" in no_command.stderr
    bad_adapter = subprocess.run(
        [*WRAPPER, "--adapter", "xml", "--", "true"],
        capture_output=True,
        env=wrapper_env(tmp_path),
        check=False,
    )
    assert bad_adapter.returncode == 2
    assert b"invalid choice: 'xml'" in bad_adapter.stderr
    helped = subprocess.run([*WRAPPER, "--help"], capture_output=True, check=True)
    assert b"codex-json (codex exec --json)" in helped.stdout


def test_a_closed_stdout_stops_the_command_as_it_would_directly(tmp_path: Path) -> None:
    """`transcript-otel run -- yes | head -2`: `yes` gets SIGPIPE and the pipeline ends."""
    pipeline = f'{" ".join(WRAPPER)} --adapter plain -- yes | head -2; echo "${{PIPESTATUS[0]}}" >&2'
    result = subprocess.run(
        ["bash", "-c", pipeline], capture_output=True, env=wrapper_env(tmp_path), timeout=30, check=False
    )
    assert result.stdout == b"y\ny\n"
    assert result.stderr.strip().splitlines()[-1] == b"141"  # killed by SIGPIPE, like `yes | head` itself


def test_a_reader_that_goes_away_ends_the_run_with_what_it_read(tmp_path: Path) -> None:
    """`transcript-otel run -- seq 1 100000000 | head -1`: the lines the relay copied but nobody
    read (the megabyte in the command's pipe: 165,669 lines, recorded for 6-9 s before the
    wrapper exited) are not the run's; it ends as `seq` does, with what was passed on."""
    pipeline = (
        f'{" ".join(WRAPPER)} --adapter plain -- seq 1 100000000 | head -1; echo "${{PIPESTATUS[0]}}" >&2'
    )
    result = subprocess.run(
        ["bash", "-c", pipeline], capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False
    )
    assert result.stdout == b"1\n"
    assert result.stderr.strip().splitlines()[-1] == b"141"  # killed by SIGPIPE, like `seq` itself
    records = mirror(tmp_path)
    texts = [entry["detail"].get("text") for entry in entries(records) if entry["entry_type"] != "error"]
    # What our reader was passed, its last line as far as it was passed.
    assert texts[:-1] == [str(number) for number in range(1, len(texts))]
    assert str(len(texts)).startswith(texts[-1])
    # The command's pipe held a megabyte (165,669 lines) our reader never read; what reached
    # `head` is what its pipe took (64 KiB: about 12,000 lines), and capture reads on a few
    # thousand lines at most before it hears the reader went away.
    assert len(texts) < 50_000, len(texts)
    assert records[-1]["event"] == "transcript.stop"


SLOW_READER = """
import sys, time
received = 0
while chunk := sys.stdin.buffer.read1(4096):
    received += len(chunk)
    time.sleep(0.01)
print(received)
"""


def test_a_slow_reader_gets_every_byte_and_the_wrapper_waits_for_it(tmp_path: Path) -> None:
    """The command is done long before its reader: the output is not cut (it was, at 1 s)."""
    expected = subprocess.run(["seq", "1", "100000"], capture_output=True, check=True).stdout
    pipeline = (
        f'{" ".join(WRAPPER)} --adapter plain -- seq 1 100000 | {sys.executable} -c "$SLOW_READER"; '
        'echo "wrapper=${PIPESTATUS[0]}" >&2'
    )
    result = subprocess.run(
        ["bash", "-c", pipeline],
        capture_output=True,
        env=wrapper_env(tmp_path, SLOW_READER=SLOW_READER),
        timeout=120,
        check=False,
    )
    assert result.stdout.decode().strip() == str(len(expected))  # 588,895 bytes, in 4 KiB reads
    assert result.stderr.decode().strip().splitlines()[-1] == "wrapper=0"


def test_a_fast_printer_is_passed_through_whole_and_what_capture_missed_is_counted(tmp_path: Path) -> None:
    """50,000 lines of 100 bytes at full speed: the output is exact; every line is either in
    the transcript or in the one report of what was not (the benchmark measures how many),
    whatever the machine's load: the transcript is written whole before the shutdown's
    deadline starts."""
    line = "x" * 99
    command = [*WRAPPER, "--adapter", "plain", "--", "sh", "-c", f"yes {line} | head -n 50000"]
    result = subprocess.run(command, capture_output=True, env=wrapper_env(tmp_path), timeout=900, check=False)
    assert result.returncode == 0
    assert result.stdout == (line + "\n").encode() * 50_000
    records = mirror(tmp_path)
    recorded = entries(records)
    assert all(entry["detail"] == {"text": line} for entry in recorded)
    reports = [r["context"] for r in records if r["event"] == "transcript.error"]
    unrecorded = sum(report["unrecorded_lines"] for report in reports)
    assert len(recorded) + unrecorded == 50_000
    assert len(reports) == (1 if unrecorded else 0)
    said = [line for line in result.stderr.decode().splitlines() if "were not recorded" in line]
    assert len(said) == len(reports)


def test_a_writer_that_cannot_keep_up_loses_no_line_uncounted(tmp_path: Path) -> None:
    """A backlog of 8 entries at most and a shutdown deadline of 1 ms: capture waits for the
    writer instead of having entries dropped, and the transcript is written whole once the
    output is over. Every line is in the mirror, in order, or counted in the run's one report."""
    printed = 30_000
    env = wrapper_env(
        tmp_path, TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES="1", TRANSCRIPT_OTEL_SHUTDOWN_TIMEOUT="0.001"
    )
    command = [*WRAPPER, "--adapter", "plain", "--", "seq", "1", str(printed)]
    result = subprocess.run(command, capture_output=True, env=env, timeout=300, check=False)
    assert result.returncode == 0
    assert result.stdout.decode().splitlines() == [str(number) for number in range(1, printed + 1)]
    records = mirror(tmp_path)
    texts = [entry["detail"]["text"] for entry in entries(records)]
    assert texts == [str(number) for number in range(1, len(texts) + 1)]
    reports = [r["context"] for r in records if r["event"] == "transcript.error"]
    assert all("unrecorded_lines" in report for report in reports)  # no entry dropped
    assert len(texts) + sum(report["unrecorded_lines"] for report in reports) == printed
    assert records[-1]["event"] == "transcript.stop"
    assert b"not written" not in result.stderr


UNENDED_CALLS = """
import json
for number in range(2000):
    call = {"type": "tool_start", "tool": {"id": f"call-{number}", "name": "sh", "input": {}}}
    print("@@RALPH@@ " + json.dumps(call))
"""


def test_stderr_and_the_transcript_tell_the_same_losses(tmp_path: Path) -> None:
    """2,000 tool calls that never end become 2,000 results at the end of the output, all at
    once, into a backlog of 8 entries: the backlog drops most. stderr said only the lines
    capture missed (20 MB of binary output: 293 lines on stderr, 10,131 entries dropped in the
    mirror); it says the entries dropped too, the very count the transcript holds."""
    env = wrapper_env(tmp_path, TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES="1")
    command = [*WRAPPER, "--adapter", "rtf1", "--", sys.executable, "-c", UNENDED_CALLS]
    result = subprocess.run(command, capture_output=True, env=env, timeout=300, check=False)
    assert result.returncode == 0
    records = mirror(tmp_path)
    stop = records[-1]
    assert stop["event"] == "transcript.stop"
    dropped = stop["context"]["dropped_entries"]
    assert dropped > 0
    reports = [r["context"] for r in records if r["event"] == "transcript.error"]
    assert sum(report.get("dropped_entries", 0) for report in reports) == dropped
    assert len(entries(records)) + dropped == 4000  # each call's tool_use and its result
    said = [line for line in result.stderr.decode().splitlines() if "dropped" in line]
    assert said == [
        f"transcript-otel run: {dropped} transcript entries were dropped: the backlog exceeded its "
        "bound while the sinks fell behind (the transcript's dropped_entries)"
    ]


@pytest.mark.parametrize("redirect", [">", ">>"])
def test_output_into_a_file_or_appended_to_one_is_exact(redirect: str, tmp_path: Path) -> None:
    """The kernel moves the output where it can (splice); an append-only file is written to."""
    target = tmp_path / "out.txt"
    target.write_bytes(b"before\n")
    shell = f"{' '.join(WRAPPER)} -- seq 1 100000 {redirect} {target}"
    result = subprocess.run(["sh", "-c", shell], env=wrapper_env(tmp_path), timeout=60, check=False)
    assert result.returncode == 0
    expected = subprocess.run(["seq", "1", "100000"], capture_output=True, check=True).stdout
    assert target.read_bytes() == (b"before\n" if redirect == ">>" else b"") + expected


PRIVATE_KEY = (
    "-----BEGIN OPENSSH PRIVATE KEY-----\n"
    "b3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZWQy\n"
    "NTUxOQAAACBmYWtlIGtleSBmb3IgdGVzdHMgb25seSBub3QgcmVhbCBhdCBhbGwAAAAAAAAA\n"
    "-----END OPENSSH PRIVATE KEY-----\n"
)


def test_a_private_key_printed_across_lines_reaches_no_sink(tmp_path: Path) -> None:
    """Each line is an entry, but a key's lines are redacted as the one secret they are, also
    when the output ends before its END line."""
    key, cut = tmp_path / "id_ed25519", tmp_path / "cut"
    key.write_text(PRIVATE_KEY)
    cut.write_text("".join(PRIVATE_KEY.splitlines(keepends=True)[:2]))
    script = f"echo before; cat {key}; echo after; cat {cut}"
    result = subprocess.run(
        [*WRAPPER, "--", "sh", "-c", script],
        capture_output=True,
        env=wrapper_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.decode() == f"before\n{PRIVATE_KEY}after\n{cut.read_text()}"  # passed on as printed
    (path,) = (tmp_path / "runs").glob("*.jsonl")
    mirrored = path.read_text()
    for line in PRIVATE_KEY.splitlines()[1:3]:
        assert line[:24] not in mirrored
    texts = [e["detail"]["text"] for e in entries(mirror(tmp_path))]
    assert texts[0] == "before"
    assert texts[1].startswith("[REDACTED:private_key:")
    assert texts[2] == "after"
    assert texts[3].startswith("[REDACTED:private_key:")
    assert len(texts) == 4


def test_without_the_sdk_run_writes_the_mirror_with_its_spans_and_says_nothing(tmp_path: Path) -> None:
    """A core install (no SDK) with no export asked for: nothing to say (issue 48 item 3; one
    line when an endpoint is set: tests/test_core_install.py)."""
    core_only = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"  # as if not installed
        "from transcript_otel.cli import main\n"
        "sys.exit(main(['run', '--', 'echo', 'hi']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", core_only],
        capture_output=True,
        env=wrapper_env(tmp_path),
        timeout=60,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout == b"hi\n"
    assert result.stderr == b""
    records = mirror(tmp_path)
    assert [e["detail"] for e in entries(records)] == [{"text": "hi"}]
    assert [r["context"]["name"] for r in records if r["event"] == "transcript.span"] == [
        "chat",
        "invoke_agent echo",
    ]


def test_a_command_that_closes_its_stdout_early_is_waited_for(tmp_path: Path) -> None:
    command = [*WRAPPER, "--", "/bin/sh", "-c", "echo early; exec >&-; sleep 1; exit 3"]
    result = subprocess.run(command, capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False)
    assert result.returncode == 3
    assert result.stdout == b"early\n"
    recorded = [(e["entry_type"], e["detail"]) for e in entries(mirror(tmp_path))]
    assert recorded == [
        ("assistant_message", {"text": "early"}),
        ("error", {"exception": {"type": "CommandFailed", "message": "exited with status 3"}}),
    ]


def test_a_process_left_behind_does_not_keep_the_wrapper_waiting(tmp_path: Path) -> None:
    # It keeps the command's stdout (our pipe) open; its stderr would be the caller's own.
    command = [*WRAPPER, "--", "/bin/sh", "-c", "echo start; (sleep 30; echo late) 2>/dev/null &"]
    started = time.monotonic()
    result = subprocess.run(command, capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False)
    assert result.returncode == 0
    assert time.monotonic() - started < 15
    assert result.stdout == b"start\n"


def test_the_callers_trace_is_the_runs_parent_and_the_command_gets_the_runs_span(tmp_path: Path) -> None:
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    script = "import os; print(os.environ['TRACEPARENT'])"
    env = wrapper_env(tmp_path, TRACEPARENT=caller)
    result = subprocess.run(
        [*WRAPPER, "--adapter", "plain", "--", sys.executable, "-c", script],
        capture_output=True,
        env=env,
        timeout=60,
        check=True,
    )
    _, trace_id, span_id, _ = result.stdout.decode().strip().split("-")
    assert trace_id == "0af7651916cd43dd8448eb211c80319c"  # the caller's trace
    assert span_id != "b7ad6b7169203331"  # the run's own span, a child of the caller's
    (entry,) = entries(mirror(tmp_path))
    assert entry["trace_id"] == trace_id


def test_a_script_without_a_shebang_runs_as_a_shell_would_run_it(tmp_path: Path) -> None:
    script = tmp_path / "agent-script"
    script.write_text("echo from sh\n")
    script.chmod(0o755)
    result = subprocess.run(
        [*WRAPPER, "--", str(script)], capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False
    )
    assert result.returncode == 0
    assert result.stdout == b"from sh\n"


def test_a_bad_adapter_variable_is_reported_and_the_command_still_runs(tmp_path: Path) -> None:
    env = wrapper_env(tmp_path, TRANSCRIPT_OTEL_LINE_ADAPTER="xml")
    result = subprocess.run(
        [*WRAPPER, "--", "/bin/echo", "hi"], capture_output=True, env=env, timeout=60, check=False
    )
    assert result.returncode == 0
    assert result.stdout == b"hi\n"
    assert b"TRANSCRIPT_OTEL_LINE_ADAPTER: unknown line adapter 'xml'" in result.stderr


def test_claude_stream_json_spans_nest_subagents_and_count_usage_once(tmp_path: Path) -> None:
    async def run() -> list[Any]:
        async with TapCollector() as tap:
            env = wrapper_env(tmp_path, OTEL_EXPORTER_OTLP_ENDPOINT=tap.endpoint)
            command = [*WRAPPER, "--prompt-name", "cli-claude", "--", *agent("claude-stream-json")]
            returncode, _, stderr = await run_to_completion(command, 60, env=env)
            assert returncode == 0, stderr.decode(errors="replace")
            await tap.wait_for(lambda: any(span.name == "invoke_agent cli-claude" for span in tap.spans))
            await asyncio.sleep(0.2)
            return list(tap.spans)

    spans = asyncio.run(run())
    by_id = {span.span_id: span for span in spans}
    (root,) = [span for span in spans if span.name == "invoke_agent cli-claude"]
    subagents = [span for span in spans if span.name.startswith("invoke_agent ") and span is not root]
    assert subagents
    for subagent in subagents:
        assert by_id[subagent.parent_span_id].name in ("execute_tool Task", "execute_tool Agent")
    results = [
        json.loads(line)
        for line in (FIXTURES / "claude-stream-json.jsonl").read_text().splitlines()
        if line.startswith("{") and json.loads(line).get("type") == "result"
    ]
    (session,) = results[-1]["modelUsage"].values()  # the session's running totals, subagent included
    attributes = {a.key: a.value.int_value for a in root.attributes}
    # counted once; Anthropic's input leaves out the cache, the recorded input is the whole prompt
    whole_prompt = (
        session["inputTokens"] + session["cacheReadInputTokens"] + session["cacheCreationInputTokens"]
    )
    # The root says the session's totals under its own names; the chat spans (the turns', the
    # subagent's) count the tokens, each once: together they are the same totals.
    assert attributes["transcript.usage.input_tokens"] == whole_prompt
    assert attributes["transcript.usage.output_tokens"] == session["outputTokens"]
    assert not [key for key in attributes if key.startswith("gen_ai.usage.")]
    chats = [span for span in spans if span.name.startswith("chat")]
    assert any(by_id[chat.parent_span_id] in subagents for chat in chats)
    counted = Counter[str]()
    for chat in chats:
        usage = {a.key: a.value.int_value for a in chat.attributes if a.key.startswith("gen_ai.usage.")}
        counted.update(usage)
    assert counted["gen_ai.usage.input_tokens"] == whole_prompt
    # (Output differs: a subagent's stream-json messages carry the output count of their first
    # chunk, 1; only the session's totals know what it wrote in all.)
    assert session["inputTokens"] > sum(result["usage"]["input_tokens"] for result in results)


# -- what the output and the command line tell about the agent ----------------------------------


def span_records(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r["context"] for r in records if r["event"] == "transcript.span"]


@pytest.mark.parametrize(
    ("fmt", "adapter", "provider"),
    [
        ("claude-stream-json", None, "anthropic"),  # chosen by auto
        ("claude-stream-json", "claude-stream-json", "anthropic"),
        ("codex-json", None, "openai"),  # not a `codex exec` command line: the output tells
        ("rtf1", None, None),  # any agent may print it
    ],
)
def test_the_line_adapter_tells_the_provider_of_the_root_and_chat_spans(
    fmt: str, adapter: str | None, provider: str | None, tmp_path: Path
) -> None:
    result = run_wrapper(tmp_path, fmt, adapter=adapter)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    spans = span_records(mirror(tmp_path))
    (root,) = [span for span in spans if span["name"] == f"invoke_agent cli-{fmt}"]
    chats = [span for span in spans if span["name"].split(" ")[0] == "chat"]
    assert chats
    for span in [root, *chats]:
        assert span["attributes"].get("gen_ai.provider.name") == provider, span["name"]


def test_an_sdk_driven_claude_clis_stdout_is_read_as_claude_stream_json(tmp_path: Path) -> None:
    """The CLI's stdout under claude-agent-sdk opens with its `control_response` to `initialize`
    (recorded: `tests/agents/record_sdk_stdout.py`); auto still reads it as Claude's stream."""
    recorded = FIXTURES / "claude-sdk-stdout.jsonl"
    assert json.loads(recorded.read_text().splitlines()[0])["type"] == "control_response"
    command = [*WRAPPER, "--prompt-name", "cli-sdk", "--", "cat", str(recorded)]
    result = subprocess.run(command, capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    records = mirror(tmp_path)
    counted = Counter(entry["entry_type"] for entry in entries(records))
    assert counted["tool_use"] == counted["tool_result"] == 1
    assert counted["token_usage"] == 1
    assert counted["unknown"] == 0
    (root,) = [span for span in span_records(records) if span["name"] == "invoke_agent cli-sdk"]
    assert root["attributes"].get("gen_ai.provider.name") == "anthropic"


def fake_claude(directory: Path) -> str:
    """A `claude` on disk that ignores its arguments and prints the claude-stream-json fixture."""
    launcher = directory / "claude"
    launcher.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{AGENT}" claude-stream-json\n')
    launcher.chmod(0o755)
    return str(launcher)


def test_a_claude_command_lines_system_prompt_is_on_the_root_and_chat_spans(tmp_path: Path) -> None:
    claude = fake_claude(tmp_path)
    system_prompt = ["--system-prompt", "You list files.", "--append-system-prompt=Be terse."]
    command = [*WRAPPER, "--prompt-name", "cli-claude", "--", claude, "-p", *system_prompt, "hi"]
    result = subprocess.run(command, capture_output=True, env=wrapper_env(tmp_path), timeout=60, check=False)
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert result.stdout == (FIXTURES / "claude-stream-json.jsonl").read_bytes()
    spans = span_records(mirror(tmp_path))
    (root,) = [span for span in spans if span["name"] == "invoke_agent cli-claude"]
    # The main thread's turns (a subagent's chat span is told no system prompt of the run's).
    turns = [span for span in spans if span["attributes"].get("transcript.turn") is not None]
    assert len(turns) == 2
    for span in [root, *turns]:
        parts = json.loads(span["attributes"]["gen_ai.system_instructions"])
        assert [part["content"] for part in parts] == ["You list files.\n\nBe terse."], span["name"]
        assert span["attributes"]["gen_ai.provider.name"] == "anthropic"


@pytest.mark.parametrize(
    ("command", "told"),
    [
        (["claude", "-p", "--system-prompt", "Be brief.", "hi"], "Be brief."),
        (["/usr/local/bin/claude", "--print", "--system-prompt=a=b", "hi"], "a=b"),
        (["claude", "-p", "--append-system-prompt", "And kind.", "hi"], "And kind."),
        (["npx", "@anthropic-ai/claude-code", "-p", "--append-system-prompt", "X", "hi"], "X"),
        (["claude", "-p", "--system-prompt", "A", "--append-system-prompt", "B"], "A\n\nB"),
        (["claude", "-p", "--system-prompt", "A", "--system-prompt", "C"], "C"),  # the last
        (["claude", "-p", "--", "--system-prompt", "not an option"], None),  # the prompt
        (["claude", "-p", "--system-prompt", "", "hi"], None),
        (["claude", "-p", "hi"], None),
    ],
)
def test_claude_command_reads_the_system_prompt_options(command: list[str], told: str | None) -> None:
    from transcript_otel.cli.claude_command import ClaudeCommand

    facts = ClaudeCommand.of(command)
    assert facts is not None
    assert facts.system_instructions == told


@pytest.mark.parametrize(
    ("command", "prompt"),
    [
        (
            ["claude", "-p", "--output-format", "stream-json", "--verbose", "Count the files"],
            "Count the files",
        ),
        (["claude", "-p", "--thinking", "enabled", "fix the bug"], "fix the bug"),  # a hidden option
        (["claude", "-p", "--allowedTools", "Bash", "Read", "--", "the prompt"], "the prompt"),  # a list
        (["claude", "-p", "-r", "--model", "m", "hi"], "hi"),  # an optional value not taken
        (["claude", "-p", "-r", "session-1", "hi"], "hi"),  # an optional value taken
        (["claude", "-p", "--some-new-option", "x", "fix"], None),  # unknown: x or fix? none told
        (["claude", "-p", "--some-new-option=x", "fix"], "fix"),  # its value is its own
        (["claude", "mcp", "list"], None),  # a command, not a prompt
        (["claude", "-p", "--input-format", "stream-json"], None),  # the prompt comes on stdin
    ],
)
def test_claude_command_reads_the_prompt_as_claude_does(command: list[str], prompt: str | None) -> None:
    from transcript_otel.cli.claude_command import ClaudeCommand

    facts = ClaudeCommand.of(command)
    assert facts is not None
    assert facts.prompt == prompt


def test_claude_command_reads_prompt_files_and_only_claude(tmp_path: Path) -> None:
    from transcript_otel.cli.claude_command import MAX_SYSTEM_PROMPT_FILE_BYTES, ClaudeCommand

    prompt, appended, huge = tmp_path / "prompt.md", tmp_path / "more.md", tmp_path / "huge.md"
    prompt.write_text("From a file.")
    appended.write_text("Appended.")
    huge.write_bytes(b"x" * (MAX_SYSTEM_PROMPT_FILE_BYTES + 1))
    files = ["--system-prompt-file", str(prompt), "--append-system-prompt-file", str(appended)]
    facts = ClaudeCommand.of(["claude", "-p", *files, "hi"])
    assert facts is not None
    assert facts.system_instructions == "From a file.\n\nAppended."
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)  # a pipe is the agent's to read: never opened
    for unread in (huge, tmp_path / "missing.md", fifo, tmp_path):
        facts = ClaudeCommand.of(["claude", "-p", "--system-prompt-file", str(unread), "hi"])
        assert facts is not None
        assert facts.system_instructions is None
    assert ClaudeCommand.of(["codex", "exec", "--system-prompt", "x"]) is None
    assert ClaudeCommand.of(["python", "claude", "--system-prompt", "x"]) is None
    assert ClaudeCommand.of([]) is None
