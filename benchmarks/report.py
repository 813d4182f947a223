"""Turning the sections' JSON into the printed report, ratios included."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from entries import SIZES, all_entries
from harness import Stat, fmt_bytes, fmt_ns
from results import Row, render_table

RATIO_SECTION = "ratios: ours / baseline (medians of this run; < 1 means ours is cheaper)"

# (our row name prefix, baseline row name prefix, label)
_RATIOS = (
    (
        "hot loop",
        "weakincentives 0.27.0 emit(), logging off",
        "hot loop / weakincentives emit(), logging off",
    ),
    (
        "hot loop",
        "weakincentives 0.27.0 emit(), bundle JSONL",
        "hot loop / weakincentives emit() + bundle JSONL",
    ),
    ("hot loop", "bare OTel SDK logger.emit()", "hot loop / bare OTel SDK logger.emit()"),
    ("capture off", "weakincentives 0.27.0 emit(), logging off", "capture off / weakincentives, logging off"),
)
_PACED_RATIOS = (
    ("weakincentives 0.27.0 emit(), logging off", "weakincentives emit(), logging off"),
    ("weakincentives 0.27.0 emit(), bundle JSONL", "weakincentives emit() + bundle JSONL"),
    ("bare OTel SDK logger.emit()", "bare OTel SDK logger.emit()"),
)


def _rows(payload: dict[str, Any]) -> list[Row]:
    return [Row.from_json(row) for row in payload.get("rows", [])]


def _find(rows: list[Row], prefix: str) -> Row | None:
    for row in rows:
        if row.name.startswith(prefix):
            return row
    return None


def _following(rows: list[Row], prefix: str, suffix: str) -> Row | None:
    """The `  same, ...` row that follows the row named `prefix`."""
    for index, row in enumerate(rows):
        if row.name.startswith(prefix):
            for later in rows[index + 1 :]:
                if not later.name.startswith("  "):
                    break
                if later.name.endswith(suffix):
                    return later
    return None


def _ratio_row(name: str, ours: Row | None, base: Row | None) -> Row | None:
    if ours is None or base is None:
        return None
    row = Row(RATIO_SECTION, name, "ratio")
    for key, _ in SIZES:
        mine, theirs = ours.cells.get(key), base.cells.get(key)
        if mine is not None and theirs is not None and theirs.median > 0:
            row.cells[key] = Stat([mine.median / theirs.median])
    return row


def ratio_rows(agent: list[Row], baselines: list[Row]) -> list[Row]:
    produced: list[Row] = []
    for ours_prefix, base_prefix, label in _RATIOS:
        row = _ratio_row(label, _find(agent, ours_prefix), _find(baselines, base_prefix))
        if row is not None:
            produced.append(row)
    for quantile in ("p50", "p99"):
        ours = _find(agent, f"paced 2.0 ms: {quantile}")
        for base_prefix, label in _PACED_RATIOS:
            base = _following(baselines, base_prefix, f"paced 2.0 ms: {quantile}")
            row = _ratio_row(f"paced 2.0 ms {quantile} / {label}", ours, base)
            if row is not None:
                produced.append(row)
    return produced


def render_entries() -> str:
    lines = ["| entry | detail JSON | raw | detail nodes |", "|---|---|---|---|"]
    for entry in all_entries():
        lines.append(
            f"| {entry.label} ({entry.detail['notification']['item']['type']}) | "
            f"{entry.detail_json_bytes:,} B | {entry.raw_bytes:,} B | {entry.nodes:,} |"
        )
    return "\n".join(lines)


def render_memory(results: list[dict[str, Any]]) -> str:
    lines = [
        "| variant (10,000 distinct 50 KB entries) | accepted | dropped | limit (entries) "
        "| RSS growth, peak | growth / bound | drops reported | emit() p50 accepting / dropping |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for result in results:
        if "error" in result:
            lines.append(f"| {result['label']} | error: {result['error'][-300:]} |||||||")
            continue
        lines.append(
            f"| {result['label']} | {result['accepted']:,} | {result['dropped']:,} "
            f"| {result['backlog_limit_entries']:,} | {fmt_bytes(result['rss_growth_peak'])} "
            f"| {result['growth_over_bound']:.2f}x | {result['drops_reported_in_error_records']:,} "
            f"| {fmt_ns(result['emit_p50_accepted_ns'])} / {fmt_ns(result['emit_p50_dropped_ns'])} |"
        )
    return "\n".join(lines)


_BACKENDS = {"refused": "port closed (refused)", "silent": "accepts, never answers"}
_QUEUES = {
    "configure": "configure(): BoundedLogRecordProcessor, 8 MiB",
    "sdk_batch": "baseline: SDK BatchLogRecordProcessor, batch 64",
}


def _count(value: Any) -> str:
    return "not counted" if value is None else f"{value:,}"


def render_outage(results: list[dict[str, Any]]) -> str:
    """One line per (entry size, backend, export queue); our growth over the baseline's."""
    baseline_growth = {
        (result["key"], result["backend"]): result["rss_growth_peak"]
        for result in results
        if result["queue"] == "sdk_batch" and "error" not in result
    }
    lines = [
        "| entry | backend down as | export queue | RSS growth, peak (after half the entries) "
        "| growth / 64 MiB bound "
        "| growth / baseline's | dropped by the export queue | transcript.error about otel_logs "
        "| entries in the mirror | in failed exports (reported in the mirror) "
        "| neither exported nor reported | shutdown() "
        "| emitting took |",
        "|" + "---|" * 13,
    ]
    for result in results:
        head = f"| {result['label']} | {_BACKENDS[result['backend']]} | {_QUEUES[result['queue']]} "
        if "error" in result:
            lines.append(head + f"| error: {result['error'][-300:]} |||||||||")
            continue
        baseline = baseline_growth.get((result["key"], "refused"))
        versus = (
            f"{result['rss_growth_peak'] / baseline:.2f}x"
            if baseline and result["queue"] != "sdk_batch"
            else "—"
        )
        lines.append(
            head
            + f"| {fmt_bytes(result['rss_growth_peak'])} ({fmt_bytes(result['rss_growth_peak_first_half'])}) "
            f"| {result['growth_over_bound']:.2f}x "
            f"| {versus} | {_count(result['export_dropped'])} | {result['export_drop_reports']:,} "
            f"| {result['mirror_entries']:,} of {result['entries']:,} "
            f"| {result['export_failed']:,} ({result.get('export_failed_reported', 0):,}) "
            f"| {result['lost_unreported']:,} | {result['shutdown_s']:.2f} s | {result['emitting_s']:.1f} s |"
        )
    return "\n".join(lines)


