"""A captured run as one self-contained HTML page: a timeline of turns, tool calls and subagent lanes.

`write_html(source, out)` reads the run twice and never holds it whole: a first
pass feeds a `RunDigest` for the header (prompt, adapter, session, status, times,
tokens, cost, tools, turns), a second writes the entries as compact JSON in
`<script type="application/json" class="tx-chunk">` blocks of at most
`_CHUNK_ENTRIES` entries (every `<` escaped as `\\u003c`, so no text can close the
block or open a comment), each followed by a `<noscript>` plain list of the same
entries for a browser without JavaScript. This module assembles the page; the
header comes from `header.run_header`, each entry's JSON from `entries.entry_data`.

Every figure is the writer's, from one rule each: an entry's turn (`reading.turns`), the
tokens it counts there (`reading.turn_tokens`, as devflow's turns count them: the turns and
a last line of what the session counts beyond them add up to the header), the call it
answers and how long that took (`reading.tool_calls`, as the header's tools table counts),
whether a usage report's cost is its turn's (`entries.Placement`). The
page's script (`html_page.js`, inlined) sorts the entries by time, groups them by those
turns, pairs each call with its answer, puts each `subagent:<id>` source in its own lane
beside the main one, and renders the timeline in batches as the reader scrolls, so a
100,000-entry run opens quickly. It only ever sets text
(`textContent`), never markup, and a Content-Security-Policy allows nothing but
that one script (by hash) and inline styles: the page loads nothing from anywhere.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Mapping
from functools import cache, lru_cache
from html import escape
from importlib import resources
from typing import TYPE_CHECKING, Any, Final, TextIO

from transcript_otel.exports.html.entries import Placement, entry_data, epoch_us, error_notice, malformed
from transcript_otel.exports.html.header import page_text, run_header
from transcript_otel.model.entries import TranscriptEvent
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.text import ROLES, compact_json
from transcript_otel.records.serialize import dumps

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


def write_html(source: RecordSource, out: TextIO, *, title: str | None = None) -> int:
    """Write the run `source` reads as one HTML page to `out`; return the number of entries written.

    Every `transcript.entry` record is an entry of the page, a malformed one too
    (shown as such, with its record); `transcript.error` records are shown as
    notices and not counted. `out` must accept any Unicode text (a UTF-8 file).
    """
    digest = RunDigest.of(source.records())
    page = _PageWriter(out, digest)
    page.head(title)
    count, rest = page.entries(source.records(), Placement(digest.entry_turns(), digest.turn_tokens()))
    page.tail(count, rest)
    return count


def _script_json(value: Any) -> str:
    """JSON that can sit inside a `<script>` element: no `<` at all (so no `</script>`, no `<!--`)."""
    return dumps(value).data.replace(b"<", b"\\u003c").decode("utf-8")


@cache
def _asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def _csp(script: str) -> str:
    digest = base64.b64encode(hashlib.sha256(script.encode("utf-8")).digest()).decode("ascii")
    return (
        "default-src 'none'; img-src data:; style-src 'unsafe-inline'; "
        f"script-src 'sha256-{digest}'; base-uri 'none'; form-action 'none'"
    )


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
        f' class="k-{escape(page_text(kind))}">',
        f" {symbol} <b>{escape(page_text(label))}</b> <i>{escape(page_text(source))}</i> <span>",
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
            f"<title>{escape(page_text(page_title))}</title>\n<style>\n{_asset('html_page.css')}</style>\n"
            "</head>\n<body>\n"
        )
        write(run_header(digest))
        write(
            '<nav id="toolbar" hidden></nav>\n<main id="timeline" aria-live="polite">'
            '<noscript><p class="notice">JavaScript is off: the entries are listed below as plain '
            "text, without turns, tool pairing or lanes.</p></noscript></main>\n"
            '<div id="more" hidden></div>\n<div id="tx-data">\n'
        )

    # -- entries --

    def entries(
        self, records: Iterable[Mapping[str, Any]], placement: Placement
    ) -> tuple[int, dict[str, int]]:
        """Write the entries; return how many, and the tokens the run counts beyond their turns
        (the placement is let go then: it holds a set the size of the run's turns)."""
        started = self._digest.started
        at_us = epoch_us(started) if started else 0
        count = 0
        index = 0
        for record in records:
            event = record.get("event")
            context = record.get("context")
            if event == TranscriptEvent.ENTRY.value:
                if isinstance(context, Mapping):
                    data, at_us = entry_data(index, context, at_us, placement)
                else:
                    data = malformed(index, {}, at_us, "transcript.entry record without a context object")
                count += 1
            elif event == TranscriptEvent.ERROR.value:
                data = error_notice(index, context if isinstance(context, Mapping) else {}, record, at_us)
            else:
                continue
            if "t" not in data:
                placement.place_notice(data)
            self._add(data)
            index += 1
        self._flush()
        return count, placement.rest()

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
        text = escape(page_text(words))
        return f"<li{prefix[0]}<time>{escape(moment)}</time>{prefix[1]}{text}</span></li>\n"

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

    def tail(self, count: int, rest: Mapping[str, int]) -> None:
        """`rest`: the tokens the run counts beyond all its turns (a line of its own)."""
        digest = self._digest
        meta = {
            "entries": count,
            "rest": dict(rest),
            "started_us": epoch_us(digest.started) if digest.started else None,
            "digest": digest.as_dict(),
            "roles": dict(ROLES),
            "symbols": _SYMBOLS,
        }
        write = self._out.write
        write("</div>\n")
        write(f'<script type="application/json" id="tx-meta">{_script_json(meta)}</script>\n')
        write(f"<script>{_asset('html_page.js')}</script>\n</body>\n</html>\n")
