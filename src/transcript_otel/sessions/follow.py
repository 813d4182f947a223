"""Following one session as its CLI writes it: new lines recorded as they are appended.

A `SessionFollower` reads each of the session's files from where it stopped (its byte
offset and the lines before it, `followed_file`), holds a partial last line until its
newline is written, and records the new lines, merged in time order across the files,
into a live run (`SessionRecorder`). A file replaced by another (another inode) that
holds at least the lines read is the same log rewritten (a file's name is its session's:
`codex migrate-rollouts` rewrites old rollouts so, a copy may be put back): it goes on
after those lines. One that holds fewer, or a file truncated (shorter than the offset),
is read again from its start, in a run of its own. The run ends when the session stays
idle; it is made again, under another id, if the session goes on later, counting only
what its runs before did not (what they counted is kept with the main file's position,
so a watch started again goes on from it too).
"""

from __future__ import annotations

import os
import stat
import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, Final

from opentelemetry import trace

from transcript_otel.capture.pipeline import TranscriptPipeline
from transcript_otel.instrumentation.cli_logs import last_line_holding
from transcript_otel.model.entries import MAIN_SOURCE
from transcript_otel.reading.lines import MAX_RECORD_BYTES, TranscriptReadWarning
from transcript_otel.sessions.files import SessionFiles
from transcript_otel.sessions.followed_file import (
    FilePosition,
    FollowedFile,
    after_lines,
    complete_lines,
    counted,
    read_position,
)
from transcript_otel.sessions.importer import session_id_from_name
from transcript_otel.sessions.recorder import (
    HARNESSES,
    SessionMapping,
    SessionRecorder,
    Unexported,
    WentBefore,
    run_id_of,
)
from transcript_otel.sessions.regular import NotRegularFileError, open_regular
from transcript_otel.sessions.rewrites import fingerprint, head_session_id
from transcript_otel.sessions.timeline import MapLine, TimedLine, in_time_order, never_raising, say_repaired

# The longest a burst waits for the writer to make room (the watch is our own process).
WRITER_WAIT_S: Final = 60.0
# The records a session's poll leaves queued for the writer, at most, before the next is read.
ROUND_BACKLOG: Final = 64


