"""The JSONL mirror's reused write buffer: what reaches the file is exactly the lines, in order."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from transcript_otel import TranscriptEmitter, TranscriptPipeline
from transcript_otel.sinks.jsonl import JsonlMirror
from transcript_otel.sinks.jsonl_buffer import BUFFER_BYTES, BufferedFile


@pytest.fixture
def pipeline(make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path) -> TranscriptPipeline:
    """The mirror alone, with a backlog bound no entry here reaches (none is dropped)."""
    return make_pipeline([JsonlMirror(runs_dir)], max_backlog_bytes=1 << 40)


def _texts_in_the_mirror(emitter: TranscriptEmitter) -> list[str]:
    assert emitter.jsonl_path is not None
    lines = Path(emitter.jsonl_path).read_text("utf-8").splitlines()
    records = [json.loads(line) for line in lines]  # every line whole: no stale or torn bytes
    return [r["context"]["detail"]["text"] for r in records if r["event"] == "transcript.entry"]


def test_long_then_short_lines_across_many_writes_come_out_exactly(
    pipeline: TranscriptPipeline,
) -> None:
    # A line past the buffer's size, then shorter ones over the stale bytes it left, past
    # the size again in small lines, flushed at different points.
    texts = ["x" * (3 * BUFFER_BYTES), "short", "é" * 70_000, *(f"line {n}" for n in range(3000)), "end"]
    emitter = TranscriptEmitter(prompt_name="buffer", adapter="cli", pipeline=pipeline)
    with emitter:
        for index, text in enumerate(texts):
            emitter.emit("assistant_message", detail={"text": text})
            if index in (0, 2, 1000):
                assert pipeline.flush(10.0)
    assert _texts_in_the_mirror(emitter) == texts


def test_a_run_after_a_huge_line_still_writes_every_line(pipeline: TranscriptPipeline) -> None:
    first = TranscriptEmitter(prompt_name="huge", adapter="cli", pipeline=pipeline)
    with first:
        first.emit("assistant_message", detail={"text": "y" * (5 * BUFFER_BYTES)})
    second = TranscriptEmitter(prompt_name="after", adapter="cli", pipeline=pipeline)
    with second:
        for n in range(10):
            second.emit("assistant_message", detail={"text": f"after {n}"})
    assert _texts_in_the_mirror(first) == ["y" * (5 * BUFFER_BYTES)]
    assert _texts_in_the_mirror(second) == [f"after {n}" for n in range(10)]


def test_a_failed_write_leaves_the_buffer_usable(tmp_path: Path) -> None:
    # The failure's traceback outlives the write: it must not keep the buffer exported
    # (an exported bytearray cannot grow).
    fd = os.open(tmp_path / "closed.jsonl", os.O_WRONLY | os.O_CREAT, 0o600)
    handle = BufferedFile(fd)
    handle.add(b"lost\n")
    os.close(fd)
    with pytest.raises(OSError, match="Bad file descriptor") as failure:
        handle.write_pending()
    handle.fd = os.open(tmp_path / "reopened.jsonl", os.O_WRONLY | os.O_CREAT, 0o600)
    handle.add(b"x" * (2 * BUFFER_BYTES) + b"\n")
    handle.add(b"kept\n")
    handle.write_pending()
    os.close(handle.fd)
    assert failure.value is not None
    assert (tmp_path / "reopened.jsonl").read_bytes() == b"x" * (2 * BUFFER_BYTES) + b"\nkept\n"


def test_lines_that_fill_the_buffer_exactly_then_outgrow_it(tmp_path: Path) -> None:
    # Lines are copied into the room the buffer has; one that ends exactly at its end fits,
    # one past it grows the buffer; the bytes written are the lines, whatever was there before.
    target = tmp_path / "exact.jsonl"
    handle = BufferedFile(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    handle.add(b"a" * 99 + b"\n")
    handle.write_pending()
    handle.add(b"b" * 49 + b"\n")
    handle.add(b"c" * 49 + b"\n")  # ends exactly where the first batch's line did
    handle.add(b"d\n")  # one past the room: the buffer grows
    handle.write_pending()
    handle.add(b"e" * 9 + b"\n")
    handle.write_pending()
    os.close(handle.fd)
    expected = b"a" * 99 + b"\n" + b"b" * 49 + b"\n" + b"c" * 49 + b"\n" + b"d\n" + b"e" * 9 + b"\n"
    assert target.read_bytes() == expected


def test_lines_added_in_parts_come_out_as_the_lines(tmp_path: Path) -> None:
    # A large entry's line is copied in as its parts (`add_parts`): into the room the buffer
    # has, exactly to its end, past it (the buffer grows), and past the write-out size.
    target = tmp_path / "parts.jsonl"
    handle = BufferedFile(os.open(target, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600))
    lines: list[bytes] = []

    def add(parts: tuple[bytes, ...], whole: bool = False) -> None:
        lines.append(b"".join(parts))
        if whole:
            handle.add(lines[-1])
        else:
            handle.add_parts(parts)

    add((b"{", b"a" * 97, b"}\n"), whole=True)
    handle.write_pending()
    add((b"{", b"b" * 47, b"}\n"))
    add((b"", b"{", b"c" * 47, b"}\n"))  # ends exactly where the first batch's line did
    add((b"{", b"d" * 10, b"}\n"))  # past the room: the buffer grows
    for index in range(40):  # past the size at which the pending bytes are written out
        add((b"{", bytes([65 + index % 26]) * (BUFFER_BYTES // 16), b"", b"}\n"))
    handle.write_pending()
    os.close(handle.fd)
    assert target.read_bytes() == b"".join(lines)
