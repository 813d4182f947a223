"""Record an instrumented claude-agent-sdk run of the real Claude Code CLI as a captured run.

    .venv/bin/python tests/agents/record_sdk_run.py

Runs `claude_sdk_program.py` (one `query()`, no code of ours) under `opentelemetry-instrument`
(transcript-otel's instrumentor alone) on the CLI `make agents` installs, against the scripted
model's `parallel_subagents` scenario, and keeps the JSONL mirror transcript-otel wrote:
`tests/fixtures/runs/claude-sdk-parallel-subagents.jsonl` (the working directory as
`/home/dev/project`, see tests/fixtures/runs/README.md). A run that fails (the program's exit
status, or not one mirror file) writes nothing and exits 1.
"""

from __future__ import annotations

import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_code import CLAUDE_CODE_VERSION, ROOT, cli_at
from instrumented_program import run_instrumented

TARGET = ROOT / "tests" / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
SCENARIO = "parallel_subagents"


def record(scratch: Path) -> str:
    work = scratch / "project"
    work.mkdir()
    program = ROOT / "tests" / "agents" / "claude_sdk_program.py"
    # Ours only: OpenInference's instrumentor (the `test` group) adds hooks, with which the SDK
    # keeps the CLI's stdin open and ends the run on the CLI's own schedule.
    run = run_instrumented(
        program,
        SCENARIO,
        cli_at(CLAUDE_CODE_VERSION),
        scratch,
        cwd=work,
        variables={"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "claude_agent_sdk"},
    )
    done = run.completed
    if done.returncode != 0:
        raise SystemExit(f"the program exited {done.returncode}: {done.stderr[-2000:]}")
    (path,) = run.mirror.glob("*.jsonl")
    text = path.read_text().replace(str(work), "/home/dev/project").replace(str(scratch), "/home/dev")
    # The CLI's per-project temp folder is named after the working directory.
    return text.replace(re.sub(r"[^A-Za-z0-9]", "-", str(work)), "-home-dev-project")


def main() -> None:
    with tempfile.TemporaryDirectory() as scratch:
        text = record(Path(scratch))
    TARGET.write_text(text)
    print(f"{TARGET}: {len(text.splitlines())} records")


if __name__ == "__main__":
    main()
