"""The base every sink builds on."""

from __future__ import annotations

from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo


class Sink:
    """A destination for transcript records, driven by the pipeline's writer thread.

    Only `write` is required; the other hooks default to doing nothing. Any
    method may raise: the pipeline reports it as a `transcript.error` and goes on.
    """

    name: str = "sink"
    # Essential sinks still get every record when shutdown runs short of time.
    essential: bool = False

    def local_path(self, run: RunInfo) -> str | None:
        """The local file this sink writes `run` to, if it writes one (asked for by
        `TranscriptEmitter.jsonl_path`, from whichever thread reads it)."""
        return None

    def write(self, record: PreparedRecord) -> None:
        """Write one record."""
        raise NotImplementedError

    def flush(self) -> None:
        """Make everything written so far visible (end of each drained batch)."""

    def close_run(self, run: RunInfo) -> None:
        """The run stopped: release what is held for it."""

    def force_flush(self, timeout_s: float) -> None:
        """Push buffered data to its final destination, within `timeout_s`."""

    def shutdown(self, timeout_s: float) -> None:
        """Release everything; called once at pipeline shutdown."""

    def after_fork_in_child(self) -> None:
        """Forget state inherited from the parent process without flushing it."""
