"""Section 5: end to end, a weakincentives Codex `evaluate()` with and without capture.

Issue 8, target 5: an instrumented weakincentives Codex `evaluate()` over a scripted
2,000-notification turn takes at most 3% longer than the same run uninstrumented
(median of 5, same run).

`CodexAppServerAdapter.evaluate()` of weakincentives 0.27 runs against
`examples/fake_agents/fake_codex.py`, scenario `bulk`: one turn of 2,000
notifications (reasoning, command output and message deltas, item started and
completed, commands with ~4 KB of output, token usage), about 900 KB of JSON-RPC.
The prompt and launcher are the demo's (`examples/codex_agent.py`); the adapter runs the fake.

Each kind runs in fresh processes, so no instrumentation state leaks from one to the other:

* `uninstrumented`: `evaluate()` alone (weakincentives' own transcript emitter
  still runs, logging off, as in any weakincentives 0.27 run);
* `instrumented`: `transcript_otel.configure()` first, with the JSONL mirror on and
  OTLP/HTTP to a live loopback `rotel`: the real setup.

Each process (`serve()`) runs `1 + LATER_RUNS` evaluations, each with a new session,
fake app-server and workspace. The first one of a process pays for what a process does
once (in the instrumented one: the memory that holds the queued entries until the
writer takes them is new, and each of its pages is faulted in, 4 µs apiece on this VM).
The later ones are what a long-running agent pays for each `evaluate()`.

The machine's speed drifts over seconds, so the two kinds run side by side: a pair of
processes, one of each kind, both set up before either is timed, take turns one
evaluation at a time (which goes first alternates). After each evaluation the
instrumented process flushes, untimed: its writer catches up, as while an agent waits
for its model, and not while the other process is timed. One warm-up pair, then `RUNS`
pairs. Each evaluation is timed alone (from the call to its return, which includes
starting the fake app-server); at the end the instrumented process counts the entries
that reached each run's mirror.
"""

from __future__ import annotations

import gc
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from harness import THREADED_RUNS, WARMUP_RUNS, ServingChild, alternating_pair, perf_ns, read_mirror

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
sys.path[:0] = [str(EXAMPLES), str(EXAMPLES / "fake_agents")]
import fake_codex  # noqa: E402  (the bulk scenario's shape)

import codex_agent  # noqa: E402  (the demo's prompt, fake app-server launcher and adapter)

MODES: Final = ("uninstrumented", "instrumented")
# More pairs than other threaded rows: a ratio of a few percent, on a 2-CPU machine that drifts.
RUNS: Final = 2 * THREADED_RUNS
LATER_RUNS: Final = 6  # evaluations after the first, in each child
CHILD_TIMEOUT_S: Final = 180.0
PROMPT_NAME: Final = "bench-e2e-bulk"
# What weakincentives 0.27's CodexTranscriptBridge emits for the bulk turn (its deltas
# give nothing): the prompt (user_message), turn/started (system_event), and per step
# item/reasoning/completed (thinking), the command's item/started and item/completed
# (tool_use, tool_result), the message's item/completed (assistant_message) and
# thread/tokenUsage/updated (token_usage); then the final answer (assistant_message).
EXPECTED_ENTRIES: Final = 2 + 5 * fake_codex.BULK_STEPS + 1


TASK: Final = "Call the echo tool with the text 'hi', then reply."


def _fake_codex_adapter(workdir: Path) -> Any:
    """The adapter on the fake app-server (it runs `<codex_bin> app-server`): a load of notifications
    no real model session makes this fast, in the shapes the real Codex 0.171 sends."""
    from weakincentives.adapters.codex_app_server import CodexAppServerAdapter, CodexAppServerClientConfig

    launcher = codex_agent.write_launcher(workdir, "codex", EXAMPLES / "fake_agents" / "fake_codex.py")
    workspace = workdir / "workspace"
    workspace.mkdir()
    return CodexAppServerAdapter(
        client_config=CodexAppServerClientConfig(codex_bin=launcher, cwd=str(workspace))
    )


def _evaluate_once(adapter: Any, prompt: Any, session: Any) -> dict[str, Any]:
    gc.collect()
    process_cpu, thread_cpu = time.process_time(), time.thread_time()
    started = perf_ns()
    response = adapter.evaluate(prompt, session=session)
    elapsed_ns = perf_ns() - started
    # Where the time went: this (the agent's) thread, and all of the process's threads
    # (the writer and exporters included; the fake app-server is another process).
    thread_cpu, process_cpu = time.thread_time() - thread_cpu, time.process_time() - process_cpu
    return {
        "evaluate_s": elapsed_ns / 1e9,
        "agent_thread_cpu_s": thread_cpu,
        "process_cpu_s": process_cpu,
        "answer_chars": len(response.text or ""),
    }


def serve(mode: str) -> None:
    """Child process: an evaluation of the bulk turn for each `run` line on stdin, its figures
    as a JSON line on stdout; at `finish`, instrumented, what each run captured."""
    import transcript_otel

    configuration: transcript_otel.Configuration | None = None
    jsonl_dir = ""
    if mode == "instrumented":
        jsonl_dir = tempfile.mkdtemp(prefix="bench-e2e-mirror-")
        configuration = transcript_otel.configure(service_name="bench-e2e", jsonl_dir=jsonl_dir)
    from weakincentives.runtime import Session

    os.environ["FAKE_SCENARIO"] = "bulk"
    session_ids: list[str] = []
    print(json.dumps({"ready": True}), flush=True)
    for command in sys.stdin:
        if command.strip() != "run":
            break
        with tempfile.TemporaryDirectory(prefix="bench-e2e-") as workdir:
            session = Session()
            adapter = _fake_codex_adapter(Path(workdir))
            figures = _evaluate_once(adapter, codex_agent.build_prompt(PROMPT_NAME, TASK), session)
            session_ids.append(str(session.session_id))
        if configuration is not None:
            # Untimed: the writer catches up, as while an agent waits for its model, and not
            # while the other process is timed.
            figures["flushed"] = transcript_otel.flush(30.0)
        print(json.dumps(figures), flush=True)
    result: dict[str, Any] = {}
    if configuration is not None:
        from otel_setup import export_queue_of

        result["captures"] = [_capture(Path(jsonl_dir), session_id) for session_id in session_ids]
        export_queue = export_queue_of(configuration.logger_provider)
        result.update(export_dropped=export_queue.dropped, export_failed=export_queue.failed)
        configuration.shutdown()
        shutil.rmtree(jsonl_dir)
    print(json.dumps(result), flush=True)


