"""Section 8: `transcript-otel import` of large Claude Code and Codex session logs (issue 32's
import target: >= 50 MB/s of session files, memory independent of file size).

The session files are synthesized from the real recorded fixtures, repeated until they weigh
about 10 MB, 100 MB and 200 MB (written once per run under a temp dir):

* Claude Code: `tests/fixtures/sessions/claude_code/parallel_subagents` (Claude Code 2.1.332):
  the main file (45 lines, 165 KB) and its two subagents' files (21 lines, 94 KB each). Each
  repetition appends every line of each file to the same file again, bookkeeping lines
  included (`queue-operation`, `api-request*`, `attachment`s, `last-prompt`, `cost-state`...: a
  real session file holds them, and they are most of its bytes), so the main agent launches the
  same two subagents (their `agentId`s and file names kept) once per repetition.
* Codex: `tests/fixtures/sessions/codex/shell` (Codex 0.171, one turn, 26 lines, 49 KB):
  `session_meta` once at the top, then lines 2-26 (`task_started` to `task_complete`) once per
  repetition: one turn each, its developer and environment messages and `world_state` kept.

In each repetition every id gets a fresh value: UUIDs (`uuid`, `parentUuid`, `promptId`,
`requestRef`, turn ids, Codex item ids; the session id is kept), message ids, tool call ids and
request / response ids (Claude `msg_`, `toolu_`, `req_`; Codex `call_`, `resp_` and their
prefixed forms), in the text that quotes them too (`<tool-use-id>`). Every `timestamp` is
shifted by the repetition's number times the fixture's duration rounded up to the second, plus
a second; Codex `ordinal`s go on counting; Claude `cost-state` (cumulative over the session)
has its cost and token totals times the repetition's number, so each repetition reports the
same cost again.

Measured per CLI and size, each in a fresh child process (`python bench_sessions.py MODE ...`),
the two kinds taking turns (this machine's speed drifts over seconds), one untimed warm-up pair
then `PAIRS` timed pairs:

* *import*: `import_session(find_sessions([main file]), mirror dir)` as `transcript-otel import`
  calls it (JSONL mirror only, redaction on, the environment's `OTEL_*`/`TRANSCRIPT_OTEL_*`
  removed), timed from the call to its return (the run's file moved into place; the pipeline
  shut down); MB/s = the session files' bytes (all of them) / that time (MB = 10^6 bytes). The
  run's file is deleted after each run.
* *json.loads floor*: every file of the session read in binary, a line at a time, and each line
  given to stdlib `json.loads` (what the mappers parse with): what any importer pays.
* the ratios: the median of import time / floor time over the pairs.
* *peak RSS*: the child's `ru_maxrss` when the call returns (what the whole process held at
  its peak, the interpreter and the modules included; the run's file is counted after), and the
  growth during the call: the peak sampled every 10 ms by `RssSampler`, minus the RSS just
  before it. The 100 MB / 10 MB ratio of the growth shows whether memory grows with file size.
* *entries*: the entries the import recorded (`transcript.entry` records in the run's file,
  and the returned summary's count) against the entries the session's lines carry, counted
  once per file in another child by giving every line, in file order, to the CLI's own mapper
  (`HARNESSES[kind].mapper(None)`; that pass is timed too, once: *the mapper alone*, the lines
  read with `for line in file` and mapped, no timeline, no run); and the run's
  `transcript.error` records and dropped entries (`transcript.stop`), which must be 0.

*Many sessions* (what `transcript-otel import --claude-code` or `--codex` meets): one session of
2.5 MB synthesized as above, copied 40 times under session ids of their own (100 MB a CLI), and
the directory imported by the CLI in a child process (its start-up included) with `--jobs 1` and
with `--jobs` at its default (one worker per CPU), taking turns: one warm-up pair, 3 timed pairs.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, Final

HERE: Final = Path(__file__).resolve().parent
FIXTURES: Final = HERE.parent / "tests" / "fixtures" / "sessions"
CLAUDE_PROJECT: Final = (
    FIXTURES / "claude_code" / "parallel_subagents" / "home" / ".claude" / "projects" / "-scratch-work"
)
CLAUDE_SESSION: Final = "095e7926-878b-4089-b795-e4a102449eea"
CODEX_SESSIONS: Final = FIXTURES / "codex" / "shell" / "codex-home" / "sessions"
CODEX_SESSION: Final = "01a21c28-b7ba-7e13-8674-ef3d7d360718"
MB: Final = 1_000_000
SIZES: Final = (("10mb", "10 MB", 10 * MB), ("100mb", "100 MB", 100 * MB), ("200mb", "200 MB", 200 * MB))
KINDS: Final = (("claude_code", "Claude Code"), ("codex", "Codex"))
PAIRS: Final = {"10mb": 7, "100mb": 5, "200mb": 3}  # timed pairs after one warm-up pair
_ENTRY: Final = b'"event":"transcript.entry"'
_ERROR: Final = b'"event":"transcript.error"'

# -- synthesizing the session files -------------------------------------------------------

_UUID: Final = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_IDS: Final = r"msg_scripted_\d+|toolu_[A-Za-z0-9_]+|req_scripted|call_shell_\d+|resp_scripted_[0-9_]*[0-9]"
_TIME: Final = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
# One token of a template line: a time, an ordinal, a UUID or another id.
_TOKEN: Final = re.compile(f'({_TIME}|"ordinal":\\d+|{_UUID}|{_IDS})')
_NAMESPACE: Final = uuid.UUID("5b1e2c3d-4f50-4a6b-9c7d-8e9fa0b1c2d3")


def _parse_time(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=UTC)


class _Template:
    """One file's lines cut into text and tokens; `render(rep)` gives them for repetition `rep`."""

    def __init__(self, lines: list[str], keep: frozenset[str], ordinals: int) -> None:
        self.lines = [_TOKEN.split(line) for line in lines]  # odd positions are tokens
        self.keep = keep  # ids kept in every repetition (the session's, the subagents')
        self.ordinals = ordinals  # how far a repetition moves the Codex ordinals
        self.period = timedelta(0)

    def times(self) -> list[datetime]:
        return [_parse_time(p) for parts in self.lines for p in parts[1::2] if re.fullmatch(_TIME, p)]

    def render(self, rep: int, cost: Callable[[str, int], str] | None = None) -> str:
        mapping: dict[str, str] = {}
        out: list[str] = []
        for parts in self.lines:
            pieces = list(parts)
            for index in range(1, len(pieces), 2):
                token = pieces[index]
                new = mapping.get(token)
                if new is None:
                    new = mapping[token] = self._fresh(token, rep)
                pieces[index] = new
            line = "".join(pieces)
            if cost is not None and line.startswith('{"type":"cost-state"'):
                line = cost(line, rep)
            out.append(line)
        return "".join(out)

    def _fresh(self, token: str, rep: int) -> str:
        if rep == 0 or token in self.keep:
            return token
        if token.startswith('"ordinal":'):
            return f'"ordinal":{int(token[10:]) + rep * self.ordinals}'
        if re.fullmatch(_TIME, token):
            moved = _parse_time(token) + rep * self.period
            return moved.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moved.microsecond // 1000:03d}Z"
        if re.fullmatch(_UUID, token):
            return str(uuid.uuid5(_NAMESPACE, f"{token}:{rep}"))
        return f"{token}_r{rep}"


