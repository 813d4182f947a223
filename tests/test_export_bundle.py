"""Debug bundles: a captured run as the zip that weakincentives' `wink query` and `wink debug` open."""

from __future__ import annotations

import hashlib
import json
import os
import re
import selectors
import subprocess
import time
import tracemalloc
import urllib.request
import zipfile
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

from transcript_otel import read_records
from transcript_otel.exports.bundle import sources as bundle_sources
from transcript_otel.exports.bundle.writer import BundleInfo, write_bundle
from transcript_otel.reading import bundle
from transcript_otel.reading.bundle import iter_bundle_records
from transcript_otel.reading.lines import TranscriptReadWarning
from transcript_otel.version import __version__

from helpers import FIXTURE_RUNS
from wink_harness import wink_python

ROOT = "debug_bundle"
APP = f"{ROOT}/logs/app.jsonl"
TRANSCRIPT = f"{ROOT}/transcript.jsonl"
MANIFEST = f"{ROOT}/manifest.json"
README = f"{ROOT}/README.txt"
INDEX = f"{ROOT}/transcript/index.json"
SAFE_MEMBER = re.compile(
    r"debug_bundle/(manifest\.json|README\.txt|logs/app\.jsonl|transcript\.jsonl"
    r"|transcript/index\.json|transcript/[A-Za-z0-9_-]+\.jsonl)"
)
FAILED_RUNS = {"wink-0.27-codex-failed", "wink-0.24-openai-error"}
WINK_QUERY_TIMEOUT_S = 120


def fixture_id(path: Path) -> str:
    return path.stem


def fixture(stem: str) -> Path:
    (path,) = [run for run in FIXTURE_RUNS if run.stem == stem]
    return path


