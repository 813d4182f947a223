"""A core-only install (`pip install transcript-otel`, no `[otlp]`: no OTel SDK) imports and
watches sessions into the mirror, with the records the SDK gives, and says in one line what to
install for what needs the SDK (issue 48, item 3).

The SDK is taken away as tests/test_cli_export.py does for `replay`: `sys.modules` holds None
for `opentelemetry.sdk` in a subprocess, so any import of it fails as on a core install.
tests/test_packaging.py runs every command from the built wheel installed without extras.
"""

from __future__ import annotations

import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from loopback import subprocess_env
from session_fixtures import CLAUDE, CODEX

RUN = Path(__file__).resolve().parent / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
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


SENDING_NEEDS_THE_SDK = (
    "transcript-otel import: sending runs to an OTLP endpoint (--endpoint, OTEL_EXPORTER_OTLP_ENDPOINT) "
    "needs the OpenTelemetry SDK and OTLP exporters, which the core install leaves out: "
    "pip install 'transcript-otel[otlp]'"
)


@pytest.mark.parametrize("how", ["--endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT"])
def test_import_that_would_send_without_the_sdk_says_which_extra_it_needs(how: str, tmp_path: Path) -> None:
    """One line, exit 2, nothing imported: sending needs the SDK's exporters."""
    endpoint = "http://127.0.0.1:9"
    argv = ["import", str(SCENARIOS[0]), "--jsonl-dir", str(tmp_path / "mirror")]
    given = {"OTEL_EXPORTER_OTLP_ENDPOINT": endpoint} if how != "--endpoint" else {}
    done = cli(
        argv + (["--endpoint", endpoint] if how == "--endpoint" else []), tmp_path, sdk=False, variables=given
    )
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (2, [SENDING_NEEDS_THE_SDK], "")
    assert not (tmp_path / "mirror").exists()


def test_import_with_a_sampler_but_no_sdk_says_every_span_is_recorded(tmp_path: Path) -> None:
    variables = {"OTEL_TRACES_SAMPLER": "always_off"}
    argv = ["import", str(CODEX / "subagent"), "--jsonl-dir", str(tmp_path / "mirror")]
    done = cli(argv, tmp_path, sdk=False, variables=variables)
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines()[0] == (
        "transcript-otel import: OTEL_TRACES_SAMPLER needs the OpenTelemetry SDK, which the core install "
        "leaves out: every span is recorded (pip install 'transcript-otel[otlp]')"
    )
    assert all(b'"event":"transcript.span"' in run for run in _mirror(tmp_path / "mirror").values())


# -- watch -------------------------------------------------------------------------------------------

CODEX_SESSION = next((CODEX / "subagent").rglob("rollout-*.jsonl"))
# What differs from one watch to the next: random ids, times, the run id (from the watch's start).
_VARYING = re.compile(
    rb'"(trace_id|span_id|parent_span_id|run_id|transcript\.run_id)":"[0-9a-f]+"|"timestamp":"[^"]*"|\d{16,}'
)


