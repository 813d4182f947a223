"""What a debug bundle says about its run: `manifest.json`, `transcript/index.json` and `README.txt`.

`RunNotes` is filled as the records pass (the run's ids, times, outcome and counts);
from it the writer builds, at the end, the manifest weakincentives requires of a
bundle (format `BUNDLE_FORMAT_VERSION`), the index of the `transcript/` section and
the README a person opens first.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final

from transcript_otel.exports.bundle.sources import SourceFile
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.version import __version__

BUNDLE_FORMAT_VERSION: Final = "1.0.0"  # weakincentives' BUNDLE_FORMAT_VERSION (0.22 to 0.27)
_RUN_KEYS: Final = ("run_id", "prompt_name", "adapter", "session_id", "trace_id")


@dataclass(slots=True)
class RunNotes:
    """What the records written so far say about the run."""

    run: dict[str, str] = field(default_factory=dict)  # the first non-empty value of each of _RUN_KEYS
    started_at: str = ""
    ended_at: str = ""
    has_stop: bool = False
    has_error: bool = False
    stop_context: dict[str, Any] = field(default_factory=dict)
    records: int = 0
    entries: int = 0  # `transcript.entry` records
    skipped: int = 0  # records that were not objects with an `event`, or not JSON-encodable

    def note(self, record: Mapping[str, Any], context: Mapping[str, Any], event: str) -> None:
        """One more record written (`context` is its context, `{}` when it has none)."""
        self.records += 1
        if len(self.run) < len(_RUN_KEYS):
            for key in _RUN_KEYS:
                if key not in self.run:
                    value = context.get(key)
                    if isinstance(value, str) and value:
                        self.run[key] = value
        stamp = record.get("timestamp")
        if not self.started_at and isinstance(stamp, str):
            self.started_at = stamp
        if event == TranscriptEvent.STOP:
            self.has_stop = True
            self.ended_at = stamp if isinstance(stamp, str) else ""
            self.stop_context = dict(context)
        if event == TranscriptEvent.ENTRY:
            self.entries += 1
            if context.get("entry_type") == "error":
                self.has_error = True

    def status(self) -> str:
        """As the manifest says it: `failed` (an error entry), `success` (stopped), else `incomplete`."""
        if self.has_error:
            return "failed"
        return "success" if self.has_stop else "incomplete"


def manifest(
    notes: RunNotes, bundle_id: str, created: datetime, checksums: Mapping[str, str]
) -> dict[str, Any]:
    """The `BundleManifest`; `checksums` holds the SHA-256 of every other member, by name."""
    files = sorted(checksums)
    return {
        "format_version": BUNDLE_FORMAT_VERSION,
        "bundle_id": bundle_id,
        "created_at": created.isoformat(),
        "request": {
            "request_id": notes.run.get("run_id", ""),
            "session_id": notes.run.get("session_id"),
            "status": notes.status(),
            "started_at": notes.started_at,
            "ended_at": notes.ended_at,
        },
        "capture": {
            "mode": "full",
            "trigger": "export",
            "limits_applied": {"filesystem_truncated": False},
        },
        "prompt": _prompt(notes),
        "files": files,
        "integrity": {"algorithm": "sha256", "checksums": {name: checksums[name] for name in files}},
        "build": {"version": __version__, "commit": ""},
    }


def _prompt(notes: RunNotes) -> dict[str, str]:
    name = notes.run.get("prompt_name", "")
    ns, colon, key = name.partition(":")
    if not colon:
        ns, key = "", name
    return {"ns": ns, "key": key, "adapter": notes.run.get("adapter", "")}


def index(notes: RunNotes, sources: Sequence[SourceFile]) -> dict[str, Any]:
    """`transcript/index.json`: the run, and each source's file with its counts and completeness."""
    expected = notes.stop_context.get("entries_by_source")
    return {
        "generator": f"transcript-otel {__version__}",
        "run": {
            **{key: notes.run.get(key) for key in ("run_id", "prompt_name", "adapter", "session_id")},
            "trace_id": notes.run.get("trace_id"),
            "status": notes.status(),
            "started_at": notes.started_at,
            "ended_at": notes.ended_at,
            "records": notes.records,
            "entries": notes.entries,
            "skipped_records": notes.skipped,
            "stop_total_entries": notes.stop_context.get("total_entries"),
            "dropped_entries": notes.stop_context.get("dropped_entries"),
        },
        "sources": [source.index_item(expected) for source in sources],
    }


def readme(notes: RunNotes, bundle_id: str, created: datetime) -> str:
    """`README.txt`: what the bundle is, who made it, how to open it."""

    def shown(key: str, missing: str) -> str:
        value = notes.run.get(key, "")
        if not value.isprintable():
            value = value.encode("unicode_escape").decode("ascii")
        return value or missing

    transcript = [
        "transcript.jsonl    The transcript.entry lines of logs/app.jsonl",
        "transcript/         The same entries split by source:",
        "  main.jsonl          the main agent",
        "  subagent-<id>.jsonl each subagent (source subagent:<id>)",
        "  index.json          sources, counts, sequence ranges, completeness",
    ]
    lines = [
        "Debug Bundle (transcript-otel)",
        "=" * 60,
        "",
        f"The transcript of one agent run, captured by transcript-otel {__version__} and",
        "written in the weakincentives debug-bundle layout (format 1.0.0).",
        "",
        f"Bundle ID: {bundle_id}",
        f"Created: {created.isoformat()}",
        f"Run: {shown('run_id', '(unknown)')}",
        f"Prompt: {shown('prompt_name', '(unknown)')}",
        f"Adapter: {shown('adapter', '(unknown)')}",
        f"Session: {shown('session_id', '(none)')}",
        f"Status: {notes.status()}",
        f"Records: {notes.records}, transcript entries: {notes.entries}, skipped: {notes.skipped}",
        "",
        "Contents",
        "-" * 60,
        "",
        "manifest.json       Bundle metadata and integrity checksums (SHA-256)",
        "README.txt          This file",
        "logs/app.jsonl      Every record of the run, one JSON object per line",
        *(transcript if notes.entries else []),
        "",
        "Open it",
        "-" * 60,
        "",
        '  wink query BUNDLE.zip "SELECT transcript_source, sequence_number, entry_type,',
        '      content FROM transcript ORDER BY rowid" --table',
        '  wink query BUNDLE.zip "SELECT * FROM transcript_tools" --table',
        "  wink debug BUNDLE.zip              (web UI; needs weakincentives[wink])",
        "  transcript-otel show BUNDLE.zip    (the human-readable transcript)",
        "",
        "wink writes its SQLite cache next to the zip (BUNDLE.zip.sqlite).",
        "",
    ]
    return "\n".join(lines)
