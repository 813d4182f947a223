"""The distributions a packager gets: built, checked as an index checks them, and the wheel
installed without extras into a fresh venv (issue 48, item 5), where every command of the CLI
runs on a recorded run and a session directory, or says in one line what to install (item 3).

Builds with `python -m build` (the `test` dependency group has it and twine); the build
backend and the wheel's dependencies come from PyPI, as for any user.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tarfile
import time
import zipfile
from pathlib import Path

import pytest

from loopback import subprocess_env
from session_fixtures import CLAUDE, CODEX

pytestmark = pytest.mark.packaging

REPO = Path(__file__).resolve().parent.parent
RUN = REPO / "tests" / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
# What a user's install needs none of: the suite, its fixtures, CI and the benchmarks.
NOT_SHIPPED = ("tests/", ".ci/", "benchmarks/", "examples/")


def _run(
    command: list[str],
    cwd: Path,
    timeout_s: float = 120,
    status: int = 0,
    variables: dict[str, str] | None = None,
) -> subprocess.CompletedProcess[str]:
    completed = subprocess.run(
        command,
        cwd=cwd,
        env=_env(cwd) | (variables or {}),
        capture_output=True,
        text=True,
        timeout=timeout_s,
        check=False,
    )
    assert completed.returncode == status, f"{command}: exit {completed.returncode}\n{completed.stderr}"
    return completed


def _env(cwd: Path) -> dict[str, str]:
    return subprocess_env(XDG_STATE_HOME=str(cwd / "state"), PIP_DISABLE_PIP_VERSION_CHECK="1")


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


@pytest.fixture(scope="module")
def core_install(dist: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The wheel installed without extras in a fresh venv: its `bin/`."""
    (wheel,) = dist.glob("*.whl")
    home = tmp_path_factory.mktemp("core")
    venv = home / "venv"
    # No pip of its own (the running pip installs into it) and no site-packages but its own.
    _run([sys.executable, "-m", "venv", "--without-pip", str(venv)], home)
    _run([sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python"), "install", str(wheel)], home)
    return venv / "bin"


def test_the_wheel_without_extras_installs_and_reads_a_recorded_run(
    core_install: Path, tmp_path: Path
) -> None:
    # The core install has no OTel SDK: reading a run must not need it.
    _run(
        [
            str(core_install / "python"),
            "-c",
            "import importlib.util as u; assert not u.find_spec('opentelemetry.sdk')",
        ],
        tmp_path,
    )
    version = _run([str(core_install / "transcript-otel"), "--version"], tmp_path)
    assert version.stdout.startswith("transcript-otel ")
    summary = _run([str(core_install / "transcript-otel"), "summary", str(RUN)], tmp_path)
    assert "completed" in summary.stdout


def test_every_command_works_on_the_core_install_or_says_what_to_install(
    core_install: Path, tmp_path: Path
) -> None:
    """Without the SDK: the reading commands, the exports, `import` of a session directory and
    `watch` of a folder (both writing spans to the mirror), `run`; `replay` says the one line."""
    cli = [str(core_install / "transcript-otel")]
    run = str(RUN)
    assert _run([*cli, "show", run], tmp_path).stdout
    assert "completed" in _run([*cli, "summary", run], tmp_path).stdout
    assert _run([*cli, "validate", run], tmp_path).stderr.endswith(" records: ok\n")
    for form, name in (
        ("markdown", "run.md"),
        ("html", "run.html"),
        ("devflow", "run.json"),
        ("jsonl", "run.jsonl"),
    ):
        _run([*cli, "export", run, "--format", form, "-o", str(tmp_path / name)], tmp_path)
        assert (tmp_path / name).stat().st_size > 0
    assert "complete -o" in _run([*cli, "completion", "bash"], tmp_path).stdout
    assert _run([*cli, "completion", "zsh"], tmp_path).stdout.startswith("#compdef transcript-otel\n")
    _run([*cli, "bundle", run, "-o", str(tmp_path / "run.zip")], tmp_path)
    assert zipfile.is_zipfile(tmp_path / "run.zip")
    replay = _run([*cli, "replay", run, "--endpoint", "http://127.0.0.1:9"], tmp_path, status=2)
    assert replay.stderr.splitlines() == [
        "transcript-otel replay: sending runs needs the OpenTelemetry SDK and OTLP exporters, "
        "which the core install leaves out: pip install 'transcript-otel[otlp]'"
    ]
    # A session directory (a main session and its subagents' files), into a mirror of its own.
    mirror = tmp_path / "mirror"
    imported = _run(
        [*cli, "import", str(CLAUDE / "parallel_subagents"), "--jsonl-dir", str(mirror)], tmp_path
    )
    assert " -> " in imported.stdout
    (imported_run,) = mirror.glob("*.jsonl")
    assert b'"event":"transcript.span"' in imported_run.read_bytes()
    listed = _run([*cli, "list", "--jsonl-dir", str(mirror)], tmp_path)
    assert imported_run.name in listed.stdout
    ran = _run([*cli, "run", "--", "echo", "hi"], tmp_path)
    assert (ran.stdout, ran.stderr) == ("hi\n", "")  # no export asked for: nothing to say
    (ran_run,) = (tmp_path / "state" / "transcript-otel" / "runs").glob("*.jsonl")  # the default mirror
    assert b'"event":"transcript.span"' in ran_run.read_bytes()
    _watch(cli, tmp_path)


# An application that calls configure() and records an entry: the sinks it got.
APPLICATION = """
import transcript_otel
configuration = transcript_otel.configure(service_name="app")
with transcript_otel.TranscriptEmitter(prompt_name="app", adapter="app") as emitter:
    emitter.emit("user_message", detail={"text": "hello"})
print([sink.name for sink in configuration.pipeline.sinks])
"""
EXPORT_NEEDS_THE_SDK = (
    "transcript-otel: exporting to an OTLP endpoint or the console needs the OpenTelemetry SDK and "
    "OTLP exporters, which the core install leaves out: pip install 'transcript-otel[otlp]' (the mirror "
    "gets the transcript)"
)


def test_configure_and_opentelemetry_instrument_on_the_core_install_say_what_to_install(
    core_install: Path, tmp_path: Path
) -> None:
    """Asked to export without the SDK: one line, no exception, the mirror written; under
    `opentelemetry-instrument` too (our configurator), where a program runs as it would."""
    endpoint = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    mirror = {"TRANSCRIPT_OTEL_JSONL_DIR": str(tmp_path / "mirror")}
    python = str(core_install / "python")
    configured = _run([python, "-c", APPLICATION], tmp_path, variables=endpoint | mirror)
    assert (configured.stdout, configured.stderr.splitlines()) == ("['jsonl']\n", [EXPORT_NEEDS_THE_SDK])
    assert b'"text":"hello"' in next((tmp_path / "mirror").glob("*.jsonl")).read_bytes()
    program = (
        "from transcript_otel.capture.defaults import get_pipeline; print('ran', get_pipeline() is not None)"
    )
    instrumented = _run(
        [str(core_install / "opentelemetry-instrument"), python, "-c", program], tmp_path, variables=endpoint
    )
    assert (instrumented.stdout, instrumented.stderr.splitlines()) == ("ran True\n", [EXPORT_NEEDS_THE_SDK])


def _watch(cli: list[str], tmp_path: Path) -> None:
    """A watch of a folder a Codex session is copied into, stopped by SIGTERM once the session's
    run is in the mirror, ended on idle."""
    folder, mirror = tmp_path / "watched", tmp_path / "watch-mirror"
    folder.mkdir()
    command = [*cli, "watch", str(folder), "--jsonl-dir", str(mirror), "--state", str(tmp_path / "w.json")]
    watch = subprocess.Popen(
        [*command, "--idle", "1"],
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        assert "following" in watch.stdout.readline()
        session = next((CODEX / "subagent").rglob("rollout-*.jsonl"))
        shutil.copy(session, folder / session.name)
        deadline = time.monotonic() + 60
        while not any(b'"event":"transcript.stop"' in path.read_bytes() for path in mirror.glob("*.jsonl")):
            assert time.monotonic() < deadline, "the watch wrote no run"
            time.sleep(0.1)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, said = watch.communicate(timeout=60)
    assert watch.returncode == 0, said
    (watched,) = mirror.glob("*.jsonl")
    assert b'"event":"transcript.span"' in watched.read_bytes()
