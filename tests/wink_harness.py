"""Real weakincentives runs for the integration tests.

Each weakincentives version gets its own Python 3.13 virtual environment under
`.venvs/wink-<version>` (3.12.1 breaks weakincentives), with this package installed
editable. `make test` creates them in parallel beforehand; a missing or stale one is
created here. A run starts `tests/agents/wink_driver.py` in that environment: the
real adapters' `evaluate()` against the scripted fake `codex` and `claude` agents,
exporting over OTLP/HTTP to an oteltap receiver in this process, with the JSONL
mirror in a temporary directory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transcript_otel.reading.otlp_records import record_from_otlp

from loopback import subprocess_env
from receivers import TapCollector, run_to_completion

REPO = Path(__file__).resolve().parent.parent
DRIVER = REPO / "tests" / "agents" / "wink_driver.py"
NATIVE_TRANSCRIPT = "native-transcript.jsonl"
VERSIONS = ("0.24.0", "0.25.0", "0.26.0", "0.27.0")
CODEX_VERSIONS = VERSIONS[1:]  # the Codex adapter first shipped in 0.25
ACP_VERSIONS = VERSIONS[2:]  # the ACP and OpenCode ACP adapters: 0.26 and 0.27
# The OpenAI and LiteLLM adapters: both ends of their range (removed in 0.25).
CHAT_VERSIONS = ("0.18.0", "0.24.0")
ALL_VERSIONS = tuple(sorted({*VERSIONS, *CHAT_VERSIONS}))
RUN_TIMEOUT_S = 240.0


def python313() -> str:
    """An interpreter weakincentives runs on: `WINK_PYTHON`, pyenv's 3.13.0, or this one."""
    candidates = [os.environ.get("WINK_PYTHON", "")]
    pyenv = shutil.which("pyenv")
    if pyenv is not None:
        root = subprocess.run([pyenv, "root"], capture_output=True, text=True, check=False).stdout.strip()
        candidates.append(f"{root}/versions/3.13.0/bin/python3.13")
    candidates.append(str(Path.home() / ".pyenv/versions/3.13.0/bin/python3.13"))
    for candidate in candidates:
        if candidate and Path(candidate).is_file():
            return candidate
    if sys.version_info >= (3, 13):
        return sys.executable
    raise RuntimeError("no Python 3.13 found for the weakincentives tests: set WINK_PYTHON")


def requirements(version: str) -> list[str]:
    extras = ["claude-agent-sdk"] if version in VERSIONS else []
    if version in ACP_VERSIONS:
        extras.append("acp")  # agent-client-protocol: the ACP and OpenCode ACP adapters
    if version == "0.27.0":
        extras.append("wink")  # fastapi, uvicorn, markdown-it-py: `wink debug` (tests/test_export_bundle.py)
    # litellm's `completion()` imports `mcp`, which litellm does not declare.
    undeclared = ["mcp"] if version in CHAT_VERSIONS else []
    if version in ACP_VERSIONS:
        # weakincentives asks for `mcp>=1.26`; mcp 2 removed the `Server.list_tools()` decorator
        # its MCP tool server (`adapters/acp/_mcp_http.py`) is built with.
        # agent-client-protocol 0.9 renamed `FileSystemCapability`, which its handshake imports.
        undeclared += ["mcp<2", "agent-client-protocol<0.9"]
    if version in CHAT_VERSIONS:
        extras += ["openai", "litellm"]
    # `[otlp-grpc]`: the pipeline tests send over gRPC too.
    return [f"weakincentives[{','.join(extras)}]=={version}", *undeclared, "-e", f"{REPO}[otlp-grpc]"]


def _stamp(version: str) -> str:
    pyproject = (REPO / "pyproject.toml").read_bytes()
    return hashlib.sha256(pyproject + " ".join(requirements(version)).encode()).hexdigest()


# `make canary`: the interpreter of its environment, with the newest weakincentives release,
# which stands in for the newest tested version; the older ones' tests skip.
CANARY_PYTHON = "TRANSCRIPT_OTEL_CANARY_PYTHON"


def wink_python(version: str) -> Path:
    """The interpreter of the environment for `version`, created (or renewed) if needed."""
    canary = os.environ.get(CANARY_PYTHON)
    if canary:
        if version != VERSIONS[-1]:
            import pytest

            pytest.skip(f"make canary runs the newest weakincentives only, not {version}")
        return Path(canary)
    venv = REPO / ".venvs" / f"wink-{version}"
    python = venv / "bin" / "python"
    stamp = venv / ".stamp"
    if python.is_file() and stamp.is_file() and stamp.read_text() == _stamp(version):
        return python
    shutil.rmtree(venv, ignore_errors=True)
    subprocess.run([python313(), "-m", "venv", str(venv)], check=True)
    subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            *requirements(version),
        ],
        check=True,
    )
    stamp.write_text(_stamp(version))
    return python


