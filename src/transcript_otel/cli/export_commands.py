"""`bundle` and `export`: a captured run written out for other tools and other people."""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from transcript_otel.cli.read_commands import add_run_command

if TYPE_CHECKING:
    from transcript_otel.reading.sources import RecordSource

FORMATS: Final = ("devflow", "markdown", "html", "jsonl")
_PROGRESS_EVERY_S: Final = 0.2


@dataclass(frozen=True, slots=True)
class Progress:
    """A source whose records, as they are read, are counted on a terminal's status line."""

    source: RecordSource
    label: str
    stream: TextIO

    def records(self) -> Iterator[dict[str, Any]]:
        if not self.stream.isatty():
            yield from self.source.records()
            return
        shown_at = time.monotonic()
        count = 0
        try:
            for count, record in enumerate(self.source.records(), start=1):
                if time.monotonic() - shown_at >= _PROGRESS_EVERY_S:
                    shown_at = time.monotonic()
                    self.stream.write(f"\r{self.label}: {count:,} records")
                    self.stream.flush()
                yield record
        finally:
            self.stream.write(f"\r{self.label}: {count:,} records\n")
            self.stream.flush()


def add_bundle(commands: Any) -> None:
    bundle = add_run_command(
        commands,
        "bundle",
        run_bundle,
        help_text="write a run as a weakincentives debug bundle (.zip)",
        description="Write a run as a debug bundle in the weakincentives layout (debug_bundle/manifest.json, "
        "logs/app.jsonl, transcript.jsonl and a transcript/ section per source), which `wink query` and "
        "`wink debug` open.",
        epilog="example:\n  transcript-otel bundle last -o run.zip\n"
        '  wink query run.zip "SELECT entry_type, tool_name FROM transcript"',
    )
    bundle.add_argument(
        "-o",
        "--output",
        required=True,
        help="the .zip to write, a directory to write it in, or - for standard output",
    )


def _opened(run: str, label: str) -> Progress:
    """The run asked for (`open_run`), its records counted on a terminal as they are read."""
    from transcript_otel.reading.sources import open_run

    return Progress(open_run(run), label, sys.stderr)


def run_bundle(args: argparse.Namespace, out: TextIO) -> int:
    from transcript_otel.exports.bundle.writer import write_bundle

    source = _opened(args.run, "bundling")
    if args.output != "-":
        info = write_bundle(source.records(), args.output)
        print(f"{info.path}: {info.entries} entries", file=sys.stderr)
        return 0
    with tempfile.TemporaryDirectory(prefix="transcript-otel-bundle-") as scratch:
        info = write_bundle(source.records(), Path(scratch) / "bundle.zip")
        with info.path.open("rb") as bundle:
            shutil.copyfileobj(bundle, sys.stdout.buffer)
        sys.stdout.buffer.flush()
    print(f"(standard output): {info.entries} entries", file=sys.stderr)
    return 0


def add_export(commands: Any) -> None:
    export = add_run_command(
        commands,
        "export",
        run_export,
        help_text="write a run as devflow JSON, Markdown, HTML or JSONL",
        description="Write a run in another format:\n"
        "  devflow   the devflow transcript (ADR-011): metadata, turns with tool calls; gzip at 100 KB\n"
        "  markdown  the readable transcript as Markdown\n"
        "  html      one self-contained page: a timeline of turns, tool calls, thinking, usage, subagents\n"
        "  jsonl     the run's records in the JSONL mirror format (from a bundle or an OTLP export)",
        epilog="examples:\n  transcript-otel export last --format html -o run.html\n"
        "  transcript-otel export run.jsonl --format devflow -o transcripts/",
    )
    export.add_argument("--format", choices=FORMATS, required=True)
    export.add_argument(
        "-o",
        "--output",
        help="where to write (default, or -: standard output; for devflow, the current directory, "
        "which gets transcript.json or transcript.json.gz)",
    )
    export.add_argument("--flow", help="devflow: the flow id (default: the prompt name)")
    export.add_argument("--run-id", help="devflow: the run id (default: {date}-{flow}-{session})")


