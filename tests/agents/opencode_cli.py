"""The real OpenCode CLI against the scripted chat completions API
(`examples/model_servers/openai_chat.py`, run offline by `opencode_offline.py`).

The CLI is the npm package pinned in the Makefile (`make agents` installs it under
`.agents/`); `TRANSCRIPT_OTEL_OPENCODE_CLI` names another binary. Each run gets a throwaway
`HOME` (its XDG folders, where OpenCode keeps `opencode.db`), `TMPDIR` and working directory
(`PWD`: OpenCode takes its project from it).

    python tests/agents/opencode_cli.py SCENARIO

runs one scenario with `opencode run --format json --thinking` and prints the stream, then what
the model served.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "model_servers"))

from captured_run import Recorded, installed_cli, record_main, run_cli, scratch_dirs  # noqa: E402
from chat_scenarios import prompt_for  # noqa: E402
from opencode_offline import MODEL, PROVIDER, model_server, offline_environment, xdg  # noqa: E402
from record_gemini_opencode_fixtures import opencode_tables  # noqa: E402

OPENCODE_VERSION = "1.18.33"
CLI_VARIABLE = "TRANSCRIPT_OTEL_OPENCODE_CLI"
INSTALLED_CLI = ROOT / ".agents" / "opencode" / "node_modules" / ".bin" / "opencode"


def cli_path() -> Path | None:
    """The real `opencode` binary, if installed (`make agents`)."""
    return installed_cli(CLI_VARIABLE, INSTALLED_CLI)


def run_arguments(scenario: str) -> list[str]:
    """`opencode run` printing JSON lines with the reasoning, the model named on the command line."""
    return ["run", "--format", "json", "--thinking", "-m", f"{PROVIDER}/{MODEL}", prompt_for(scenario)]


def database(home: Path) -> Path:
    return Path(xdg(home)["XDG_DATA_HOME"]) / "opencode" / "opencode.db"


def stored(home: Path) -> dict[str, list[dict[str, Any]]]:
    """What OpenCode stored in its database in `home`, read-only (with its WAL)."""
    tables, _ = opencode_tables(database(home))
    return tables


def record(
    scenario: str,
    scratch: Path,
    command_prefix: tuple[str, ...] = (),
    environment: dict[str, str] | None = None,
) -> Recorded:
    """Run `opencode run --format json --thinking` on one scenario (under `command_prefix`, e.g.
    `transcript-otel run --`, with `environment` added to the offline one)."""
    cli = cli_path()
    if cli is None:
        raise RuntimeError(f"no OpenCode CLI: run `make agents` or set {CLI_VARIABLE}")
    home, work = scratch_dirs(scratch)
    tmp = scratch / "tmp"
    tmp.mkdir(exist_ok=True)
    with model_server(scenario, scratch) as model:
        offline = {**offline_environment(model, home, work), "TMPDIR": str(tmp)}
        command = [*command_prefix, str(cli), *run_arguments(scenario)]
        return run_cli(command, model, {**offline, **(environment or {})}, work)


if __name__ == "__main__":
    record_main(record)
