"""The HTML page's header: the run at a glance, from its `RunDigest`.

The prompt and status, then a list of facts (adapter, session, run and trace ids,
times, entry and token counts, cost, tool calls, errors, lanes, capture problems),
a table of the tools and the first errors. Each fact's `<dd>` names its field
(`data-field`) and holds its exact value (`data-value`) beside the text shown, for
the page's script and for tests; every text is escaped.
"""

from __future__ import annotations

from datetime import datetime
from html import escape
from typing import Any

from transcript_otel.reading.digest import TOKEN_NAMES, RunDigest
from transcript_otel.reading.text import usd_text
from transcript_otel.records.serialize import safe_text


def page_text(value: Any) -> str:
    """Text a UTF-8 page can hold (lone surrogates escaped)."""
    return safe_text(value if isinstance(value, str) else str(value))[0]


def _tokens_text(count: int) -> str:
    return f"{count:,}"


def _cost_text(cost: float) -> str:
    return usd_text(cost) if cost else "\u2014"


def _duration_text(seconds: float | None) -> str:
    if seconds is None:
        return "\u2014"
    if seconds < 60:
        return f"{seconds:.3f} s"
    minutes, rest = divmod(seconds, 60)
    if minutes < 60:
        return f"{int(minutes)} min {rest:04.1f} s"
    hours, minutes = divmod(int(minutes), 60)
    return f"{hours} h {minutes:02d} min {int(rest):02d} s"


def _moment_text(moment: datetime | None) -> str:
    return moment.isoformat(sep=" ", timespec="milliseconds") if moment else "\u2014"


def _fact(label: str, field: str, text: str, value: Any = None, *, title: str | None = None) -> str:
    data_value = "" if value is None else f' data-value="{escape(page_text(value))}"'
    hint = "" if title is None else f' title="{escape(page_text(title))}"'
    return (
        f'<div class="fact"><dt>{escape(label)}</dt>'
        f'<dd data-field="{field}"{data_value}{hint}>{escape(page_text(text))}</dd></div>\n'
    )


def run_header(digest: RunDigest) -> str:
    """The page's `<header>` for the run `digest` describes."""
    status = digest.status
    total = sum(digest.by_type.values())
    parts = [
        '<header id="run">\n<div class="title">',
        f'<h1 data-field="prompt_name">{escape(page_text(digest.prompt_name or "(unnamed run)"))}</h1>',
        f'<span class="status status-{status}" data-field="status">{status}</span></div>\n',
        '<dl class="facts">\n',
        _fact("adapter", "adapter", digest.adapter or "\u2014"),
        _fact("session", "session_id", digest.session_id or "\u2014"),
        _fact("run", "run_id", digest.run_id or "\u2014"),
    ]
    if digest.trace_id:
        parts.append(_fact("trace", "trace_id", digest.trace_id))
    started = digest.started.isoformat() if digest.started else None
    ended = digest.ended.isoformat() if digest.ended else None
    parts += [
        _fact("started", "started", _moment_text(digest.started), started, title=started),
        _fact("ended", "ended", _moment_text(digest.ended), ended, title=ended),
        _fact("duration", "duration_s", _duration_text(digest.duration_s), digest.duration_s),
        _fact("entries", "total_entries", f"{total:,}", total),
        _fact("turns", "turns", f"{digest.turns:,}", digest.turns),
    ]
    tokens = digest.tokens
    for name in TOKEN_NAMES.values():
        if name in tokens:
            label = name.replace("_", " ") + " tokens"
            parts.append(_fact(label, f"tokens.{name}", _tokens_text(tokens[name]), tokens[name]))
    if not tokens:
        parts.append(_fact("tokens", "tokens", "none reported"))
    cost = round(digest.cost_usd, 6)
    parts.append(_fact("cost", "cost_usd", _cost_text(cost), cost))
    calls = sum(stats.calls for stats in digest.tools.values())
    failures = sum(stats.failures for stats in digest.tools.values())
    parts.append(
        _fact(
            "tool calls",
            "tool_calls",
            f"{calls:,}" + (f" ({failures:,} failed)" if failures else ""),
            calls,
        )
    )
    parts.append(_fact("errors", "error_count", f"{digest.error_count:,}", digest.error_count))
    if len(digest.by_source) > 1:
        lanes = ", ".join(f"{source} ({count:,})" for source, count in digest.by_source.items())
        parts.append(_fact("sources", "sources", lanes))
    if digest.malformed or digest.transcript_errors or digest.dropped:
        problems = (
            f"{digest.malformed:,} malformed entries, {digest.transcript_errors:,} capture errors, "
            f"{digest.dropped:,} entries dropped while capturing"
        )
        parts.append(_fact("capture", "capture_problems", problems))
    parts.append("</dl>\n")
    parts.append(_tools_table(digest))
    parts.append(_errors_list(digest))
    if total == 0 and not digest.malformed:
        if digest.started is None and not digest.prompt_name:
            empty = "This run has no records: nothing was captured."
        else:
            empty = "No entries were recorded in this run" + (
                "." if digest.stopped else " (it has no transcript.stop record: it may still be running)."
            )
        parts.append(f'<p class="empty" data-field="empty">{escape(empty)}</p>\n')
    parts.append("</header>\n")
    return "".join(parts)


def _tools_table(digest: RunDigest) -> str:
    tools = digest.tools
    if not tools:
        return ""
    rows = []
    for name, stats in sorted(tools.items()):
        summary = stats.as_dict()
        cells = [
            escape(page_text(name)),
            f"{stats.calls:,}",
            f"{stats.failures:,}",
            f"{stats.unanswered:,}",
            "\u2014" if summary["median_ms"] is None else f"{summary['median_ms']:,.1f}",
            "\u2014" if summary["max_ms"] is None else f"{summary['max_ms']:,.1f}",
        ]
        rows.append(
            f'<tr data-tool="{escape(page_text(name))}">'
            + "".join(f"<td>{cell}</td>" for cell in cells)
            + "</tr>"
        )
    return (
        '<details class="tools-table"><summary>Tools</summary><table><thead><tr>'
        "<th>tool</th><th>calls</th><th>failed</th><th>no result</th><th>median ms</th><th>max ms</th>"
        "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table></details>\n"
    )


def _errors_list(digest: RunDigest) -> str:
    errors = digest.errors
    if not errors:
        return ""
    items = "".join(f"<li>{escape(page_text(error))}</li>" for error in errors)
    more = digest.error_count - len(errors)
    tail = f"<li>\u2026 and {more:,} more</li>" if more > 0 else ""
    return f'<details class="errors" open><summary>Errors</summary><ol>{items}{tail}</ol></details>\n'
