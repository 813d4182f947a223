"""Record the real Claude Code CLI's stream-json for every scenario as test fixtures (`make fixtures`).

For each case of `claude_code.CASES`: `tests/fixtures/claude_code/<scenario>.jsonl` is
what `claude -p --output-format stream-json --verbose` printed, and
`<scenario>.served.json` the CLI version, its exit status, the prompt and what the
scripted model served. A scenario whose CLI exits otherwise than its case says
(`Case.exit_code`), or that fails to run, keeps its old fixture and makes the script exit 1.
Machine paths (the scratch directory, and the CLI's per-project
temp folder named after it) become `/scratch`, so fixtures do not change with the machine.
"""

from __future__ import annotations

import json
import re
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from claude_code import CASES, CLAUDE_CODE_VERSION, ROOT, record
from recording import record_all

FIXTURES = ROOT / "tests" / "fixtures" / "claude_code"


def without_machine_paths(text: str, scratch: Path) -> str:
    slug = re.sub(r"[^A-Za-z0-9]", "-", str(scratch))
    return text.replace(str(scratch), "/scratch").replace(slug, "-scratch")


def record_one(scenario: str) -> None:
    with tempfile.TemporaryDirectory() as scratch:
        recorded = record(scenario, Path(scratch))
        stdout = without_machine_paths(recorded.stdout, Path(scratch))
    expected = CASES[scenario].exit_code
    if recorded.exit_code != expected:
        # A recording of a scenario that did not go as scripted is no fixture: keep the old one.
        stderr = recorded.stderr.strip()[-500:]
        raise RuntimeError(f"exit {recorded.exit_code}, expected {expected}: {stderr}")
    (FIXTURES / f"{scenario}.jsonl").write_text(stdout)
    meta = {
        "claude_code": CLAUDE_CODE_VERSION,
        "exit_code": recorded.exit_code,
        "stderr": recorded.stderr.strip()[:2000],
        "prompt": recorded.prompt,
        "served": recorded.served,
    }
    (FIXTURES / f"{scenario}.served.json").write_text(json.dumps(meta, indent=1) + "\n")
    lines, served = len(stdout.splitlines()), len(recorded.served)
    print(f"{scenario}: {lines} lines, exit {recorded.exit_code}, {served} served")


def main() -> None:
    FIXTURES.mkdir(parents=True, exist_ok=True)
    record_all(sys.argv[1:] or list(CASES), record_one)


if __name__ == "__main__":
    main()