def entries_of(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    return [r for r in records if r["event"] == "transcript.entry"]


def line_of(record: dict[str, Any]) -> bytes:
    """The weakincentives log-collector line format (what the fixtures' key order already is)."""
    return json.dumps(record, ensure_ascii=False).encode("utf-8") + b"\n"


def stem_of(source: str) -> str:
    """The per-source file of a fixture source (their ids are file-name safe already)."""
    return source.replace("subagent:", "subagent-")


def record(
    event: str, context: dict[str, Any], timestamp: str = "2026-11-23T10:00:00+00:00"
) -> dict[str, Any]:
    return {
        "timestamp": timestamp,
        "level": "DEBUG",
        "logger": "transcript_otel",
        "event": event,
        "message": event,
        "context": context,
    }


def entry(source: str, sequence: int, entry_type: str = "assistant_message", **detail: Any) -> dict[str, Any]:
    moment = f"2026-11-23T10:00:{sequence:02d}+00:00"
    context = {
        "prompt_name": "demo:hello",
        "adapter": "cli",
        "entry_type": entry_type,
        "sequence_number": sequence,
        "source": source,
        "timestamp": moment,
        "detail": detail or {"text": f"{source} {sequence}"},
    }
    return record("transcript.entry", context, moment)


def small_run(*entries: dict[str, Any], stop: bool = True) -> list[dict[str, Any]]:
    base = {"prompt_name": "demo:hello", "adapter": "cli", "run_id": "run-1", "session_id": "sess-1"}
    body = list(entries) or [entry("main", 1)]
    end = [record("transcript.stop", base, "2026-11-23T10:01:00+00:00")] if stop else []
    return [record("transcript.start", base, "2026-11-23T09:59:59+00:00"), *body, *end]


def read_member(path: Path, name: str) -> bytes:
    with zipfile.ZipFile(path) as archive:
        return archive.read(name)


def manifest_of(path: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(read_member(path, MANIFEST))
    return loaded


# --- every captured run ----------------------------------------------------------------


@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=fixture_id)
def test_bundle_of_each_captured_run(run: Path, tmp_path: Path) -> None:
    records = list(read_records(run))
    entries = entries_of(records)
    sources = list(dict.fromkeys(e["context"]["source"] for e in entries))
    target = tmp_path / "run.zip"

    info = write_bundle(iter(records), target)

    per_source = [f"{ROOT}/transcript/{stem_of(s)}.jsonl" for s in sources]
    members = sorted([MANIFEST, README, APP, TRANSCRIPT, INDEX, *per_source])
    assert info == BundleInfo(
        path=target,
        bundle_id=info.bundle_id,
        entries=len(entries),
        skipped=0,
        members=tuple(members),
        status="failed" if run.stem in FAILED_RUNS else "success",
    )
    with zipfile.ZipFile(target) as archive:
        assert sorted(archive.namelist()) == members
        assert archive.testzip() is None
        contents = {name: archive.read(name) for name in members}

    # logs/app.jsonl: every record, in order, in weakincentives' line format.
    assert contents[APP] == b"".join(map(line_of, records))
    # transcript.jsonl: the entry lines, byte for byte; transcript/: the same per source.
    assert contents[TRANSCRIPT] == b"".join(map(line_of, entries))
    for source, member in zip(sources, per_source, strict=True):
        assert contents[member] == b"".join(line_of(e) for e in entries if e["context"]["source"] == source)

    first, stop = records[0], records[-1]
    assert stop["event"] == "transcript.stop"
    context = stop["context"]
    manifest = json.loads(contents[MANIFEST])
    others = sorted(name.removeprefix(f"{ROOT}/") for name in members if name != MANIFEST)
    assert manifest == {
        "format_version": "1.0.0",
        "bundle_id": info.bundle_id,
        "created_at": manifest["created_at"],
        "request": {
            "request_id": context["run_id"],
            "session_id": context.get("session_id"),
            "status": info.status,
            "started_at": first["timestamp"],
            "ended_at": stop["timestamp"],
        },
        "capture": {"mode": "full", "trigger": "export", "limits_applied": {"filesystem_truncated": False}},
        "prompt": {"ns": "", "key": context["prompt_name"], "adapter": context["adapter"]},
        "files": others,
        "integrity": {
            "algorithm": "sha256",
            "checksums": {name: hashlib.sha256(contents[f"{ROOT}/{name}"]).hexdigest() for name in others},
        },
        "build": {"version": __version__, "commit": ""},
    }
    assert manifest["created_at"].endswith("+00:00")

    index = json.loads(contents[INDEX])
    assert index["run"]["run_id"] == context["run_id"]
    assert index["run"]["entries"] == index["run"]["stop_total_entries"] == len(entries)
    assert [(s["source"], s["file"], s["entries"], s["contiguous"]) for s in index["sources"]] == [
        (s, member.removeprefix(f"{ROOT}/"), context["entries_by_source"][s], True)
        for s, member in zip(sources, per_source, strict=True)
    ]
    assert all(s["stop_entries"] == s["entries"] == s["last_sequence"] for s in index["sources"])

    readme = contents[README].decode()
    assert f"transcript-otel {__version__}" in readme
    assert info.bundle_id in readme
    assert all(command in readme for command in ("wink query", "wink debug", "transcript-otel show"))

    # Read back: the records, with where each one is.
    located = list(iter_bundle_records(target))
    assert [r for _, r in located] == records
    assert [where for where, _ in located] == [f"{target}!{APP}:{n}" for n in range(1, len(records) + 1)]


def test_status_incomplete_without_stop_and_failed_first(tmp_path: Path) -> None:
    rich = [r for r in read_records(fixture("wink-0.27-codex-rich")) if r["event"] != "transcript.stop"]
    failed = [r for r in read_records(fixture("wink-0.27-codex-failed")) if r["event"] != "transcript.stop"]

    info = write_bundle(rich, tmp_path / "rich.zip")
    request = manifest_of(info.path)["request"]
    assert (info.status, request["status"], request["ended_at"]) == ("incomplete", "incomplete", "")
    # A run with an error entry failed, stopped or not.
    assert write_bundle(failed, tmp_path / "failed.zip").status == "failed"


def test_prompt_name_split_into_namespace_and_key(tmp_path: Path) -> None:
    info = write_bundle(small_run(), tmp_path / "run.zip")
    manifest = manifest_of(info.path)
    assert manifest["prompt"] == {"ns": "demo", "key": "hello", "adapter": "cli"}
    assert manifest["request"]["request_id"] == "run-1"
    assert manifest["request"]["session_id"] == "sess-1"


def test_directory_target_gets_a_weakincentives_name(tmp_path: Path) -> None:
    first = write_bundle(small_run(), tmp_path)
    second = write_bundle(small_run(), tmp_path)

    for info in (first, second):
        assert info.path == tmp_path / f"{info.bundle_id}_20261123_095959.zip"  # the run's start, UTC
        assert manifest_of(info.path)["bundle_id"] == info.bundle_id
        assert (info.path.stat().st_mode & 0o777) == 0o600  # private, as the JSONL mirror
    assert first.bundle_id != second.bundle_id
    assert sorted(tmp_path.iterdir()) == sorted([first.path, second.path])


def test_an_existing_file_target_is_replaced(tmp_path: Path) -> None:
    target = tmp_path / "run.zip"
    target.write_bytes(b"old")
    info = write_bundle(small_run(), target)
    assert info.path == target
    assert manifest_of(target)["bundle_id"] == info.bundle_id


def test_a_missing_directory_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="no such directory"):
        write_bundle(small_run(), tmp_path / "nowhere" / "run.zip")
    assert list(tmp_path.iterdir()) == []


