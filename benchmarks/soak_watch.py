"""Issue 51's soak: `transcript-otel watch` over 10,000 sessions with lines appended at random for
10 minutes, stopped with SIGTERM three times and killed with SIGKILL once, each time started
again: the mirror holds every session's entries once (the lines of the killed process's last
round may be twice, docs/harnesses.md), and the sessions' runs count the CLIs' tokens.

    .venv/bin/python benchmarks/soak_watch.py                      # the full soak (~15 min)
    .venv/bin/python benchmarks/soak_watch.py --sessions 200 --minutes 0.5 --sigterms 1

The sessions are copies of the real recorded sessions (`soak_sessions.py`), each under ids of
its own, in a throwaway HOME's ~/.claude/projects (50 projects) and ~/.codex/sessions (28 day
folders). Each session's lines are written over a stretch of the soak at random times, one
write each but 1 in 20 cut in two writes at a random byte (the CLIs write a long line in
parts). The watch is the real command in a process of its own (`soak_processes.py`), started
before the first line, `--jsonl-dir` to a mirror, no backend. The stops come at random moments
between 10% and 90% of the soak; after each the next process starts after a pause of up to
3 s (lines written meanwhile are the next one's). When the writing ends, the last process is
left to catch up (its state keeps every file's end) and stopped with SIGTERM. Then the mirror
is read (`soak_mirror.py`) and checked (`soak_check.py`). Exit status 1 when the check fails.
"""

from __future__ import annotations

import argparse
import itertools
import json
import random
import resource
import shutil
import sys
import tempfile
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Final

from soak_check import Verdict, kept_positions, verify
from soak_mirror import MirrorRead, read_mirror, sizes
from soak_processes import Stopped, WatchProcess
from soak_sessions import Copy, Template, fresh_ids, templates

CLAUDE_PROJECTS: Final = 50
CODEX_DAYS: Final = 28
CUT_ONE_IN: Final = 20
PAUSE_MAX_S: Final = 3.0
CAUGHT_UP_WAIT_S: Final = 3600.0


@dataclass
class Options:
    sessions: int = 10_000
    minutes: float = 10.0
    sigterms: int = 3
    sigkills: int = 1
    idle_s: float = 60.0
    seed: int = 51
    scratch: Path | None = None  # kept afterwards when given
    backlog_bytes: int | None = None  # the watch's pipeline bound, where not its default
    scenarios: tuple[str, ...] = ()  # the recorded sessions copied, by name part (none: all)
    pause_s: float = 0.0  # the watch stopped (SIGSTOP) this long every 5 to 10 s: a loaded machine


@dataclass
class Soak:
    options: dict[str, Any]
    templates: int
    bytes_written: int = 0
    writes: int = 0
    writing_s: float = 0.0
    late_s: float = 0.0  # how far behind its schedule the writer fell, at most
    caught_up_s: float = 0.0  # from the last write to the state keeping every file's end
    processes: list[Stopped] = field(default_factory=list)
    mirror: dict[str, Any] = field(default_factory=dict)
    verdict: Verdict = field(default_factory=Verdict)
    driver_cpu_s: float = 0.0


def run_soak(options: Options) -> Soak:
    rng = random.Random(options.seed)
    made = [
        t for t in templates() if not options.scenarios or any(s in t.scenario for s in options.scenarios)
    ]
    if not made:
        raise ValueError(f"no recorded session matches {options.scenarios}")
    scratch = options.scratch or Path(tempfile.mkdtemp(prefix="soak-watch-"))
    try:
        return _soak(options, made, scratch, rng)
    finally:
        if options.scratch is None:
            shutil.rmtree(scratch, ignore_errors=True)


def _soak(options: Options, made: list[Template], scratch: Path, rng: random.Random) -> Soak:
    home, runs, state, logs = scratch / "home", scratch / "runs", scratch / "watch.json", scratch / "logs"
    copies = _copies(options.sessions, made, home, rng)
    writes = _schedule(copies, options.minutes * 60, rng)
    (home / ".claude" / "projects").mkdir(parents=True)
    (home / ".codex" / "sessions").mkdir(parents=True)
    soak = Soak(asdict(options) | {"scratch": str(scratch)}, len(made), writes=len(writes))
    ends: list[dict[str, int]] = []
    killed: list[int] = []
    kept_at_kill: list[dict[str, int]] = []
    current = [
        WatchProcess(home, runs, state, logs, options.idle_s, 0, options.backlog_bytes, options.pause_s)
    ]
    stops = _stop_moments(options, rng)
    began = time.monotonic()

    def restarts() -> None:
        for moment, kill in stops:
            time.sleep(max(0.0, began + moment - time.monotonic()))
            process = current[0]
            soak.processes.append(process.stop(kill, "SIGKILL" if kill else "SIGTERM"))
            ends.append(sizes(runs))
            if kill:
                killed.append(process.number)
                kept_at_kill.append(kept_positions(state))
            time.sleep(rng.uniform(0.0, PAUSE_MAX_S))
            current[0] = WatchProcess(
                home,
                runs,
                state,
                logs,
                options.idle_s,
                process.number + 1,
                options.backlog_bytes,
                options.pause_s,
            )

    controller = threading.Thread(target=restarts)
    controller.start()
    soak.bytes_written, soak.late_s = _write(copies, writes, began)
    soak.writing_s = time.monotonic() - began
    controller.join()
    written = time.monotonic()
    _wait_caught_up(copies, state)
    soak.caught_up_s = time.monotonic() - written
    soak.processes.append(current[0].stop(False, "SIGTERM (the end)"))
    ends.append(sizes(runs))
    by_session = {copy.session_id: copy for copy in copies}
    read = read_mirror(runs, by_session, ends)
    soak.mirror = _mirror_figures(read)
    soak.verdict = verify(copies, read, state, killed, kept_at_kill)
    usage = resource.getrusage(resource.RUSAGE_SELF)
    soak.driver_cpu_s = usage.ru_utime + usage.ru_stime
    return soak


