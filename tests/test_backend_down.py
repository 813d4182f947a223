"""The OTLP backend is down: the agent is unaffected and the JSONL mirror is complete.

A subprocess calls `configure()` with OTEL_EXPORTER_OTLP_ENDPOINT at a closed
loopback port (nothing listens there), or at a backend that takes the connection and
never answers, emits 2,000 entries inside spans and exits normally. The exporters fail
and retry, or wait; exit must still come within a bounded time, with exit code 0, no
exception in the agent's code, every entry in the JSONL mirror, and one warning per
signal saying how many records did not reach the backend and why. How long shutdown
took is printed, not asserted.
"""

from __future__ import annotations

import contextlib
import json
import re
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from transcript_otel import check_invariants, read_records

pytest.importorskip("opentelemetry.sdk")
pytest.importorskip("opentelemetry.exporter.otlp.proto.http")

from fault_servers import SilentServer

from helpers import assert_complete_mirror
from loopback import free_port, subprocess_env
from session_fixtures import codex_day

ENTRIES = 2000
SPANS = 20
TIMEOUT_S = 30

AGENT = f"""
import json, threading, time, atexit

thread_errors = []
threading.excepthook = lambda args: thread_errors.append(repr(args.exc_value))
# Registered before configure(): runs after transcript-otel's exit handler (LIFO).
atexit.register(lambda: print("EXIT_DONE " + json.dumps({{"wall": time.time(),
                                                          "thread_errors": thread_errors}}), flush=True))

import transcript_otel
from opentelemetry import trace

cfg = transcript_otel.configure(service_name="backend-down")
agent_error = None
emitter = None
started = time.perf_counter()
try:
    tracer = trace.get_tracer("agent")
    emitter = transcript_otel.TranscriptEmitter(prompt_name="down", adapter="scripted")
    emitter.start()
    for turn in range({SPANS}):
        with tracer.start_as_current_span(f"turn-{{turn}}"):
            for i in range({ENTRIES // SPANS}):
                emitter.emit("assistant_message", detail={{"turn": turn, "i": i, "text": "x" * 100}})
    emitter.stop()
except BaseException as exc:
    agent_error = repr(exc)
agent_s = time.perf_counter() - started
print("RESULT " + json.dumps({{
    "agent_error": agent_error,
    "agent_s": agent_s,
    "jsonl": emitter.jsonl_path if emitter else None,
    "protocol": cfg.otlp_protocol,
    "endpoint": cfg.otlp_endpoint,
    "dropped": emitter.dropped_entries if emitter else None,
}}), flush=True)
atexit.register(lambda: print("EXIT_START " + json.dumps({{"wall": time.time()}}), flush=True))
"""


def marker(stdout: str, name: str) -> dict[str, object]:
    lines = [line for line in stdout.splitlines() if line.startswith(name + " ")]
    assert lines, f"{name} missing from output:\n{stdout}"
    value: dict[str, object] = json.loads(lines[-1][len(name) + 1 :])
    return value


@contextlib.contextmanager
def dead_backend(kind: str) -> Iterator[str]:
    """The endpoint of a backend that is down: nothing listening, or listening and silent."""
    if kind == "closed port":
        yield f"http://127.0.0.1:{free_port()}"  # bound and released: nothing listens there
    else:
        with SilentServer() as silent:
            yield silent.endpoint


@pytest.mark.parametrize("backend", ["closed port", "never answers"])
@pytest.mark.parametrize("protocol", ["http/protobuf", "grpc"])
def test_dead_backend_neither_hangs_nor_loses_the_mirror(tmp_path: Path, protocol: str, backend: str) -> None:
    if protocol == "grpc":
        pytest.importorskip("opentelemetry.exporter.otlp.proto.grpc")
    with dead_backend(backend) as endpoint:
        run_against_dead_backend(tmp_path, protocol, backend, endpoint)