def render_growth_by_minute(result: dict[str, Any]) -> str:
    """The peak RSS growth so far after each minute: flat once the queues are full."""
    peaks = ", ".join(
        f"{minute}: {fmt_bytes(growth)}" for minute, growth in enumerate(result["rss_growth_peak_by_part"], 1)
    )
    return f"Peak RSS growth so far, after each minute: {peaks}."


def render_e2e(result: dict[str, Any]) -> str:
    def seconds(value: float | None) -> str:
        return "n/a" if value is None else f"{value * 1000:.1f} ms"

    labels = {
        "uninstrumented": "uninstrumented",
        "instrumented": "instrumented: configure(), JSONL mirror + OTLP/HTTP to rotel",
    }
    phase_labels = {
        "first": f"first evaluate() of each process ({result['runs']} processes of each kind)",
        "later": (
            f"later evaluate()s ({result['later_runs']} per process, {result['runs']} processes "
            "of each kind): what a long-running agent pays per run"
        ),
    }
    lines = [
        "| run | evaluate(): median [best] | p25 to p75 | agent thread CPU | process CPU, all threads "
        "| runs |",
        "|---|---|---|---|---|---|",
    ]
    for phase, summaries in result["phases"].items():
        lines.append(f"| **{phase_labels[phase]}** | | | | | |")
        for mode, summary in summaries.items():
            failed = summary["errors"]
            errors = f" ({len(failed)} processes failed: {failed[0][-200:]})" if failed else ""
            lines.append(
                f"| {labels.get(mode, mode)} | {seconds(summary['median_s'])} [{seconds(summary['best_s'])}] "
                f"| {seconds(summary['p25_s'])} to {seconds(summary['p75_s'])} "
                f"| {seconds(summary['agent_thread_cpu_s'])} | {seconds(summary['process_cpu_s'])} "
                f"| {len(summary['seconds'])}{errors} |"
            )

        def ratio_cell(ratio: float | None) -> str:
            return "" if ratio is None else f"{ratio:.3f}x ({(ratio - 1) * 100:+.1f}%)"

        for label, ratio, cpu_ratio in (
            (
                "instrumented / uninstrumented (medians)",
                result["ratios"].get(phase),
                result.get("cpu_ratios", {}).get(phase),
            ),
            (
                "median of instrumented / uninstrumented, run back to back",
                result["paired_ratios"].get(phase),
                result.get("paired_cpu_ratios", {}).get(phase),
            ),
        ):
            if ratio is not None:
                lines.append(f"| {label} | {ratio_cell(ratio)} | | {ratio_cell(cpu_ratio)} | | |")
    captures = result["captures"]
    lines.append("")
    if captures:
        entries = sorted({capture["mirror_entries"] for capture in captures})
        complete = sum(capture["mirror_entries"] == result["expected_entries"] for capture in captures)
        first = captures[0]
        by_type = ", ".join(f"{name} {count}" for name, count in first["entry_types"].items())
        lines.append(
            f"Captured by the instrumented runs: {'/'.join(str(n) for n in entries)} entries in each "
            f"mirror, {result['expected_entries']} expected (what weakincentives' Codex bridge emits "
            f"for the {result['notifications']:,} notifications); complete in {complete} of "
            f"{len(captures)} runs. By type: {by_type}. {first['spans']} spans; transcript.error "
            f"records {sum(capture['errors'] for capture in captures)}, pipeline drops "
            f"{sum(capture['pipeline_dropped'] for capture in captures)}, export queue drops "
            f"{result['export_dropped']}, records in failed exports {result['export_failed']}, "
            f"flushes after an evaluation that timed out {result['flushes_timed_out']} "
            "(totals over the timed processes)."
        )
    return "\n".join(lines)


