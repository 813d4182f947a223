"""A core-only install (`pip install transcript-otel`, no `[otlp]`: no OTel SDK) imports and
watches sessions into the mirror, with the records the SDK gives, and says in one line what to
install for what needs the SDK (issue 48, item 3).

The SDK is taken away as tests/test_cli_export.py does for `replay`: `sys.modules` holds None
for `opentelemetry.sdk` in a subprocess, so any import of it fails as on a core install.
tests/test_packaging.py runs every command from the built wheel installed without extras.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from loopback import subprocess_env
from session_fixtures import CLAUDE, CODEX

# Subagents (in parallel, in the background), a fork, a compaction, a failed request.
SCENARIOS = (
    CLAUDE / "parallel_subagents",
    CLAUDE / "background_subagent",
    CLAUDE / "forked",
    CLAUDE / "fatal_500",
    CODEX / "subagent",
    CODEX / "compacted",
)
WITHOUT_THE_SDK = "import sys; sys.modules['opentelemetry.sdk'] = None\n"  # as if not installed
# The attribute limits of the environment, which the SDK's SpanLimits reads.
LIMITS = {
    "OTEL_SPAN_ATTRIBUTE_COUNT_LIMIT": "6",
    "OTEL_ATTRIBUTE_VALUE_LENGTH_LIMIT": "24",
    "OTEL_SPAN_ATTRIBUTE_VALUE_LENGTH_LIMIT": "40",
}


def cli(
    argv: list[str], cwd: Path, *, sdk: bool, variables: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """`transcript-otel argv` in a subprocess, with or without the SDK, `variables` set."""
    code = ("" if sdk else WITHOUT_THE_SDK) + (
        f"import sys\nfrom transcript_otel.cli import main\nsys.exit(main({argv!r}))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        cwd=cwd,
        env=subprocess_env(XDG_STATE_HOME=str(cwd / "state"), **(variables or {})),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _mirror(directory: Path) -> dict[str, bytes]:
    return {path.name: path.read_bytes() for path in sorted(directory.iterdir())}


@pytest.mark.parametrize("limits", [False, True], ids=["default limits", "limits of the environment"])
def test_import_without_the_sdk_writes_the_mirror_the_sdk_gives(limits: bool, tmp_path: Path) -> None:
    """Every file byte for byte, nothing dropped: entries, ids, `transcript.span` records. With
    limits set, the reference is the SDK's own tracer (a sampler in the environment picks it)."""
    variables = LIMITS if limits else {}
    sdk_variables = {"OTEL_TRACES_SAMPLER": "parentbased_always_on"} if limits else {}
    paths = [str(path) for path in SCENARIOS]
    without = cli(
        ["import", *paths, "--jsonl-dir", str(tmp_path / "without"), "-j", "2"],
        tmp_path,
        sdk=False,
        variables=variables,
    )
    assert without.returncode == 0, without.stderr
    with_sdk = cli(
        ["import", *paths, "--jsonl-dir", str(tmp_path / "with"), "-j", "2"],
        tmp_path,
        sdk=True,
        variables=variables | sdk_variables,
    )
    assert with_sdk.returncode == 0, with_sdk.stderr
    assert without.stdout.replace("/without/", "/with/") == with_sdk.stdout
    if not limits:  # (the SDK's tracer warns of each value it cuts; the API's BoundedAttributes less)
        assert without.stderr == with_sdk.stderr
    mirror = _mirror(tmp_path / "without")
    assert len(mirror) >= len(SCENARIOS)
    assert all(b'"event":"transcript.span"' in run for run in mirror.values())
    assert mirror == _mirror(tmp_path / "with")