def run_against_dead_backend(tmp_path: Path, protocol: str, backend: str, endpoint: str) -> None:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(AGENT))
    runs = tmp_path / "runs"
    env = subprocess_env(
        OTEL_EXPORTER_OTLP_ENDPOINT=endpoint,
        OTEL_EXPORTER_OTLP_PROTOCOL=protocol,
        TRANSCRIPT_OTEL_JSONL_DIR=str(runs),
        XDG_STATE_HOME=str(tmp_path / "state"),
    )
    started = time.time()
    process = subprocess.run(
        [sys.executable, str(script)],
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_S,  # a hang fails the test here
        cwd=tmp_path,
        check=False,
    )
    finished = time.time()
    assert process.returncode == 0, process.stderr[-4000:]
    outcome = marker(process.stdout, "RESULT")
    exit_start = marker(process.stdout, "EXIT_START")
    exit_done = marker(process.stdout, "EXIT_DONE")
    assert isinstance(exit_start["wall"], float)
    print(
        f"\n[{protocol}] {backend} at {endpoint}: agent {outcome['agent_s']:.2f} s, "
        f"shutdown {finished - exit_start['wall']:.2f} s, whole process {finished - started:.2f} s"
    )
    assert outcome["agent_error"] is None
    assert outcome["protocol"] == protocol
    assert outcome["endpoint"] == endpoint
    assert exit_done["thread_errors"] == []
    assert outcome["dropped"] == 0

    # The JSONL mirror holds every entry: start, 2,000 gap-free entries, stop.
    assert_complete_mirror(outcome["jsonl"], runs, spans=SPANS, per_span=ENTRIES // SPANS, span_key="turn")

    # Nothing reached the backend, and stderr says so, with how many and why: for a backend
    # that never answers, that it did not answer (not a silent exit after the timeout).
    warnings = {
        match["items"]: (int(match["count"]), match["why"])
        for match in re.finditer(
            r"transcript-otel: (?P<count>\d+) (?P<items>log records|spans?) did not reach the OTLP "
            r"backend \((?P<why>[^\n]*)\); the JSONL mirror has them",
            process.stderr,
        )
    }
    assert set(warnings) == {"log records", "spans"}, process.stderr[-4000:]
    assert warnings["log records"][0] == ENTRIES + 2  # the entries, start and stop
    assert warnings["spans"][0] >= SPANS
    if backend == "never answers":
        # The export in flight at exit is the one the backend never answered; on a busy machine
        # the export thread may not have sent a signal's first batch before the exit: then it is
        # still queued, and the warning says that instead; or the exporter's own timeout came
        # first and it returned its failure. Each is true; a silent exit is not.
        truthful = (
            "the backend did not answer an export of",
            "still queued at shutdown",
            "result <SpanExportResult.FAILURE",
            "result <LogRecordExportResult.FAILURE",
        )
        assert all(why.startswith(truthful) for _, why in warnings.values()), warnings


CODEX_SESSION = next(
    codex_day("shell").glob("rollout-*.jsonl")
)  # its session id is the name's last 36 characters


def _ten_sessions(folder: Path) -> list[Path]:
    """Ten Codex sessions: the recorded one under ten session ids."""
    session_id = CODEX_SESSION.stem[-36:]
    made = []
    for number in range(10):
        other = f"{session_id[:-2]}{number:02d}"
        path = folder / CODEX_SESSION.name.replace(session_id, other)
        path.write_bytes(CODEX_SESSION.read_bytes().replace(session_id.encode(), other.encode()))
        made.append(path)
    return made


def test_an_import_to_a_backend_that_never_answers_waits_once_and_says_what_was_not_sent(
    tmp_path: Path,
) -> None:
    """Each of ten sessions waited out the export timeout (10 sessions: 60.6 s against 0.67 s).
    After the first run the backend does not take, the others are not sent: each is said, with
    the run that was not; the mirror has every run; the import fails (exit 1)."""
    folder = tmp_path / "sessions"
    folder.mkdir()
    sessions = _ten_sessions(folder)
    with SilentServer() as silent:
        done = subprocess.run(
            [sys.executable, "-m", "transcript_otel.cli", "import", str(folder), "-j", "2"],
            env=subprocess_env(
                OTEL_EXPORTER_OTLP_ENDPOINT=silent.endpoint,
                OTEL_EXPORTER_OTLP_TIMEOUT="1",
                TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "runs"),
            ),
            capture_output=True,
            text=True,
            timeout=600,  # (a hang fails here; how long it took is not the test's)
            check=False,
        )
    assert done.returncode == 1, done.stderr
    runs = sorted((tmp_path / "runs").glob("*.jsonl"))
    assert len(runs) == len(sessions)
    for run in runs:
        assert check_invariants(list(read_records(run))) == []
    not_sent = re.findall(r"^transcript-otel import: (.*\.jsonl): not sent: (.*)$", done.stderr, re.MULTILINE)
    assert sorted(Path(run) for run, _ in not_sent) == runs
    (failed, first_why), *others = not_sent
    assert "did not take the run" in first_why
    assert [why for _, why in others] == [f"not tried, as {failed} was not sent"] * (len(runs) - 1)
