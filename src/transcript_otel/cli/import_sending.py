"""How `transcript-otel import` sends the runs it writes to an OTLP backend: one at a time, as each
is imported, until the backend does not take one.

A backend that does not answer lets each run's export wait out the exporters' timeout: ten
sessions took ten timeouts. After the first run the backend did not take (unreachable, too
slow, refusing), the others are not sent: each is said, with the run that failed and why, so
the import ends within one timeout and the person knows what to send again (the runs are in
the mirror: `transcript-otel replay` or another import sends them, with the same ids).
"""

from __future__ import annotations

import sys
from pathlib import Path

from transcript_otel.reading.escapes import visible, visible_name


class RunSender:
    """Sends each run to `endpoint` (None: the `OTEL_EXPORTER_OTLP_*` variables' backend)."""

    def __init__(self, endpoint: str | None) -> None:
        self._endpoint = endpoint
        self._failed: str | None = None  # the first run not sent, and why: the rest are not tried

    def send(self, run: Path) -> bool:
        """Send `run`; whether it was sent (what was not is said on stderr)."""
        from transcript_otel.exports.replay.run import ReplayError, replay
        from transcript_otel.reading.sources import open_run

        if self._failed is not None:
            _not_sent(run, f"not tried, as {self._failed}")
            return False
        try:
            result = replay(open_run(run), endpoint=self._endpoint)
        except (ReplayError, ValueError) as exc:
            _not_sent(run, visible(str(exc)))
            if isinstance(exc, ReplayError):  # (a run with nothing to send says nothing of the backend)
                self._failed = f"{visible_name(run)} was not sent"
            return False
        print(f"  sent {result.spans} spans and {result.records} log records", file=sys.stderr)
        return True


def _not_sent(run: Path, why: str) -> None:
    print(f"transcript-otel import: {visible_name(run)}: not sent: {why}", file=sys.stderr)