def _watch(
    tmp_path: Path, *, sdk: bool, endpoint: str | None = None, variables: dict[str, str] | None = None
) -> tuple[list[str], list[bytes]]:
    """A watch of a folder a Codex session is copied into, stopped by SIGTERM once the session's
    run ended (idle): what it said on stderr, and its run with what varies from watch to watch
    taken out."""
    folder, mirror = tmp_path / "sessions", tmp_path / "mirror"
    folder.mkdir(parents=True)
    code = ("" if sdk else WITHOUT_THE_SDK) + "import sys\nfrom transcript_otel.cli import main\n"
    argv = ["watch", str(folder), "--jsonl-dir", str(mirror), "--state", str(tmp_path / "w.json")]
    argv += ["--idle", "1"] + (["--endpoint", endpoint] if endpoint else [])
    watch = subprocess.Popen(
        [sys.executable, "-c", f"{code}sys.exit(main({argv!r}))"],
        env=subprocess_env(XDG_STATE_HOME=str(tmp_path / "state"), **(variables or {})),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert watch.stdout is not None
        assert "following" in watch.stdout.readline()
        shutil.copy(CODEX_SESSION, folder / CODEX_SESSION.name)
        deadline = time.monotonic() + 60
        while not any(b'"event":"transcript.stop"' in run for run in _runs(mirror)):
            assert time.monotonic() < deadline, "the session's run did not end in the mirror"
            time.sleep(0.1)
    finally:
        watch.send_signal(signal.SIGTERM)
        _, said = watch.communicate(timeout=60)
    assert watch.returncode == 0, said
    (run,) = _runs(mirror)
    return said.splitlines(), [_VARYING.sub(b"", line) for line in run.splitlines()]


def _runs(mirror: Path) -> list[bytes]:
    return [path.read_bytes() for path in sorted(mirror.glob("*.jsonl"))] if mirror.is_dir() else []


def test_watch_without_the_sdk_writes_the_run_a_watch_with_it_writes(tmp_path: Path) -> None:
    """The same records, spans too (only ids, times and the run id differ from watch to watch),
    and not a word about the SDK when nothing is to be exported."""
    said, run = _watch(tmp_path / "without", sdk=False)
    assert not [line for line in said if "SDK" in line or "OTLP" in line]
    assert sum(b'"event":"transcript.span"' in line for line in run) >= 2
    _, with_sdk = _watch(tmp_path / "with", sdk=True)
    assert run == with_sdk


def test_watch_to_an_endpoint_without_the_sdk_says_which_extra_it_needs_and_fills_the_mirror(
    tmp_path: Path,
) -> None:
    said, run = _watch(tmp_path, sdk=False, endpoint="http://127.0.0.1:9")
    assert [line for line in said if "SDK" in line] == [
        "transcript-otel watch: exporting to an OTLP endpoint or the console needs the OpenTelemetry "
        "SDK and OTLP exporters, which the core install leaves out: pip install 'transcript-otel[otlp]' "
        "(the mirror gets the sessions)"
    ]
    assert sum(b'"event":"transcript.span"' in line for line in run) >= 2


# -- run ---------------------------------------------------------------------------------------------


def _run_echo(
    tmp_path: Path, *, sdk: bool, variables: dict[str, str] | None = None
) -> tuple[str, list[bytes]]:
    """`transcript-otel run -- echo hi`: what it said on stderr, and its run (as `_watch`)."""
    mirror = tmp_path / "mirror"
    tmp_path.mkdir(exist_ok=True)
    done = cli(
        ["run", "--", "echo", "hi"],
        tmp_path,
        sdk=sdk,
        variables={"TRANSCRIPT_OTEL_JSONL_DIR": str(mirror), **(variables or {})},
    )
    assert (done.returncode, done.stdout) == (0, "hi\n"), done.stderr
    (run,) = _runs(mirror)
    return done.stderr, [_VARYING.sub(b"", line) for line in run.splitlines()]


def test_run_without_the_sdk_writes_the_run_with_its_spans_as_with_the_sdk(tmp_path: Path) -> None:
    said, run = _run_echo(tmp_path / "without", sdk=False)
    assert said == ""
    assert sum(b'"event":"transcript.span"' in line for line in run) == 2
    assert _run_echo(tmp_path / "with", sdk=True) == ("", run)


def test_run_to_an_endpoint_without_the_sdk_says_which_extra_it_needs(tmp_path: Path) -> None:
    said, run = _run_echo(
        tmp_path, sdk=False, variables={"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"}
    )
    assert said.splitlines() == [
        "transcript-otel run: exporting to an OTLP endpoint or the console needs the OpenTelemetry "
        "SDK and OTLP exporters, which the core install leaves out: pip install 'transcript-otel[otlp]' "
        "(the mirror gets the transcript)"
    ]
    assert sum(b'"event":"transcript.span"' in line for line in run) == 2


# -- configure() and opentelemetry-instrument ----------------------------------------------------------

EXPORT_NEEDS_THE_SDK = (
    "transcript-otel: exporting to an OTLP endpoint or the console needs the OpenTelemetry SDK and "
    "OTLP exporters, which the core install leaves out: pip install 'transcript-otel[otlp]' (the mirror "
    "gets the transcript)"
)
# An application that calls configure(), records an entry, and goes on.
APPLICATION = """
import transcript_otel
configuration = transcript_otel.configure(service_name="app")
emitter = transcript_otel.TranscriptEmitter(prompt_name="app", adapter="app")
with emitter:
    emitter.emit("user_message", detail={"text": "hello"})
print("the application went on", [sink.name for sink in configuration.pipeline.sinks])
"""
WENT_ON = "the application went on ['jsonl']\n"


@pytest.mark.parametrize(
    "variables",
    [
        {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9"},
        {"OTEL_TRACES_EXPORTER": "console"},
        {"OTEL_METRICS_EXPORTER": "console"},
    ],
    ids=["endpoint", "console traces", "console metrics"],
)
def test_configure_without_the_sdk_says_what_to_install_and_the_application_goes_on(
    variables: dict[str, str], tmp_path: Path
) -> None:
    done = _application(tmp_path, sdk=False, variables=variables)
    assert (done.returncode, done.stdout, done.stderr.splitlines()) == (0, WENT_ON, [EXPORT_NEEDS_THE_SDK])
    assert b'"text":"hello"' in _runs(tmp_path / "mirror")[0]


def test_configure_without_the_sdk_and_nothing_to_export_says_nothing(tmp_path: Path) -> None:
    done = _application(tmp_path, sdk=False)
    assert (done.returncode, done.stdout, done.stderr) == (0, WENT_ON, "")
    assert b'"text":"hello"' in _runs(tmp_path / "mirror")[0]


def _application(
    tmp_path: Path, *, sdk: bool, variables: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", ("" if sdk else WITHOUT_THE_SDK) + APPLICATION],
        cwd=tmp_path,
        env=subprocess_env(TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "mirror"), **(variables or {})),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _python_hiding(tmp_path: Path, hidden: str) -> Path:
    """A venv's python that sees this environment's packages (transcript-otel, its instrumented
    libraries, opentelemetry-instrument's) but not the module `hidden`, from its first line on:
    its `.pth` files run before `sitecustomize`, which `opentelemetry-instrument` configures OTel in."""
    import site
    import sysconfig

    venv = tmp_path / "core-venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = sysconfig.get_path("purelib", vars={"base": str(venv), "platbase": str(venv)})
    (Path(purelib) / "00_hidden.pth").write_text(f"import sys; sys.modules[{hidden!r}] = None\n")
    ours = [path for path in site.getsitepackages() if Path(path).is_dir()]
    (Path(purelib) / "10_this_environment.pth").write_text(
        "".join(f"import site; site.addsitedir({path!r})\n" for path in ours)
    )
    return venv / "bin" / "python"


@pytest.fixture
def python_without_the_sdk(tmp_path: Path) -> Path:
    return _python_hiding(tmp_path, "opentelemetry.sdk")


_INSTRUMENTED_PROGRAM = (
    "from transcript_otel.capture.defaults import get_pipeline\n"
    "from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor\n"
    "print('instrumented:', ClaudeAgentSdkInstrumentor().is_instrumented_by_opentelemetry)\n"
    "print('mirror:', [sink.name for sink in get_pipeline().sinks])\n"
)
_RAN_INSTRUMENTED = "instrumented: True\nmirror: ['jsonl']\n"


def _under_opentelemetry_instrument(
    python: Path, tmp_path: Path, first_lines: str = "", **variables: str
) -> subprocess.CompletedProcess[str]:
    """`opentelemetry-instrument <python> agent.py`, an endpoint set: a program that says whether
    our claude-agent-sdk instrumentor was applied and which sinks the pipeline has."""
    program = tmp_path / "agent.py"
    program.write_text(first_lines + _INSTRUMENTED_PROGRAM)
    return subprocess.run(
        [str(Path(sys.executable).parent / "opentelemetry-instrument"), str(python), str(program)],
        cwd=tmp_path,
        env=subprocess_env(
            TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "mirror"),
            OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
            # OpenInference's instrumentor of the same library, when installed, says its own line.
            OTEL_PYTHON_DISABLED_INSTRUMENTATIONS="claude_agent_sdk",
            **variables,
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_opentelemetry_instrument_without_the_sdk_says_what_to_install_and_runs_the_program(
    python_without_the_sdk: Path, tmp_path: Path
) -> None:
    """Our configurator under `opentelemetry-instrument` on a core install: one line, no
    traceback, the program runs with our claude-agent-sdk instrumentor applied and the mirror written."""
    no_sdk = "import sys\nassert sys.modules['opentelemetry.sdk'] is None  # no SDK from the first line on\n"
    done = _under_opentelemetry_instrument(python_without_the_sdk, tmp_path, no_sdk)
    assert (done.returncode, done.stderr.splitlines()) == (0, [EXPORT_NEEDS_THE_SDK]), done.stderr
    assert done.stdout == _RAN_INSTRUMENTED


def test_opentelemetry_instrument_asked_for_an_exporter_not_installed_still_captures(tmp_path: Path) -> None:
    """OTLP/gRPC asked for where only `[otlp]` (HTTP) is installed: our configurator says so in
    one line and the program runs instrumented, into the mirror (it raised: `opentelemetry-instrument`
    printed a traceback and loaded no instrumentor, so nothing was captured)."""
    python = _python_hiding(tmp_path, "opentelemetry.exporter.otlp.proto.grpc")
    done = _under_opentelemetry_instrument(python, tmp_path, OTEL_EXPORTER_OTLP_PROTOCOL="grpc")
    said = (
        "transcript-otel: the OTLP grpc exporter is missing: pip install 'transcript-otel[otlp-grpc]'; "
        "nothing is exported, the JSONL mirror gets the transcript"
    )
    assert (done.returncode, done.stderr.splitlines()) == (0, [said]), done.stderr
    assert done.stdout == _RAN_INSTRUMENTED


# -- OTEL_SDK_DISABLED -----------------------------------------------------------------------------


def test_configure_with_the_sdk_disabled_makes_no_providers_and_writes_the_mirror(tmp_path: Path) -> None:
    """As the SDK's own providers read `OTEL_SDK_DISABLED=true`: nothing exported (an endpoint
    is set), no provider of ours made global; the mirror gets the entry, and nothing is said."""
    check = (
        "from opentelemetry import trace\n"
        "assert type(trace.get_tracer_provider()).__name__ == 'ProxyTracerProvider'\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", APPLICATION + check],
        cwd=tmp_path,
        env=subprocess_env(
            TRANSCRIPT_OTEL_JSONL_DIR=str(tmp_path / "mirror"),
            OTEL_SDK_DISABLED="true",
            OTEL_EXPORTER_OTLP_ENDPOINT="http://127.0.0.1:9",
            OTEL_TRACES_EXPORTER="otlp,console",
        ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert (done.returncode, done.stdout, done.stderr) == (0, WENT_ON, "")
    assert b'"text":"hello"' in _runs(tmp_path / "mirror")[0]


def test_run_with_the_sdk_disabled_writes_the_run_a_core_install_writes(tmp_path: Path) -> None:
    """No export (the console exporter would print the spans on stdout), nothing said, the run
    with its spans in the mirror as without the SDK."""
    disabled = {"OTEL_SDK_DISABLED": "True", "OTEL_TRACES_EXPORTER": "console"}
    said, run = _run_echo(tmp_path / "disabled", sdk=True, variables=disabled)
    assert said == ""
    assert _run_echo(tmp_path / "without", sdk=False) == ("", run)


def test_watch_with_the_sdk_disabled_writes_the_run_a_core_install_writes(tmp_path: Path) -> None:
    said, run = _watch(tmp_path / "disabled", sdk=True, variables={"OTEL_SDK_DISABLED": "true"})
    assert not [line for line in said if "SDK" in line or "OTLP" in line]
    assert sum(b'"event":"transcript.span"' in line for line in run) >= 2
    assert _watch(tmp_path / "without", sdk=False)[1] == run


SENDING_DISABLED = (
    "OTEL_SDK_DISABLED=true turns the OpenTelemetry SDK off: nothing would be sent (unset it to send)"
)


@pytest.mark.parametrize("command", ["replay", "import"])
def test_sending_with_the_sdk_disabled_says_so_instead_of_sending_nothing(
    command: str, tmp_path: Path
) -> None:
    """`replay` said it sent a run that the disabled SDK's providers had dropped; `import` would
    have imported, then sent each run in vain. One line, exit 2, nothing imported."""
    what = str(RUN) if command == "replay" else str(SCENARIOS[0])
    argv = [command, what, "--endpoint", "http://127.0.0.1:9"]
    argv += ["--jsonl-dir", str(tmp_path / "mirror")] if command == "import" else []
    done = cli(argv, tmp_path, sdk=True, variables={"OTEL_SDK_DISABLED": "true"})
    assert (done.returncode, done.stderr.splitlines(), done.stdout) == (
        2,
        [f"transcript-otel {command}: {SENDING_DISABLED}"],
        "",
    )
    assert not (tmp_path / "mirror").exists()
