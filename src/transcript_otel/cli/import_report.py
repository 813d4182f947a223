"""What `transcript-otel import` says of its progress and of its end: on a terminal (stderr) a
progress line, then a summary line; with `--json` one JSON object on stdout.

The progress line (sessions done, MB read, MB/s, ETA) is rewritten in place with `\\r` at most
every `_REDRAW_S`, and wiped before any other line is printed, so that it never ends up inside
one. Both lines are for a person at the terminal: piped or redirected, stderr says only what
went wrong (a cron job mails nothing when all went well), and `--json` has the totals.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import Any, Final, Literal, TextIO

from transcript_otel.cli.import_workers import Outcome
from transcript_otel.cli.terminal import is_terminal
from transcript_otel.sessions.files import SessionFiles
from transcript_otel.sessions.formats import Format
from transcript_otel.sessions.recorder import HARNESSES

_REDRAW_S: Final = 0.2  # often enough to look alive, rarely enough to cost nothing
_MB: Final = 1_000_000

Status = Literal["imported", "failed", "not sent"]


@dataclass(frozen=True, slots=True)
class SessionResult:
    """One session's line of the JSON result."""

    path: Path
    adapter: str
    status: Status
    outcome: Outcome

    @property
    def entries(self) -> int:
        """The entries its run holds (none written: none, whatever was read)."""
        return 0 if self.outcome.run is None else self.outcome.entries

    def as_dict(self) -> dict[str, Any]:
        found: dict[str, Any] = {
            "path": str(self.path),
            "run": None if self.outcome.run is None else str(self.outcome.run),
            "adapter": self.adapter,
            "entries": self.entries,
            "subagents": self.outcome.subagents,
            "status": self.status,
            "warnings": len(self.outcome.warned),
        }
        if self.outcome.error:
            found["error"] = self.outcome.error
        return found


class ImportReport:
    """Follows an import of `sessions`: `done` after each session is said, `finish` at the end.
    As a context manager it wipes the progress line however the import ends (a signal too)."""

    def __init__(
        self,
        sessions: Sequence[SessionFiles],
        skipped: dict[Path, Format],
        stderr: TextIO,
        *,
        as_json: bool,
    ) -> None:
        self._sizes = [_size(session) for session in sessions]
        self._total_bytes = sum(self._sizes)
        self._skipped = skipped
        self._stderr = stderr
        self._as_json = as_json
        self._started = time.monotonic()
        self._drawn_at: float | None = None
        self._drawn = 0  # the length of the progress line on the terminal (0: none)
        self._terminal = is_terminal(stderr)
        self.results: list[SessionResult] = []
        self._read_bytes = 0
        self._draw()

    def __enter__(self) -> ImportReport:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.wipe()

    def wipe(self) -> None:
        """Take the progress line off the terminal, before a line is printed."""
        if self._drawn:
            self._stderr.write("\r" + " " * self._drawn + "\r")
            self._stderr.flush()
            self._drawn = 0

    def before_saying(self, outcome: Outcome, out: TextIO | None, sends: bool) -> None:
        """Wipe the progress line if saying `outcome` prints on the terminal: its run on `out`,
        or on stderr its warnings, its failure, what was sent."""
        if (out is not None and is_terminal(out)) or outcome.warned or outcome.run is None or sends:
            self.wipe()

    def done(self, session: SessionFiles, outcome: Outcome, *, sent: bool) -> None:
        """`session` was said (imported or not; `sent`: not refused by the backend)."""
        status: Status = "failed" if outcome.run is None else "imported" if sent else "not sent"
        self.results.append(SessionResult(session.path, HARNESSES[session.kind].adapter, status, outcome))
        self._read_bytes += self._sizes[len(self.results) - 1]
        self._draw()

    def finish(self, out: TextIO) -> None:
        """The JSON result on `out`, or on a terminal the summary line."""
        self.wipe()
        totals = self._totals()
        if self._as_json:
            skipped = [{"path": str(path), "reason": what.value} for path, what in self._skipped.items()]
            result = {"sessions": [r.as_dict() for r in self.results], "skipped": skipped, "totals": totals}
            json.dump(result, out, indent=2, ensure_ascii=False)
            out.write("\n")
            return
        if not self._terminal:
            return
        not_imported = totals["sessions"] - totals["imported"]
        print(
            f"transcript-otel import: {totals['imported']} of {totals['sessions']} sessions imported"
            + (f" ({not_imported} not)" if not_imported else "")
            + f", {totals['entries']} entries, {self._read_bytes / _MB:.1f} MB in {totals['seconds']:.1f} s, "
            + _counted(totals["warnings"], "warning"),
            file=self._stderr,
        )

    def _totals(self) -> dict[str, Any]:
        return {
            "sessions": len(self._sizes),
            "imported": sum(r.status == "imported" for r in self.results),
            "failed": sum(r.status != "imported" for r in self.results),
            "skipped": len(self._skipped),
            "entries": sum(r.entries for r in self.results),
            "bytes": self._read_bytes,
            "seconds": round(time.monotonic() - self._started, 3),
            "warnings": sum(len(r.outcome.warned) for r in self.results),
        }

    def _draw(self) -> None:
        """The progress line, drawn again unless it is on the terminal since less than
        `_REDRAW_S` (the first, the last, and one wiped are drawn at once)."""
        if not self._terminal:
            return
        now = time.monotonic()
        last = len(self.results) == len(self._sizes)
        wiped = not self._drawn
        if not (wiped or last) and self._drawn_at is not None and now - self._drawn_at < _REDRAW_S:
            return
        self._drawn_at = now
        line = self._progress(now - self._started)
        line = line[: max(self._columns() - 1, 0)]  # a wrapped line could not be rewritten
        self._stderr.write("\r" + line.ljust(self._drawn))
        self._stderr.flush()
        self._drawn = len(line)

    def _columns(self) -> int:
        """The width of stderr's terminal (stdout's may be a file)."""
        try:
            return os.get_terminal_size(self._stderr.fileno()).columns
        except (OSError, ValueError):
            return shutil.get_terminal_size().columns

    def _progress(self, elapsed_s: float) -> str:
        line = (
            f"importing: {len(self.results)}/{len(self._sizes)} sessions, "
            f"{self._read_bytes / _MB:.1f}/{self._total_bytes / _MB:.1f} MB"
        )
        if self._read_bytes and elapsed_s > 0:
            rate = self._read_bytes / elapsed_s
            line += f", {rate / _MB:.1f} MB/s, ETA {_duration((self._total_bytes - self._read_bytes) / rate)}"
        return line


def _size(session: SessionFiles) -> int:
    """The bytes of a session's files (what an import reads), those it can see."""
    total = 0
    for path, _ in session.sources():
        with contextlib.suppress(OSError):  # said when its import fails
            total += path.stat().st_size
    return total


def _duration(seconds: float) -> str:
    whole = round(seconds)
    return f"{whole // 60}m{whole % 60:02d}s" if whole >= 60 else f"{whole}s"


def _counted(number: int, what: str) -> str:
    return f"{number} {what}" + ("" if number == 1 else "s")
