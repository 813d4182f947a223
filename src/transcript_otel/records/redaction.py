"""Secrets taken out of transcript content before any sink sees it.

Agents paste credentials into prompts, read `.env` files with tools and echo
`Authorization` headers. On the writer thread (never the agent's), every entry is
redacted before it is written anywhere: API keys and tokens of the common
providers, bearer and basic credentials, and PEM private keys are replaced by
`[REDACTED:<kind>:<length>:<hash>]`, where the length and the first 8 hex digits of
the SHA-256 of the secret keep transcripts comparable (the same key gives the same
marker) without keeping the secret.

The built-in patterns (`records.redaction_rules`) run over the entry's encoded JSON
bytes, so nothing escapes them: not a value deep in a cycle-broken structure, not the
`repr` of an object JSON could not hold. None of them can match a `"`, so they never
cross a JSON string's end and the JSON stays valid. A key counts as starting where no
ASCII letter, digit or `_` precedes it, or a JSON escape does (`\\n`, `\\u001b`): a key
glued to a non-ASCII letter, or on a line of its own, is redacted too. User patterns and
the user's function see the entry's plain strings instead (what a person means by
"text"), and `raw`.

Cost: every match of a built-in pattern begins with, holds or follows one of a few
literals, found for all rules at once by one Aho-Corasick pass (SIMD, several GB/s); a
pattern is only tried, anchored, where its literals place it. Text holding none of them
(nearly every entry) costs that one pass and is never copied. The writer makes that pass
once for a batch of small entries (`parts_holding_literals`). A rule whose literal is
common in ordinary text (`://`: a list of search results holds hundreds) is placed from a
rarer byte instead (`found_by`), since each place tried costs a few Python steps.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final

from transcript_otel.records.joined_search import parts_holding
from transcript_otel.records.literal_search import LiteralSearch, leftmost_first
from transcript_otel.records.redaction_rules import BUILTIN_RULES, BuiltinRule

# The rules placed otherwise than by their literals, by index.
_FOUND_BY: Final = tuple((index, rule.found_by) for index, rule in enumerate(BUILTIN_RULES) if rule.found_by)
_MAX_DEPTH: Final = 64

Replacer = Callable[[str], str]


def marker(kind: str, secret: str) -> str:
    """`[REDACTED:<kind>:<length>:<hash>]` for `secret`: comparable, not reversible."""
    import hashlib  # here, not at the top: it loads OpenSSL, and secrets are rare (issue 30)

    digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"[REDACTED:{kind}:{len(secret)}:{digest}]"


def _compile(kinds: Iterable[tuple[str, str]]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in kinds))


def _replace(match: re.Match[str]) -> str:
    return marker(match.lastgroup or "secret", match.group(0))


# The literal search and its tables: built by the first `Redactor()`, not at import (issue 30),
# which a process that imports the package and never emits need not pay. Declared here, bound
# by `_build_tables()`: the functions below run only for a Redactor, so they read them as plain
# globals, without a check per call; read from outside before then, `__getattr__` below builds
# them. Each rule's pattern is compiled where one of its literals first occurs (on the writer
# thread, where the agent's first emitter would pay for them otherwise).
_BUILTIN_PATTERNS: list[re.Pattern[bytes] | None]
# The literals that place the rules, in the search's order.
_LITERALS: list[bytes]
# How many of them, first, the search looks for. Each of the others starts with one of those
# (`sk-ant-`: `sk-`), and is found where that one occurs, as a literal it hides (`_HIDDEN`).
_SEARCHED: int
# Per literal, the (rule index, offset from the literal to the match start) it places.
_PLACES: tuple[tuple[tuple[int, int], ...], ...]
# One pass for all those literals, leftmost-first: its first answer is the leftmost occurrence
# of any literal, so an empty answer is exact, and this kind runs on a SIMD prefilter
# (faster than the standard kind, which reports overlapping occurrences).
_LEFTMOST_LITERALS: LiteralSearch
# Per literal, the (offset, literal index) of the literals that can start inside an occurrence of it.
_HIDDEN: tuple[tuple[tuple[int, int], ...], ...]
_TABLES: Final = ("_BUILTIN_PATTERNS", "_LITERALS", "_SEARCHED", "_PLACES", "_LEFTMOST_LITERALS", "_HIDDEN")
_tables_lock: Final = threading.Lock()

# The search's order of the literals, which only its speed depends on. ahocorasick-rs's SIMD
# prefilter (Teddy; 32 literals at most, past that a fat one at half the speed) looks for a
# literal's first three bytes in one of 8 buckets: the i-th literal goes to bucket 7 - i % 8,
# or to an earlier one's whose first bytes have the same low 4 bits (`Bearer`, `bearer`). A
# bucket matches any mix of its literals' bytes at each position, so which literals share one
# decides how often ordinary text makes the search stop and verify. Each row below puts one
# literal in each bucket, last to first; the order gave the fewest of those stops over section
# 3c's entries, the recorded sessions and this repository's text (benchmarks/NOTES.md, "Issue
# 48: redaction rules, section 3c within 10% again"; benchmarks/literal_buckets.py counts them).
# A literal missing here goes last.
_SEARCH_ORDER: Final = (
    *("AKIA", "sk-", "gho_", "BEGIN ", "ghs_", "xox", "ASIA", "ghu_"),
    *("AIza", "SG.", "EY=", "ghp_", "ghr_", "hf_", "b_pat_", "k_test_"),
    *("eyJ", "ET=", "EN=", "Bearer", "glpat-", "gsk_", "k_live_", "aws_secret_access_key"),
    *("pypi-", "SSW", "asic", "Key=", "npm_", "ASIC", "bearer", "BEARER"),
)


def _literal_targets() -> dict[bytes, tuple[tuple[int, int], ...]]:
    """Each distinct literal of the rules, in the search's order, those that start with another
    last: the (rule index, offset from the literal to the match start) it places."""
    targets: dict[bytes, list[tuple[int, int]]] = {}
    for index, rule in enumerate(BUILTIN_RULES):
        for literal in rule.literals:
            places = targets.setdefault(literal.text.encode("ascii"), [])
            places += ((index, offset) for offset in literal.offsets)
    rank = {literal.encode("ascii"): place for place, literal in enumerate(_SEARCH_ORDER)}
    in_order = sorted(
        targets,
        key=lambda literal: (_extends_another(literal, targets), rank.get(literal, len(rank)), literal),
    )
    return {literal: tuple(targets[literal]) for literal in in_order}


def _extends_another(literal: bytes, literals: Iterable[bytes]) -> bool:
    """Whether `literal` starts with another of `literals`: then it is found where that one is."""
    return any(other != literal and literal.startswith(other) for other in literals)


def _hidden_literals(literals: list[bytes]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per literal, the (offset, literal) that can occur inside one of its occurrences.

    A leftmost-first search resumes after each occurrence it reports, so it skips the
    ones that start inside it (`xoxox`: `xox` starts inside `xox`) or at the same place
    (`sk-ant-` where `sk-` is reported). These are the only occurrences it skips.
    Only literals that start with the byte at an offset can occur there: grouped by that
    byte, the table is built without comparing every pair (issue 30).
    """
    by_first_byte: dict[int, list[tuple[int, bytes]]] = {}
    for index, other in enumerate(literals):
        by_first_byte.setdefault(other[0], []).append((index, other))
    hidden: list[tuple[tuple[int, int], ...]] = []
    for literal in literals:
        found: list[tuple[int, int]] = []
        for offset in range(len(literal)):
            rest = literal[offset:]
            for index, other in by_first_byte.get(rest[0], ()):
                if (offset or other is not literal) and (  # not the reported occurrence itself
                    rest.startswith(other) or other.startswith(rest)  # within `literal`, or past its end
                ):
                    found.append((offset, index))
        hidden.append(tuple(found))
    return tuple(hidden)


