"""The distributions a packager gets: built, checked as an index checks them, and the wheel
installed without extras into a fresh venv, where the CLI reads a recorded run (issue 48, item 5).

Builds with `python -m build` (the `test` dependency group has it and twine); the build
backend and the wheel's dependencies come from PyPI, as for any user.
"""

from __future__ import annotations

import subprocess
import sys
import tarfile
import zipfile
from pathlib import Path

import pytest

from loopback import subprocess_env

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "tests" / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
# What a user's install needs none of: the suite, its fixtures, CI and the benchmarks.
NOT_SHIPPED = ("tests/", ".ci/", "benchmarks/", "examples/")


def _run(command: list[str], cwd: Path, timeout_s: float = 120) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        command,
        cwd=cwd,
        env=subprocess_env(XDG_STATE_HOME=str(cwd / "state"), PIP_DISABLE_PIP_VERSION_CHECK="1"),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert completed.returncode == 0, f"{command}: exit {completed.returncode}\n{completed.stderr}"
    return completed


@pytest.fixture(scope="module")
def dist(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The sdist and the wheel built from it (what `python -m build` does by default)."""
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "build", "--outdir", str(out), str(REPO)], out)
    return out


def test_twine_check_strict_passes_the_wheel_and_the_sdist(dist: Path) -> None:
    files = sorted(dist.glob("transcript_otel-*"))
    assert [path.suffix for path in files] == [".whl", ".gz"]
    _run([sys.executable, "-m", "twine", "check", "--strict", *map(str, files)], dist)


def test_the_metadata_is_what_an_index_accepts(dist: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    with zipfile.ZipFile(wheel) as archive:
        (name,) = [name for name in archive.namelist() if name.endswith(".dist-info/METADATA")]
        metadata = archive.read(name).decode()
    headers = metadata.partition("\n\n")[0].splitlines()
    assert "License-Expression: Apache-2.0" in headers
    assert not [line for line in headers if line.startswith("Classifier: License ::")]  # PyPI rejects both
    assert "Classifier: Framework :: OpenTelemetry :: Instrumentations" in headers
    assert [line for line in headers if line.startswith("Provides-Extra:")] == [
        "Provides-Extra: instruments-any",
        "Provides-Extra: otlp",
        "Provides-Extra: otlp-grpc",
    ]
    assert "example.invalid" not in metadata
    assert "](" not in metadata.partition("\n\n")[2].replace("](https://", "")  # no relative links


def test_the_sdist_has_the_source_docs_and_license_and_no_tests(dist: Path) -> None:
    (sdist,) = dist.glob("*.tar.gz")
    with tarfile.open(sdist) as archive:
        # Each name without the leading `transcript_otel-<version>/`.
        names = [name.partition("/")[2] for name in archive.getnames()]
    shipped = [name for name in names if name.startswith(NOT_SHIPPED) or name == "-"]
    assert shipped == []
    assert {"LICENSE", "pyproject.toml", "docs/pypi.md", "src/transcript_otel/__init__.py"} <= set(names)
    assert not any("fixtures" in name for name in names)


def test_the_wheel_without_extras_installs_and_reads_a_recorded_run(dist: Path, tmp_path: Path) -> None:
    (wheel,) = dist.glob("*.whl")
    venv = tmp_path / "venv"
    # No pip of its own (the running pip installs into it) and no site-packages but its own.
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], tmp_path)
    _run(
        [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", str(wheel)],
        tmp_path,
    )
    # The core install has no OTel SDK: reading a run must not need it.
    _run(
        [
            str(venv / "bin" / "python"),
            "-c",
            "import importlib.util as u; assert not u.find_spec('opentelemetry.sdk')",
        ],
        tmp_path,
    )
    version = _run([str(venv / "bin" / "transcript-otel"), "--version"], tmp_path)
    assert version.stdout.startswith("transcript-otel ")
    summary = _run([str(venv / "bin" / "transcript-otel"), "summary", str(RUN)], tmp_path)
    assert "completed" in summary.stdout
