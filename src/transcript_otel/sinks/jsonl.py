"""The local JSONL mirror: one debug-bundle `logs/app.jsonl` record per line.

One file per run (`jsonl_files`: where, named how); with a fixed `path`, every run
appends to that one file instead. Lines are copied into one buffer per file
(`jsonl_buffer`) and written once per drained batch (or per MiB). A forked child drops
that buffer unwritten, so lines are never written twice; a crash can cut at most the last
line. Files idle for a minute are closed and reopened on demand. A write that fails (a
full disk) is accounted for, the file mended, and the failure raised from `flush` for the
pipeline to report (`jsonl_mending`).
"""

from __future__ import annotations

import os
import threading
import time
import weakref
from pathlib import Path
from typing import Final

from transcript_otel.records.lines import line_or_parts
from transcript_otel.records.prepared import PreparedRecord
from transcript_otel.records.run import RunInfo
from transcript_otel.sinks.base import Sink
from transcript_otel.sinks.jsonl_buffer import PARTS_FROM_BYTES, BufferedFile
from transcript_otel.sinks.jsonl_files import claim_private, default_directory, open_private, run_file_name
from transcript_otel.sinks.jsonl_mending import account_for_failure
from transcript_otel.sinks.jsonl_write_failures import SINK_NAME

# A run that is never stopped must not hold a file descriptor for ever: files idle this
# long are closed (and reopened for appending if the run writes again).
IDLE_CLOSE_S: Final = 60.0


def _claimed(path: str) -> bool:
    """Whether `path` was free and is now this run's; a directory that cannot be written
    counts as free: the first write fails and is reported as every failed write is."""
    try:
        return claim_private(Path(path))
    except OSError:
        return True


class JsonlMirror(Sink):
    """Writes every record, complete and never truncated, to local JSONL files."""

    name = SINK_NAME
    essential = True

    def __init__(
        self, directory: str | os.PathLike[str] | None = None, *, path: str | os.PathLike[str] | None = None
    ) -> None:
        self.directory = Path(directory) if directory is not None else default_directory()
        self._directory_text = str(self.directory)
        self.path = Path(path) if path is not None else None
        self._files: dict[str, BufferedFile] = {}
        self._assigned: set[str] = set()
        self._naming_lock = threading.Lock()
        # The runs named here, by id: whose lines a failed write lost (`_runs_writing`).
        self._named: weakref.WeakValueDictionary[str, RunInfo] = weakref.WeakValueDictionary()

    def local_path(self, run: RunInfo) -> str:
        """The file `run` is written to, named the first time it is asked for: by the writer at
        the run's first record, or by whoever reads `TranscriptEmitter.jsonl_path` first. Never
        as the run is created: naming looks at the directory (is the name taken?), and the
        agent's thread must not wait for a filesystem (a hung network mount, a slow disk)."""
        path = run.jsonl_path
        if path is None:
            with self._naming_lock:
                path = run.jsonl_path
                if path is None:
                    path = run.jsonl_path = self._new_path(run)
                    self._named[run.run_id] = run
        return path

    def _new_path(self, run: RunInfo) -> str:
        if self.path is not None:
            return str(self.path)
        name = run_file_name(run)
        candidate = os.path.join(self._directory_text, name)
        # The name is claimed by creating the file, so another process naming a run alike (same
        # prompt, session and second) gets the run-id suffix; a forked child, which shares this
        # one's memory of the names handed out but not what it names after the fork, always does.
        if run.forked_from_run_id is not None or candidate in self._assigned or not _claimed(candidate):
            stem = name.removesuffix(".jsonl")
            candidate = os.path.join(self._directory_text, f"{stem}-{run.run_id[:12]}.jsonl")
        self._assigned.add(candidate)
        return candidate

    def write(self, record: PreparedRecord) -> None:
        target = record.run.jsonl_path
        if target is None:
            target = self.local_path(record.run)
        handle = self._files.get(target)
        if handle is None:
            handle = self._files[target] = BufferedFile(open_private(Path(target)))
        line = line_or_parts(record, PARTS_FROM_BYTES)
        try:
            if isinstance(line, bytes):
                handle.add(line)
            else:
                handle.add_parts(line)
        except OSError as failure:  # writing out a MiB failed: what it lost is reported at `flush`
            self._account_for(target, handle, failure)

    def flush(self) -> None:
        failure: OSError | None = None
        for target, handle in list(self._files.items()):
            self._write_out(target, handle)
            failure = failure or handle.unreported
            handle.unreported = None
            if not handle.pending and time.monotonic() - handle.last_write >= IDLE_CLOSE_S:
                del self._files[target]
                os.close(handle.fd)
        if failure is not None:
            raise failure

    def close_run(self, run: RunInfo) -> None:
        if self.path is not None or run.jsonl_path is None:
            return
        handle = self._files.get(run.jsonl_path)
        if handle is None:
            return
        try:
            self._write_out(run.jsonl_path, handle)
        finally:
            del self._files[run.jsonl_path]
            os.close(handle.fd)
        if handle.unreported is not None:
            raise handle.unreported

    def force_flush(self, timeout_s: float) -> None:
        self.flush()

    def shutdown(self, timeout_s: float) -> None:
        try:
            self.flush()
        finally:
            for handle in self._files.values():
                os.close(handle.fd)
            self._files.clear()

    def after_fork_in_child(self) -> None:
        self._naming_lock = threading.Lock()  # another thread of the parent may have held it
        for handle in self._files.values():
            os.close(handle.fd)
        self._files.clear()

    # -- after a failed write ----------------------------------------------------------

    def _write_out(self, target: str, handle: BufferedFile) -> None:
        try:
            handle.write_pending()
        except OSError as failure:
            self._account_for(target, handle, failure)

    def _account_for(self, target: str, handle: BufferedFile, failure: OSError) -> None:
        """Count what `failure` lost in the runs writing to `target`, and mend the file
        (`jsonl_mending`); a fixed `path` may be shared with other processes."""
        account_for_failure(handle, failure, self._runs_writing(target), shared=self.path is not None)

    def _runs_writing(self, target: str) -> list[RunInfo]:
        """The runs named here that write to `target`, alive (the batch being written holds them)."""
        with self._naming_lock:
            return [run for run in self._named.values() if run.jsonl_path == target]
