"""Record `tests/fixtures/runs/wink-0.27-codex-rich.jsonl`: the JSONL mirror of weakincentives
0.27's Codex adapter driving the real `codex app-server` (the CLI of `make agents`) against the
scripted Responses API's `demo` scenario (reasoning, the WINK tool `echo`, commands, a patch,
an MCP tool, a web search, the answer), under `opentelemetry-instrument` with no code of ours.

    .venv/bin/python tests/agents/record_wink_run.py

The driver's temporary directories become `/home/dev/project` (as in the other run fixtures).
Exits 1 if the run did not end as the scenario does (answered) or left no mirror.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

sys.path[:0] = [str(Path(__file__).resolve().parent), str(Path(__file__).resolve().parents[1])]

from codex_cli import ROOT, require_cli  # noqa: E402
from wink_driver import REAL_CODEX_CLI  # noqa: E402

from wink_harness import run_driver  # noqa: E402

TARGET = ROOT / "tests" / "fixtures" / "runs" / "wink-0.27-codex-rich.jsonl"
WINK_VERSION = "0.27.0"
SCENARIO = "demo"
PROMPT = f"codex-{SCENARIO}"


def without_machine_paths(text: str, scratch: Path) -> str:
    """The run's folders under the driver's temporary directory become `/home/dev/project`."""
    text = re.sub(
        r"/tmp/wink-driver-[A-Za-z0-9_]+/codex-demo-[A-Za-z0-9_]+/workspace", "/home/dev/project", text
    )
    return text.replace(str(scratch), "/home/dev/project")


def main() -> int:
    with tempfile.TemporaryDirectory() as directory:
        scratch = Path(directory)
        run = run_driver(
            WINK_VERSION,
            scratch / "work",
            ("--adapter", "codex", "--scenarios", SCENARIO),
            zero_code=True,
            extra_env={REAL_CODEX_CLI: str(require_cli())},
        )
        result = run.results.get(PROMPT)
        if result is None or not result["ok"]:
            print(f"the {SCENARIO} run did not answer: {result}", file=sys.stderr)
            return 1
        mirrors = [
            path
            for path in (scratch / "work" / "runs").rglob("*.jsonl")
            if any(json.loads(line).get("context", {}).get("prompt_name") == PROMPT for line in path.open())
        ]
        if len(mirrors) != 1:
            print(f"expected one mirror of {PROMPT}, found {mirrors}", file=sys.stderr)
            return 1
        TARGET.write_text(without_machine_paths(mirrors[0].read_text(), scratch))
    print(f"recorded {TARGET}: {len(TARGET.read_text().splitlines())} records")
    return 0


if __name__ == "__main__":
    sys.exit(main())
