"""Section sdk: `claude_agent_sdk.query()` on the real Claude Code CLI, with and without capture.

Issue 46: the CPU of the Python process that runs a `query()` with the transcript-otel
claude-agent-sdk instrumentor active, against the same `query()` without it (target
<= 1.05x). The CLI is the real Claude Code (`make agents`: 2.1.332 under `.agents/`, or
`$TRANSCRIPT_OTEL_CLAUDE_CLI`), run offline as the demo and the tests run it
(`examples/claude_sdk_agent.py`, `examples/model_servers/claude_offline.py`): a throwaway
HOME, the scripted Anthropic Messages API on loopback, nothing else reachable. The scripted
model runs in a process of its own, so what is measured is the SDK and, instrumented, our
capture: not the model, not the CLI (another process).

Each kind runs in fresh processes:

* `uninstrumented`: `query()` alone; transcript_otel is not imported;
* `instrumented`: `transcript_otel.configure()` first (the JSONL mirror, OTel log records and
  span events, no OTLP endpoint: the environment's `OTEL_*` are removed), which instruments
  claude-agent-sdk, as `examples/claude_sdk_agent.py` does.

Per query: `time.process_time()` (every thread of the Python process) from the call of
`query()` to the end of its messages, plus, instrumented, the `transcript_otel.flush()` that
follows (the writer's work for that query, on its thread); `time.thread_time()` of the
thread that iterates `query()` (the agent's); and the wall time of `query()`. As in section 5,
a pair of processes, one of each kind, both set up before either is timed, take turns one
query at a time (which goes first alternates); one warm-up pair, then `PAIRS` pairs. The
first query of a process (our wrappers load the emitter and mappings then) is reported apart
from the later ones.
"""

from __future__ import annotations

import asyncio
import gc
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Final

from harness import THREADED_RUNS, WARMUP_RUNS, ServingChild, alternating_pair, read_mirror

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
MODEL_SERVERS = REPO / "examples" / "model_servers"
INSTALLED_CLI = REPO / ".agents" / "claude-code" / "node_modules" / ".bin" / "claude"
MODES: Final = ("uninstrumented", "instrumented")
# `tools`: thinking, text and one Bash call, then the answer (10 messages). `parallel_subagents`
# (the demo's): two subagents in parallel, each with a Bash call, three notification turns (~30).
SCENARIOS: Final = ("tools", "parallel_subagents")
PAIRS: Final = THREADED_RUNS
LATER_QUERIES: Final = 3  # queries after the first, in each child
CHILD_TIMEOUT_S: Final = 120.0
PROMPT_NAME: Final = "bench-sdk"
# What the CLI and the scripted model must not see of this machine's settings.
STRIPPED: Final = ("ANTHROPIC_", "CLAUDE", "OTEL_", "TRANSCRIPT_OTEL_")


def claude_cli() -> Path:
    return Path(os.environ.get("TRANSCRIPT_OTEL_CLAUDE_CLI", str(INSTALLED_CLI)))


def _query_once(cli: str, url: str, scenario: str) -> dict[str, Any]:
    """One `query()` in a throwaway HOME and working directory: its figures."""
    from claude_agent_sdk import ClaudeAgentOptions, query
    from claude_offline import offline_environment
    from claude_scenarios import prompt_for
    from scripted_http import ModelServer

    with tempfile.TemporaryDirectory(prefix="bench-sdk-") as workdir:
        home, work = Path(workdir) / "home", Path(workdir) / "work"
        home.mkdir()
        work.mkdir()
        model = ModelServer(scenario, url, Path(workdir) / "unused.jsonl", prompt_for(scenario))
        options = ClaudeAgentOptions(
            cli_path=cli,
            env=offline_environment(model, home),
            cwd=str(work),
            permission_mode="bypassPermissions",
        )

        async def messages() -> list[Any]:
            return [message async for message in query(prompt=model.prompt, options=options)]

        gc.collect()
        process_cpu, thread_cpu, started = time.process_time(), time.thread_time(), time.perf_counter()
        received = asyncio.run(messages())
        wall, thread_cpu = time.perf_counter() - started, time.thread_time() - thread_cpu
        flushed = True
        if "transcript_otel" in sys.modules:
            import transcript_otel

            flushed = transcript_otel.flush(30.0)
        process_cpu = time.process_time() - process_cpu
    last = received[-1] if received else None
    return {
        "process_cpu_s": process_cpu,
        "thread_cpu_s": thread_cpu,
        "query_s": wall,
        "messages": len(received),
        "result": f"{type(last).__name__} {getattr(last, 'subtype', '')}".strip(),
        "flushed": flushed,
    }