def _build_tables() -> None:
    """Bind the tables above, once per process (later calls return at once)."""
    global _BUILTIN_PATTERNS, _LITERALS, _SEARCHED, _PLACES, _LEFTMOST_LITERALS, _HIDDEN
    with _tables_lock:
        if "_HIDDEN" in globals():  # bound last: every table is there
            return
        targets = _literal_targets()
        literals = list(targets)
        _BUILTIN_PATTERNS = [None] * len(BUILTIN_RULES)
        _LITERALS, _PLACES = literals, tuple(targets.values())
        _SEARCHED = sum(not _extends_another(literal, literals) for literal in literals)
        _LEFTMOST_LITERALS = leftmost_first(literals[:_SEARCHED])
        _HIDDEN = _hidden_literals(literals)


# Hidden from type checkers, which see the declarations above.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in _TABLES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        _build_tables()
        return globals()[name]


def parts_holding_literals(parts: Sequence[bytes]) -> list[bool]:
    """For each of `parts`, whether `Redactor.encoded` may change it: whether it holds a literal
    of the built-in rules or an `@` (URL credentials are placed from those), in one search for
    all. Only for the parts of a `Redactor`'s records (the first `Redactor()` builds the search)."""
    if not parts:  # a batch without a redacted record: no Redactor need exist
        return []
    return parts_holding(_LEFTMOST_LITERALS, parts, also=b"@")