def _capture(jsonl_dir: Path, session_id: str) -> dict[str, Any]:
    mirrors = sorted(jsonl_dir.glob(f"*_{PROMPT_NAME}_{session_id}.jsonl"))
    if not mirrors:
        raise RuntimeError(f"no JSONL mirror of session {session_id} in {jsonl_dir}")
    mirror = read_mirror(mirrors[-1])
    return {
        "mirror_entries": mirror.entries,
        "entry_types": dict(mirror.entry_types),
        "spans": mirror.events["transcript.span"],
        "errors": mirror.events["transcript.error"],
        "pipeline_dropped": mirror.pipeline_dropped,
    }


def _pair(environment: dict[str, str]) -> dict[str, Any]:
    """One process of each kind, their evaluations alternating (which goes first alternates too)."""
    children = {mode: ServingChild(__file__, [mode], environment, CHILD_TIMEOUT_S) for mode in MODES}
    return alternating_pair(children, 1 + LATER_RUNS)


def _summary(runs: list[dict[str, Any]], errors: list[str]) -> dict[str, Any]:
    seconds = [run["evaluate_s"] for run in runs]

    def median_of(key: str) -> float | None:
        return statistics.median(run[key] for run in runs) if runs else None

    quartiles = statistics.quantiles(seconds, n=4) if len(seconds) >= 2 else [None, None, None]
    return {
        "seconds": seconds,
        "median_s": median_of("evaluate_s"),
        "best_s": min(seconds) if seconds else None,
        "p25_s": quartiles[0],
        "p75_s": quartiles[2],
        "agent_thread_cpu_s": median_of("agent_thread_cpu_s"),
        "process_cpu_s": median_of("process_cpu_s"),
        "errors": errors,
    }


def _ratio(summaries: dict[str, dict[str, Any]], key: str = "median_s") -> float | None:
    plain, instrumented = summaries["uninstrumented"][key], summaries["instrumented"][key]
    return instrumented / plain if plain and instrumented else None


def _paired_ratio(pairs: list[dict[str, Any]], indexes: range, key: str = "evaluate_s") -> float | None:
    """The median, over evaluations run back to back, of instrumented / uninstrumented."""
    ratios = [
        pair["runs"]["instrumented"][index][key] / pair["runs"]["uninstrumented"][index][key]
        for pair in pairs
        for index in indexes
        if pair["runs"]["uninstrumented"][index][key]
    ]
    return statistics.median(ratios) if ratios else None


def main() -> dict[str, Any]:
    from receiver import blackhole_rotel

    outcomes: list[dict[str, Any]] = []
    with blackhole_rotel() as rotel:
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "TRANSCRIPT_OTEL_", "FAKE_"))
        }
        # Both modes get the same environment; only the instrumented one reads it.
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = rotel.http_endpoint
        for index in range(WARMUP_RUNS + RUNS):
            outcome = _pair(environment)
            if index >= WARMUP_RUNS:
                outcomes.append(outcome)
    pairs = [outcome for outcome in outcomes if "error" not in outcome]
    errors = [outcome["error"] for outcome in outcomes if "error" in outcome]
    phases: dict[str, dict[str, dict[str, Any]]] = {
        "first": {mode: _summary([pair["runs"][mode][0] for pair in pairs], errors) for mode in MODES},
        "later": {
            mode: _summary([run for pair in pairs for run in pair["runs"][mode][1:]], errors)
            for mode in MODES
        },
    }
    return {
        "e2e": {
            "notifications": fake_codex.BULK_NOTIFICATIONS,
            "expected_entries": EXPECTED_ENTRIES,
            "runs": RUNS,
            "later_runs": LATER_RUNS,
            "phases": phases,
            "ratios": {phase: _ratio(summaries) for phase, summaries in phases.items()},
            "paired_ratios": {
                "first": _paired_ratio(pairs, range(1)),
                "later": _paired_ratio(pairs, range(1, 1 + LATER_RUNS)),
            },
            # The agent's thread: what issue 46's target is about (the wall also has the fake
            # app-server's start, and the machine's other work).
            "cpu_ratios": {
                phase: _ratio(summaries, "agent_thread_cpu_s") for phase, summaries in phases.items()
            },
            "paired_cpu_ratios": {
                "first": _paired_ratio(pairs, range(1), "agent_thread_cpu_s"),
                "later": _paired_ratio(pairs, range(1, 1 + LATER_RUNS), "agent_thread_cpu_s"),
            },
            "captures": [capture for pair in pairs for capture in pair["captures"]],
            "export_dropped": sum(pair["export_dropped"] for pair in pairs),
            "export_failed": sum(pair["export_failed"] for pair in pairs),
            # A flush that timed out would leave the writer busy while the other process is timed.
            "flushes_timed_out": sum(
                not run["flushed"] for pair in pairs for run in pair["runs"]["instrumented"]
            ),
        }
    }


if __name__ == "__main__":
    serve(sys.argv[1])
