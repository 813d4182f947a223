"""Record a JSONL mirror of weakincentives 0.27's Codex adapter driving the real `codex app-server`
(the CLI of `make agents`) against a scenario of the scripted Responses API
(`examples/model_servers/codex_scenarios.py`), under `opentelemetry-instrument` with no code of ours:

    .venv/bin/python tests/agents/record_wink_run.py                        # wink-0.27-codex-rich.jsonl
    .venv/bin/python tests/agents/record_wink_run.py --scenario fatal_500   # wink-0.27-codex-failed.jsonl

`demo` has reasoning, the WINK tool `echo`, commands, a patch, an MCP tool, a web search and the
answer; `fatal_500` fails every request with HTTP 500, so the turn fails. The driver's temporary
directories become `/home/dev/project` (as in the other run fixtures). Exits 1 if the run did not
end as the scenario does (answered, or for a failing scenario raised with an `error` entry in the
mirror) or left no mirror.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from codex_cli import ROOT, require_cli  # noqa: E402
from codex_scenarios import APP_SERVER_SCENARIOS, FAILING  # noqa: E402  (on the path by codex_cli)
from wink_driver import REAL_CODEX_CLI  # noqa: E402

from wink_harness import run_driver  # noqa: E402

RUNS = ROOT / "tests" / "fixtures" / "runs"
WINK_VERSION = "0.27.0"
# The fixture each recorded scenario is, unless --target says otherwise.
TARGETS = {"demo": RUNS / "wink-0.27-codex-rich.jsonl", "fatal_500": RUNS / "wink-0.27-codex-failed.jsonl"}


def without_machine_paths(text: str, scratch: Path, scenario: str) -> str:
    """The run's folders under the driver's temporary directory become `/home/dev/project`."""
    text = re.sub(
        rf"/tmp/wink-driver-[A-Za-z0-9_]+/codex-{re.escape(scenario)}-[A-Za-z0-9_]+/workspace",
        "/home/dev/project",
        text,
    )
    return text.replace(str(scratch), "/home/dev/project")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--scenario", default="demo", choices=APP_SERVER_SCENARIOS)
    parser.add_argument("--target", type=Path, help="the mirror's file (default: the scenario's fixture)")
    args = parser.parse_args(argv)
    scenario: str = args.scenario
    target: Path | None = args.target or TARGETS.get(scenario)
    if target is None:
        parser.error(f"no fixture for scenario {scenario}: give --target")
    prompt = f"codex-{scenario}"
    failing = scenario in FAILING
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        run = run_driver(
            WINK_VERSION,
            scratch / "work",
            ("--adapter", "codex", "--scenarios", scenario),
            zero_code=True,
            extra_env={REAL_CODEX_CLI: str(require_cli())},
        )
        result = run.results.get(prompt)
        if result is None or result["ok"] == failing:
            expected = "fail" if failing else "answer"
            print(f"the {scenario} run did not {expected}: {result}", file=sys.stderr)
            return 1
        mirrors = [
            path
            for path in (scratch / "work" / "runs").rglob("*.jsonl")
            if any(json.loads(line).get("context", {}).get("prompt_name") == prompt for line in path.open())
        ]
        if len(mirrors) != 1:
            print(f"expected one mirror of {prompt}, found {mirrors}", file=sys.stderr)
            return 1
        records = [json.loads(line) for line in mirrors[0].open()]
        errors = [r for r in records if r.get("context", {}).get("entry_type") == "error"]
        if failing and not errors:
            print(f"the {scenario} run's mirror has no error entry", file=sys.stderr)
            return 1
        target.write_text(without_machine_paths(mirrors[0].read_text(), scratch, scenario))
    print(f"recorded {target}: {len(target.read_text().splitlines())} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