# --- safety ------------------------------------------------------------------------------


def test_no_source_or_prompt_name_escapes_the_bundle(tmp_path: Path) -> None:
    hostile = [
        "subagent:../../etc/passwd",
        "../../etc/shadow",
        "/absolute/path",
        "subagent:A",
        "subagent:a",  # the same file as A on a case-insensitive file system
        "subagent:",
        "subagent:index",
        "subagent:..\\..\\windows",
        "subagent:\x00nul",
        "main",
    ]
    entries = [entry(source, 1) for source in hostile]
    entries.append(record("transcript.entry", {"entry_type": "unknown", "sequence_number": 1}))  # no source
    run = small_run(*entries)
    for r in run:
        r["context"]["prompt_name"] = "../../../tmp/evil:../key"

    info = write_bundle(run, tmp_path / "run.zip")

    assert all(SAFE_MEMBER.fullmatch(name) for name in info.members), info.members
    lowered = [name.lower() for name in info.members]
    assert len(set(lowered)) == len(lowered)
    index = json.loads(read_member(info.path, INDEX))
    files = {s["source"]: s["file"] for s in index["sources"]}
    assert files == {
        "subagent:../../etc/passwd": "transcript/subagent-etc-passwd.jsonl",
        "../../etc/shadow": "transcript/source-etc-shadow.jsonl",
        "/absolute/path": "transcript/source-absolute-path.jsonl",
        "subagent:A": "transcript/subagent-A.jsonl",
        "subagent:a": "transcript/subagent-a-2.jsonl",
        "subagent:": "transcript/subagent.jsonl",
        "subagent:index": "transcript/subagent-index.jsonl",
        "subagent:..\\..\\windows": "transcript/subagent-windows.jsonl",
        "subagent:\x00nul": "transcript/subagent-nul.jsonl",
        "main": "transcript/main.jsonl",
        None: "transcript/no-source.jsonl",
    }
    # Each file holds exactly its source's entry; the prompt name only appears as data.
    for source, name in files.items():
        (line,) = read_member(info.path, f"{ROOT}/{name}").splitlines()
        assert json.loads(line)["context"].get("source") == source
    assert manifest_of(info.path)["prompt"] == {"ns": "../../../tmp/evil", "key": "../key", "adapter": "cli"}
    outside = tmp_path / "out"
    with zipfile.ZipFile(info.path) as archive:
        archive.extractall(outside / "inside")
    extracted = {p.relative_to(outside / "inside").as_posix() for p in outside.rglob("*") if p.is_file()}
    assert extracted == set(info.members)


def test_sources_beyond_the_limit_share_one_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle_sources, "MAX_SOURCE_FILES", 2)
    sources = ["main", "subagent:a", "subagent:b", "subagent:c", "subagent:b"]
    info = write_bundle(small_run(*(entry(s, 1) for s in sources)), tmp_path / "run.zip")

    index = json.loads(read_member(info.path, INDEX))
    assert [(s["source"], s["file"], s["entries"], s.get("several_sources")) for s in index["sources"]] == [
        ("main", "transcript/main.jsonl", 1, None),
        ("subagent:a", "transcript/subagent-a.jsonl", 1, None),
        (None, "transcript/other-sources.jsonl", 3, True),
    ]
    lines = read_member(info.path, f"{ROOT}/transcript/other-sources.jsonl").splitlines()
    assert [json.loads(line)["context"]["source"] for line in lines] == [
        "subagent:b",
        "subagent:c",
        "subagent:b",
    ]


def exploding(records: list[dict[str, Any]], after: int) -> Iterator[dict[str, Any]]:
    yield from records[:after]
    raise RuntimeError("the run's file went away")


