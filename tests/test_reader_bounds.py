"""What reading a run may cost (issue 30, points 10 and 12): a record's size is capped in
every reader, blank lines cost next to nothing, and a bundle member may not inflate past
a bound.

The long lines are sparse files (a hole reads as NUL bytes): 200 MiB to read, nothing on
disk. Memory is measured in a process of its own: the command line run in-process by a
small script that prints its own peak RSS at the end.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from transcript_otel.cli import main
from transcript_otel.reading.lines import MAX_RECORD_BYTES, LineReader
from transcript_otel.reading.show import follow

MIB = 1 << 20
HUGE = 200 * MIB  # far past the cap, and past what a reader may take in memory
PEAK_LIMIT = 100 * MIB  # half the line; the readers take ~60 MiB, ~25 of them Python's own
APP = "debug_bundle/logs/app.jsonl"
TOO_LONG = f"skipped a line longer than the {MAX_RECORD_BYTES >> 20} MiB a record may take"
Capture = pytest.CaptureFixture[str]

# The peak of this process alone: Linux's `ru_maxrss` keeps, across exec, the peak of the process
# that forked it (the test run itself, hundreds of MiB deep into the suite); `VmHWM` does not.
_MEASURED = """
import resource, sys
from transcript_otel.cli import main
status = main(sys.argv[1:])
sys.stdout.flush()
try:
    with open("/proc/self/status") as status_file:
        peak = next(int(line.split()[1]) * 1024 for line in status_file if line.startswith("VmHWM:"))
except OSError:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    peak = peak if sys.platform == "darwin" else peak * 1024
print(f"peak-rss {peak}", file=sys.stderr)
sys.exit(status)
"""


def record(event: str, context: dict[str, Any], second: int) -> dict[str, Any]:
    moment = f"2026-11-23T09:00:{second:02d}+00:00"
    return {
        "timestamp": moment,
        "level": "INFO",
        "logger": "t",
        "event": event,
        "message": event,
        "context": context,
    }


def entry(sequence_number: int, text: str) -> dict[str, Any]:
    context = {
        "prompt_name": "bounds",
        "adapter": "cli",
        "entry_type": "assistant_message",
        "sequence_number": sequence_number,
        "source": "main",
        "timestamp": f"2026-11-23T09:00:{sequence_number:02d}+00:00",
        "detail": {"text": text},
    }
    return record("transcript.entry", context, sequence_number)


def start(run_id: str) -> dict[str, Any]:
    return record("transcript.start", {"prompt_name": "bounds", "adapter": "cli", "run_id": run_id}, 0)


STOP = record("transcript.stop", {"prompt_name": "bounds", "adapter": "cli", "total_entries": 2}, 9)


def line_of(value: dict[str, Any]) -> bytes:
    return json.dumps(value).encode() + b"\n"


def write_long_line(path: Path, size: int, before: list[bytes], after: list[bytes]) -> int:
    """Writes `before`, a line of `size` bytes (JSON-looking, its middle a hole), then
    `after`; returns that line's number."""
    with open(path, "wb") as handle:
        handle.writelines(before)
        head = b'{"event": "transcript.entry", "context": {"text": "'
        handle.write(head)
        handle.seek(size - len(head) - 3, os.SEEK_CUR)
        handle.write(b'"}}\n')
        handle.writelines(after)
    return len(before) + 1