def _copies(count: int, made: list[Template], home: Path, rng: random.Random) -> list[Copy]:
    copies = []
    for number in range(count):
        template = rng.choice(made)
        if template.kind == "claude":
            folder = home / ".claude" / "projects" / f"-soak-project-{number % CLAUDE_PROJECTS}"
        else:
            folder = home / ".codex" / "sessions" / "2026" / "11" / f"{1 + number % CODEX_DAYS:02d}"
        copies.append(Copy(template, fresh_ids(template), folder, [0] * len(template.paths)))
    return copies


# A write: (when, copy, line number, the line's part: 0 whole, 1 and 2 its halves, where it is cut)
_Write = tuple[float, int, int, int, int]


def _schedule(copies: list[Copy], seconds: float, rng: random.Random) -> list[_Write]:
    """Each session's writes at random times over a stretch of the soak, in its lines' order."""
    writes: list[_Write] = []
    for number, copy in enumerate(copies):
        parts: list[tuple[int, int, int]] = []
        for line_number, (_, line) in enumerate(copy.template.lines):
            if len(line) > 2 and rng.randrange(CUT_ONE_IN) == 0:
                cut = rng.randrange(1, len(line) - 1)
                parts += [(line_number, 1, cut), (line_number, 2, cut)]
            else:
                parts.append((line_number, 0, 0))
        start = rng.uniform(0.0, 0.8 * seconds)
        end = rng.uniform(start + 0.1 * seconds, seconds)
        times = sorted(rng.uniform(start, end) for _ in parts)
        writes += [(at, number, *part) for at, part in zip(times, parts, strict=True)]
    writes.sort()
    return writes


def _write(copies: list[Copy], writes: list[_Write], began: float) -> tuple[int, float]:
    """Appends each write to its file at its time; the bytes written and the worst lateness."""
    written = 0
    late = 0.0
    for at, number, line_number, part, cut in writes:
        now = time.monotonic() - began
        if at > now:
            time.sleep(at - now)
        else:
            late = max(late, now - at)
        copy = copies[number]
        index, line = copy.line(line_number)
        data = line if part == 0 else line[:cut] if part == 1 else line[cut:]
        path = copy.path(index)
        if copy.written[index] == 0:
            path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("ab") as out:
            out.write(data)
        copy.written[index] += len(data)
        written += len(data)
    return written, late


def _stop_moments(options: Options, rng: random.Random) -> list[tuple[float, bool]]:
    """When each process is stopped, and whether killed: at random between 10% and 90% of the
    soak, at least 5% of it apart (each process gets to start and work)."""
    seconds = options.minutes * 60
    count = options.sigterms + options.sigkills
    while True:
        moments = sorted(rng.uniform(0.1 * seconds, 0.9 * seconds) for _ in range(count))
        if all(b - a >= 0.05 * seconds for a, b in itertools.pairwise(moments)):
            break
    kills = [True] * options.sigkills + [False] * options.sigterms
    rng.shuffle(kills)
    return list(zip(moments, kills, strict=True))


def _wait_caught_up(copies: list[Copy], state: Path) -> None:
    """Until the state keeps every file's end (it keeps a position once the lines before it are
    written to the mirror)."""
    ends = {str(copy.path(index)): size for copy in copies for index, size in enumerate(copy.written)}
    deadline = time.monotonic() + CAUGHT_UP_WAIT_S
    while time.monotonic() < deadline:
        kept = kept_positions(state)
        if all(kept.get(path) == size for path, size in ends.items()):
            return
        time.sleep(1.0)
    raise RuntimeError("the watch did not catch up within an hour")


def _mirror_figures(read: MirrorRead) -> dict[str, Any]:
    runs = [len(found.run_files) for found in read.sessions.values()]
    return {
        "run_files": read.files,
        "mib": round(read.bytes / 2**20, 1),
        "records": read.records,
        "torn_lines": read.torn,
        "records_of_no_session": read.strangers,
        "runs_per_session_max": max(runs, default=0),
        "runs_per_session_mean": round(sum(runs) / max(1, len(runs)), 2),
        "runs_ended": sum(found.stops for found in read.sessions.values()),
        "errors": dict(read.errors.most_common(10)),
    }