def _match_starts(data: bytes, leftmost: list[tuple[int, int, int]]) -> dict[int, list[int]]:
    """Per rule, the sorted positions in `data` where one of its matches can start, from
    the `leftmost` occurrences of the literals and those they hide."""
    starts: dict[int, set[int]] = {}
    for literal, position, _ in leftmost:
        found = [(literal, position)]
        found += (
            (index, position + offset)
            for offset, index in _HIDDEN[literal]
            if data.startswith(_LITERALS[index], position + offset)
        )
        for index, at in found:
            for rule, offset in _PLACES[index]:
                if at + offset >= 0:  # a literal found inside a match, too close to the start for one
                    starts.setdefault(rule, set()).add(at + offset)
    return {rule: sorted(positions) for rule, positions in starts.items()}


def _replace_at(rule: BuiltinRule, pattern: re.Pattern[bytes], data: bytes, starts: list[int]) -> bytes:
    """`pattern.sub` of markers over `data`, trying only `starts`: the same result when
    every match begins at one of them (a match ending past a start skips it, as `sub` does).
    `pattern.match(data, start)` sees the bytes before `start` for `\\b` and lookbehinds."""
    pieces: list[bytes] = []
    copied = 0
    for start in starts:
        if start < copied:
            continue
        match = pattern.match(data, start)
        if match is not None and (rule.accepts is None or rule.accepts(match.group())):
            secret = match.group().decode("utf-8", "surrogatepass")
            pieces += (data[copied:start], marker(rule.kind, secret).encode("utf-8"))
            copied = match.end()
    if not pieces:
        return data
    pieces.append(data[copied:])
    return b"".join(pieces)


def _compiled(rule: int) -> re.Pattern[bytes]:
    """The pattern of `BUILTIN_RULES[rule]`, compiled once (two threads may both compile it:
    the same pattern either way)."""
    pattern = _BUILTIN_PATTERNS[rule] = re.compile(BUILTIN_RULES[rule].pattern.encode("ascii"))
    return pattern


def _rule_starts(data: bytes) -> dict[int, list[int]]:
    """Per rule, the sorted positions in `data` where one of its matches can start."""
    leftmost = _LEFTMOST_LITERALS.find_matches_as_indexes(data)
    starts = _match_starts(data, leftmost) if leftmost else {}
    for rule, found_by in _FOUND_BY:
        found = found_by(data)
        if found:
            starts[rule] = found
    return starts