def _scaled_cost(line: str, rep: int) -> str:
    """`cost-state` is cumulative over the session: repetition `rep` reports `rep + 1` times it."""
    state = json.loads(line)
    factor = rep + 1
    state["totalCostUSD"] = state["totalCostUSD"] * factor
    for usage in state.get("modelUsage", {}).values():
        for key, value in usage.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                usage[key] = value * factor
    return json.dumps(state, separators=(",", ":"), ensure_ascii=False) + "\n"


def _templates(kind: str) -> list[tuple[Path, list[str], list[str]]]:
    """(path relative to the home, header lines written once, lines repeated) per file."""
    if kind == "claude_code":
        main = CLAUDE_PROJECT / f"{CLAUDE_SESSION}.jsonl"
        files = [main, *sorted((CLAUDE_PROJECT / CLAUDE_SESSION / "subagents").glob("agent-*.jsonl"))]
        return [(path.relative_to(CLAUDE_PROJECT.parent.parent), [], _lines(path)) for path in files]
    (rollout,) = CODEX_SESSIONS.rglob("rollout-*.jsonl")
    lines = _lines(rollout)
    assert '"type":"session_meta"' in lines[0]
    return [(rollout.relative_to(CODEX_SESSIONS.parent), lines[:1], lines[1:])]


def _lines(path: Path) -> list[str]:
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    assert all(line.endswith("\n") for line in lines), path
    return lines


