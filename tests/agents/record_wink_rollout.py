"""Record the Codex rollout a weakincentives app-server run writes (its bridged tools are
`DynamicToolCall` items): tests/fixtures/codex/wink-rollouts/.

    .venvs/wink-0.27.0/bin/python tests/agents/record_wink_rollout.py

Runs `examples/codex_agent.py` (weakincentives 0.27 `CodexAppServerAdapter` on the real Codex
CLI of `make agents`, the scripted model's `demo` scenario) keeping its throwaway CODEX_HOME,
and copies the rollout Codex wrote into the fixtures folder.
"""

from __future__ import annotations

import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

REPO = Path(__file__).resolve().parent.parent.parent
TARGET = REPO / "tests" / "fixtures" / "codex" / "wink-rollouts"
sys.path.insert(0, str(REPO / "examples"))

import codex_agent  # noqa: E402


class _Kept:
    """A `TemporaryDirectory` left in place, so the rollout can be copied after the run."""

    made: ClassVar[list[str]] = []

    def __init__(self, prefix: str = "", **_: Any) -> None:
        self.name = tempfile.mkdtemp(prefix=prefix)
        _Kept.made.append(self.name)

    def __enter__(self) -> str:
        return self.name

    def __exit__(self, *_: object) -> None:
        return None


def main() -> int:
    codex_agent.tempfile.TemporaryDirectory = _Kept  # type: ignore[attr-defined]
    with tempfile.TemporaryDirectory() as mirror:
        sys.argv = ["codex_agent", "--jsonl-dir", mirror]
        status = codex_agent.main()
    if status != 0:
        return status
    rollouts = [path for made in _Kept.made for path in Path(made).rglob("rollout-*.jsonl")]
    if len(rollouts) != 1:
        print(f"expected one rollout, found {rollouts}", file=sys.stderr)
        return 1
    TARGET.mkdir(parents=True, exist_ok=True)
    for previous in TARGET.glob("rollout-*.jsonl"):  # the folder holds the latest recording only
        previous.unlink()
    shutil.copy(rollouts[0], TARGET / rollouts[0].name)
    for made in _Kept.made:
        shutil.rmtree(made, ignore_errors=True)
    print(f"recorded {TARGET / rollouts[0].name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