def _builtin(data: bytes) -> bytes:
    """`data` with every built-in rule applied in order, as a `sub` per rule would;
    `data` itself (not a copy) when nothing matched."""
    starts = _rule_starts(data)
    if not starts:
        return data  # the common case: one pass, nothing decoded or copied
    for rule, pattern in enumerate(_BUILTIN_PATTERNS):
        if rule not in starts:
            continue
        if pattern is None:
            pattern = _compiled(rule)
        redacted = _replace_at(BUILTIN_RULES[rule], pattern, data, starts[rule])
        if redacted is not data:
            data = redacted  # the markers moved what follows them: search again
            starts = _rule_starts(data)
    return data


class Redactor:
    """The built-in patterns, plus the user's patterns and function."""

    __slots__ = ("_custom", "_user", "has_user_rules")

    def __init__(self, patterns: Iterable[tuple[str, str]] = (), custom: Replacer | None = None) -> None:
        user = list(patterns)
        seen: set[str] = set()
        for kind in [*(rule.kind for rule in BUILTIN_RULES), *(kind for kind, _ in user)]:
            if not kind.isidentifier() or kind in seen:
                raise ValueError(f"a redaction kind must be a new identifier: {kind!r}")
            seen.add(kind)
        self._user = _compile(user) if user else None
        self._custom = custom
        # A plain attribute, not a property: the writer reads it for every entry.
        self.has_user_rules: bool = self._user is not None or self._custom is not None
        _build_tables()  # what `encoded` and `text` read

    def text(self, text: str) -> str:
        """Plain text with every rule applied: built-in, user patterns, user function."""
        data = text.encode("utf-8", "surrogatepass")
        redacted = _builtin(data)
        if redacted is not data:
            text = redacted.decode("utf-8", "surrogatepass")
        return self._user_rules(text)

    def texts(self, texts: list[str]) -> list[str]:
        """`text()` of each, with the built-in rules' literals looked for in all at once: most
        texts hold none, and each search costs a call before a byte is read (a span's record
        has half a dozen short fields)."""
        if len(texts) < 2 or self.has_user_rules:
            return [self.text(text) for text in texts]
        holding = parts_holding_literals([text.encode("utf-8", "surrogatepass") for text in texts])
        return [self.text(text) if holds else text for text, holds in zip(texts, holding, strict=True)]

    # Encoded JSON with the built-in patterns applied (it stays valid JSON); `_builtin`
    # itself rather than a method that calls it, which cost a call per entry.
    encoded = staticmethod(_builtin)

    def user_value(self, value: Any) -> Any:
        """`value` with the user's rules applied to its strings; unchanged parts are the
        same objects, cycles and very deep nesting are left for the encoder to stub."""
        if not self.has_user_rules:
            return value
        return self._walk(value, set(), 0)

    def _walk(self, value: Any, path: set[int], depth: int) -> Any:
        if isinstance(value, str):
            return self._user_rules(value)
        if not isinstance(value, Mapping | list | tuple) or id(value) in path or depth > _MAX_DEPTH:
            return value
        path.add(id(value))
        try:
            if isinstance(value, Mapping):
                changed = {key: self._walk(item, path, depth + 1) for key, item in value.items()}
                same = all(changed[key] is item for key, item in value.items())
                return value if same else changed
            items = [self._walk(item, path, depth + 1) for item in value]
            return value if all(new is old for new, old in zip(items, value, strict=True)) else items
        finally:
            path.discard(id(value))

    def _user_rules(self, text: str) -> str:
        if self._user is not None:
            text = self._user.sub(_replace, text)
        if self._custom is None:
            return text
        try:
            custom = self._custom(text)
        except Exception:  # the user's function must not lose the entry: the other rules stand
            return text
        return custom if isinstance(custom, str) else text