def render_run(run: dict[str, Any]) -> str:
    """One line per output size: the command's time with and without the wrapper, the lines
    recorded; then the random bytes and the slow reader."""
    lines = [
        "| CMD prints | command time, direct | under run | ratio (median of pairs) | wrapper start to exit "
        "| lines recorded (lowest run) | output byte for byte | recorded + reported = printed |",
        "|" + "---|" * 8,
    ]
    for printer in run["printers"]:
        direct, wrapped = printer["direct_s"], printer["command_s"]
        lines.append(
            f"| {printer['label']} | {direct * 1000:.0f} ms | {wrapped * 1000:.0f} ms "
            f"| {printer['ratio']:.2f}x | {printer['exit_s']:.2f} s "
            f"| {printer['recorded']:.1%} ({printer['recorded_min']:.1%}) | {_yes(printer['exact'])} "
            f"| {_yes(printer['reported_ok'])} |"
        )
    random = run["random"]
    lines.append(
        f"| 20 MB of random bytes | {random['direct_s'] * 1000:.0f} ms | {random['command_s'] * 1000:.0f} ms "
        f"| {random['ratio']:.2f}x | {random['exit_s']:.2f} s | — "
        f"| {_yes(random['exact'])} | — |"
    )
    slow = run["slow_reader"]
    return "\n".join(lines) + (
        f"\n\nA slow reader (4 KiB reads, 5 ms apart) of `seq 1 200000`: {slow['delivered']:.1%} of the "
        f"bytes delivered in {slow['read_s']:.2f} s, wrapper exit status {slow['status']}."
    )


def _ms(median_s: float | None, best_s: float | None) -> str:
    if median_s is None or best_s is None:
        return "—"
    return f"{median_s * 1000:.1f} ms [{best_s * 1000:.1f} ms]"


def render_import(result: dict[str, Any]) -> str:
    """One line per statement run in fresh processes; then the ratios to the baselines."""
    lines = [
        "| `python -c` | statement: median [best] | process start to exit: median [best] | modules "
        "| ours | heavy modules loaded |",
        "|---|---|---|---|---|---|",
    ]
    for variant in result["variants"]:
        heavy = ", ".join(variant["heavy"]) or "none"
        lines.append(
            f"| {variant['label']} | {_ms(variant['import_median_s'], variant['import_best_s'])} "
            f"| {_ms(variant['process_median_s'], variant['process_best_s'])} | {variant['modules']:.0f} "
            f"| {variant.get('ours', 0):.0f} | {heavy} |"
        )
    for ratio in result["ratios"]:
        lines.append(
            f"| {ratio['label']} | {ratio['median_of_pairs']:.2f}x "
            f"(median of pairs) [{ratio['of_best']:.2f}x of the best] | | | | |"
        )
    if result.get("instrument") is None:
        lines += ["", "`opentelemetry-instrument` is not installed here: its rows were left out."]
    return "\n".join(lines)


