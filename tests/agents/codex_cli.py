"""The real Codex CLI against the scripted model (`examples/model_servers/openai_responses.py`).

The CLI is the npm package pinned in the Makefile (`make agents` installs it under
`.agents/`); `TRANSCRIPT_OTEL_CODEX_CLI` names another binary. Each run gets a throwaway
`HOME`, `CODEX_HOME` and working directory (`codex_offline`).

    python tests/agents/codex_cli.py SCENARIO

runs one scenario with `codex exec --json` and prints the stream, then what the model
served (for recording fixtures by hand).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "model_servers"))

from captured_run import Recorded, installed_cli, older_cli, record_main, run_cli, scratch_dirs  # noqa: E402
from codex_offline import model_server, offline_environment, write_codex_home  # noqa: E402
from codex_scenarios import MODEL, UNKNOWN_MODEL, prompt_for  # noqa: E402

CODEX_VERSION = "0.171.0"
CLI_VARIABLE = "TRANSCRIPT_OTEL_CODEX_CLI"
INSTALLED_CLI = ROOT / ".agents" / "codex" / "node_modules" / ".bin" / "codex"

# Token counts as the scripted model reports them (`openai_responses.usage_of`) and codex sums them.
USAGE_PATHS = {
    "input_tokens": ("input_tokens",),
    "cached_input_tokens": ("input_tokens_details", "cached_tokens"),
    "output_tokens": ("output_tokens",),
    "reasoning_output_tokens": ("output_tokens_details", "reasoning_tokens"),
}


def cli_path() -> Path | None:
    """The real `codex` binary, if installed (`make agents`)."""
    return installed_cli(CLI_VARIABLE, INSTALLED_CLI)


def require_cli() -> Path:
    cli = cli_path()
    if cli is None:
        raise RuntimeError(f"no Codex CLI: run `make agents` or set {CLI_VARIABLE}")
    return cli


def cli_at(version: str) -> Path:
    """The `codex` binary of `version`: the pinned one, or an older one (`older_cli`)."""
    return require_cli() if version == CODEX_VERSION else older_cli(ROOT, "@openai/codex", version)


def model_slug(scenario: str) -> str:
    return UNKNOWN_MODEL if scenario == "unknown_model" else MODEL


def served_usage(served: list[dict[str, Any]]) -> dict[str, int]:
    """What the model answered, summed, named as `codex exec --json`'s `turn.completed` names it."""
    totals = dict.fromkeys(USAGE_PATHS, 0)
    for answer in served:
        for name, path in USAGE_PATHS.items():
            value: Any = answer.get("usage")
            for key in path:
                value = value.get(key) if isinstance(value, dict) else None
            totals[name] += value if isinstance(value, int) else 0
    return totals


def exec_arguments(scenario: str) -> list[str]:
    return ["exec", "--json", "--skip-git-repo-check", prompt_for(scenario)]


def record(
    scenario: str,
    scratch: Path,
    command_prefix: tuple[str, ...] = (),
    environment: dict[str, str] | None = None,
) -> Recorded:
    """Run `codex exec --json` on one scenario (under `command_prefix`, e.g. `transcript-otel
    run --`, with `environment` added to the offline one)."""
    cli = require_cli()
    home, work = scratch_dirs(scratch)
    with model_server(scenario, scratch) as model:
        codex_home = write_codex_home(scratch / "codex-home", model, model_slug(scenario))
        command = [*command_prefix, str(cli), *exec_arguments(scenario)]
        return run_cli(command, model, {**offline_environment(codex_home, home), **(environment or {})}, work)


if __name__ == "__main__":
    record_main(record)