def test_a_failure_midway_leaves_nothing(tmp_path: Path) -> None:
    records = list(read_records(fixture("claude-sdk-parallel-subagents")))
    target = tmp_path / "run.zip"
    with pytest.raises(RuntimeError, match="went away"):
        write_bundle(exploding(records, 10), target)
    assert list(tmp_path.iterdir()) == []

    # Into a directory, and over an existing bundle: the old one stays as it was.
    with pytest.raises(RuntimeError, match="went away"):
        write_bundle(exploding(records, 10), tmp_path)
    assert list(tmp_path.iterdir()) == []
    target.write_bytes(b"previous bundle")
    with pytest.raises(RuntimeError, match="went away"):
        write_bundle(exploding(records, 10), target)
    assert list(tmp_path.iterdir()) == [target]
    assert target.read_bytes() == b"previous bundle"


def test_a_failure_at_the_rename_leaves_nothing(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(source: object, destination: object) -> None:
        raise PermissionError(f"cannot replace {destination}")

    monkeypatch.setattr(os, "replace", refuse)
    with pytest.raises(PermissionError, match="cannot replace"):
        write_bundle(small_run(), tmp_path / "run.zip")
    assert list(tmp_path.iterdir()) == []


def test_an_empty_run_is_an_error(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="has no records"):
        write_bundle([], tmp_path / "run.zip")
    with pytest.raises(ValueError, match=r"has no records \(3 skipped"):
        write_bundle([1, "text", {"context": {}}], tmp_path / "run.zip")  # type: ignore[list-item]
    assert list(tmp_path.iterdir()) == []


def test_records_that_are_not_objects_with_an_event_are_skipped_and_counted(tmp_path: Path) -> None:
    good = small_run(entry("main", 1), entry("main", 2))
    partial = {"event": "custom.note", "extra": [1], "context": {"note": "no timestamp"}}
    bad: list[Any] = [None, ["a", "list"], "a string", {"level": "INFO"}, {"event": ""}, {"event": 7}]
    unencodable = {"event": "custom.object", "context": {"value": object()}}
    records: list[Any] = [good[0], *bad, good[1], partial, unencodable, *good[2:]]

    info = write_bundle(records, tmp_path / "run.zip")

    assert (info.skipped, info.entries) == (len(bad) + 1, 2)
    lines = read_member(info.path, APP).splitlines()
    assert [json.loads(line) for line in lines] == [
        good[0],
        good[1],
        # The weakincentives line keys, in their order, with their defaults; extra keys after.
        {"timestamp": "", "level": "", "logger": "", "event": "custom.note", "message": ""}
        | {"context": {"note": "no timestamp"}, "extra": [1]},
        *good[2:],
    ]
    assert list(json.loads(lines[2])) == [
        "timestamp",
        "level",
        "logger",
        "event",
        "message",
        "context",
        "extra",
    ]
    assert json.loads(read_member(info.path, INDEX))["run"]["skipped_records"] == info.skipped


def test_lines_survive_any_line_splitter(tmp_path: Path) -> None:
    separators = entry("main", 1, text="line\u2028separator\u2029paragraph\x85next-line")
    surrogate = entry("main", 2, text="lone \ud800 surrogate")
    run = small_run(separators, surrogate)

    info = write_bundle(run, tmp_path / "run.zip")

    for member in (APP, TRANSCRIPT, f"{ROOT}/transcript/main.jsonl"):
        text = read_member(info.path, member).decode("utf-8")  # valid UTF-8
        # weakincentives reads transcript.jsonl with str.splitlines(): one line per record.
        assert [json.loads(line) for line in text.splitlines()] == [
            r for r in run if member == APP or r["event"] == "transcript.entry"
        ]
    assert [r for _, r in iter_bundle_records(info.path)] == run


# --- reading bundles back ----------------------------------------------------------------


def hand_made(path: Path, members: dict[str, bytes]) -> Path:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return path


def test_reading_something_that_is_not_a_bundle(tmp_path: Path) -> None:
    not_zip = tmp_path / "run.zip"
    not_zip.write_bytes(fixture("wink-0.27-codex-rich").read_bytes())
    with pytest.raises(ValueError, match=rf"{re.escape(str(not_zip))}: not a debug bundle: not a zip file"):
        iter_bundle_records(not_zip)  # at once, before any iteration

    no_manifest = hand_made(tmp_path / "nomanifest.zip", {APP: b"{}\n"})
    with pytest.raises(
        ValueError, match=r"nomanifest\.zip: not a debug bundle: no debug_bundle/manifest\.json"
    ):
        iter_bundle_records(no_manifest)

    bad_manifest = hand_made(tmp_path / "badmanifest.zip", {MANIFEST: b"[]", APP: b"{}\n"})
    with pytest.raises(ValueError, match=r"badmanifest\.zip!debug_bundle/manifest\.json: not a JSON object"):
        iter_bundle_records(bad_manifest)

    no_logs = hand_made(tmp_path / "nologs.zip", {MANIFEST: b"{}"})
    with pytest.raises(ValueError, match=r"nologs\.zip: debug bundle without debug_bundle/logs/app\.jsonl"):
        iter_bundle_records(no_logs)


def test_reading_skips_lines_that_are_not_objects(tmp_path: Path) -> None:
    one, two = small_run()[0], small_run()[1]
    lines = [line_of(one), b"not json\n", b"[1, 2]\n", b"\n", line_of(two), b'{"partial": ']
    path = hand_made(tmp_path / "b.zip", {MANIFEST: b"{}", APP: b"".join(lines)})

    with pytest.warns(TranscriptReadWarning) as caught:
        located = list(iter_bundle_records(path))

    assert located == [(f"{path}!{APP}:1", one), (f"{path}!{APP}:5", two)]
    messages = [str(w.message) for w in caught]
    assert messages[0].startswith(f"{path}!{APP}:2: skipped invalid JSON")
    assert messages[1:] == [
        f"{path}!{APP}:3: skipped a line that is not a JSON object",
        f"{path}!{APP}:6: skipped partial last line",
    ]


def test_reading_falls_back_to_transcript_jsonl(tmp_path: Path) -> None:
    entries = entries_of(small_run(entry("main", 1), entry("subagent:x", 1)))
    path = hand_made(tmp_path / "b.zip", {MANIFEST: b"{}", TRANSCRIPT: b"".join(map(line_of, entries))})
    assert list(iter_bundle_records(path)) == [
        (f"{path}!{TRANSCRIPT}:1", entries[0]),
        (f"{path}!{TRANSCRIPT}:2", entries[1]),
    ]


def test_reading_refuses_a_member_declaring_too_much(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # 2 MiB of newlines deflate to a few KiB; with the limit at 1 MiB this is the 4 GiB case.
    monkeypatch.setattr(bundle, "MAX_MEMBER_BYTES", 1 << 20)
    path = hand_made(tmp_path / "bomb.zip", {MANIFEST: b"{}", APP: b"\n" * (2 << 20)})
    assert path.stat().st_size < 64 << 10
    with pytest.raises(ValueError, match=r"bomb\.zip!debug_bundle/logs/app\.jsonl: declares 2097152 bytes"):
        iter_bundle_records(path)


def test_reading_skips_a_line_too_long_to_hold(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(bundle, "MAX_LINE_BYTES", 1024)
    one = small_run()[0]
    path = hand_made(
        tmp_path / "b.zip", {MANIFEST: b"{}", APP: b'{"x": "' + b"y" * 5000 + b'"}\n' + line_of(one)}
    )
    with pytest.warns(
        TranscriptReadWarning, match=r"b\.zip!debug_bundle/logs/app\.jsonl:1: skipped a line longer"
    ):
        assert list(iter_bundle_records(path)) == [(f"{path}!{APP}:2", one)]


# --- a large run ---------------------------------------------------------------------------


def generated_run(entries: int) -> Iterator[dict[str, Any]]:
    """A run of `entries` entries (a tool call, its result, an answer; one in ten by a
    subagent), made as it is consumed: ~420 bytes a line."""
    base = {"prompt_name": "large", "adapter": "cli", "session_id": "s-large"}
    yield record("transcript.start", {**base, "run_id": "r-large"}, "2026-11-23T09:00:00+00:00")
    counters = {"main": 0, "subagent:helper": 0}
    kinds = ("tool_use", "tool_result", "assistant_message")
    for index in range(entries):
        source = "subagent:helper" if index % 10 == 0 else "main"
        counters[source] += 1
        moment = f"2026-11-23T09:{index // 60_000:02d}:{index // 1000 % 60:02d}.{index % 1000:03d}000+00:00"
        context = {
            **base,
            "entry_type": kinds[index % 3],
            "sequence_number": counters[source],
            "source": source,
            "timestamp": moment,
            "detail": {
                "tool_use_id": f"call_{index // 3}",
                "tool_name": "shell",
                "text": f"step {index} " * 12,
            },
        }
        yield record("transcript.entry", context, moment)
    yield record(
        "transcript.stop",
        {**base, "run_id": "r-large", "total_entries": entries},
        "2026-11-23T10:00:00+00:00",
    )


def test_a_100000_entry_run_streams_in_bounded_memory(tmp_path: Path) -> None:
    tracemalloc.start()
    try:
        info = write_bundle(generated_run(100_000), tmp_path / "large.zip")
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    with zipfile.ZipFile(info.path) as archive:
        sizes = {i.filename: i.file_size for i in archive.infolist()}
        assert archive.testzip() is None
    run_size = sizes[APP]
    assert (info.entries, info.skipped, info.status) == (100_000, 0, "success")
    assert run_size > 40 << 20
    assert peak < 8 << 20, f"peak {peak} bytes for a {run_size}-byte run"
    assert list(tmp_path.iterdir()) == [info.path]  # no spool left
    assert (
        sizes[f"{ROOT}/transcript/main.jsonl"] + sizes[f"{ROOT}/transcript/subagent-helper.jsonl"]
        == (sizes[TRANSCRIPT])
    )
    index = json.loads(read_member(info.path, INDEX))
    assert [(s["source"], s["entries"], s["last_sequence"], s["contiguous"]) for s in index["sources"]] == [
        ("subagent:helper", 10_000, 10_000, True),
        ("main", 90_000, 90_000, True),
    ]


# --- the real wink of weakincentives 0.27 ------------------------------------------------------

TRANSCRIPT_SQL = (
    "SELECT transcript_source, sequence_number, entry_type, tool_name, tool_use_id "
    "FROM transcript ORDER BY rowid"
)
TOOLS_SQL = (
    "SELECT transcript_source, tool_name, tool_use_id, call_seq, result_seq "
    "FROM transcript_tools ORDER BY transcript_source, call_seq"
)
TOOL_IDS = {
    "wink-0.27-codex-rich": [
        "call_demo_echo",
        "call_tour_1",
        "call_tour_2",
        "call_tour_3",
        "call_tour_5",
        "ws_7e8aa20d4a6f4c81989f3ea0599fc97800",
    ],
    "wink-0.25-codex-rich": ["call_echo_1", "item_cmd_1", "item_file_1", "item_mcp_1", "item_web_1"],
    "claude-sdk-parallel-subagents": [
        "toolu_agent_a",
        "toolu_agent_b",
        "toolu_sub_count_1",
        "toolu_sub_read_1",
    ],
}


@pytest.fixture(scope="module")
def wink() -> Path:
    """The `wink` command of weakincentives 0.27 (built with its `wink` extra)."""
    return wink_python("0.27.0").parent / "wink"


def run_wink(wink: Path, *arguments: str | Path) -> list[dict[str, Any]]:
    done = subprocess.run(
        [str(wink), "query", *map(str, arguments)],
        capture_output=True,
        text=True,
        timeout=WINK_QUERY_TIMEOUT_S,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)  # the default output is JSON
    return rows


@pytest.fixture(scope="module")
def wink_rows(wink: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[dict[str, Any]]]:
    """`wink query` of every captured run's bundle, all started at once (each takes ~1 s)."""
    directory = tmp_path_factory.mktemp("wink-bundles")
    running = {}
    for run in FIXTURE_RUNS:
        path = write_bundle(read_records(run), directory / f"{run.stem}.zip").path
        command = [str(wink), "query", str(path), TRANSCRIPT_SQL]
        running[run.stem] = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
        )
    rows = {}
    try:
        for stem, process in running.items():
            stdout, stderr = process.communicate(timeout=WINK_QUERY_TIMEOUT_S)
            assert process.returncode == 0, stderr
            rows[stem] = json.loads(stdout)
    finally:
        for process in running.values():
            if process.poll() is None:
                process.kill()
                process.wait()
    return rows


@pytest.mark.wink
@pytest.mark.parametrize("run", FIXTURE_RUNS, ids=fixture_id)
def test_wink_query_reads_the_transcript(run: Path, wink_rows: dict[str, list[dict[str, Any]]]) -> None:
    entries = [e["context"] for e in entries_of(list(read_records(run)))]
    rows = wink_rows[run.stem]
    assert [(r["transcript_source"], r["sequence_number"], r["entry_type"]) for r in rows] == [
        (e["source"], e["sequence_number"], e["entry_type"]) for e in entries
    ]
    if run.stem in TOOL_IDS:
        # Each call and its result carry the call's id.
        calls = [r["tool_use_id"] for r in rows if r["entry_type"] == "tool_use"]
        results = [r["tool_use_id"] for r in rows if r["entry_type"] == "tool_result"]
        assert sorted(calls) == sorted(results) == sorted(TOOL_IDS[run.stem])


@pytest.mark.wink
def test_wink_query_pairs_tool_calls_with_results(wink: Path, tmp_path: Path) -> None:
    codex_zip = write_bundle(read_records(fixture("wink-0.27-codex-rich")), tmp_path / "codex.zip").path
    claude_zip = write_bundle(
        read_records(fixture("claude-sdk-parallel-subagents")), tmp_path / "claude.zip"
    ).path

    assert run_wink(wink, codex_zip, TOOLS_SQL) == [
        {
            "transcript_source": "main",
            "tool_name": name,
            "tool_use_id": call,
            "call_seq": at,
            "result_seq": res,
        }
        for name, call, at, res in [
            ("echo", "call_demo_echo", 4, 5),
            ("/bin/bash -lc 'seq 2 > data.txt && wc -l data.txt'", "call_tour_1", 8, 9),
            ("/bin/bash -lc 'cat missing.txt'", "call_tour_2", 11, 12),
            ("fileChange", "call_tour_3", 14, 15),
            ("mcpToolCall", "call_tour_5", 19, 20),
            ("webSearch", "ws_7e8aa20d4a6f4c81989f3ea0599fc97800", 22, 23),
        ]
    ]
    assert run_wink(wink, claude_zip, TOOLS_SQL) == [
        {
            "transcript_source": source,
            "tool_name": name,
            "tool_use_id": call,
            "call_seq": at,
            "result_seq": res,
        }
        for source, name, call, at, res in [
            ("main", "Agent", "toolu_agent_a", 3, 6),
            ("main", "Agent", "toolu_agent_b", 7, 10),
            ("subagent:toolu_agent_a", "Bash", "toolu_sub_count_1", 1, 2),
            ("subagent:toolu_agent_b", "Bash", "toolu_sub_read_1", 1, 2),
        ]
    ]


@pytest.mark.wink
def test_wink_query_manifest_and_table_output(wink: Path, tmp_path: Path) -> None:
    info = write_bundle(
        read_records(fixture("wink-0.27-codex-failed")), tmp_path
    )  # a directory: wink opens its newest bundle

    (manifest,) = run_wink(wink, tmp_path, "SELECT * FROM manifest")
    assert manifest == manifest | {
        "bundle_id": info.bundle_id,
        "format_version": "1.0.0",
        "status": "failed",
        "request_id": "f9debed7784b4264aab33320b452cf68",
        "session_id": "dc150438-df62-491f-a88b-fe7dabd636c3",
        "prompt_ns": "",
        "prompt_key": "codex-fatal_500",
        "prompt_adapter": "codex_app_server",
    }
    table = subprocess.run(
        [str(wink), "query", str(info.path), TRANSCRIPT_SQL, "--table"],
        capture_output=True,
        text=True,
        timeout=WINK_QUERY_TIMEOUT_S,
        check=True,
    ).stdout.splitlines()
    assert [cell.strip() for cell in table[0].split("|")] == [
        "transcript_source",
        "sequence_number",
        "entry_type",
        "tool_name",
        "tool_use_id",
    ]
    assert [[cell.strip() for cell in line.split("|")][:3] for line in table[2:]] == [
        ["main", "1", "user_message"],
        ["main", "2", "system_event"],
        ["main", "3", "system_event"],
        ["main", "4", "system_event"],
        ["main", "5", "error"],
    ]
    assert (tmp_path / f"{info.path.name}.sqlite").is_file()  # wink's cache, next to the zip


@pytest.mark.wink
def test_wink_query_keeps_entries_with_unicode_line_separators(wink: Path, tmp_path: Path) -> None:
    run = small_run(entry("main", 1, text="a\u2028b"), entry("main", 2, text="c\u2029d\x85e"))
    info = write_bundle(run, tmp_path / "run.zip")
    rows = run_wink(wink, info.path, "SELECT sequence_number, content FROM transcript ORDER BY rowid")
    assert rows == [
        {"sequence_number": 1, "content": "a\u2028b"},
        {"sequence_number": 2, "content": "c\u2029d\x85e"},
    ]


@pytest.mark.wink
def test_wink_debug_serves_the_bundle(wink: Path, tmp_path: Path) -> None:
    info = write_bundle(read_records(fixture("claude-sdk-parallel-subagents")), tmp_path / "run.zip")
    server = subprocess.Popen(
        [str(wink), "debug", str(info.path), "--host", "127.0.0.1", "--port", "0", "--no-open-browser"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        url = wait_for_server_url(server, deadline=time.monotonic() + WINK_QUERY_TIMEOUT_S)
        with urllib.request.urlopen(f"{url}/api/meta", timeout=30) as response:
            meta = json.load(response)
        with urllib.request.urlopen(f"{url}/api/transcript/facets", timeout=30) as response:
            facets = json.load(response)
    finally:
        server.kill()
        server.wait()
        assert server.stderr is not None
        server.stderr.close()
    assert meta == meta | {
        "bundle_id": info.bundle_id,
        "has_transcript": True,
        "request_id": "1e68ddb645514680a6040d8f5759053c",
        "session_id": "5c7f76f9-22e1-40cb-8535-c7c6f8b0aea7",
        "status": "success",
        "validation_error": None,
    }
    assert {s["name"]: s["count"] for s in facets["sources"]} == {
        "main": 26,
        "subagent:toolu_agent_a": 3,
        "subagent:toolu_agent_b": 3,
    }


def wait_for_server_url(server: subprocess.Popen[bytes], deadline: float) -> str:
    """The address uvicorn logs once it listens (port 0: the one it was given).

    Reads the pipe's bytes as they come (`os.read`), never through the file object's
    buffer: a `readline()` there can take several lines at once, and `select()` then waits
    for more while the address is already read (seen on a loaded machine)."""
    assert server.stderr is not None
    pattern = re.compile(rb"Uvicorn running on (http://127\.0\.0\.1:\d+)")
    seen = b""
    with selectors.DefaultSelector() as selector:
        selector.register(server.stderr, selectors.EVENT_READ)
        while time.monotonic() < deadline:
            if not selector.select(timeout=deadline - time.monotonic()):
                break
            chunk = os.read(server.stderr.fileno(), 1 << 16)
            if not chunk:
                break
            seen += chunk
            found = pattern.search(seen)
            if found:
                return found.group(1).decode()
    raise AssertionError(f"wink debug did not start:\n{seen.decode(errors='replace')}")


@pytest.mark.wink
def test_reading_a_bundle_weakincentives_wrote(tmp_path: Path) -> None:
    script = """
import logging, sys
from pathlib import Path
from weakincentives.debug import BundleWriter
from weakincentives.runtime.transcript import TranscriptEmitter
logging.getLogger().setLevel(logging.DEBUG)
with BundleWriter(target=Path(sys.argv[1])) as writer, writer.capture_logs():
    emitter = TranscriptEmitter(prompt_name="demo:hello", adapter="codex_app_server", session_id="s1")
    emitter.start()
    emitter.emit("user_message", detail={"text": "Say hi"})
    emitter.emit("assistant_message", detail={"text": "hi"})
    emitter.stop()
print(writer.path)
"""
    python = wink_python("0.27.0")
    done = subprocess.run(
        [str(python), "-c", script, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=WINK_QUERY_TIMEOUT_S,
        check=True,
    )
    path = Path(done.stdout.strip().splitlines()[-1])
    records = [r for _, r in iter_bundle_records(path)]
    wink_entries = [r["context"] for r in records if r["event"] == "transcript.entry"]
    assert [(e["entry_type"], e["detail"]) for e in wink_entries] == [
        ("user_message", {"text": "Say hi"}),
        ("assistant_message", {"text": "hi"}),
    ]
    # …and our bundle of those very records is what wink's own would be, line for line.
    ours = write_bundle(records, tmp_path / "ours.zip")
    assert read_member(ours.path, APP) == read_member(path, APP)
    assert read_member(ours.path, TRANSCRIPT) == read_member(path, TRANSCRIPT)