_SESSION_KINDS = {"claude_code": "Claude Code", "codex": "Codex"}
_SESSION_SIZES = {"10mb": 10, "100mb": 100, "200mb": 200}


def render_sessions(sessions: dict[str, Any]) -> str:
    """One line per CLI and size: import MB/s against the json.loads floor, memory, entries;
    then how the memory grows from the smallest size to the larger ones."""
    lines = [
        "| session (files, lines, repetitions) | import: median [best] | MB/s: median [best] "
        "| json.loads floor | import / floor (median of pairs) | orjson floor | import / orjson "
        "| the mapper alone | peak RSS, process | RSS growth in the call (max) "
        "| entries recorded / carried by the lines (lines carrying them) | errors, dropped |",
        "|" + "---|" * 12,
    ]
    results = sessions["results"]
    for result in results:
        counted = result["counted"]
        recorded = "/".join(f"{n:,}" for n in result["entries"])
        complete = result["entries"] == [counted["entries"]] == result["summary_entries"]
        lines.append(
            f"| {_SESSION_KINDS[result['kind']]} {result['bytes'] / 1e6:.1f} MB ({result['files']}, "
            f"{result['lines']:,}, {result['repetitions']:,}) "
            f"| {result['import_median_s']:.2f} s [{result['import_best_s']:.2f} s] "
            f"| {result['mb_per_s']:.1f} [{result['mb_per_s_best']:.1f}] "
            f"| {result['floor_mb_per_s']:.0f} MB/s | {result['ratio_floor']:.1f}x "
            f"| {result['orjson_mb_per_s']:.0f} MB/s | {result['ratio_orjson']:.1f}x "
            f"| {result['mapper_mb_per_s']:.0f} MB/s "
            f"| {fmt_bytes(result['peak_rss'])} ({fmt_bytes(result['peak_rss_max'])} max) "
            f"| {fmt_bytes(result['rss_growth'])} ({fmt_bytes(result['rss_growth_max'])}) "
            f"| {recorded} / {counted['entries']:,} ({counted['lines_with_entries']:,}) "
            f"{'complete' if complete else 'MISMATCH'} | {result['errors']}, {result['dropped']} |"
        )
    growth: list[str] = []
    for kind, label in _SESSION_KINDS.items():
        mine = {r["size"]: r for r in results if r["kind"] == kind}
        base = mine.get("10mb")
        if base is None:
            continue
        for size in ("100mb", "200mb"):
            if size in mine:
                other = mine[size]
                growth.append(
                    f"{label} {_SESSION_SIZES[size]} MB / 10 MB: peak RSS "
                    f"{other['peak_rss'] / base['peak_rss']:.2f}x, growth in the call "
                    f"{other['rss_growth'] / max(base['rss_growth'], 1):.2f}x "
                    f"(files {other['bytes'] / base['bytes']:.1f}x)"
                )
        if "100mb" in mine and "200mb" in mine:
            small, large = mine["100mb"], mine["200mb"]
            growth.append(
                f"{label} 200 MB / 100 MB: peak RSS {large['peak_rss'] / small['peak_rss']:.2f}x, growth "
                f"in the call {large['rss_growth'] / max(small['rss_growth'], 1):.2f}x"
            )
    if growth:
        lines += ["", "Memory against file size: " + "; ".join(growth) + "."]
    many = sessions.get("many") or []
    if many:
        lines += [
            "",
            "| many sessions (`transcript-otel import DIR`) | runs written | `--jobs 1`: MB/s "
            "| `--jobs` default (CPUs): MB/s, median [best] | speed-up (median of pairs) |",
            "|---|---|---|---|---|",
        ]
        for result in many:
            lines.append(
                f"| {_SESSION_KINDS[result['kind']]}: {result['sessions']} sessions, "
                f"{result['bytes'] / 1e6:.0f} MB | {result['runs_written']} "
                f"| {result['serial_mb_per_s']:.1f} "
                f"| {result['parallel_mb_per_s']:.1f} [{result['parallel_best_mb_per_s']:.1f}] "
                f"({result['cpus']} workers) | {result['speedup']:.2f}x |"
            )
    return "\n".join(lines)


