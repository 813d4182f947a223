"""`transcript-otel bundle` and `export` on captured runs: what lands on disk and on the terminal."""

from __future__ import annotations

import io
import json
import os
import stat
import subprocess
import sys
import threading
import zipfile
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.cli import main
from transcript_otel.cli.export_commands import Progress
from transcript_otel.reading.sources import open_run

from helpers import FIXTURE_RUNS, write_large_run

RUNS = Path(__file__).parent / "fixtures" / "runs"
Capture = pytest.CaptureFixture[str]


def cli(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


def records_of(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=lambda path: path.stem)
def test_a_bundle_reads_back_as_the_same_run(tmp_path: Path, capsys: Capture, run: Path) -> None:
    bundle = tmp_path / "run.zip"
    status, _, err = cli(capsys, "bundle", str(run), "-o", str(bundle))
    assert status == 0
    entries = sum(1 for r in records_of(run) if r["event"] == "transcript.entry")
    assert err == f"{bundle}: {entries} entries\n"
    assert "debug_bundle/manifest.json" in zipfile.ZipFile(bundle).namelist()
    _, from_bundle, _ = cli(capsys, "summary", str(bundle), "--json")
    _, from_mirror, _ = cli(capsys, "summary", str(run), "--json")
    assert json.loads(from_bundle) == json.loads(from_mirror)
    _, shown_bundle, _ = cli(capsys, "show", str(bundle))
    _, shown_mirror, _ = cli(capsys, "show", str(run))
    assert shown_bundle == shown_mirror


def test_jsonl_export_of_a_bundle_gives_back_the_mirror(tmp_path: Path, capsys: Capture) -> None:
    run = RUNS / "wink-0.27-claude-rich.jsonl"
    bundle = tmp_path / "run.zip"
    cli(capsys, "bundle", str(run), "-o", str(bundle))
    status, out, _ = cli(capsys, "export", str(bundle), "--format", "jsonl")
    assert status == 0
    assert [json.loads(line) for line in out.splitlines()] == records_of(run)


def test_markdown_export_is_the_transcript_with_headings_and_code_blocks(capsys: Capture) -> None:
    status, out, _ = cli(capsys, "export", str(RUNS / "wink-0.27-claude-rich.jsonl"), "--format", "markdown")
    assert status == 0
    assert out.startswith("## claude-rich · claude_agent_sdk · ")
    assert "### [14:33:42] 👤 USER\n\n## 1. Task (task)" in out
    assert '### [14:33:42] 🔧 Task\n\n```\n{"description":"List files"' in out
    assert "### [subagent:a1b2c3] [14:33:42] 🔧 Bash → result\n\n```\na.txt\n```" in out


def test_markdown_fences_are_longer_than_any_backticks_inside(tmp_path: Path, capsys: Capture) -> None:
    records = records_of(RUNS / "wink-0.24-openai-tool.jsonl")
    for record in records:
        if record["event"] == "transcript.entry" and record["context"]["entry_type"] == "tool_result":
            record["context"]["detail"]["content"] = record["context"]["detail"]["text"] = (
                "```\nrm -rf /\n```"
            )
    run = tmp_path / "fenced.jsonl"
    run.write_text("".join(json.dumps(r) + "\n" for r in records))
    _, out, _ = cli(capsys, "export", str(run), "--format", "markdown")
    assert "\n````\n```\nrm -rf /\n```\n````\n" in out


@pytest.mark.parametrize(
    ("fmt", "name"), [("html", "run.html"), ("markdown", "run.md"), ("jsonl", "run.jsonl")]
)
def test_an_export_to_a_file_is_written_whole(tmp_path: Path, capsys: Capture, fmt: str, name: str) -> None:
    target = tmp_path / name
    status, out, _ = cli(capsys, "export", str(RUNS / "run-rtf1.jsonl"), "--format", fmt, "-o", str(target))
    assert (status, out) == (0, "")
    assert target.stat().st_size > 0
    assert [p.name for p in tmp_path.iterdir()] == [name]  # no temporary file left beside it


def test_devflow_export_writes_a_transcript_file(tmp_path: Path, capsys: Capture) -> None:
    status, _, err = cli(
        capsys,
        "export",
        str(RUNS / "wink-0.24-openai-tool.jsonl"),
        "--format",
        "devflow",
        "-o",
        str(tmp_path),
    )
    assert status == 0
    written = Path(err.strip())
    assert written.parent == tmp_path
    assert written.name in ("transcript.json", "transcript.json.gz")


def test_bad_targets_and_runs_are_clear_errors(tmp_path: Path, capsys: Capture) -> None:
    empty = tmp_path / "empty.jsonl"
    empty.touch()
    status, _, err = cli(capsys, "bundle", str(empty), "-o", str(tmp_path / "x.zip"))
    assert status == 2
    assert err.startswith("transcript-otel bundle: ")
    assert "no records" in err
    status, _, err = cli(
        capsys, "export", str(RUNS / "run-rtf1.jsonl"), "--format", "html", "-o", "/no/such/dir/x.html"
    )
    assert status == 2
    assert err.startswith("transcript-otel export: ")
    not_a_bundle = tmp_path / "fake.zip"
    with zipfile.ZipFile(not_a_bundle, "w") as archive:
        archive.writestr("hello.txt", "hi")
    status, _, err = cli(capsys, "show", str(not_a_bundle))
    assert status == 2
    assert "manifest.json" in err


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_long_work_shows_progress_on_a_terminal_only(tmp_path: Path) -> None:
    run = open_run(write_large_run(tmp_path / "large.jsonl", 2_000))
    terminal, pipe = Terminal(), io.StringIO()
    assert sum(1 for _ in Progress(run, "exporting", terminal).records()) == 2_002
    assert terminal.getvalue().endswith("\rexporting: 2,002 records\n")
    assert sum(1 for _ in Progress(run, "exporting", pipe).records()) == 2_002
    assert pipe.getvalue() == ""


def test_export_and_bundle_help_say_what_they_make(capsys: Capture) -> None:
    for command, words in {
        "bundle": ("wink query", "-o"),
        "export": ("devflow", "markdown", "html", "jsonl", "gzip at 100 KB"),
        "replay": ("original trace and span ids", "--endpoint", "OTEL_EXPORTER_OTLP_ENDPOINT"),
    }.items():
        with pytest.raises(SystemExit) as exited:
            main([command, "--help"])
        assert exited.value.code == 0
        text = " ".join(capsys.readouterr().out.split())
        for word in words:
            assert word in text, (command, word)


def test_replay_without_the_sdk_says_which_extra_it_needs() -> None:
    """A core-only install (`pip install transcript-otel`) has no SDK: one line, exit 2."""
    run = next(iter(FIXTURE_RUNS))
    without_sdk = (
        "import sys; sys.modules['opentelemetry.sdk'] = None\n"  # as if not installed
        "from transcript_otel.cli import main\n"
        f"sys.exit(main(['replay', {str(run)!r}, '--endpoint', 'http://127.0.0.1:9']))"
    )
    result = subprocess.run(
        [sys.executable, "-c", without_sdk], capture_output=True, text=True, timeout=60, check=False
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        "transcript-otel replay: sending runs needs the OpenTelemetry SDK and OTLP exporters, "
        "which the core install leaves out: pip install 'transcript-otel[otlp]'"
    ]


# -- where -o writes -------------------------------------------------------------------------------


def test_output_through_a_symlink_writes_the_file_it_names_and_keeps_the_link(tmp_path: Path) -> None:
    run = str(next(iter(FIXTURE_RUNS)))
    for argv, name in (
        (["export", run, "--format", "markdown"], "run.md"),
        (["bundle", run], "run.zip"),
        (["export", run, "--format", "devflow"], "transcript.json"),
    ):
        real = tmp_path / "real" / name
        real.parent.mkdir(exist_ok=True)
        real.write_text("old")
        link = tmp_path / f"link-{name}"
        link.symlink_to(real)
        assert main([*argv, "-o", str(link)]) == 0
        assert link.is_symlink()
        assert link.resolve() == real
        assert real.read_bytes() != b"old"


def test_output_onto_an_existing_file_keeps_its_mode_and_its_other_names(tmp_path: Path) -> None:
    """As `> file` would: an existing file keeps its permissions (not the 0600 of a new one),
    and a file with hard links is written into, so that each name shows the export."""
    run = str(next(iter(FIXTURE_RUNS)))
    shared = tmp_path / "shared.md"
    shared.write_text("old")
    shared.chmod(0o644)
    other_name = tmp_path / "other-name.md"
    os.link(shared, other_name)
    inode = shared.stat().st_ino
    assert main(["export", run, "--format", "markdown", "-o", str(shared)]) == 0
    assert shared.stat().st_ino == inode
    assert other_name.read_bytes() == shared.read_bytes() != b"old"
    alone = tmp_path / "alone.md"
    alone.write_text("old")
    alone.chmod(0o640)
    assert main(["export", run, "--format", "markdown", "-o", str(alone)]) == 0
    assert stat.S_IMODE(alone.stat().st_mode) == 0o640
    assert alone.read_bytes() != b"old"


def test_output_into_a_fifo_or_a_device_writes_into_it(tmp_path: Path) -> None:
    run = str(next(iter(FIXTURE_RUNS)))
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    received: list[bytes] = []
    reader = threading.Thread(target=lambda: received.append(fifo.read_bytes()), daemon=True)
    reader.start()
    assert main(["export", run, "--format", "markdown", "-o", str(fifo)]) == 0
    reader.join(30)
    assert received[0].startswith(b"## ")  # the reader got the transcript
    assert stat.S_ISFIFO(os.stat(fifo).st_mode)  # and the FIFO is still one
    # A device: a null device of our own (root may make one), never the machine's /dev/null.
    null = tmp_path / "null"
    try:
        os.mknod(null, stat.S_IFCHR | 0o666, os.stat(os.devnull).st_rdev)
    except PermissionError:
        pytest.skip("no permission to make a device node; the FIFO case has passed")
    assert main(["bundle", run, "-o", str(null)]) == 0
    assert stat.S_ISCHR(os.stat(null).st_mode)  # written into, not replaced by a zip


def test_output_dash_is_standard_output(capsysbinary: pytest.CaptureFixture[bytes]) -> None:
    run = str(next(iter(FIXTURE_RUNS)))
    assert main(["export", run, "--format", "markdown", "-o", "-"]) == 0
    assert capsysbinary.readouterr().out.startswith(b"## ")
    assert main(["bundle", run, "-o", "-"]) == 0
    with zipfile.ZipFile(io.BytesIO(capsysbinary.readouterr().out)) as bundle:
        assert "debug_bundle/manifest.json" in bundle.namelist()


@pytest.mark.parametrize(
    ("endpoint", "said"),
    [
        ("", "no OTLP endpoint: give --endpoint or set OTEL_EXPORTER_OTLP_ENDPOINT"),
        ("not a url", "not an OTLP endpoint: 'not a url' (give a URL such as http://localhost:4318)"),
        (
            "ftp://collector",
            "not an OTLP endpoint: 'ftp://collector' (give a URL such as http://localhost:4318)",
        ),
    ],
)
def test_replay_to_an_endpoint_that_is_not_one_is_one_line_and_exit_2(
    endpoint: str, said: str, capsys: pytest.CaptureFixture[str]
) -> None:
    run = str(next(iter(FIXTURE_RUNS)))
    assert main(["replay", run, "--endpoint", endpoint]) == 2
    assert capsys.readouterr().err.splitlines()[-1] == f"transcript-otel replay: {said}"
