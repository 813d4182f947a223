"""A captured run as one self-contained HTML page: a timeline of turns, tool calls and subagent lanes.

`write_html(source, out)` reads the run twice and never holds it whole: a first
pass feeds a `RunDigest` for the header (prompt, adapter, session, status, times,
tokens, cost, tools), a second writes the entries as compact JSON in
`<script type="application/json" class="tx-chunk">` blocks of at most
`_CHUNK_ENTRIES` entries (every `<` escaped as `\\u003c`, so no text can close the
block or open a comment), each followed by a `<noscript>` plain list of the same
entries for a browser without JavaScript.

The page's script (`html_page.js`, inlined) sorts the entries by time, groups
them into turns (a main `user_message` opens one, as does a Codex `turn_started`
system event unless it follows the user message that opened the turn; user messages
in a row share a turn), pairs each `tool_use` with the
`tool_result` of the same call id and source, puts each `subagent:<id>` source in
its own lane beside the main one, and renders the timeline in batches as the
reader scrolls, so a 100,000-entry run opens quickly. It only ever sets text
(`textContent`), never markup, and a Content-Security-Policy allows nothing but
that one script (by hash) and inline styles: the page loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from datetime import UTC, datetime, timedelta
from functools import cache, lru_cache
from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, TextIO

from transcript_otel.genai.attributes import (
    cost_usd,
    message_usage,
    tool_failed,
    tool_identity,
    usage_attributes,
)
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.digest import TOKEN_NAMES, RunDigest
from transcript_otel.reading.reconstruct import entry_from_context
from transcript_otel.reading.text import (
    ROLES,
    assistant_parts,
    compact_json,
    entry_text,
    tool_input,
    tool_output,
)
from transcript_otel.records.serialize import dumps, safe_text

if TYPE_CHECKING:
    from transcript_otel.reading.sources import RecordSource

__all__ = ["write_html"]

_CHUNK_ENTRIES: Final = 1000
_CHUNK_CHARS: Final = 4 * 1024 * 1024
_NOSCRIPT_TEXT_CHARS: Final = 2000
_SYMBOLS: Final = {
    "system": "\u2699\ufe0f",
    "user": "\U0001f464",
    "assistant": "\U0001f916",
    "tool": "\U0001f527",
}
_EPOCH: Final = datetime(1970, 1, 1, tzinfo=UTC)
_MICROSECOND: Final = timedelta(microseconds=1)
# Entry kinds the page shows besides the canonical entry types.
MALFORMED: Final = "malformed"
TRANSCRIPT_ERROR: Final = "transcript.error"


def write_html(source: RecordSource, out: TextIO, *, title: str | None = None) -> int:
    """Write the run `source` reads as one HTML page to `out`; return the number of entries written.

    Every `transcript.entry` record is an entry of the page, a malformed one too
    (shown as such, with its record); `transcript.error` records are shown as
    notices and not counted. `out` must accept any Unicode text (a UTF-8 file).
    """
    digest = RunDigest.of(source.records())
    page = _PageWriter(out, digest)
    page.head(title)
    count = page.entries(source.records())
    page.tail(count)
    return count


# -- the entries' data ------------------------------------------------------------------


def _text(value: Any) -> str:
    """Text a UTF-8 page can hold (lone surrogates escaped)."""
    return safe_text(value if isinstance(value, str) else str(value))[0]


def _epoch_us(moment: datetime) -> int:
    """Microseconds since the epoch, exactly (a naive time is taken as UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return (moment - _EPOCH) // _MICROSECOND


def _words(entry_type: str, detail: Mapping[str, Any]) -> tuple[str | None, str | None, bool]:
    """(thinking, the text to show, whether there are no words but the detail's own JSON).

    A tool result shows its output, a Claude assistant message its text blocks with
    its thinking blocks apart; every other entry its `entry_text`.
    """
    thinking = None
    if entry_type == "tool_result":
        words = tool_output(detail)
    elif entry_type == "assistant_message":
        thinking, words = assistant_parts(detail)
        if not words and thinking is None:
            words = entry_text(entry_type, detail)
    else:
        words = entry_text(entry_type, detail)
    if words.startswith("{") and words == compact_json(detail):
        return thinking, None, True
    return thinking, words, False


def _short_usage(usage: Mapping[str, int]) -> dict[str, int]:
    """`gen_ai.usage.*` counts under the page's short names."""
    return {TOKEN_NAMES[key]: value for key, value in usage.items() if key in TOKEN_NAMES}


def entry_data(index: int, context: Mapping[str, Any], at_us: int) -> tuple[dict[str, Any], int]:
    """The page's JSON object for one `transcript.entry` context, and its time (`at_us` if it has none).

    Keys: `i` file order, `k` entry type, `s` source, `n` sequence number, `ts` the
    recorded timestamp, `us` epoch microseconds, `x` the text (absent when the only
    words are the detail's JSON: `xj`), `th` an assistant message's thinking, `d` the
    detail, `r` raw (unknown and malformed entries), `c`/`nm`/`in` call id, tool name and input, `f` failed,
    `ms` reported duration, `u` token counts, `cost`, `mu` a message's usage.
    """
    try:
        entry = entry_from_context(context)
    except ValueError as exc:
        return _malformed(index, context, at_us, str(exc)), at_us
    at_us = _epoch_us(entry.timestamp)
    kind, detail = entry.entry_type, entry.detail
    data: dict[str, Any] = {
        "i": index,
        "k": kind,
        "s": entry.source,
        "n": entry.sequence_number,
        "ts": context.get("timestamp"),
        "us": at_us,
    }
    thinking, words, fallback = _words(kind, detail)
    if words is not None:
        data["x"] = words
    if fallback:
        data["xj"] = 1
    if thinking is not None:
        data["th"] = thinking
    data["d"] = detail
    if kind in ("unknown", "error") and entry.raw is not None:
        data["r"] = entry.raw
    if kind in ("tool_use", "tool_result"):
        call_id, name = tool_identity(detail)
        if call_id is not None:
            data["c"] = call_id
        if name is not None:
            data["nm"] = name
        if kind == "tool_use":
            data["in"] = tool_input(detail)
        else:
            if tool_failed(detail):
                data["f"] = 1
            reported = detail.get("duration_ms")
            if isinstance(reported, int | float) and not isinstance(reported, bool) and reported >= 0:
                data["ms"] = reported
    elif kind == "token_usage":
        usage = _short_usage(usage_attributes(detail))
        if usage:
            data["u"] = usage
        cost = cost_usd(detail)
        if cost:
            data["cost"] = cost
    elif kind == "assistant_message":
        counted = message_usage(detail)
        if counted is not None:
            data["mu"] = [counted[0], _short_usage(counted[1])]
    return data, at_us


def _malformed(index: int, context: Mapping[str, Any], at_us: int, reason: str) -> dict[str, Any]:
    source = context.get("source")
    timestamp = context.get("timestamp")
    return {
        "i": index,
        "k": MALFORMED,
        "s": source if isinstance(source, str) and source else "main",
        "n": context.get("sequence_number"),
        "ts": timestamp if isinstance(timestamp, str) else None,
        "us": at_us,
        "x": reason,
        "r": compact_json(dict(context)),
    }


def _error_notice(
    index: int, context: Mapping[str, Any], record: Mapping[str, Any], at_us: int
) -> dict[str, Any]:
    """A `transcript.error` record (something went wrong while capturing) as a notice in the timeline."""
    words = context.get("error") or record.get("message") or "transcript error"
    source = context.get("source")
    return {
        "i": index,
        "k": TRANSCRIPT_ERROR,
        "s": source if isinstance(source, str) and source else "main",
        "n": context.get("sequence_number"),
        "ts": record.get("timestamp") if isinstance(record.get("timestamp"), str) else None,
        "us": at_us,
        "x": words if isinstance(words, str) else compact_json(words),
        "d": dict(context),
    }


def _script_json(value: Any) -> str:
    """JSON that can sit inside a `<script>` element: no `<` at all (so no `</script>`, no `<!--`)."""
    return dumps(value).data.replace(b"<", b"\\u003c").decode("utf-8")


# -- the page ---------------------------------------------------------------------------


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


def _tokens_text(count: int) -> str:
    return f"{count:,}"


def _cost_text(cost: float) -> str:
    return f"${cost:.6f}".rstrip("0").rstrip(".") if cost else "\u2014"


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


@lru_cache(maxsize=1024)
def _fallback_prefix(kind: str, tool: Any, source: Any) -> tuple[str, str]:
    """The markup around an entry's time in the no-script list (few distinct values: cached)."""
    symbol = (
        _SYMBOLS["tool"] if kind in ("tool_use", "tool_result") else _SYMBOLS.get(ROLES.get(kind, "system"))
    )
    # As character references: the list's lines stay ASCII (compact) when their text is.
    symbol = "".join(f"&#x{ord(char):x};" for char in symbol or _SYMBOLS["system"])
    label = kind if tool is None else f"{kind} {tool}"
    return (
        f' class="k-{escape(_text(kind))}">',
        f" {symbol} <b>{escape(_text(label))}</b> <i>{escape(_text(source))}</i> <span>",
    )


class _PageWriter:
    """Writes the page in order: head and header, data chunks, the script."""

    def __init__(self, out: TextIO, digest: RunDigest) -> None:
        self._out = out
        self._digest = digest
        self._chunk_entries = 0
        self._chunk_chars = 0
        self._fallback: list[str] = []
        self._written = 0  # entries (and notices) written before the open chunk

    # -- head and header --

    def head(self, title: str | None) -> None:
        digest = self._digest
        name = digest.prompt_name or "run"
        page_title = title if title is not None else f"{name} \u00b7 transcript"
        write = self._out.write
        write(
            '<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            '<meta name="viewport" content="width=device-width, initial-scale=1">\n'
            f'<meta http-equiv="Content-Security-Policy" content="{_csp(_asset("html_page.js"))}">\n'
            '<meta name="generator" content="transcript-otel">\n'
            f"<title>{escape(_text(page_title))}</title>\n<style>\n{_asset('html_page.css')}</style>\n"
            "</head>\n<body>\n"
        )
        write(self._header())
        write(
            '<nav id="toolbar" hidden></nav>\n<main id="timeline" aria-live="polite">'
            '<noscript><p class="notice">JavaScript is off: the entries are listed below as plain '
            "text, without turns, tool pairing or lanes.</p></noscript></main>\n"
            '<div id="more" hidden></div>\n<div id="tx-data">\n'
        )

    def _fact(self, label: str, field: str, text: str, value: Any = None, *, title: str | None = None) -> str:
        data_value = "" if value is None else f' data-value="{escape(_text(value))}"'
        hint = "" if title is None else f' title="{escape(_text(title))}"'
        return (
            f'<div class="fact"><dt>{escape(label)}</dt>'
            f'<dd data-field="{field}"{data_value}{hint}>{escape(_text(text))}</dd></div>\n'
        )

    def _header(self) -> str:
        digest = self._digest
        status = digest.status
        total = sum(digest.by_type.values())
        parts = [
            '<header id="run">\n<div class="title">',
            f'<h1 data-field="prompt_name">{escape(_text(digest.prompt_name or "(unnamed run)"))}</h1>',
            f'<span class="status status-{status}" data-field="status">{status}</span></div>\n',
            '<dl class="facts">\n',
            self._fact("adapter", "adapter", digest.adapter or "\u2014"),
            self._fact("session", "session_id", digest.session_id or "\u2014"),
            self._fact("run", "run_id", digest.run_id or "\u2014"),
        ]
        if digest.trace_id:
            parts.append(self._fact("trace", "trace_id", digest.trace_id))
        started = digest.started.isoformat() if digest.started else None
        ended = digest.ended.isoformat() if digest.ended else None
        parts += [
            self._fact("started", "started", _moment_text(digest.started), started, title=started),
            self._fact("ended", "ended", _moment_text(digest.ended), ended, title=ended),
            self._fact("duration", "duration_s", _duration_text(digest.duration_s), digest.duration_s),
            self._fact("entries", "total_entries", f"{total:,}", total),
            self._fact("turns", "turns", "\u2014"),
        ]
        tokens = digest.tokens
        for name in TOKEN_NAMES.values():
            if name in tokens:
                label = name.replace("_", " ") + " tokens"
                parts.append(self._fact(label, f"tokens.{name}", _tokens_text(tokens[name]), tokens[name]))
        if not tokens:
            parts.append(self._fact("tokens", "tokens", "none reported"))
        cost = round(digest.cost_usd, 6)
        parts.append(self._fact("cost", "cost_usd", _cost_text(cost), cost))
        calls = sum(stats.calls for stats in digest.tools.values())
        failures = sum(stats.failures for stats in digest.tools.values())
        parts.append(
            self._fact(
                "tool calls",
                "tool_calls",
                f"{calls:,}" + (f" ({failures:,} failed)" if failures else ""),
                calls,
            )
        )
        parts.append(self._fact("errors", "error_count", f"{digest.error_count:,}", digest.error_count))
        if len(digest.by_source) > 1:
            lanes = ", ".join(f"{source} ({count:,})" for source, count in digest.by_source.items())
            parts.append(self._fact("sources", "sources", lanes))
        if digest.malformed or digest.transcript_errors or digest.dropped:
            problems = (
                f"{digest.malformed:,} malformed entries, {digest.transcript_errors:,} capture errors, "
                f"{digest.dropped:,} entries dropped while capturing"
            )
            parts.append(self._fact("capture", "capture_problems", problems))
        parts.append("</dl>\n")
        parts.append(self._tools_table())
        parts.append(self._errors_list())
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

    def _tools_table(self) -> str:
        tools = self._digest.tools
        if not tools:
            return ""
        rows = []
        for name, stats in sorted(tools.items()):
            summary = stats.as_dict()
            cells = [
                escape(_text(name)),
                f"{stats.calls:,}",
                f"{stats.failures:,}",
                f"{stats.unanswered:,}",
                "\u2014" if summary["median_ms"] is None else f"{summary['median_ms']:,.1f}",
                "\u2014" if summary["max_ms"] is None else f"{summary['max_ms']:,.1f}",
            ]
            rows.append(
                f'<tr data-tool="{escape(_text(name))}">'
                + "".join(f"<td>{cell}</td>" for cell in cells)
                + "</tr>"
            )
        return (
            '<details class="tools-table"><summary>Tools</summary><table><thead><tr>'
            "<th>tool</th><th>calls</th><th>failed</th><th>no result</th><th>median ms</th><th>max ms</th>"
            "</tr></thead><tbody>" + "\n".join(rows) + "</tbody></table></details>\n"
        )

    def _errors_list(self) -> str:
        errors = self._digest.errors
        if not errors:
            return ""
        items = "".join(f"<li>{escape(_text(error))}</li>" for error in errors)
        more = self._digest.error_count - len(errors)
        tail = f"<li>\u2026 and {more:,} more</li>" if more > 0 else ""
        return f'<details class="errors" open><summary>Errors</summary><ol>{items}{tail}</ol></details>\n'

    # -- entries --

    def entries(self, records: Iterable[Mapping[str, Any]]) -> int:
        started = self._digest.started
        at_us = _epoch_us(started) if started else 0
        count = 0
        index = 0
        for record in records:
            event = record.get("event")
            context = record.get("context")
            if event == TranscriptEvent.ENTRY.value:
                if isinstance(context, Mapping):
                    data, at_us = entry_data(index, context, at_us)
                else:
                    data = _malformed(index, {}, at_us, "transcript.entry record without a context object")
                count += 1
            elif event == TranscriptEvent.ERROR.value:
                data = _error_notice(index, context if isinstance(context, Mapping) else {}, record, at_us)
            else:
                continue
            self._add(data)
            index += 1
        self._flush()
        return count

    def _add(self, data: dict[str, Any]) -> None:
        encoded = _script_json(data)
        write = self._out.write
        if self._chunk_entries == 0:
            write('<script type="application/json" class="tx-chunk">[')
        else:
            write(",")
        write(encoded)
        self._chunk_entries += 1
        self._chunk_chars += len(encoded)
        self._fallback.append(self._fallback_item(data))
        if self._chunk_entries >= _CHUNK_ENTRIES or self._chunk_chars >= _CHUNK_CHARS:
            self._flush()

    def _fallback_item(self, data: Mapping[str, Any]) -> str:
        """One line of the list shown without JavaScript."""
        words = data.get("x")
        if words is None:
            words = compact_json(data.get("d"))
        elif not isinstance(words, str):
            words = str(words)
        if len(words) > _NOSCRIPT_TEXT_CHARS:
            words = (
                words[:_NOSCRIPT_TEXT_CHARS]
                + f"\u2026 ({len(words) - _NOSCRIPT_TEXT_CHARS:,} more characters)"
            )
        timestamp = data.get("ts")
        moment = timestamp[11:23] if isinstance(timestamp, str) else ""
        prefix = _fallback_prefix(str(data["k"]), data.get("nm"), data["s"])
        return f"<li{prefix[0]}<time>{escape(moment)}</time>{prefix[1]}{escape(_text(words))}</span></li>\n"

    def _flush(self) -> None:
        """End the open data block and write its entries' no-script list."""
        if not self._chunk_entries:
            return
        write = self._out.write
        write(f']</script>\n<noscript><ol class="nojs" start="{self._written + 1}">')
        for item in self._fallback:
            write(item)
        write("</ol></noscript>\n")
        self._written += len(self._fallback)
        self._fallback.clear()
        self._chunk_entries = 0
        self._chunk_chars = 0

    # -- tail --

    def tail(self, count: int) -> None:
        digest = self._digest
        meta = {
            "entries": count,
            "started_us": _epoch_us(digest.started) if digest.started else None,
            "digest": digest.as_dict(),
            "roles": dict(ROLES),
            "symbols": _SYMBOLS,
        }
        write = self._out.write
        write("</div>\n")
        write(f'<script type="application/json" id="tx-meta">{_script_json(meta)}</script>\n')
        write(f"<script>{_asset('html_page.js')}</script>\n</body>\n</html>\n")
