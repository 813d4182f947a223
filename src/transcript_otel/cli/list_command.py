"""`list`: the runs in the JSONL mirror directory, newest first, as a table or JSON lines."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, TextIO

from transcript_otel.cli.read_commands import number_at_least
from transcript_otel.reading.escapes import visible_name
from transcript_otel.reading.text import usd_text
from transcript_otel.records.serialize import iso_timestamp

if TYPE_CHECKING:
    from transcript_otel.reading.digest import RunDigest


def add_list(commands: Any) -> None:
    listing = commands.add_parser(
        "list",
        help="the runs in the mirror, newest first",
        description="List the runs in the JSONL mirror directory, the one that started last first: "
        "start time, prompt, adapter, status, duration, tokens in and out, cost, and the file.",
    )
    listing.add_argument(
        "--jsonl-dir",
        type=Path,
        help="the mirror directory (default: $TRANSCRIPT_OTEL_JSONL_DIR, else the default)",
    )
    listing.add_argument(
        "-n",
        "--last",
        type=number_at_least(1),
        default=20,
        metavar="N",
        help="the N newest runs (default 20)",
    )
    listing.add_argument("--json", action="store_true", help="one JSON object per run, one per line")
    listing.set_defaults(handler=run_list)


def run_list(args: argparse.Namespace, out: TextIO) -> int:
    from transcript_otel.reading.digest import RunDigest
    from transcript_otel.reading.sources import RunSource, mirror_directory, runs_newest_first

    directory = args.jsonl_dir or mirror_directory()
    runs = runs_newest_first(directory)
    if not runs:
        print(f"transcript-otel list: no runs in {visible_name(directory)}", file=sys.stderr)
        return 1
    rows: list[dict[str, Any]] = []
    for path in runs[: args.last]:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a run being written: its last line may be cut
            try:
                digest = RunDigest.of(RunSource(path, "jsonl").records())
            except ValueError as exc:  # not a transcript: listed, saying so
                rows.append({"path": str(path), "error": str(exc)})
                continue
        rows.append(_listed(digest, path))
    if args.json:
        for row in rows:
            out.write(json.dumps(row, ensure_ascii=False) + "\n")
    else:
        out.write(_table(rows))
    if len(runs) > args.last:
        older = len(runs) - args.last
        print(f"transcript-otel list: {older} older run{'s' * (older != 1)} not listed (-n)", file=sys.stderr)
    return 0


def _listed(digest: RunDigest, path: Path) -> dict[str, Any]:
    tokens = digest.tokens
    return {
        "started": iso_timestamp(int(digest.started.timestamp() * 1e9)) if digest.started else None,
        "prompt_name": digest.prompt_name,
        "adapter": digest.adapter,
        "status": digest.status,
        "duration_s": round(digest.duration_s, 3) if digest.duration_s is not None else None,
        "input_tokens": tokens.get("input"),
        "output_tokens": tokens.get("output"),
        "cost_usd": round(digest.cost_usd, 6) if digest.cost_usd else None,
        "run_id": digest.run_id,
        "path": str(path),
    }


_COLUMNS: Final = (
    "STARTED (UTC)",
    "PROMPT",
    "ADAPTER",
    "STATUS",
    "DURATION",
    "TOKENS IN/OUT",
    "COST",
    "FILE",
)


def _table(rows: list[dict[str, Any]]) -> str:
    """The runs as aligned columns, every field made safe for a terminal."""
    cells = [_COLUMNS] + [_cells(row) for row in rows]
    widths = [max(len(row[index]) for row in cells) for index in range(len(_COLUMNS) - 1)]
    lines = [
        "  ".join([*(cell.ljust(width) for cell, width in zip(row, widths, strict=False)), row[-1]])
        for row in cells
    ]
    return "\n".join(line.rstrip() for line in lines) + "\n"


def _cells(row: dict[str, Any]) -> tuple[str, ...]:
    name = Path(row["path"]).name
    if "error" in row:
        return ("?", "?", "?", "unreadable", "", "", "", visible_name(name))
    started = row["started"][:19].replace("T", " ") if row["started"] else "?"
    duration = f"{row['duration_s']:.1f} s" if row["duration_s"] is not None else ""
    tokens = (
        ""
        if row["input_tokens"] is None and row["output_tokens"] is None
        else (f"{row['input_tokens'] or 0}/{row['output_tokens'] or 0}")
    )
    cost = usd_text(row["cost_usd"]) if row["cost_usd"] else ""
    fields = (
        started,
        row["prompt_name"] or "?",
        row["adapter"] or "?",
        row["status"],
        duration,
        tokens,
        cost,
        name,
    )
    return tuple(visible_name(field) for field in fields)