def measured(*argv: str, env: dict[str, str] | None = None) -> tuple[int, str, list[str], int]:
    """Status, stdout, stderr lines and peak RSS in bytes of `transcript-otel ARGV`."""
    result = subprocess.run(
        [sys.executable, "-c", _MEASURED, *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )
    *errors, peak = result.stderr.splitlines()
    return result.returncode, result.stdout, errors, int(peak.removeprefix("peak-rss "))


def cli(capsys: Capture, *argv: str) -> tuple[int, str, str]:
    status = main(list(argv))
    captured = capsys.readouterr()
    return status, captured.out, captured.err


# --- a record's size ---------------------------------------------------------------------


def test_a_line_over_the_cap_is_skipped_with_one_warning_in_bounded_memory(tmp_path: Path) -> None:
    run = tmp_path / "run.jsonl"
    number = write_long_line(
        run, HUGE, [line_of(start("r-1")), line_of(entry(1, "before"))], [line_of(entry(2, "after"))]
    )
    status, out, errors, peak = measured("show", str(run))
    assert status == 0
    assert errors == [f"transcript-otel: warning: {run}:{number}: {TOO_LONG} ({HUGE:,} bytes)"]
    assert "🤖 ASSISTANT\nbefore\n" in out
    assert "🤖 ASSISTANT\nafter\n" in out  # the rest of the file is read
    assert peak < PEAK_LIMIT, f"peak RSS {peak >> 20} MiB reading a {HUGE >> 20} MiB line"


def test_an_otlp_json_line_over_the_cap_is_skipped_in_bounded_memory(tmp_path: Path) -> None:
    def request(sequence_number: int, text: str) -> bytes:
        attributes = {
            "transcript.prompt_name": "bounds",
            "transcript.adapter": "cli",
            "transcript.entry_type": "assistant_message",
            "transcript.source": "main",
            "transcript.timestamp": f"2026-11-23T09:00:0{sequence_number}+00:00",
            "transcript.detail": json.dumps({"text": text}),
        }
        log = {
            "eventName": "transcript.entry",
            "attributes": [
                *({"key": key, "value": {"stringValue": value}} for key, value in attributes.items()),
                {"key": "transcript.sequence_number", "value": {"intValue": str(sequence_number)}},
            ],
        }
        return json.dumps({"resourceLogs": [{"scopeLogs": [{"logRecords": [log]}]}]}).encode() + b"\n"

    export = tmp_path / "logs.json"
    number = write_long_line(export, HUGE, [request(1, "before")], [request(2, "after")])
    status, out, errors, peak = measured("show", str(export))
    assert status == 0
    assert errors == [f"transcript-otel: warning: {export}:{number}: {TOO_LONG} ({HUGE:,} bytes)"]
    assert "before" in out
    assert "after" in out
    assert peak < PEAK_LIMIT, f"peak RSS {peak >> 20} MiB reading a {HUGE >> 20} MiB line"


def test_a_run_id_lookup_reads_only_the_start_of_each_first_line(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    write_long_line(mirror / "a-decoy.jsonl", HUGE, [], [line_of(start("r-decoy"))])
    (mirror / "b-run.jsonl").write_bytes(line_of(start("r-wanted")) + line_of(entry(1, "found it")))
    status, out, errors, peak = measured("show", "r-wanted", env={"TRANSCRIPT_OTEL_JSONL_DIR": str(mirror)})
    assert (status, errors) == (0, [])
    assert "🤖 ASSISTANT\nfound it\n" in out
    assert peak < PEAK_LIMIT, f"peak RSS {peak >> 20} MiB looking past a {HUGE >> 20} MiB first line"


@pytest.mark.filterwarnings("always")
def test_follow_skips_a_line_over_the_cap_and_reads_on_to_the_stop(tmp_path: Path) -> None:
    run = tmp_path / "live.jsonl"
    size = MAX_RECORD_BYTES + MIB
    number = write_long_line(run, size, [line_of(start("r-1"))], [line_of(entry(1, "after")), line_of(STOP)])
    with warnings.catch_warnings(record=True) as caught:
        events = [r["event"] for r in follow(run, poll_s=0.01)]
    assert events == ["transcript.start", "transcript.entry", "transcript.stop"]
    assert [str(w.message) for w in caught] == [f"{run}:{number}: {TOO_LONG} ({size:,} bytes)"]


def test_the_library_reader_skips_a_line_over_the_cap_too(tmp_path: Path) -> None:
    """`transcript_otel.read_records`, what a user's script calls, has the same cap."""
    from transcript_otel import read_records

    run = tmp_path / "run.jsonl"
    size = MAX_RECORD_BYTES + MIB
    number = write_long_line(run, size, [line_of(start("r-1"))], [line_of(entry(1, "after")), line_of(STOP)])
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        events = [r["event"] for r in read_records(run)]
    assert events == ["transcript.start", "transcript.entry", "transcript.stop"]
    assert [str(w.message) for w in caught] == [f"{run}:{number}: {TOO_LONG} ({size:,} bytes)"]


# --- blank lines and bundles ---------------------------------------------------------------


@pytest.mark.filterwarnings("always")
def test_megabytes_of_blank_lines_are_passed_over_and_counted(tmp_path: Path, capsys: Capture) -> None:
    run = tmp_path / "blank.jsonl"
    blanks = 16 * MIB  # lines of " \t\r": 64 MiB
    with open(run, "wb") as handle:
        handle.write(line_of(start("r-1")))
        handle.write(b" \t\r\n" * blanks)
        handle.write(b"not json\n")
        handle.write(line_of(entry(1, "after the blanks")))
    status, out, _ = cli(capsys, "validate", str(run))
    assert status == 1  # the line that is not JSON
    assert f"{run}:{blanks + 2}: skipped invalid JSON" in out  # the blank lines were counted
    status, out, _ = cli(capsys, "show", str(run))
    assert status == 0
    assert "after the blanks" in out


def write_zip(path: Path, app: bytes) -> zipfile.ZipInfo:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("debug_bundle/manifest.json", b"{}")
        archive.writestr(APP, app)
        return archive.getinfo(APP)


@pytest.mark.parametrize("filler", [b"\n", b"{}\n"], ids=["newlines", "tiny-records"])
def test_a_zip_bomb_is_refused_with_one_message_and_status_2(
    tmp_path: Path, capsys: Capture, filler: bytes
) -> None:
    bomb = tmp_path / "bomb.zip"
    info = write_zip(bomb, filler * (16 * MIB // len(filler)))
    assert bomb.stat().st_size < 64 << 10
    status, out, err = cli(capsys, "summary", str(bomb))
    assert (status, out) == (2, "")
    assert err == (
        f"transcript-otel summary: {bomb}!{APP}: declares {info.file_size} bytes uncompressed from "
        f"{info.compress_size} compressed, more than 200 times as many (a zip bomb?); not read. "
        "If you trust it, unzip it and read that file\n"
    )


@pytest.mark.filterwarnings("always")
def test_a_bundle_with_blank_lines_within_the_bound_is_read(tmp_path: Path, capsys: Capture) -> None:
    bundle = tmp_path / "blank.zip"
    blanks = MIB  # a MiB of newlines deflates 1000 times: within the first MiB a member may have
    write_zip(bundle, line_of(start("r-1")) + b"\n" * blanks + b"not json\n" + line_of(entry(1, "kept")))
    status, out, _ = cli(capsys, "validate", str(bundle))
    assert status == 1
    assert f"{bundle}!{APP}:{blanks + 2}: skipped invalid JSON" in out
    status, out, _ = cli(capsys, "show", str(bundle))
    assert status == 0
    assert "🤖 ASSISTANT\nkept\n" in out


# --- the line reader, against a model -------------------------------------------------------

_PIECES = st.sampled_from([b"\n", b" ", b"\r", b"\t\n", b"\n\n\n", b"a", b"{}", b"xyz"])


@given(
    data=st.lists(_PIECES, max_size=60).map(b"".join),
    max_bytes=st.integers(1, 12),
    reads=st.lists(st.integers(1, 9), min_size=1, max_size=8),
)
def test_lines_do_not_depend_on_how_the_input_is_cut(data: bytes, max_bytes: int, reads: list[int]) -> None:
    """Each non-blank line once, numbered, without its leading blanks, with its newline; a
    line longer than `max_bytes` is one warning: whatever the reads the bytes come in."""
    expected: list[tuple[int, bytes]] = []
    too_long: list[str] = []
    pieces = data.split(b"\n")
    for index, piece in enumerate(pieces, start=1):
        text = piece.lstrip()
        if not text:
            continue
        if len(text) > max_bytes:
            too_long.append(
                f"w:{index}: skipped a line longer than the {max_bytes:,} bytes a record may take"
            )
            continue
        expected.append((index, text + (b"\n" if index < len(pieces) else b"")))

    reader = LineReader("w", max_bytes=max_bytes)
    found: list[tuple[int, bytes]] = []
    position = 0
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for size in reads * len(data):
            if position >= len(data):
                break
            found.extend(reader.feed(data[position : position + size]))
            position += size
        found.extend(reader.finish())
    assert found == expected
    assert [str(w.message).split(" (")[0] for w in caught] == too_long
    assert reader.number == data.count(b"\n")
