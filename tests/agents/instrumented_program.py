"""A Python program run under `opentelemetry-instrument` on the real Claude Code CLI, offline.

The program gets the scripted model's prompt as its argument and the CLI as `CLAUDE_CLI`;
transcript-otel's JSONL mirror goes to `<scratch>/runs`, nothing is exported unless
`variables` say so. Used by the tests and the recorder of captured SDK runs alike.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from claude_offline import model_server, offline_environment


@dataclass
class ProgramRun:
    completed: subprocess.CompletedProcess[str]
    served: list[dict[str, Any]]  # what the scripted model answered
    mirror: Path  # the folder of the JSONL mirror


def run_instrumented(
    program: Path,
    scenario: str,
    cli: Path,
    scratch: Path,
    *,
    cwd: Path,
    timeout_s: float = 180.0,
    variables: Mapping[str, str] | None = None,
) -> ProgramRun:
    """`opentelemetry-instrument python PROGRAM PROMPT` against `scenario`'s scripted model;
    `variables` are added to (or replace) the environment's."""
    instrument = Path(sys.executable).parent / "opentelemetry-instrument"
    home, mirror = scratch / "home", scratch / "runs"
    home.mkdir()
    with model_server(scenario, scratch) as model:
        environment = {
            **offline_environment(model, home),
            "CLAUDE_CLI": str(cli),
            "TRANSCRIPT_OTEL_JSONL_DIR": str(mirror),
            "OTEL_TRACES_EXPORTER": "none",
            "OTEL_LOGS_EXPORTER": "none",
            "OTEL_METRICS_EXPORTER": "none",
            **(variables or {}),
        }
        completed = subprocess.run(
            [str(instrument), sys.executable, str(program), model.prompt],
            env=environment,
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )
        served = model.served()
    return ProgramRun(completed, served, mirror)
