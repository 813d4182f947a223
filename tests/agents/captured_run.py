"""What a real agent's run left in the JSONL mirror, for the real-CLI tests to read.

`Recorded` is what one real CLI run printed and what the scripted model served;
`CapturedRun` holds one run's records (entries and `transcript.span` records) with those.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, Self


@dataclass
class Recorded:
    """One real run: what the CLI printed, its exit status, what the model served."""

    stdout: str
    stderr: str
    exit_code: int
    served: list[dict[str, Any]]
    prompt: str

    def print(self) -> None:
        """The stream on stdout; the CLI's stderr, its exit status and the answers on stderr."""
        sys.stdout.write(self.stdout)
        sys.stderr.write(self.stderr)
        print(f"# exit {self.exit_code}", file=sys.stderr)
        for answer in self.served:
            print(f"# served {json.dumps(answer)}", file=sys.stderr)


class Served(Protocol):
    """A scripted model (`scripted_http.ModelServer`): its scenario's prompt and its answers."""

    prompt: str

    def served(self) -> list[dict[str, Any]]: ...


def older_cli(root: Path, package: str, version: str) -> Path:
    """An older release of an npm CLI, installed beside the pinned ones to record session
    fixtures in its format: `.agents/<name>-<version>` (`npm install --prefix`)."""
    name = package.rpartition("/")[2]
    path = root / ".agents" / f"{name}-{version}" / "node_modules" / ".bin" / package_binary(package)
    if not path.exists():
        raise RuntimeError(
            f"no {package} {version}: npm install --prefix .agents/{name}-{version} {package}@{version}"
        )
    return path


def installed_cli(variable: str, installed: Path) -> Path | None:
    """A real CLI's binary, if there: the one `variable` names, else the one `make agents`
    installed."""
    named = os.environ.get(variable)
    path = Path(named) if named else installed
    return path if path.exists() else None


def package_binary(package: str) -> str:
    return {"@openai/codex": "codex", "@anthropic-ai/claude-code": "claude"}[package]


def scratch_dirs(scratch: Path) -> tuple[Path, Path]:
    """A throwaway `HOME` and working directory for one run."""
    home, work = scratch / "home", scratch / "work"
    home.mkdir(parents=True, exist_ok=True)
    work.mkdir(parents=True, exist_ok=True)
    return home, work


def run_cli(
    command: Sequence[str],
    model: Served,
    environment: dict[str, str],
    cwd: Path,
    stdin_text: str | None = None,
    timeout: float = 240,
) -> Recorded:
    """Run a real CLI against `model` to its end (stdin: `stdin_text`, else nothing)."""
    completed = subprocess.run(
        list(command),
        input=stdin_text,
        stdin=subprocess.DEVNULL if stdin_text is None else None,
        env=environment,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    return Recorded(completed.stdout, completed.stderr, completed.returncode, model.served(), model.prompt)


def record_main(record: Callable[[str, Path], Recorded]) -> None:
    """`python <module> SCENARIO`: one run, printed (for recording fixtures by hand)."""
    with tempfile.TemporaryDirectory() as scratch:
        record(sys.argv[1], Path(scratch)).print()


class Records(Protocol):
    """A scenario's `record()` (`codex_cli.record`, `opencode_cli.record`...)."""

    def __call__(
        self, scenario: str, scratch: Path, command_prefix: tuple[str, ...], environment: dict[str, str]
    ) -> Recorded: ...


def record_mirrored(
    record: Records, scenario: str, scratch: Path, wrapper: tuple[str, ...]
) -> tuple[Recorded, list[dict[str, Any]]]:
    """One scenario run under `wrapper` (`transcript-otel run ... --`): what it did, and the
    records of the one JSONL mirror file the run wrote."""
    from transcript_otel import read_records

    mirror = scratch / "runs"
    recorded = record(scenario, scratch, wrapper, {"TRANSCRIPT_OTEL_JSONL_DIR": str(mirror)})
    (path,) = mirror.glob("*.jsonl")
    return recorded, list(read_records(path))


@dataclass
class CapturedRun:
    """One scenario's run: what the CLI did and what the mirror holds (spans included)."""

    scenario: str
    records: list[dict[str, Any]]
    served: list[dict[str, Any]]
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    prompt_name: str = ""

    @classmethod
    def of(cls, scenario: str, recorded: Recorded, records: list[dict[str, Any]], **more: Any) -> Self:
        """The run of `scenario` that `recorded` is, with the records its mirror holds."""
        return cls(
            scenario, records, recorded.served, recorded.stdout, recorded.stderr, recorded.exit_code, **more
        )

    @property
    def messages(self) -> list[dict[str, Any]]:
        """What the CLI printed as JSON lines (under `transcript-otel run`)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.entry"]

    @property
    def spans(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.span"]

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"].startswith(prefix)]

    def span(self, span_id: str) -> dict[str, Any]:
        (found,) = [span for span in self.spans if span["span_id"] == span_id]
        return found

    def parent(self, span: dict[str, Any]) -> dict[str, Any]:
        return self.span(span["parent_span_id"])

    @property
    def root(self) -> dict[str, Any]:
        (root,) = self.named(f"invoke_agent {self.prompt_name}")
        return root

    def tool(self, call_id: str) -> dict[str, Any]:
        (found,) = [s for s in self.spans if s["attributes"].get("gen_ai.tool.call.id") == call_id]
        return found

    def chat_spans(self) -> list[dict[str, Any]]:
        """The main turns' chat spans, in order (a subagent's chat span has no turn number)."""
        turns = [span for span in self.named("chat") if "transcript.turn" in span["attributes"]]
        return sorted(turns, key=lambda span: span["attributes"]["transcript.turn"])
