"""Section 5: end to end, a weakincentives Codex `evaluate()` with and without capture.

Issue 8, target 5: an instrumented weakincentives Codex `evaluate()` over a scripted
2,000-notification turn takes at most 3% longer than the same run uninstrumented
(median of 5, same run).

`CodexAppServerAdapter.evaluate()` of weakincentives 0.27 runs against
`examples/fake_agents/fake_codex.py`, scenario `bulk`: one turn of 2,000
notifications (reasoning, command output and message deltas, item started and
completed, commands with ~4 KB of output, token usage), about 900 KB of JSON-RPC.
The prompt, adapter and launcher are the demo's (`examples/codex_agent.py`).

Every run is a fresh process, so no instrumentation state can leak between runs:

* `uninstrumented`: `evaluate()` alone (weakincentives' own transcript emitter
  still runs, logging off, as in any weakincentives 0.27 run);
* `instrumented`: `transcript_otel.configure()` first, with the JSONL mirror on and
  OTLP/HTTP to a live loopback `rotel`: the real setup.

One warm-up process of each, then the two alternate, `RUNS` of each. Each child
times `evaluate()` alone (from the call to its return, which includes starting the
fake app-server); the instrumented one then flushes, untimed, and counts the
entries that reached the mirror.
"""

from __future__ import annotations

import gc
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from harness import THREADED_RUNS, WARMUP_RUNS, perf_ns, read_mirror, run_child

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent / "examples"
sys.path[:0] = [str(EXAMPLES), str(EXAMPLES / "fake_agents")]
import fake_codex  # noqa: E402  (the bulk scenario's shape)

import codex_agent  # noqa: E402  (the demo's prompt, fake app-server launcher and adapter)

MODES: Final = ("uninstrumented", "instrumented")
PROMPT_NAME: Final = "bench-e2e-bulk"
# What weakincentives 0.27's CodexTranscriptBridge emits for the bulk turn (its deltas
# give nothing): the prompt (user_message), turn/started (system_event), and per step
# item/reasoning/completed (thinking), the command's item/started and item/completed
# (tool_use, tool_result), the message's item/completed (assistant_message) and
# thread/tokenUsage/updated (token_usage); then the final answer (assistant_message).
EXPECTED_ENTRIES: Final = 2 + 5 * fake_codex.BULK_STEPS + 1


def run_evaluate(mode: str) -> dict[str, Any]:
    """Child process: one `evaluate()` of the bulk turn; its time and, instrumented, the capture."""
    import transcript_otel

    configuration: transcript_otel.Configuration | None = None
    jsonl_dir = ""
    if mode == "instrumented":
        jsonl_dir = tempfile.mkdtemp(prefix="bench-e2e-mirror-")
        configuration = transcript_otel.configure(service_name="bench-e2e", jsonl_dir=jsonl_dir)
    from weakincentives.runtime import Session

    os.environ["FAKE_SCENARIO"] = "bulk"
    with tempfile.TemporaryDirectory(prefix="bench-e2e-") as workdir:
        adapter = codex_agent.codex_adapter(Path(workdir))
        prompt = codex_agent.build_prompt(PROMPT_NAME)
        session = Session()
        gc.collect()
        process_cpu, thread_cpu = time.process_time(), time.thread_time()
        started = perf_ns()
        response = adapter.evaluate(prompt, session=session)
        elapsed_ns = perf_ns() - started
        # Where the time went: this (the agent's) thread, and all of the process's threads
        # (the writer and exporters included; the fake app-server is another process).
        thread_cpu, process_cpu = time.thread_time() - thread_cpu, time.process_time() - process_cpu
    result: dict[str, Any] = {
        "evaluate_s": elapsed_ns / 1e9,
        "agent_thread_cpu_s": thread_cpu,
        "process_cpu_s": process_cpu,
        "answer_chars": len(response.text or ""),
    }
    if configuration is not None:
        from otel_setup import export_queue_of

        result["flushed"] = transcript_otel.flush(30.0)
        mirrors = sorted(Path(jsonl_dir).glob(f"*_{PROMPT_NAME}_{session.session_id}.jsonl"))
        if not mirrors:
            raise RuntimeError(f"no JSONL mirror of the run in {jsonl_dir}")
        mirror = read_mirror(mirrors[-1])
        export_queue = export_queue_of(configuration.logger_provider)
        result.update(
            mirror_entries=mirror.entries,
            entry_types=dict(mirror.entry_types),
            spans=mirror.events["transcript.span"],
            errors=mirror.events["transcript.error"],
            pipeline_dropped=mirror.pipeline_dropped,
            export_dropped=export_queue.dropped,
            export_failed=export_queue.failed,
        )
        configuration.shutdown()
        shutil.rmtree(jsonl_dir)
    return result


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    done = [run for run in runs if "error" not in run]
    seconds = [run["evaluate_s"] for run in done]

    def median_of(key: str) -> float | None:
        return statistics.median(run[key] for run in done) if done else None

    return {
        "seconds": seconds,
        "median_s": median_of("evaluate_s"),
        "best_s": min(seconds) if seconds else None,
        "agent_thread_cpu_s": median_of("agent_thread_cpu_s"),
        "process_cpu_s": median_of("process_cpu_s"),
        "errors": [run["error"] for run in runs if "error" in run],
    }


def main() -> dict[str, Any]:
    from receiver import Rotel

    timed: dict[str, list[dict[str, Any]]] = {mode: [] for mode in MODES}
    with Rotel() as rotel:
        environment = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("OTEL_", "TRANSCRIPT_OTEL_", "FAKE_"))
        }
        # Both modes get the same environment; only the instrumented one reads it.
        environment["OTEL_EXPORTER_OTLP_ENDPOINT"] = rotel.http_endpoint
        for index in range(WARMUP_RUNS + THREADED_RUNS):
            for mode in MODES:
                outcome = run_child(__file__, mode, env=environment, timeout_s=180.0)
                if index >= WARMUP_RUNS:
                    timed[mode].append(outcome)
    summaries = {mode: _summary(runs) for mode, runs in timed.items()}
    plain, instrumented = summaries["uninstrumented"]["median_s"], summaries["instrumented"]["median_s"]
    return {
        "e2e": {
            "notifications": fake_codex.BULK_NOTIFICATIONS,
            "expected_entries": EXPECTED_ENTRIES,
            "runs": THREADED_RUNS,
            "modes": summaries,
            "ratio": instrumented / plain if plain and instrumented else None,
            "instrumented_runs": timed["instrumented"],
        }
    }


if __name__ == "__main__":
    import json

    print(json.dumps(run_evaluate(sys.argv[1])))
