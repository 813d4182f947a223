"""The real Gemini CLI against the scripted Gemini API (`examples/model_servers/gemini_api.py`).

The CLI is the npm package pinned in the Makefile (`make agents` installs it under `.agents/`);
`TRANSCRIPT_OTEL_GEMINI_CLI` names another binary. Each run gets a throwaway `HOME`, `TMPDIR`
and working directory (`gemini_offline`).

    python tests/agents/gemini_cli.py SCENARIO

runs one scenario with `gemini -p PROMPT --output-format stream-json` and prints the stream,
then what the model served.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "model_servers"))

from captured_run import Recorded, installed_cli, record_main, run_cli, scratch_dirs  # noqa: E402
from chat_scenarios import prompt_for  # noqa: E402
from gemini_offline import model_server, offline_environment  # noqa: E402

GEMINI_CLI_VERSION = "0.61.0"
CLI_VARIABLE = "TRANSCRIPT_OTEL_GEMINI_CLI"
INSTALLED_CLI = ROOT / ".agents" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
ROUTER_MODEL = "gemini-3.5-flash-lite"
MAIN_MODEL = "gemini-3.8-flash"
# What the CLI printed and what the model served, per scenario and output mode (the recorder:
# tests/agents/record_gemini_opencode_fixtures.py).
FIXTURES = ROOT / "tests" / "fixtures" / "line_streams" / "gemini"
# The transcript's usage names → a chat span's attributes (the run's: `transcript.usage.*`).
SPAN_USAGE = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "cached_input_tokens": "gen_ai.usage.cache_read.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "reasoning_output_tokens": "gen_ai.usage.reasoning.output_tokens",
}
# The entries of scenario `shell` in stream-json: the prompt, the words before the call, the
# call and its result paired, the answer, the usage.
SHELL_ENTRY_TYPES = [
    "system_event",
    "user_message",
    "assistant_message",
    "tool_use",
    "tool_result",
    "assistant_message",
    "token_usage",
]


def cli_path() -> Path | None:
    """The real `gemini` binary, if installed (`make agents`)."""
    return installed_cli(CLI_VARIABLE, INSTALLED_CLI)


def served_usage(served: list[dict[str, Any]], model: str) -> dict[str, int]:
    """What the scripted API answered `model`'s requests with (the ones it answered: a 429 or
    500 has no usage), summed, in the names the transcript's usage has: input is the whole
    prompt, output counts the thoughts as the conventions count reasoning."""
    totals = dict.fromkeys(
        ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens"), 0
    )
    for answer in served:
        usage: Mapping[str, Any] = answer.get("usage") or {}
        if answer.get("model") != model or answer.get("status") != 200:
            continue
        thoughts = usage.get("thoughtsTokenCount", 0)
        totals["input_tokens"] += usage["promptTokenCount"]
        totals["cached_input_tokens"] += usage.get("cachedContentTokenCount", 0)
        totals["output_tokens"] += usage["candidatesTokenCount"] + thoughts
        totals["reasoning_output_tokens"] += thoughts
    return totals


def printed_totals(served: list[dict[str, Any]]) -> dict[str, int]:
    """What the CLI prints as its totals: the main model's usage and the router's."""
    main, router = served_usage(served, MAIN_MODEL), served_usage(served, ROUTER_MODEL)
    return {name: main[name] + router[name] for name in main}


def span_usage(span: dict[str, Any], prefix: str = "gen_ai.usage.") -> dict[str, int]:
    """A span's token counts in the transcript's usage names (`prefix`: the run's totals are
    `transcript.usage.`)."""
    attributes = span["attributes"]
    return {name: attributes.get(key.replace("gen_ai.usage.", prefix), 0) for name, key in SPAN_USAGE.items()}


def meta(scenario: str, mode: str) -> dict[str, Any]:
    """A recorded run's `.meta.json`: arguments, exit status, stderr, what the model served."""
    found: dict[str, Any] = json.loads((FIXTURES / f"{scenario}.{mode}.meta.json").read_text())
    return found


def record(
    scenario: str,
    scratch: Path,
    command_prefix: tuple[str, ...] = (),
    environment: dict[str, str] | None = None,
    output_format: str = "stream-json",
) -> Recorded:
    """Run `gemini -p PROMPT --output-format FORMAT --approval-mode yolo` on one scenario (under
    `command_prefix`, e.g. `transcript-otel run --`, with `environment` added to the offline one)."""
    cli = cli_path()
    if cli is None:
        raise RuntimeError(f"no Gemini CLI: run `make agents` or set {CLI_VARIABLE}")
    home, work = scratch_dirs(scratch)
    tmp = scratch / "tmp"  # the CLI writes its error reports to os.tmpdir()
    tmp.mkdir(exist_ok=True)
    with model_server(scenario, scratch) as model:
        arguments = ["-p", prompt_for(scenario), "--output-format", output_format, "--approval-mode", "yolo"]
        command = [*command_prefix, str(cli), *arguments]
        offline = {**offline_environment(model, home), "TMPDIR": str(tmp), **(environment or {})}
        return run_cli(command, model, offline, work)


if __name__ == "__main__":
    record_main(record)