class SessionFollower:
    """One session being followed; `poll()` records what its files gained since the last poll."""

    def __init__(
        self,
        session: SessionFiles,
        positions: dict[Path, FilePosition],
        *,
        tracer: trace.Tracer,
        pipeline: TranscriptPipeline,
        skipped: set[Path] | None = None,
    ) -> None:
        """`positions`: where each file was read to (absent: from its start); `skipped`: the
        paths said not to be regular files (shared with the search for sessions: said once)."""
        self.session = session
        self._skipped = set() if skipped is None else skipped
        self._harness = HARNESSES[session.kind]
        taken_up = positions.get(session.path) or FilePosition(0, 0)
        self._before = WentBefore()
        self._mapping, self._map_line = self._mapper(taken_up.offset, taken_up.carried)
        self._tracer = tracer
        self._pipeline = pipeline
        self._files = {
            path: FollowedFile(path, source, counted(path, read_position(path, positions.get(path))))
            for path, source in session.sources()
        }
        self._recorder: SessionRecorder | None = None
        self._session_id: str | None = None
        self._read_again = 0  # files read again from their start: each time, runs named anew
        if self._before.unexported is not None:  # a run a killed watch left: reported now
            # At that run's last line: the lines read after keep their own times.
            self._recorder = self._start(None, self._before.unexported.at_ns)
            self._let_the_writer_catch_up()  # (a start after a kill takes thousands over)

    @property
    def running(self) -> bool:
        """Whether a run of the session is open (it ends on idle, or as the watch stops)."""
        return self._recorder is not None

    @property
    def main_inode(self) -> int:
        """The inode of the main file read (another after it was rewritten)."""
        return self._files[self.session.path].position.inode

    @property
    def behind(self) -> bool:
        """Whether the last poll stopped before the end of what a file holds (a backlog, taken
        `READ_BYTES` at a time): poll again at once, not when the file changes next."""
        return any(file.more for file in self._files.values())

    def progress(self) -> tuple[Any, ...]:
        """What `positions()` follows from, but what the runs counted (which moves only with
        lines recorded or a run's end): cheap to compare, where `positions()` builds those
        counts."""
        seen: list[tuple[Any, ...]] = []
        for path, file in self._files.items():
            at = file.position
            seen.append((path, file.skipping, file.line_start, at.inode, at.offset, at.lines, at.tail))
        return tuple(seen)

    def positions(self) -> dict[Path, FilePosition]:
        """Where each file has been recorded to (a partial last line is not recorded yet; a line
        being passed over is not passed yet), the main file's with what the session's runs
        counted up to there."""
        positions = {
            path: FilePosition(
                f.position.inode,
                f.line_start if f.skipping else f.position.offset,
                f.position.lines,
                tail=None if f.skipping else f.position.tail,
                session=f.position.session,
            )
            for path, f in self._files.items()
        }
        positions[self.session.path].carried = self._carried()
        return positions

    def _carried(self) -> dict[str, Any]:
        """What the session's runs counted up to the lines read, and the turn they left open:
        a run after these (idle ended this one, the watch stopped) goes on from it."""
        went = self._recorder.goes_on_as() if self._recorder else self._before
        turn = {"open": went.turn_open, "answered": went.turn_answered, "model": went.model}
        carried: dict[str, Any] = {"turn": turn, "mapping": self._mapping.counted()}
        if self._recorder is not None:
            # Kept while the run is open: a watch killed now never exports its root and open
            # chat spans, and the run that takes the session over reports what they counted.
            root, chat = self._recorder.run.unexported_usage()
            carried["unexported"] = {"root": root, "chat": chat, "at": self._recorder.last_ns}
        return carried

    def add_file(self, path: Path, source: str, position: FilePosition | None = None) -> None:
        """A subagent file that appeared after the session was first seen (`position`: where it
        was recorded to before it went away; absent: from its start)."""
        if path not in self._files:
            self._files[path] = FollowedFile(path, source, counted(path, read_position(path, position)))

    def rewind(self, kept: dict[Path, FilePosition]) -> None:
        """Back to where each file was last kept (`kept`; a file not there: its start), when what
        was read after it could not be written (a full disk): the run ends, and the next poll
        reads those lines again, into a run going on from what the runs before them counted."""
        self.finish()
        for path, file in self._files.items():
            file.position = read_position(path, kept.get(path) or FilePosition(file.position.inode, 0, 0))
            file.lines, file.skipping = 0, False
        main = kept.get(self.session.path)
        self._renew_mapper(main.carried if main is not None else None)

    def poll(self) -> int:
        """Record the complete lines the files gained; the number of lines."""
        gained = [(file, self._read(file)) for file in list(self._files.values())]
        # Mapped as they are merged, in time order, as an import maps them: the session's
        # mapper counts across its files (a subagent's message before the main agent's report
        # of the totals that hold it), not a file's lines before the next file's.
        files = list(self._files)
        streams = [self._mapped(file, files.index(file.path), lines) for file, lines in gained if lines]
        count = 0
        for timed in in_time_order(streams):
            count += 1
            self._record(timed)
            # After each line, not each burst of lines (history, a file read again, a round
            # over many sessions): what a line queues is a few records.
            self._let_the_writer_catch_up()
        return count

    def finish(self) -> None:
        """End the live run (idle, or the watch stops); the next lines start another, which
        goes on from what this one counted (an idle session keeps no mapping state but that:
        memory is its positions and those counts)."""
        if self._recorder is not None:
            carried = self._carried()
            self._recorder.finish()
            self._recorder = None
            self._renew_mapper(carried)
            self._let_the_writer_catch_up()

    def _let_the_writer_catch_up(self) -> None:
        """Wait until the writer holds a few records at most, never near the pipeline's bound:
        past it an entry is dropped, and a span ending gets no `transcript.span` record (the
        root and chat spans carry the runs' tokens). Down to a few records, not to half the
        bound: the bound, an estimate of what the entries hold, may shrink at once under a
        burst of large ones. Asked after each line and each run's end (runs end together: the
        watch stopping, sessions idle since one round, a start after a kill taking them over)."""
        self._pipeline.wait_for_room(WRITER_WAIT_S, ROUND_BACKLOG)

    def _renew_mapper(self, carried: dict[str, Any] | None) -> None:
        """A mapper of the lines after those read, going on from `carried` (a main file read
        again from its start: from nothing)."""
        offset = self._files[self.session.path].position.offset
        if carried is not None:  # what a run never ended left is reported once, by the next run
            carried = {key: value for key, value in carried.items() if key != "unexported"}
        self._mapping, self._map_line = self._mapper(offset, carried if offset else None)

    def _mapper(self, main_offset: int, carried: dict[str, Any] | None) -> tuple[SessionMapping, MapLine]:
        """A mapper of the session's lines from `main_offset` of its main file on, going on from
        what the session's runs before counted (`carried`, where it can be used), else from the
        running totals the session had reached there (a session taken up from its end)."""
        self._before = WentBefore()
        if main_offset > 0 and carried is not None:
            mapping = self._harness.mapper(None, self.session.path)
            said = carried.get("mapping")
            if isinstance(said, dict) and mapping.go_on(said):
                unexported = _unexported(carried.get("unexported"))
                self._before = _went_before(carried.get("turn"))._replace(unexported=unexported)
                return mapping, never_raising(mapping)
        last_report = _last_report(self.session.path, main_offset, self._harness.report_marker)
        mapping = self._harness.mapper(last_report, self.session.path)
        return mapping, never_raising(mapping)

    def _read(self, file: FollowedFile) -> list[bytes]:
        """What `file` gained; nothing, and a warning once, while it cannot be read (the other
        files and sessions go on; the position stays, so nothing is lost once it can)."""
        file.more = False
        try:
            return self._read_gained(file)
        except NotRegularFileError as exc:  # replaced by a FIFO, a link to a device: never read
            if file.path not in self._skipped:
                self._skipped.add(file.path)
                warnings.warn(f"{exc}: skipped while it is one", TranscriptReadWarning, 2)
            return []
        except OSError as exc:
            if not file.unreadable:
                warnings.warn(f"{file.path}: cannot be read: {exc}", TranscriptReadWarning, 2)
            file.unreadable = True
            return []

    def _read_gained(self, file: FollowedFile) -> list[bytes]:
        try:
            status = os.stat(file.path)
        except FileNotFoundError:
            return []
        if not stat.S_ISREG(status.st_mode):
            raise NotRegularFileError(file.path, status.st_mode)
        if status.st_size == file.position.offset and status.st_ino == file.position.inode:
            return []
        with open_regular(file.path) as stream:
            inode = os.fstat(stream.fileno()).st_ino
            if inode != file.position.inode or status.st_size < file.position.offset:
                self._replaced(file, stream, inode)
            elif file.position.tail not in (None, fingerprint(stream, file.position.offset)):
                _say_read_again(file.path, "written anew in place (truncated, then written longer)")
                self._from_start(file, inode, head_session_id(stream))
            if file.position.session is None:
                file.position.session = head_session_id(stream)
            read_from = file.position.offset
            stream.seek(read_from)
            complete = complete_lines(stream, file)
            if file.position.offset != read_from or file.position.tail is None:
                file.position.tail = fingerprint(stream, file.position.offset)
        file.unreadable = False
        self._skipped.discard(file.path)
        return [line for line in complete.split(b"\n") if line.strip()]

    def _replaced(self, file: FollowedFile, stream: IO[bytes], inode: int) -> None:
        """`file` is another inode now, or shorter than where it was read to: the same log
        rewritten goes on after the lines read; another record (fewer lines, another session's
        file, truncated) is read from its start, a run of its own."""
        now_of, was_of = head_session_id(stream), file.position.session
        other_session = bool(was_of and now_of) and now_of != was_of
        if inode != file.position.inode and not other_session:
            after = after_lines(file)
            if after is not None:  # the same log rewritten: on after the lines read
                file.position = FilePosition(inode, after, file.position.lines, session=now_of)
                file.skipping = False
                return
        if other_session:
            _say_read_again(file.path, f"replaced by another session's file ({now_of}, not {was_of})")
            if file.path == self.session.path:
                self._session_id = None  # the new run is that session's
        self._from_start(file, inode, now_of)

    def _from_start(self, file: FollowedFile, inode: int, session: str | None) -> None:
        """`file` read again from its start (its first lines naming `session`), into a run of
        its own (a main file read again from 0 has no earlier totals to go on from; a
        subagent's goes on from the session's)."""
        file.position, file.lines, file.skipping = FilePosition(inode, 0, 0, session=session), 0, False
        self._read_again += 1
        self.finish()
        if file.path == self.session.path:
            self._renew_mapper(None)

    def _mapped(self, file: FollowedFile, index: int, lines: list[bytes]) -> Iterator[TimedLine]:
        """`lines` of `file` (its `index`-th), each mapped as it is asked for."""
        for line in lines:
            file.lines += 1
            said = self._map_line(line.rstrip(b"\r"), file.source)
            if said.repaired and not file.repaired:
                file.repaired = True
                say_repaired(file.path)
            if said.timestamp_ns is not None:
                file.latest_ns = max(file.latest_ns, said.timestamp_ns)
            yield TimedLine(file.latest_ns, index, file.lines, file.source, said, len(line))

    def _record(self, timed: TimedLine) -> None:
        if self._recorder is None:
            # (the session's id from its main file: a subagent's first line names its own thread)
            named = timed.said.session_id if timed.source == MAIN_SOURCE else None
            self._recorder = self._start(named, timed.at_ns)
        self._recorder.apply(timed)

    def _start(self, named: str | None, at_ns: int) -> SessionRecorder:
        main = self._files[self.session.path].position
        if self._session_id is None:  # (a Gemini session's file name holds 8 characters of its id)
            self._session_id = named or main.session or session_id_from_name(self.session)
        # Where the main file was taken up names the run: the same session followed again from
        # another point is another run, never a second copy of this one.
        again = f":again:{self._read_again}" if self._read_again else ""  # (a file at one inode twice)
        run_id = run_id_of(self.session.kind, self._session_id, f"watch:{main.inode}:{main.offset}{again}")
        return SessionRecorder(
            self._harness,
            session_id=self._session_id,
            run_id=run_id,
            started_ns=at_ns or time.time_ns(),
            pipeline=self._pipeline,
            tracer=self._tracer,
            went_before=self._before._replace(messages=self._mapping.counted_messages()),
        )