def report(soak: Soak) -> str:
    verdict = soak.verdict
    lines = [
        f"watch soak: {verdict.sessions:,} sessions ({soak.templates} recorded ones copied), "
        f"{verdict.lines:,} lines, {soak.bytes_written / 1e6:,.1f} MB in {soak.writes:,} writes over "
        f"{soak.writing_s:.0f} s (the writer at most {soak.late_s:.1f} s behind its schedule); "
        f"caught up {soak.caught_up_s:.1f} s after the last write",
        "processes:",
    ]
    for p in soak.processes:
        samples = p.rss_samples_mib
        share = 100 * p.cpu_s / p.ran_s
        lines.append(
            f"  {p.number}: {p.how} after {p.ran_s:.0f} s (ready in {p.ready_s:.1f} s, exited "
            f"{p.exit_status} {p.stop_s:.1f} s after the signal): CPU {p.cpu_s:.1f} s ({share:.0f}% of a "
            f"core), peak RSS {p.peak_rss_mib:.0f} MiB (sampled: last {samples[-1] if samples else 0:.0f} "
            f"MiB), {len(p.warnings)} warnings"
        )
    cpu = sum(p.cpu_s for p in soak.processes)
    lines += [
        f"  all: CPU {cpu:.0f} s, peak RSS {max(p.peak_rss_mib for p in soak.processes):.0f} MiB; "
        f"the soak's own process: CPU {soak.driver_cpu_s:.0f} s",
        f"mirror: {json.dumps(soak.mirror)}",
        f"entries: {verdict.entries_found:,} found, {verdict.entries_expected:,} expected (from "
        f"{verdict.lines_with_entries:,} of the lines); missing {verdict.missing}, none an import gives "
        f"{verdict.strange}, duplicates {verdict.duplicates} in {verdict.sessions_with_duplicates} sessions "
        f"({verdict.duplicates_allowed} of them the killed process's last round; it wrote "
        f"{verdict.past_kept_at_kill} entries past the positions it had kept); files not read to their end "
        f"{verdict.files_not_read_to_their_end}",
        f"tokens (input, output): the CLIs' {verdict.tokens_expected}; the runs' totals "
        f"{verdict.run_tokens_found} ({verdict.run_tokens_exact:,} sessions exact); the chat spans "
        f"{verdict.chat_tokens_found} ({verdict.chat_tokens_exact:,} sessions as an import's)",
        f"sessions whose tokens are off: {len(verdict.token_misses)} (written by the killed process: "
        f"{sum(m['written_by_the_killed_process'] for m in verdict.token_misses)}); counting more than the "
        f"CLI: {verdict.tokens_over}, less: {verdict.tokens_under}",
        *(f"  {json.dumps(miss)}" for miss in verdict.token_misses[:5]),
        *(f"problem: {said}" for said in verdict.examples),
        "PASSED" if verdict.passed else "FAILED",
    ]
    warnings = sorted({w.split(": warning: ", 1)[1][:200] for p in soak.processes for w in p.warnings})
    lines += [f"warning said: {w}" for w in warnings[:10]]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sessions", type=int, default=Options.sessions)
    parser.add_argument("--minutes", type=float, default=Options.minutes)
    parser.add_argument("--sigterms", type=int, default=Options.sigterms)
    parser.add_argument("--sigkills", type=int, default=Options.sigkills)
    parser.add_argument("--idle", type=float, default=Options.idle_s, help="the watch's --idle (seconds)")
    parser.add_argument("--seed", type=int, default=Options.seed)
    parser.add_argument("--scratch", type=Path, help="where the HOME, mirror and logs go (kept)")
    parser.add_argument("--json", type=Path, help="write the figures here too")
    parser.add_argument(
        "--backlog-bytes",
        type=int,
        help="the watch's pipeline bound (TRANSCRIPT_OTEL_MAX_BACKLOG_BYTES; default: its own, 64 MiB)",
    )
    parser.add_argument(
        "--scenario",
        action="append",
        default=[],
        help="copy only the recorded sessions whose name holds this (repeatable; e.g. subagent)",
    )
    parser.add_argument(
        "--pause",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stop the watch (SIGSTOP) this long every 5 to 10 s, as a loaded machine leaves it unscheduled",
    )
    args = parser.parse_args(argv)
    options = Options(
        args.sessions,
        args.minutes,
        args.sigterms,
        args.sigkills,
        args.idle,
        args.seed,
        args.scratch,
        args.backlog_bytes,
        tuple(args.scenario),
        args.pause,
    )
    soak = run_soak(options)
    print(report(soak))
    if args.json is not None:
        args.json.write_text(json.dumps(asdict(soak), indent=1, default=str))
    return 0 if soak.verdict.passed else 1


if __name__ == "__main__":
    sys.exit(main())