def synthesize(kind: str, target_bytes: int, home: Path) -> dict[str, Any]:
    """Write a session of `kind` of about `target_bytes` (all its files) under `home`."""
    keep = frozenset({CLAUDE_SESSION, CODEX_SESSION})
    planned = []
    for relative, header, body in _templates(kind):
        ordinals = len(body) if kind == "codex" else 0
        planned.append((home / relative, header, _Template(body, keep, ordinals)))
    times = [moment for _, _, template in planned for moment in template.times()]
    seconds = (max(times) - min(times)).total_seconds()
    period = timedelta(seconds=int(seconds) + 2)  # the fixture's duration rounded up, plus a second
    for _, _, template in planned:
        template.period = period
    written = 0
    handles = []
    for path, header, _ in planned:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle = path.open("w", encoding="utf-8")
        text = "".join(header)
        handle.write(text)
        written += len(text.encode())
        handles.append(handle)
    rep = 0
    cost = _scaled_cost if kind == "claude_code" else None
    while written < target_bytes:
        for handle, (_, _, template) in zip(handles, planned, strict=True):
            text = template.render(rep, cost)
            handle.write(text)
            written += len(text.encode())
        rep += 1
    for handle in handles:
        handle.close()
    paths = [path for path, _, _ in planned]
    return {
        "main": str(paths[0]),
        "files": len(paths),
        "bytes": sum(path.stat().st_size for path in paths),
        "repetitions": rep,
        "lines": sum(_count_lines(path) for path in paths),
    }


def _count_lines(path: Path) -> int:
    with path.open("rb") as stream:
        return sum(chunk.count(b"\n") for chunk in iter(lambda: stream.read(1 << 20), b""))


# -- the children -------------------------------------------------------------------------


def _session(main: str) -> Any:
    from transcript_otel.sessions.files import find_sessions

    (session,) = find_sessions([Path(main)])
    return session


def _count_in_file(path: Path, needles: tuple[bytes, ...]) -> list[int]:
    """How often each needle occurs in `path`, read in 16 MiB pieces (none spans two)."""
    counts = [0] * len(needles)
    keep = max(map(len, needles)) - 1
    tail = b""
    with path.open("rb") as stream:
        while chunk := stream.read(16 << 20):
            data = tail + chunk
            for index, needle in enumerate(needles):
                counts[index] += data.count(needle) - tail.count(needle)
            tail = data[-keep:]
    return counts


def child_import(main: str, mirror: str) -> dict[str, Any]:
    import gc

    from harness import RssSampler, peak_rss_bytes
    from transcript_otel.sessions.importer import import_session

    session = _session(main)
    directory = Path(mirror)
    gc.collect()
    with RssSampler() as rss:
        started = time.perf_counter_ns()
        imported = import_session(session, directory)
        elapsed = time.perf_counter_ns() - started
    peak = peak_rss_bytes()  # before the run's file is read back below
    entries, errors = _count_in_file(imported.path, (_ENTRY, _ERROR))
    dropped = 0
    with imported.path.open("rb") as stream:  # transcript.stop is the last record or close to it
        stream.seek(max(0, imported.path.stat().st_size - (1 << 20)))
        for line in stream.read().splitlines():
            if b'"event":"transcript.stop"' in line:
                dropped = int(json.loads(line)["context"].get("dropped_entries") or 0)
    mirror_bytes = imported.path.stat().st_size
    imported.path.unlink()
    return {
        "seconds": elapsed / 1e9,
        "rss_start": rss.start,
        "rss_growth": rss.growth,
        "peak_rss": peak,
        "entries": entries,
        "summary_entries": imported.summary.total_entries,
        "errors": errors,
        "dropped": dropped,
        "mirror_bytes": mirror_bytes,
    }


def child_floor(main: str, parser: str) -> dict[str, Any]:
    import gc

    from harness import RssSampler, peak_rss_bytes

    loads: Callable[[bytes], Any] = json.loads
    if parser == "orjson":
        import orjson

        loads = orjson.loads
    session = _session(main)
    gc.collect()
    with RssSampler() as rss:
        started = time.perf_counter_ns()
        lines = 0
        for path, _source in session.sources():
            with path.open("rb") as stream:
                for line in stream:
                    loads(line)
                    lines += 1
        elapsed = time.perf_counter_ns() - started
    return {
        "seconds": elapsed / 1e9,
        "rss_start": rss.start,
        "rss_growth": rss.growth,
        "peak_rss": peak_rss_bytes(),
        "lines": lines,
    }


def child_count(main: str) -> dict[str, Any]:
    """The entries the session's lines carry, by the CLI's own mapper, file by file in file order."""
    from transcript_otel.sessions.recorder import HARNESSES

    session = _session(main)
    harness = HARNESSES[session.kind]
    map_line = harness.mapper(None, session.path)  # read from its first line: no report before it
    lines = carrying = entries = 0
    started = time.perf_counter_ns()
    for path, source in session.sources():
        with path.open("rb") as stream:
            for line in stream:
                said = map_line(line.rstrip(b"\r\n"), source)
                lines += 1
                carrying += bool(said.entries)
                entries += len(said.entries)
    elapsed = time.perf_counter_ns() - started
    return {"lines": lines, "lines_with_entries": carrying, "entries": entries, "seconds": elapsed / 1e9}


