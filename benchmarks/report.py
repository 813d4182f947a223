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