def _say_read_again(path: Path, why: str) -> None:
    warnings.warn(
        f"{path}: {why}: read again from its start, as a run of its own", TranscriptReadWarning, stacklevel=3
    )


def _went_before(turn: Any) -> WentBefore:
    """The turn a session's runs left open, as `_carried` keeps it (nothing from what it did not)."""
    if not isinstance(turn, dict):
        return WentBefore()
    turn_open, answered, model = turn.get("open"), turn.get("answered"), turn.get("model")
    if not isinstance(turn_open, bool) or not isinstance(answered, bool):
        return WentBefore()
    return WentBefore(turn_open, answered, model if isinstance(model, str) else None)


def _unexported(said: Any) -> Unexported | None:
    """What a run never ended had counted, as `_carried` keeps it (None: nothing usable)."""
    if not isinstance(said, dict):
        return None
    root, chat, at = _token_counts(said.get("root")), _token_counts(said.get("chat")), said.get("at")
    if root is None or chat is None or type(at) is not int or at < 0:
        return None
    return Unexported(root, chat, at)


def _token_counts(said: Any) -> dict[str, int] | None:
    if not isinstance(said, dict) or not all(
        isinstance(key, str) and type(count) is int and count >= 0 for key, count in said.items()
    ):
        return None
    return said


def _last_report(path: Path, before: int, marker: bytes | None) -> bytes | None:
    """The running totals a session taken up at byte `before` had reached: the last line holding
    `marker` before it. Read from the file opened here, so never from a FIFO or a device that
    took the path's place (the reader opens a path: this file's, `/dev/fd/N`, where there is one)."""
    if marker is None or before <= 0:
        return None
    try:
        with open_regular(path) as stream:
            opened = Path(f"/dev/fd/{stream.fileno()}")
            return last_line_holding(opened if opened.exists() else path, before, marker, MAX_RECORD_BYTES)
    except OSError:
        return None
