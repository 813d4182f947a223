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
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_code import CLAUDE_CODE_VERSION, ROOT, cli_at
from claude_offline import model_server, offline_environment

TARGET = ROOT / "tests" / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
SCENARIO = "parallel_subagents"


def record(scratch: Path) -> str:
    cli = cli_at(CLAUDE_CODE_VERSION)
    home, work, mirror = scratch / "home", scratch / "project", scratch / "runs"
    home.mkdir()
    work.mkdir()
    program = ROOT / "tests" / "agents" / "claude_sdk_program.py"
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    with model_server(SCENARIO, scratch) as model:
        environment = {
            **offline_environment(model, home),
            "CLAUDE_CLI": str(cli),
            "TRANSCRIPT_OTEL_JSONL_DIR": str(mirror),
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            # Ours only: OpenInference's instrumentor (the `test` group) adds hooks, with which
            # the SDK keeps the CLI's stdin open and ends the run on the CLI's own schedule.
            "OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": "claude_agent_sdk",
        }
        done = subprocess.run(
            [str(instrument), sys.executable, str(program), model.prompt],
            env=environment,
            cwd=work,
            capture_output=True,
            text=True,
            timeout=180,
            check=False,
        )
    if done.returncode != 0:
        raise SystemExit(f"the program exited {done.returncode}: {done.stderr[-2000:]}")
    (path,) = mirror.glob("*.jsonl")
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
