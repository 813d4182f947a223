"""Record the real Codex CLI's output for every scenario as test fixtures (`make fixtures`).

Into `tests/fixtures/codex/`:

* `exec/<scenario>.jsonl`: what `codex exec --json` printed (`codex_cli.EXEC_SCENARIOS`), and
  `exec/<scenario>.served.json`: the Codex version, its exit status, the prompt and what the
  scripted model served;
* `app-server/<scenario>.jsonl`: what `codex app-server` wrote on stdout (notifications,
  responses, and server requests such as `item/tool/call`) while weakincentives 0.27's
  `CodexAppServerAdapter.evaluate()` ran the scenario (`wink_driver.REAL_CODEX_SCENARIOS`),
  and `app-server/<scenario>.served.json`.

Machine paths (the scratch directories) become `/scratch`, so fixtures do not change with
the machine. A scenario that ends otherwise than it should (a failing one that succeeds, or the
other way round) is reported, and the script exits with status 1 once every scenario ran.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from codex_cli import CODEX_VERSION, ROOT, record, require_cli
from codex_scenarios import EXEC_SCENARIOS, FAILING

FIXTURES = ROOT / "tests" / "fixtures" / "codex"
WINK_VERSION = "0.27.0"


def without_machine_paths(text: str, *scratches: Path) -> str:
    for scratch in scratches:
        text = text.replace(str(scratch), "/scratch")
    # The driver's per-scenario folders under its own temporary directory.
    return re.sub(r"/tmp/wink-driver-[A-Za-z0-9_]+/codex-[A-Za-z0-9_]+?-[A-Za-z0-9_]+/", "/scratch/", text)


def write_meta(path: Path, exit_code: int | None, stderr: str, prompt: str, served: object) -> None:
    meta = {"codex": CODEX_VERSION, "exit_code": exit_code, "stderr": stderr[:2000], "prompt": prompt}
    path.write_text(json.dumps({**meta, "served": served}, indent=1) + "\n")


def record_exec(scenarios: list[str]) -> list[str]:
    """Each of `scenarios` recorded; those whose exit status is not the expected one."""
    failed = []
    directory = FIXTURES / "exec"
    directory.mkdir(parents=True, exist_ok=True)
    for scenario in scenarios:
        with tempfile.TemporaryDirectory() as scratch:
            recorded = record(scenario, Path(scratch))
            stdout = without_machine_paths(recorded.stdout, Path(scratch))
            stderr = without_machine_paths(recorded.stderr, Path(scratch))
        (directory / f"{scenario}.jsonl").write_text(stdout)
        write_meta(
            directory / f"{scenario}.served.json",
            recorded.exit_code,
            stderr,
            recorded.prompt,
            recorded.served,
        )
        print(f"exec {scenario}: {len(stdout.splitlines())} lines, exit {recorded.exit_code}")
        if recorded.exit_code != (1 if scenario in FAILING else 0):
            failed.append(f"exec {scenario} (exit {recorded.exit_code})")
    return failed


def record_app_server(scenarios: list[str]) -> list[str]:
    """The app-server's stdout under weakincentives 0.27 (its environment from `wink_harness`),
    for `scenarios` (none: every one)."""
    sys.path.insert(0, str(ROOT / "tests"))
    from wink_driver import CODEX_RECORD_DIR, REAL_CODEX_CLI, REAL_CODEX_SCENARIOS

    from wink_harness import DRIVER, wink_python

    failed = []
    directory = FIXTURES / "app-server"
    directory.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as scratch:
        results = Path(scratch) / "results.jsonl"
        environment = {
            **os.environ,
            REAL_CODEX_CLI: str(require_cli()),
            CODEX_RECORD_DIR: str(directory),
            "TRANSCRIPT_OTEL_JSONL_DIR": str(Path(scratch) / "runs"),
        }
        subprocess.run(
            [
                str(wink_python(WINK_VERSION)),
                str(DRIVER),
                "--adapter",
                "codex",
                "--out",
                str(results),
                *(("--scenarios", ",".join(scenarios)) if scenarios else ()),
            ],
            env=environment,
            check=True,
            timeout=600,
        )
        for line in results.read_text().splitlines():
            result = json.loads(line)
            scenario = result["scenario"]
            kept = directory / f"{scenario}.jsonl"
            kept.write_text(without_machine_paths(kept.read_text(), Path(scratch)))
            stderr = result["error"] or ""
            prompt = f"{result['prompt_name']} (weakincentives {WINK_VERSION})"
            write_meta(directory / f"{scenario}.served.json", None, stderr, prompt, result["served"])
            print(f"app-server {scenario}: {len(kept.read_text().splitlines())} lines, ok {result['ok']}")
            if result["ok"] == (scenario in FAILING):
                failed.append(f"app-server {scenario} (ok {result['ok']}: {stderr[:200]})")
        ran = {json.loads(line)["scenario"] for line in results.read_text().splitlines()}
        failed.extend(
            f"app-server {scenario} (no result)" for scenario in set(scenarios or REAL_CODEX_SCENARIOS) - ran
        )
    if set(REAL_CODEX_SCENARIOS) != {path.stem for path in directory.glob("*.jsonl")}:
        failed.append(f"app-server fixtures are not one per scenario of {REAL_CODEX_SCENARIOS}")
    return failed


def main() -> int:
    """`record_codex_fixtures.py [SCENARIO...] [--app-server SCENARIO...]`: no argument, all."""
    arguments = sys.argv[1:]
    if "--app-server" in arguments:
        failed = record_app_server(arguments[arguments.index("--app-server") + 1 :])
    else:
        failed = record_exec(arguments or list(EXEC_SCENARIOS))
        if not arguments:
            failed += record_app_server([])
    for failure in failed:
        print(f"FAILED: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