def serve(mode: str, scenario: str, url: str, cli: str) -> None:
    """Child process: a query for each `run` line on stdin, its figures as a JSON line on
    stdout; at `finish`, instrumented, what the mirror holds."""
    sys.path.insert(0, str(MODEL_SERVERS))
    jsonl_dir = ""
    configuration: Any = None
    if mode == "instrumented":
        import transcript_otel
        from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor

        jsonl_dir = tempfile.mkdtemp(prefix="bench-sdk-mirror-")
        ClaudeAgentSdkInstrumentor().instrument(prompt_name=PROMPT_NAME)
        configuration = transcript_otel.configure(service_name="bench-sdk", jsonl_dir=jsonl_dir)
    import claude_agent_sdk  # noqa: F401  (loaded before anything is timed, in both kinds)

    print(json.dumps({"ready": True}), flush=True)
    for command in sys.stdin:
        if command.strip() != "run":
            break
        print(json.dumps(_query_once(cli, url, scenario)), flush=True)
    result: dict[str, Any] = {}
    if configuration is not None:
        mirrors = [read_mirror(path) for path in sorted(Path(jsonl_dir).glob("*.jsonl"))]
        result = {
            "mirror_runs": sum(mirror.events["transcript.start"] for mirror in mirrors),
            "mirror_entries": sum(mirror.entries for mirror in mirrors),
            "errors": sum(mirror.events["transcript.error"] for mirror in mirrors),
            "dropped": sum(mirror.pipeline_dropped for mirror in mirrors),
        }
        configuration.shutdown()
        shutil.rmtree(jsonl_dir)
    print(json.dumps(result), flush=True)


def _pair(scenario: str, url: str, cli: str, environment: dict[str, str]) -> dict[str, Any]:
    children = {
        mode: ServingChild(__file__, [mode, scenario, url, cli], environment, CHILD_TIMEOUT_S)
        for mode in MODES
    }
    return alternating_pair(children, 1 + LATER_QUERIES)


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    def median_of(key: str) -> float | None:
        return statistics.median(run[key] for run in runs) if runs else None

    cpu = [run["process_cpu_s"] for run in runs]
    return {
        "process_cpu_s": median_of("process_cpu_s"),
        "best_process_cpu_s": min(cpu) if cpu else None,
        "thread_cpu_s": median_of("thread_cpu_s"),
        "query_s": median_of("query_s"),
        "messages": median_of("messages"),
        "queries": len(runs),
        "results": sorted({run["result"] for run in runs}),
    }


def _scenario(scenario: str, cli: str, environment: dict[str, str]) -> dict[str, Any]:
    """The scripted model for `scenario` in its own process, and the pairs run against it."""
    with tempfile.TemporaryDirectory(prefix="bench-sdk-model-") as directory:
        server = subprocess.Popen(
            [
                sys.executable,
                str(MODEL_SERVERS / "anthropic_api.py"),
                "--scenario",
                scenario,
                "--log",
                str(Path(directory) / "served.jsonl"),
            ],
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            assert server.stdout is not None
            url = f"http://127.0.0.1:{json.loads(server.stdout.readline())['port']}"
            outcomes = [_pair(scenario, url, cli, environment) for _ in range(WARMUP_RUNS + PAIRS)]
        finally:
            server.kill()
            server.wait()
    outcomes = outcomes[WARMUP_RUNS:]
    pairs = [outcome for outcome in outcomes if "error" not in outcome]
    phases = {
        "first": {mode: _summary([pair["runs"][mode][0] for pair in pairs]) for mode in MODES},
        "later": {
            mode: _summary([run for pair in pairs for run in pair["runs"][mode][1:]]) for mode in MODES
        },
    }
    ratios: dict[str, float | None] = {}
    paired: dict[str, float | None] = {}
    for phase, indexes in (("first", range(1)), ("later", range(1, 1 + LATER_QUERIES))):
        plain, instrumented = (phases[phase][mode]["process_cpu_s"] for mode in MODES)
        ratios[phase] = instrumented / plain if plain and instrumented else None
        back_to_back = [
            pair["runs"]["instrumented"][index]["process_cpu_s"]
            / pair["runs"]["uninstrumented"][index]["process_cpu_s"]
            for pair in pairs
            for index in indexes
        ]
        paired[phase] = statistics.median(back_to_back) if back_to_back else None
    return {
        "scenario": scenario,
        "phases": phases,
        "ratios": ratios,
        "paired_ratios": paired,
        "mirror_runs": sum(pair["mirror_runs"] for pair in pairs),
        "mirror_entries": sum(pair["mirror_entries"] for pair in pairs),
        "transcript_errors": sum(pair["errors"] for pair in pairs),
        "dropped": sum(pair["dropped"] for pair in pairs),
        "flushes_timed_out": sum(
            not run["flushed"] for pair in pairs for run in pair["runs"]["instrumented"]
        ),
        "failed_pairs": [outcome["error"] for outcome in outcomes if "error" in outcome],
    }


def main() -> dict[str, Any]:
    import importlib.metadata
    import importlib.util

    cli = claude_cli()
    if not cli.exists():
        raise RuntimeError(
            f"no Claude Code CLI at {cli}: run `make agents` (or set TRANSCRIPT_OTEL_CLAUDE_CLI)"
        )
    if importlib.util.find_spec("claude_agent_sdk") is None:
        raise RuntimeError("claude-agent-sdk is not installed here: `make bench` installs it in .venv-bench")
    version = subprocess.run([str(cli), "--version"], capture_output=True, text=True, check=False)
    environment = {key: value for key, value in os.environ.items() if not key.startswith(STRIPPED)}
    return {
        "sdk": {
            "cli": version.stdout.strip() or str(cli),
            "sdk_version": importlib.metadata.version("claude-agent-sdk"),
            "pairs": PAIRS,
            "later_queries": LATER_QUERIES,
            "scenarios": [_scenario(scenario, str(cli), environment) for scenario in SCENARIOS],
        }
    }


if __name__ == "__main__":
    serve(*sys.argv[1:5])