def run_export(args: argparse.Namespace, out: TextIO) -> int:
    source = _opened(args.run, f"exporting {args.format}")
    if args.format == "devflow":
        from transcript_otel.exports.devflow.writer import write_devflow

        path = write_devflow(source, args.output or ".", flow_id=args.flow, run_id=args.run_id)
        print(f"{path}", file=sys.stderr)
        return 0
    with _text_output(args.output, out) as stream:
        if args.format == "html":
            from transcript_otel.exports.html.page import write_html

            write_html(source, stream)
        elif args.format == "markdown":
            from transcript_otel.reading.show import ShowWriter

            writer = ShowWriter(stream, max_chars=None, markdown=True)
            for record in source.records():
                writer.write(record)
        else:
            for record in source.records():
                stream.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")) + "\n")
    return 0


@contextlib.contextmanager
def _text_output(path: str | None, default: TextIO) -> Iterator[TextIO]:
    """Standard output (no path, or `-`), or a file written whole or not at all (a temporary
    file renamed onto it: `exports.destination`)."""
    if path is None or path == "-":
        yield default
        return
    from transcript_otel.exports import destination

    target = Path(path)
    handle, temporary = tempfile.mkstemp(prefix=f".{target.name}.", dir=destination.scratch_directory(target))
    try:
        # A lone surrogate a harness sent is written escaped, not a reason to stop halfway.
        with open(handle, "w", encoding="utf-8", errors="backslashreplace") as stream:
            yield stream
        destination.put_in_place(Path(temporary), target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def add_replay(commands: Any) -> None:
    replay = add_run_command(
        commands,
        "replay",
        run_replay,
        help_text="send a captured run to an OTLP backend, as it was sent live",
        description="Send a captured run to an OTLP backend later (an agent that ran offline, or a second "
        "backend): its spans and log records are rebuilt with their original trace and span ids and times, "
        "so the replayed run looks like the live one, and replaying twice gives one trace, not two. "
        "Exits 1, saying why in one line, when the backend refuses or misses a batch.",
        epilog="examples:\n  transcript-otel replay last --endpoint http://localhost:4318\n"
        "  OTEL_EXPORTER_OTLP_ENDPOINT=http://collector:4317 OTEL_EXPORTER_OTLP_PROTOCOL=grpc "
        "transcript-otel replay run.jsonl",
    )
    replay.add_argument("--endpoint", help="the OTLP endpoint (default: $OTEL_EXPORTER_OTLP_ENDPOINT)")
    replay.add_argument(
        "--protocol", choices=("http/protobuf", "grpc"), help="default: $OTEL_EXPORTER_OTLP_PROTOCOL or http"
    )
    replay.add_argument(
        "--service-name",
        help="the resource's service.name (default: $OTEL_SERVICE_NAME, else the live run's)",
    )


_NEEDS_THE_SDK: Final = (
    "transcript-otel replay: sending runs needs the OpenTelemetry SDK and OTLP exporters, "
    "which the core install leaves out: pip install 'transcript-otel[otlp]'"
)


def run_replay(args: argparse.Namespace, out: TextIO) -> int:
    try:
        from transcript_otel.exports.replay.run import ReplayError, replay
    except ImportError as exc:  # a core-only install: no SDK
        if not (exc.name or "").startswith("opentelemetry"):
            raise
        print(_NEEDS_THE_SDK, file=sys.stderr)
        return 2

    # The exporters' own complaints would repeat what the one line below says.
    quiet = logging.getLogger("opentelemetry")
    quiet.addHandler(logging.NullHandler())
    quiet.propagate = False
    source = _opened(args.run, "replaying")
    try:
        result = replay(
            source, endpoint=args.endpoint, protocol=args.protocol, service_name=args.service_name
        )
    except ReplayError as exc:
        print(f"transcript-otel replay: {exc}", file=sys.stderr)
        return 1
    traces = ", ".join(result.trace_ids)
    print(f"sent {result.spans} spans and {result.records} log records: trace {traces}", file=sys.stderr)
    return 0