def render_watch(watch: dict[str, Any]) -> str:
    latency = watch["latency_s"]
    return "\n".join(
        [
            "| idle CPU, share of a core | a process that only sleeps "
            "| append -> mirror: p50 | p99 | worst |",
            "|---|---|---|---|---|",
            f"| {watch['idle_cpu_share']:.2%} | {watch['sleeping_process_cpu_share']:.2%} "
            f"| {fmt_ns(latency['p50'] * 1e9)} | {fmt_ns(latency['p99'] * 1e9)} "
            f"| {fmt_ns(latency['worst'] * 1e9)} |",
            *_state_rows(watch.get("state")),
        ]
    )


def _state_rows(state: dict[str, Any] | None) -> list[str]:
    """The state's saves: bytes written a round against the whole state."""
    if not state:
        return []
    share = state["bytes_per_round"] / state["whole_state_bytes"]
    return [
        "",
        f"| state: {state['sessions']:,} sessions, 3 gaining a line a round | whole state "
        "| written a round (journal folds included) | share of the whole | save CPU a round | round CPU |",
        "|---|---|---|---|---|---|",
        f"| {state['rounds']} rounds | {state['whole_state_bytes']:,} B | {state['bytes_per_round']:,.0f} B "
        f"| {share:.2%} | {fmt_ns(state['save_cpu_s_per_round'] * 1e9)} "
        f"| {fmt_ns(state.get('round_cpu_s', 0.0) * 1e9)} |",
    ]


def render_sdk(sdk: dict[str, Any]) -> str:
    """One block per scenario: the Python process's CPU per query() uninstrumented and
    instrumented, first query of a process and later ones, and the ratios."""

    def ms(value: float | None) -> str:
        if value is None:
            return "n/a"
        return f"{value * 1000:.1f} ms" if value < 1 else f"{value:.2f} s"

    phase_labels = {"first": "first query() of each process", "later": "later query()s"}
    lines = [
        "| scenario, query() | Python process CPU: median [best] | the agent's thread CPU "
        "| query() wall time | messages | queries | how they ended |",
        "|" + "---|" * 7,
    ]
    notes: list[str] = []
    for scenario in sdk["scenarios"]:
        name = scenario["scenario"]
        for phase, summaries in scenario["phases"].items():
            lines.append(f"| **{name}: {phase_labels[phase]}** | | | | | | |")
            for mode, summary in summaries.items():
                lines.append(
                    f"| {mode} | {ms(summary['process_cpu_s'])} [{ms(summary['best_process_cpu_s'])}] "
                    f"| {ms(summary['thread_cpu_s'])} | {ms(summary['query_s'])} "
                    f"| {summary['messages'] or 0:.0f} | {summary['queries']} "
                    f"| {', '.join(summary['results'])} |"
                )
            for label, ratio in (
                ("instrumented / uninstrumented, process CPU (medians)", scenario["ratios"][phase]),
                ("median of instrumented / uninstrumented, back to back", scenario["paired_ratios"][phase]),
            ):
                if ratio is not None:
                    lines.append(f"| {label} | {ratio:.3f}x ({(ratio - 1) * 100:+.1f}%) | | | | | |")
        failed = scenario["failed_pairs"]
        notes.append(
            f"{name}: {scenario['mirror_runs']} runs and {scenario['mirror_entries']:,} entries in the "
            f"instrumented processes' mirrors, transcript.error records {scenario['transcript_errors']}, "
            f"drops {scenario['dropped']}, flushes timed out {scenario['flushes_timed_out']}"
            + (f"; {len(failed)} pairs failed: {failed[0][-300:]}" if failed else "")
        )
    return "\n".join([*lines, "", "Captured: " + "; ".join(notes) + "."])


def _yes(value: bool) -> str:
    return "yes" if value else "NO"


