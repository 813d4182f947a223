"""`gemini -p PROMPT --output-format json`: the one JSON object it prints at exit, to entries.

Gemini CLI 0.61.0 prints, when the prompt's turn is over, one pretty-printed object (indented,
its last line a `}` of its own, no newline after it) holding `session_id`, `response` and
`stats` (docs/gemini-opencode-notes.md). The adapter holds the lines from the first `{` to
that `}` (or the end of the stream), then maps the object:

* `session_id` → the session id;
* `response` → one `assistant_message` (`text`). It is only the **last step's** text: the
  words the model said before its tool calls, the calls and their results are not printed in
  this mode, and nothing here makes them up;
* `stats` → `token_usage` (`mappings.gemini_usage`: the main model by its role, its usage, the
  session's, each model's and role's), closing the turn; `stats.tools` (calls, successes and
  failures per tool name) and `stats.files` stay in `detail.stats`;
* `error` (an object that reports one) → `error`.

`run` chooses this adapter from the command line (`gemini -o json`), never from the output
alone: a `{` on a line of its own opens any pretty-printed JSON, and taking it for Gemini's
would name every such program's provider `gcp.gemini` and hold its output until the object
ends (a script that runs `gemini -o json` wants `--adapter gemini-json`). The prompt is not in
the object: `run` records it from the command line. On failure the CLI
prints nothing on stdout (its error object goes to stderr, after stack traces, where `run`
does not read): the run's error is then the exit status. The first entry's `raw` is the
printed text. What is not a JSON object with one of those keys (another program's output
under this adapter) is handed on as plain lines, one `assistant_message` each, as the
`plain` adapter would have; so is a document cut short by the end of the stream that does not
parse, or one that grows past `MAX_HELD_BYTES` (then the lines after it follow as plain too).
"""

from __future__ import annotations

from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry, assistant_line, line_entries
from transcript_otel.mappings.gemini_usage import json_usage_detail
from transcript_otel.model.entries import EntryType
from transcript_otel.records.serialize import parse_json

NAME: Final = "gemini-json"
MAX_HELD_BYTES: Final = 16 << 20
_KEYS: Final = frozenset({"session_id", "response", "stats", "error"})


def starts_document(line: str) -> bool:
    """Whether a stream's first line opens a pretty-printed JSON object (`{` alone on it)."""
    return line.strip() == "{"


class GeminiJsonAdapter:
    """Holds the lines of the object Gemini CLI prints at exit and maps it once it is whole."""

    name: Final = NAME

    def __init__(self) -> None:
        self.session_id: str | None = None
        self._held: list[str] = []
        self._size = 0
        self._plain = False  # the output is not Gemini's object: plain lines from now on

    def feed(self, line: str) -> list[MappedEntry]:
        if self._plain:
            return assistant_line(line)
        if not self._held and not starts_document(line):
            return assistant_line(line)  # not inside the object: a line of text
        self._held.append(line)
        self._size += len(line)
        if self._size > MAX_HELD_BYTES:
            self._plain = True
            return self._as_plain()
        if line.rstrip("\r\n") == "}":  # the object's own last line: indented lines are its members'
            return self._mapped(final=False)
        return []

    def flush(self) -> list[MappedEntry]:
        return self._mapped(final=True)

    def _mapped(self, *, final: bool) -> list[MappedEntry]:
        """The object held, mapped; the lines held as plain text if they are not Gemini's object
        (or, at the end of the stream, do not parse). Before the end, a `}` that ends no object
        (one inside a member's text) leaves them held."""
        if not self._held:
            return []
        text = "".join(line if line.endswith("\n") else line + "\n" for line in self._held).rstrip("\n")
        try:
            document = parse_json(text)
        except (ValueError, RecursionError):
            return self._as_plain() if final else []
        if not isinstance(document, dict) or not _KEYS.intersection(document):
            return self._as_plain()
        self._held, self._size = [], 0
        return line_entries(text, self._document(document))

    def _as_plain(self) -> list[MappedEntry]:
        held, self._held, self._size = self._held, [], 0
        return [entry for line in held for entry in assistant_line(line)]

    def _document(self, document: dict[str, Any]) -> list[tuple[EntryType, dict[str, Any]]]:
        session_id = document.get("session_id")
        if isinstance(session_id, str) and session_id:
            self.session_id = session_id
        entries: list[tuple[EntryType, dict[str, Any]]] = []
        response = document.get("response")
        if isinstance(response, str):
            entries.append((EntryType.ASSISTANT_MESSAGE, {"text": response, "last_step_only": True}))
        stats = document.get("stats")
        if stats is not None:
            entries.append((EntryType.TOKEN_USAGE, {"stats": stats, **json_usage_detail(stats)}))
        if document.get("error") is not None:
            entries.append((EntryType.ERROR, {"event": document}))
        if not entries:
            entries.append((EntryType.SYSTEM_EVENT, {"event": document, "subtype": "result"}))
        return entries