# -- the parent -----------------------------------------------------------------------------


def _environment() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("OTEL_", "TRANSCRIPT_OTEL_"))}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(HERE), env.get("PYTHONPATH", "")]))
    return env


def _child(*args: str) -> dict[str, Any]:
    completed = subprocess.run(
        [sys.executable, __file__, *args],
        capture_output=True,
        text=True,
        check=False,
        env=_environment(),
        timeout=1800,
    )
    lines = completed.stdout.strip().splitlines()
    if completed.returncode != 0 or not lines:
        raise RuntimeError(f"{args[0]} child exited with {completed.returncode}: {completed.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(lines[-1])
    return result


def _median(runs: list[dict[str, Any]], key: str) -> float:
    return float(statistics.median(run[key] for run in runs))


def measure(kind: str, size_key: str, target: int, scratch: Path) -> dict[str, Any]:
    home = scratch / f"{kind}-{size_key}"
    started = time.monotonic()
    synthesized = synthesize(kind, target, home)
    synthesize_s = time.monotonic() - started
    main = synthesized["main"]
    mirror = str(scratch / "mirror")
    counted = _child("count", main)
    imports: list[dict[str, Any]] = []
    floors: list[dict[str, Any]] = []
    orjson_floors: list[dict[str, Any]] = []
    pairs = PAIRS[size_key]
    for index in range(1 + pairs):  # the first pair is the warm-up
        order = ("import", "floor") if index % 2 else ("floor", "import")
        done: dict[str, dict[str, Any]] = {}
        for mode in order:
            done[mode] = _child("import", main, mirror) if mode == "import" else _child("floor", main, "json")
        orjson = _child("floor", main, "orjson")
        if index:
            imports.append(done["import"])
            floors.append(done["floor"])
            orjson_floors.append(orjson)
    shutil.rmtree(home)
    size = synthesized["bytes"]
    import_s = [run["seconds"] for run in imports]
    return {
        "kind": kind,
        "size": size_key,
        **synthesized,
        "synthesize_s": synthesize_s,
        "counted": counted,
        "mapper_mb_per_s": size / MB / counted["seconds"],
        "pairs": pairs,
        "import_s": import_s,
        "import_median_s": statistics.median(import_s),
        "import_best_s": min(import_s),
        "mb_per_s": size / MB / statistics.median(import_s),
        "mb_per_s_best": size / MB / min(import_s),
        "floor_median_s": _median(floors, "seconds"),
        "floor_mb_per_s": size / MB / _median(floors, "seconds"),
        "orjson_median_s": _median(orjson_floors, "seconds"),
        "orjson_mb_per_s": size / MB / _median(orjson_floors, "seconds"),
        "ratio_floor": statistics.median(
            i["seconds"] / f["seconds"] for i, f in zip(imports, floors, strict=True)
        ),
        "ratio_orjson": statistics.median(
            i["seconds"] / f["seconds"] for i, f in zip(imports, orjson_floors, strict=True)
        ),
        "peak_rss": _median(imports, "peak_rss"),
        "peak_rss_max": max(run["peak_rss"] for run in imports),
        "rss_growth": _median(imports, "rss_growth"),
        "rss_growth_max": max(run["rss_growth"] for run in imports),
        "rss_start": _median(imports, "rss_start"),
        "floor_peak_rss": _median(floors, "peak_rss"),
        "floor_rss_growth": _median(floors, "rss_growth"),
        "entries": sorted({run["entries"] for run in imports}),
        "summary_entries": sorted({run["summary_entries"] for run in imports}),
        "errors": sum(run["errors"] for run in imports),
        "dropped": sum(run["dropped"] for run in imports),
        "mirror_bytes": imports[-1]["mirror_bytes"],
        "floor_lines": floors[-1]["lines"],
    }


# -- many sessions: `transcript-otel import DIR`, one session per worker process ----------------

MANY_SESSIONS: Final = 40
MANY_SESSION_BYTES: Final = int(2.5 * MB)  # 40 sessions of 2.5 MB: 100 MB a CLI
MANY_PAIRS: Final = 3


def synthesize_many(kind: str, home: Path, count: int = MANY_SESSIONS) -> dict[str, Any]:
    """`count` sessions of `kind` under `home`, each a copy of one synthesized session of
    `MANY_SESSION_BYTES` under a session id of its own (in its files' names and lines)."""
    one = synthesize(kind, MANY_SESSION_BYTES, home / "template")
    session_id = CLAUDE_SESSION if kind == "claude_code" else CODEX_SESSION
    template = home / "template"
    files = sorted(template.rglob("*.jsonl"))
    for index in range(count):
        new_id = str(uuid.uuid5(_NAMESPACE, f"{kind}:session:{index}"))
        for path in files:
            target = home / "sessions" / str(path.relative_to(template)).replace(session_id, new_id)
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(path.read_bytes().replace(session_id.encode(), new_id.encode()))
    shutil.rmtree(template)
    root = home / "sessions"
    return {
        "root": str(root),
        "sessions": count,
        "bytes": sum(path.stat().st_size for path in root.rglob("*.jsonl")),
        "lines_each": one["lines"],
    }


def _cli_import(root: str, mirror: Path, jobs: int) -> float:
    """The wall time of `transcript-otel import --jobs N ROOT`, the interpreter's start included."""
    shutil.rmtree(mirror, ignore_errors=True)
    started = time.perf_counter()
    completed = subprocess.run(
        [
            sys.executable,
            "-m",
            "transcript_otel.cli",
            "import",
            "--jobs",
            str(jobs),
            "--jsonl-dir",
            str(mirror),
            root,
        ],
        capture_output=True,
        text=True,
        check=False,
        env=_environment(),
        timeout=1800,
    )
    elapsed = time.perf_counter() - started
    if completed.returncode != 0:
        raise RuntimeError(
            f"import --jobs {jobs} exited with {completed.returncode}: {completed.stderr[-2000:]}"
        )
    return elapsed


def measure_many(kind: str, scratch: Path) -> dict[str, Any]:
    """`MANY_SESSIONS` sessions imported by the CLI one at a time (`--jobs 1`) and with one worker
    per CPU (`--jobs` its default), taking turns: one untimed warm-up pair, `MANY_PAIRS` timed."""
    home = scratch / f"{kind}-many"
    made = synthesize_many(kind, home)
    mirror = scratch / "mirror-many"
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    serial: list[float] = []
    parallel: list[float] = []
    for index in range(1 + MANY_PAIRS):
        order = (1, cpus) if index % 2 else (cpus, 1)
        times = {jobs: _cli_import(made["root"], mirror, jobs) for jobs in order}
        if index:
            serial.append(times[1])
            parallel.append(times[cpus])
    runs = len(list(mirror.glob("*.jsonl")))
    shutil.rmtree(home)
    shutil.rmtree(mirror, ignore_errors=True)
    size = made["bytes"]
    return {
        "kind": kind,
        **made,
        "cpus": cpus,
        "runs_written": runs,
        "serial_s": serial,
        "parallel_s": parallel,
        "serial_mb_per_s": size / MB / statistics.median(serial),
        "parallel_mb_per_s": size / MB / statistics.median(parallel),
        "parallel_best_mb_per_s": size / MB / min(parallel),
        "speedup": statistics.median(s / p for s, p in zip(serial, parallel, strict=True)),
    }


def main(sizes: tuple[str, ...] = ("10mb", "100mb", "200mb", "many")) -> dict[str, Any]:
    results: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="bench-sessions-") as directory:
        scratch = Path(directory)
        for size_key, _label, target in SIZES:
            if size_key not in sizes:
                continue
            for kind, _ in KINDS:
                results.append(measure(kind, size_key, target, scratch))
                print(
                    f"[bench] sessions {kind} {size_key}: {results[-1]['mb_per_s']:.1f} MB/s",
                    file=sys.stderr,
                    flush=True,
                )
        many: list[dict[str, Any]] = []
        if "many" in sizes:
            for kind, _ in KINDS:
                many.append(measure_many(kind, scratch))
                print(
                    f"[bench] sessions {kind} many: {many[-1]['parallel_mb_per_s']:.1f} MB/s",
                    file=sys.stderr,
                    flush=True,
                )
    return {"sessions": {"results": results, "many": many}}


if __name__ == "__main__":
    sys.path[:0] = [str(HERE)]
    mode, *rest = sys.argv[1:]
    if mode == "import":
        print(json.dumps(child_import(*rest)))
    elif mode == "floor":
        print(json.dumps(child_floor(*rest)))
    elif mode == "count":
        print(json.dumps(child_count(*rest)))
    elif mode == "synthesize":  # python bench_sessions.py synthesize KIND BYTES DIR: to look at one
        print(json.dumps(synthesize(rest[0], int(rest[1]), Path(rest[2]))))
    else:
        raise SystemExit(f"unknown mode {mode!r}")