@dataclass
class WinkRun:
    """What one driver process produced: results, exported spans and logs, JSONL mirror."""

    version: str
    workdir: Path
    results: dict[str, dict[str, Any]]
    spans: list[Any]
    logs: list[dict[str, Any]]
    mirror: dict[str, list[dict[str, Any]]]  # prompt name → JSONL records of its run
    native: dict[str, list[dict[str, Any]]]  # prompt name → weakincentives' own entries (0.26+)
    stderr: str
    spans_by_id: dict[str, Any] = field(init=False)

    def __post_init__(self) -> None:
        self.spans_by_id = {span.span_id.hex(): span for span in self.spans}

    def entries(self, prompt_name: str) -> list[dict[str, Any]]:
        """The `transcript.entry` contexts of a run's JSONL mirror, in file order."""
        return [r["context"] for r in self.mirror[prompt_name] if r["event"] == "transcript.entry"]

    def entry_types(self, prompt_name: str, source: str = "main") -> list[str]:
        return [e["entry_type"] for e in self.entries(prompt_name) if e["source"] == source]

    def root_span(self, prompt_name: str) -> Any:
        (root,) = [s for s in self.spans if s.name == f"invoke_agent {prompt_name}"]
        return root

    def tree(self, prompt_name: str) -> list[Any]:
        """Every span of the run's trace."""
        root = self.root_span(prompt_name)
        return [s for s in self.spans if s.trace_id == root.trace_id]

    def children(self, span: Any) -> list[Any]:
        return sorted(
            (s for s in self.spans if s.parent_span_id == span.span_id),
            key=lambda s: s.start_time_unix_nano,
        )

    def run_logs(self, prompt_name: str) -> list[dict[str, Any]]:
        return [r for r in self.logs if r["context"].get("prompt_name") == prompt_name]

    def assert_entries_exported(self, prompt_name: str) -> None:
        """Every mirrored entry of the run reached the receiver as a log record of its span."""
        mirrored = self.entries(prompt_name)
        exported = [r["context"] for r in self.run_logs(prompt_name) if r["event"] == "transcript.entry"]
        key = ("source", "sequence_number", "entry_type", "span_id", "trace_id")
        assert sorted(tuple(e[k] for k in key) for e in exported) == sorted(
            tuple(e[k] for k in key) for e in mirrored
        )


def attributes(span_or_event: Any) -> dict[str, Any]:
    found: dict[str, Any] = {}
    for kv in span_or_event.attributes:
        kind = kv.value.WhichOneof("value")
        found[kv.key] = getattr(kv.value, kind) if kind else None
    return found


def _mirror(directory: Path) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for path in sorted(directory.glob("*.jsonl")):
        records = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
        name = next((r["context"].get("prompt_name") for r in records), None)
        if isinstance(name, str):
            runs[name].extend(records)
    return dict(runs)


def _native(path: Path) -> dict[str, list[dict[str, Any]]]:
    runs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    if path.exists():
        for line in path.read_text().splitlines():
            entry = json.loads(line)
            runs[entry["prompt_name"]].append(entry)
    return dict(runs)


async def _drive(
    command: Sequence[str], workdir: Path, arguments: Sequence[str], extra_env: dict[str, str]
) -> tuple[dict[str, dict[str, Any]], list[Any], list[Any], str]:
    results_path = workdir / "results.jsonl"
    async with TapCollector() as tap:
        environment = subprocess_env(
            OTEL_EXPORTER_OTLP_ENDPOINT=tap.endpoint,
            OTEL_EXPORTER_OTLP_PROTOCOL="http/protobuf",
            OTEL_SERVICE_NAME="wink-driver",
            TRANSCRIPT_OTEL_JSONL_DIR=str(workdir / "runs"),
            XDG_STATE_HOME=str(workdir / "state"),
            **extra_env,
        )
        returncode, _, stderr = await run_to_completion(
            [
                *command,
                str(DRIVER),
                "--out",
                str(results_path),
                "--native-transcript",
                str(workdir / NATIVE_TRANSCRIPT),
                *arguments,
            ],
            RUN_TIMEOUT_S,
            env=environment,
            cwd=workdir,
        )
        assert returncode == 0, stderr.decode(errors="replace")
        results = {r["prompt_name"]: r for r in map(json.loads, results_path.read_text().splitlines()) if r}
        # Exported at interpreter exit, before the driver ended; allow the receiver a moment.
        expected_roots = len(results)
        await tap.wait_for(
            lambda: sum(1 for s in tap.spans if s.name.startswith("invoke_agent ")) >= expected_roots,
            timeout_s=10,
        )
        await asyncio.sleep(0.2)
        return results, list(tap.spans), list(tap.logs), stderr.decode(errors="replace")


def run_driver(
    version: str,
    workdir: Path,
    arguments: Sequence[str] = ("--configure",),
    *,
    zero_code: bool = False,
    extra_env: dict[str, str] | None = None,
) -> WinkRun:
    """Run the driver: it calls `configure()` itself, or (`zero_code`) runs under
    `opentelemetry-instrument` with no code of ours in it at all."""
    python = wink_python(version)
    command = [str(python)]
    if zero_code:
        command = [str(python.parent / "opentelemetry-instrument"), str(python)]
        arguments = [a for a in arguments if a != "--configure"]
    workdir.mkdir(parents=True, exist_ok=True)
    results, spans, logs, stderr = asyncio.run(_drive(command, workdir, arguments, extra_env or {}))
    return WinkRun(
        version=version,
        workdir=workdir,
        results=results,
        spans=spans,
        logs=[record_from_otlp(log) for log in logs],
        mirror=_mirror(workdir / "runs"),
        native=_native(workdir / NATIVE_TRANSCRIPT),
        stderr=stderr,
    )


if __name__ == "__main__":
    # `make test` builds every version's environment at once before the suite runs.
    from concurrent.futures import ThreadPoolExecutor

    with ThreadPoolExecutor(len(ALL_VERSIONS)) as pool:
        for path in pool.map(wink_python, ALL_VERSIONS):
            print(path)