def render_report(results: dict[str, dict[str, Any]], *, machine: str, total_s: float) -> str:
    when = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    out = [
        f"transcript-otel benchmarks, {when}",
        "",
        f"Machine: {machine}",
        f"Total time: {total_s:.0f} s. Cells: median over the timed runs [best run]; "
        "notes are totals over the timed runs.",
        "",
        "Test entries (Codex item/completed notifications, perf.md section 0):",
        "",
        render_entries(),
        "",
    ]
    agent = _rows(results.get("agent", {}))
    baselines = _rows(results.get("baselines", {}))
    rows = agent + baselines + ratio_rows(agent, baselines)
    for name in ("throughput", "redaction", "otlp"):
        rows += _rows(results.get(name, {}))
    if rows:
        out += [render_table(rows), ""]
    memory = results.get("memory", {}).get("memory")
    if memory:
        out += [
            "4. Memory: a sink that blocks, entries pile up in the backlog",
            "",
            render_memory(memory),
            "",
        ]
    outage = results.get("outage", {}).get("outage")
    if outage:
        out += [
            "4b. Backend outage: configure() as a user would, 6,000 distinct entries per run "
            "(one minute at 100 entries/s; ten minutes: section 4c, on demand), OTLP/HTTP to a "
            "dead loopback backend",
            "",
            render_outage(outage),
            "",
        ]
    outage_long = results.get("outage10", {}).get("outage_long")
    if outage_long:
        out += [
            "4c. A ten-minute backend outage (on demand): 100 entries/s of 50 KB for ten minutes, "
            "60,000 entries in the run's one span, configure() as in 4b, the OTLP port closed",
            "",
            render_outage(outage_long),
            "",
            *(render_growth_by_minute(result) for result in outage_long if "error" not in result),
            "",
        ]
    e2e = results.get("e2e", {}).get("e2e")
    if e2e:
        out += [
            f"5. End to end: weakincentives 0.27 Codex evaluate() over a scripted "
            f"{e2e['notifications']:,}-notification turn; {e2e['runs']} pairs of processes (one of "
            f"each kind, after one warm-up pair), each running {1 + e2e['later_runs']} evaluations, "
            "the two alternating",
            "",
            render_e2e(e2e),
            "",
        ]
    run = results.get("run", {}).get("run")
    if run:
        out += [
            "6. `transcript-otel run -- CMD` against CMD alone, fresh processes alternating, medians; "
            f"the wrapper alone (`run -- true`) takes {run['startup_s']:.2f} s from start to exit",
            "",
            render_run(run),
            "",
        ]
    imported = results.get("import", {}).get("import")
    if imported:
        out += [
            f"7. `import transcript_otel`, then a first emitter, in a fresh interpreter against the OTel "
            f"trace and logs APIs alone; `opentelemetry-instrument` with and without our entry points; "
            f"{imported['rounds']} rounds of fresh processes, the variants taking turns",
            "",
            render_import(imported),
            "",
        ]
    sessions = results.get("sessions", {}).get("sessions")
    if sessions:
        out += [
            "8. `transcript-otel import` (`import_session`) of session files synthesized from the "
            "recorded fixtures, fresh processes, import and the json.loads floor taking turns; "
            "MB = 10^6 bytes of session files (target: >= 50 MB/s, memory independent of file size)",
            "",
            render_sessions(sessions),
            "",
        ]
    watch = results.get("watch", {}).get("watch")
    if watch:
        out += [
            "9. `transcript-otel watch` following a home of 20 sessions written lately and 500 older "
            "ones (targets: idle CPU <= 1% of a core, an appended line in the mirror within 1 s, p99)",
            "",
            render_watch(watch),
            "",
        ]
    sdk = results.get("sdk", {}).get("sdk")
    if sdk:
        out += [
            f"10. claude-agent-sdk {sdk['sdk_version']} `query()` on the real Claude Code CLI "
            f"({sdk['cli']}) against the scripted model (its own process): CPU of the Python process, "
            f"with and without configure() (JSONL mirror, no OTLP endpoint); {sdk['pairs']} pairs of "
            f"fresh processes after one warm-up pair, each running {1 + sdk['later_queries']} queries, "
            "the two alternating (target: <= 1.05x)",
            "",
            render_sdk(sdk),
            "",
        ]
    for name, payload in results.items():
        info = payload.get("info")
        if info:
            for key, value in info.items():
                out.append(f"{name}: {key}: {value}")
        if "error" in payload:
            out.append(f"SECTION {name} FAILED: {payload['error']}")
            if payload.get("traceback"):
                out.append(payload["traceback"])
    return "\n".join(out).rstrip() + "\n"
