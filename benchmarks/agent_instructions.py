"""The agent's thread's instructions per Codex `evaluate()`, counted by callgrind: instrumented
against uninstrumented, a figure a busy machine does not move.

    python benchmarks/agent_instructions.py [--src OTHER_CHECKOUT/src ...]

Section 5 (`bench_e2e.py`) times the same evaluations; its ratios move by a few percent with
the machine's load. Here `valgrind --tool=callgrind --separate-threads=yes` counts the
instructions of the main thread (the agent's: weakincentives runs its event loop there) in a
process that makes 1 evaluation and in one that makes 4 of the bulk turn; the difference over
3 is what one later evaluation costs, the start of the process and the first evaluation
left out. Uninstrumented and instrumented (`configure()` with the JSONL mirror, no backend)
alike; then instrumented / uninstrumented. `--src` counts another checkout's package too
(e.g. `git worktree add /tmp/old 04cde31`, then `--src /tmp/old/src`). Each process takes
about a minute under valgrind.
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Final

HERE = Path(__file__).resolve().parent
MODES: Final = ("uninstrumented", "instrumented")
SMALL, LARGE = 1, 4


def evaluate(mode: str, count: int) -> None:
    """Child: `count` evaluations of section 5's bulk turn, `configure()`d when instrumented."""
    sys.path[:0] = [str(HERE)]
    import bench_e2e
    import codex_agent  # on the path bench_e2e set: the demo's prompt

    if mode == "instrumented":
        import transcript_otel

        transcript_otel.configure(service_name="agent-instructions", jsonl_dir=tempfile.mkdtemp())
    from weakincentives.runtime import Session

    os.environ["FAKE_SCENARIO"] = "bulk"
    for _ in range(count):
        with tempfile.TemporaryDirectory() as workdir:
            adapter = bench_e2e._fake_codex_adapter(Path(workdir))
            adapter.evaluate(codex_agent.build_prompt("p", bench_e2e.TASK), session=Session())
        if mode == "instrumented":
            transcript_otel.flush(30.0)


def main_thread_instructions(mode: str, count: int, src: str | None) -> int:
    with tempfile.TemporaryDirectory(prefix="agent-instructions-") as folder:
        out = Path(folder) / "callgrind.out"
        environment = dict(os.environ)
        if src is not None:
            environment["PYTHONPATH"] = src
        subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                "--separate-threads=yes",
                f"--callgrind-out-file={out}",
                sys.executable,
                __file__,
                "--child",
                mode,
                str(count),
            ],
            env=environment,
            check=True,
            capture_output=True,
        )
        (main_thread,) = Path(folder).glob("callgrind.out-01")  # thread 1: the main thread
        found = re.search(r"^(?:summary|totals): (\d+)", main_thread.read_text(), re.MULTILINE)
        if found is None:
            raise RuntimeError(f"no instruction total in {main_thread}")
        return int(found.group(1))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--src", action="append", default=[], help="another checkout's src/ to count")
    parser.add_argument("--child", nargs=2, metavar=("MODE", "COUNT"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        evaluate(args.child[0], int(args.child[1]))
        return
    print("| code | uninstrumented | instrumented | instrumented / uninstrumented |")
    print("|---|---|---|---|")
    for src in [None, *args.src]:
        per_evaluation = {
            mode: (main_thread_instructions(mode, LARGE, src) - main_thread_instructions(mode, SMALL, src))
            / (LARGE - SMALL)
            for mode in MODES
        }
        plain, instrumented = per_evaluation["uninstrumented"], per_evaluation["instrumented"]
        print(
            f"| {src or 'this checkout'} | {plain / 1e6:.1f} M | {instrumented / 1e6:.1f} M "
            f"| {instrumented / plain:.3f}x |",
            flush=True,
        )


if __name__ == "__main__":
    main()
