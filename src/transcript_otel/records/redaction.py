"""Secrets taken out of transcript content before any sink sees it.

Agents paste credentials into prompts, read `.env` files with tools and echo
`Authorization` headers. On the writer thread (never the agent's), every entry is
redacted before it is written anywhere: API keys and tokens of the common
providers, bearer and basic credentials, and PEM private keys are replaced by
`[REDACTED:<kind>:<length>:<hash>]`, where the length and the first 8 hex digits of
the SHA-256 of the secret keep transcripts comparable (the same key gives the same
marker) without keeping the secret.

The built-in patterns run over the entry's encoded JSON bytes, so nothing escapes
them: not a value deep in a cycle-broken structure, not the `repr` of an object
JSON could not hold. None of them can match a `"`, so they never cross a JSON
string's end and the JSON stays valid. A key counts as starting where no ASCII
letter, digit or `_` precedes it, or a JSON escape does (`\\n`, `\\u001b`): a key
glued to a non-ASCII letter, or on a line of its own, is redacted too. User
patterns and the user's function see the entry's plain strings instead (what a
person means by "text"), and `raw`.

Cost: every match of a built-in pattern begins with (or directly follows) one of
a few literals, found for all rules at once by one Aho-Corasick pass (SIMD, several
GB/s); a pattern is only tried, anchored, where its literals occur. Text holding
none of them (nearly every entry) costs that one pass and is never copied. The
writer makes that pass once for a batch of small entries (`parts_holding_literals`).
A rule whose literal is common in ordinary text (`://`: a list of search results holds
hundreds) is placed from a rarer byte instead (`found_by`), since each place tried costs
a few Python steps.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Final

import ahocorasick_rs

from transcript_otel.records.joined_search import parts_holding


@dataclass(frozen=True, slots=True)
class BuiltinRule:
    """A credential format the common providers document, and the literals that place it.

    Every match of `pattern` starts with one of `starts_with`, or follows one of `follows`
    after one of `gaps` bytes (the pattern opens with a lookbehind on what it follows): the
    pattern is tried at those places only. No pattern may match `"` (see above).
    """

    kind: str
    pattern: str
    starts_with: tuple[str, ...] = ()
    follows: tuple[str, ...] = ()
    # Bytes between a `follows` literal and a match, each tried: one literal for the spellings
    # of a gap keeps the literals few. Which literals, more than how many, decide the search's
    # speed: each is a SIMD fingerprint, and some sets make it verify candidates all through a
    # text (benchmarks/NOTES.md, "Issue 48: redaction"); measure a new one with section 3c.
    gaps: tuple[int, ...] = (0,)
    # For a pattern that also matches ordinary words: whether a match is a secret after all.
    accepts: Callable[[bytes], bool] | None = None
    # For literals too common to try the pattern at each: the sorted places where a match can
    # start, found otherwise. The literals then only tell which texts to search at all.
    found_by: Callable[[bytes], list[int]] | None = None


def _basic_credentials(token: bytes) -> bool:
    """Whether the word after `Basic` is credentials: any long token, and a short one (`admin:admin`
    is 16 characters) only if it is base64 of `user:password`, not a word (`Basic Auth`)."""
    if len(token) >= 16:
        return True
    import base64  # here, not at the top: a short `Basic` word is rare (issue 30)

    try:
        return b":" in base64.b64decode(token, validate=True)
    except ValueError:
        return False


# Where a key may start: not right after an ASCII letter, digit or `_` (`\b` on bytes),
# except the last character of a JSON escape (`\n`, `\t`, `\u001b`), since the
# patterns read encoded JSON: a key on a line of its own must not hide behind `\n`.
_KEY_START: Final = r"(?:(?<![A-Za-z0-9_])|(?<=\\[bfnrt])|(?<=\\u[0-9A-Fa-f]{4}))"


# A URL's user and password (`[^\s/:@"\\]{1,256}:[^\s/@"\\]{1,256}`) span at most this many bytes.
_URL_CREDENTIALS_REACH: Final = 256 + 1 + 256


def _url_credentials_starts(data: bytes) -> list[int]:
    """Where the `url_credentials` pattern can match in `data`: a match holds neither `/` nor
    `@` and ends right before an `@`, so it starts after the last `/` before that `@`, the end
    of a `://`. Found from the `@`s, which most texts with URLs lack (a `://` holds no `@`)."""
    starts: list[int] = []
    at = data.find(b"@")
    while at >= 0:
        slash = data.rfind(b"/", max(0, at - _URL_CREDENTIALS_REACH - 1), at)
        if slash >= 2 and data.startswith(b"://", slash - 2) and (not starts or starts[-1] != slash + 1):
            starts.append(slash + 1)
        at = data.find(b"@", at + 1)
    return starts


_SENDGRID_PREFIX: Final = ahocorasick_rs.BytesAhoCorasick([b"SG."])


def _sendgrid_starts(data: bytes) -> list[int]:
    """Where a SendGrid key can start: each `SG.`, found by a search of its own (memchr-fast,
    2 us for 50 KB where `bytes.find` takes 45): as one more literal of the rules' search, `SG.`
    made that 1.3x slower over our texts (see `BuiltinRule.gaps`)."""
    return [start for _, start, _ in _SENDGRID_PREFIX.find_matches_as_indexes(data)]


def _scheme_spellings(scheme: str) -> list[str]:
    """An auth scheme's usual three spellings (schemes are case-insensitive)."""
    return [scheme.capitalize(), scheme, scheme.upper()]


def _scheme_and_gaps(scheme: str) -> list[str]:
    """An auth scheme as it precedes a credential: a spelling, then a space, a tab, or a tab
    as JSON writes it (the rules read JSON): gaps of 1 or 2 bytes."""
    return [spelling + gap for spelling in _scheme_spellings(scheme) for gap in (" ", "\t", "\\t")]


def _after_scheme(scheme: str) -> str:
    return "(?:" + "|".join(f"(?<={re.escape(literal)})" for literal in _scheme_and_gaps(scheme)) + ")"


def _after_any(literals: Iterable[str], quotes: Iterable[str] = ("",)) -> str:
    """A lookbehind on any of `literals`, each followed by one of `quotes`."""
    behind = (f"(?<={re.escape(literal + quote)})" for literal in literals for quote in quotes)
    return "(?:" + "|".join(behind) + ")"


# What a `.env` line, an `export` or a `docker run -e` names a secret with: a NAME ending so.
_SECRET_NAME_ENDINGS: Final = ("_KEY=", "_SECRET=", "_TOKEN=", "PASSWORD=", "PASSWD=")
# Their literals: the names' ends without what pytest's output is full of (`_`, `PASS`),
# which would make the SIMD search verify thousands of candidates (4x for 50 KB of it).
_SECRET_NAME_LITERALS: Final = ("KEY=", "SECRET=", "TOKEN=", "WORD=", "SSWD=")
# Where a value may open with a quote: none, `'`, `"` (plain text), or `"` as JSON writes it.
_VALUE_QUOTES: Final = ("", "'", '"', '\\"')


# In order: where two matches overlap, the earlier rule names the secret
# (`sk-ant-` before `sk-`).
BUILTIN_RULES: Final = (
    # PEM and PGP blocks; one cut short (no END line, a base64 line after the header) up to
    # the end of its text. A header alone is not a key.
    BuiltinRule(
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[^\"]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:\\[rn]|\s)+[A-Za-z0-9+/=]{16,}[^\"]*)",
        starts_with=("-----BEGIN ",),
    ),
    BuiltinRule("anthropic_key", _KEY_START + r"sk-ant-[A-Za-z0-9_-]{20,}", starts_with=("sk-ant-",)),
    BuiltinRule(
        "openai_key", _KEY_START + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", starts_with=("sk-",)
    ),
    BuiltinRule("aws_access_key", _KEY_START + r"(?:AKIA|ASIA)[0-9A-Z]{16}\b", starts_with=("AKIA", "ASIA")),
    BuiltinRule(
        "github_token",
        _KEY_START + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        starts_with=("ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"),
    ),
    BuiltinRule("gitlab_token", _KEY_START + r"glpat-[A-Za-z0-9_-]{20,}", starts_with=("glpat-",)),
    BuiltinRule("slack_token", _KEY_START + r"xox[abposr]-[A-Za-z0-9-]{10,}", starts_with=("xox",)),
    BuiltinRule("google_api_key", _KEY_START + r"AIza[0-9A-Za-z_-]{35}", starts_with=("AIza",)),
    BuiltinRule(
        "stripe_key",
        _KEY_START + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}",
        starts_with=("sk_live_", "sk_test_", "rk_live_", "rk_test_"),
    ),
    BuiltinRule("huggingface_token", _KEY_START + r"hf_[A-Za-z0-9]{30,}", starts_with=("hf_",)),
    BuiltinRule(
        "jwt",
        _KEY_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        starts_with=("eyJ",),
    ),
    # The credential after `Bearer` / `Basic` and a space or tab in an Authorization header or
    # a curl line. Basic credentials are base64 of any length; a word is not (`Basic Auth`).
    BuiltinRule(
        "bearer",
        _after_scheme("bearer") + r"[A-Za-z0-9._~+/-]{16,}=*"
        "|" + _after_scheme("basic") + r"(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
        r"(?![A-Za-z0-9+/=])"
        "|" + _after_scheme("basic") + r"[A-Za-z0-9+/]{16,}=*",
        follows=tuple(_scheme_spellings("bearer") + _scheme_spellings("basic")),
        gaps=(1, 2),
        accepts=_basic_credentials,
    ),
    # The user and password of a URL (`https://user:pw@host`, `postgres://user:pw@db/x`).
    BuiltinRule(
        "url_credentials",
        r"(?<=://)[^\s/:@\"\\]{1,256}:[^\s/@\"\\]{1,256}(?=@)",
        follows=("://",),
        found_by=_url_credentials_starts,
    ),
    # An AWS secret access key where it is named (the environment, a credentials file).
    BuiltinRule(
        "aws_secret_key",
        r"(?:(?<=AWS_SECRET_ACCESS_KEY=)|(?<=aws_secret_access_key=)|(?<=aws_secret_access_key = ))"
        r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
        follows=("AWS_SECRET_ACCESS_KEY", "aws_secret_access_key"),
        gaps=(1, 3),  # `=`, ` = `
    ),
    BuiltinRule("npm_token", _KEY_START + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", starts_with=("npm_",)),
    # PyPI and TestPyPI API tokens: `pypi-` and a base64url macaroon (over 100 characters).
    BuiltinRule("pypi_token", _KEY_START + r"pypi-[A-Za-z0-9_-]{50,}", starts_with=("pypi-",)),
    BuiltinRule("groq_key", _KEY_START + r"gsk_[A-Za-z0-9]{40,}", starts_with=("gsk_",)),
    BuiltinRule(
        "sendgrid_key",
        _KEY_START + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}",
        starts_with=("SG.",),
        found_by=_sendgrid_starts,
    ),
    # The key of an Azure storage or Service Bus connection string (base64).
    BuiltinRule(
        "azure_key",
        _after_any(("AccountKey=", "SharedAccessKey=")) + r"[A-Za-z0-9+/]{20,}={0,2}",
        follows=("Key=",),
    ),
    # `NAME=value` where NAME ends in _KEY, _SECRET, _TOKEN, PASSWORD or PASSWD (a `.env` line,
    # an `export`), the value perhaps quoted. Last: a provider's own rule names its keys first.
    # Not a `$VARIABLE`, a `<placeholder>` or a marker an earlier rule left (`[REDACTED:...]`),
    # nor a value shorter than 6.
    BuiltinRule(
        "secret_assignment",
        _after_any(_SECRET_NAME_ENDINGS, _VALUE_QUOTES) + r"[^\s\"'\\$<\[][^\s\"'\\]{5,}",
        follows=_SECRET_NAME_LITERALS,
        gaps=(0, 1, 2),  # no quote; `'` or `"`; `"` as JSON writes it
    ),
)
# The rules placed otherwise than by their literals, by index.
_FOUND_BY: Final = tuple((index, rule.found_by) for index, rule in enumerate(BUILTIN_RULES) if rule.found_by)
_MAX_DEPTH: Final = 64

Replacer = Callable[[str], str]


def marker(kind: str, secret: str) -> str:
    """`[REDACTED:<kind>:<length>:<hash>]` for `secret`: comparable, not reversible."""
    import hashlib  # here, not at the top: it loads OpenSSL (2-3 ms), and secrets are rare (issue 30)

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
# thread; 2.4 ms for all of them, which the agent's first emitter would pay otherwise).
_BUILTIN_PATTERNS: list[re.Pattern[bytes] | None]
# The literals that place the rules not `found_by` otherwise.
_LITERALS: list[bytes]
# Per literal, the (rule index, offset from the literal to the match start) it places.
_PLACES: tuple[tuple[tuple[int, int], ...], ...]
# One pass for all those literals, leftmost-first: its first answer is the leftmost occurrence
# of any literal, so an empty answer is exact, and this kind runs on a SIMD prefilter
# (5x the standard kind, which reports overlapping occurrences).
_LEFTMOST_LITERALS: ahocorasick_rs.BytesAhoCorasick
# The same for every rule's literals: whether a text need be searched at all.
_ANY_LITERAL: ahocorasick_rs.BytesAhoCorasick
# Per literal, the (offset, literal index) of the literals that can start inside an occurrence of it.
_HIDDEN: tuple[tuple[tuple[int, int], ...], ...]
_TABLES: Final = (
    "_BUILTIN_PATTERNS",
    "_LITERALS",
    "_PLACES",
    "_LEFTMOST_LITERALS",
    "_ANY_LITERAL",
    "_HIDDEN",
)
_tables_lock: Final = threading.Lock()


def _literal_targets() -> dict[bytes, tuple[tuple[int, int], ...]]:
    """Each distinct literal of the rules it places (not `found_by` otherwise): the (rule
    index, offset from the literal to the match start) it places."""
    targets: dict[bytes, list[tuple[int, int]]] = {}
    for index, rule in enumerate(BUILTIN_RULES):
        if rule.found_by is not None:
            continue
        for literal in rule.starts_with:
            targets.setdefault(literal.encode("ascii"), []).append((index, 0))
        for literal in rule.follows:
            places = targets.setdefault(literal.encode("ascii"), [])
            places += ((index, len(literal) + gap) for gap in rule.gaps)
    return {literal: tuple(places) for literal, places in targets.items()}


def _hidden_literals(literals: list[bytes]) -> tuple[tuple[tuple[int, int], ...], ...]:
    """Per literal, the (offset, literal) that can occur inside one of its occurrences.

    A leftmost-first search resumes after each occurrence it reports, so it skips the
    ones that start inside it (`sk-----BEGIN `: `-----BEGIN ` starts inside `sk-`) or
    at the same place (`sk-ant-` and `sk-`). These are the only occurrences it skips.
    Only literals that start with the byte at an offset can occur there: grouped by that
    byte, the table takes 0.15 ms to build instead of 2-3 ms comparing every pair (issue 30).
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
    global _BUILTIN_PATTERNS, _LITERALS, _PLACES, _LEFTMOST_LITERALS, _ANY_LITERAL, _HIDDEN
    with _tables_lock:
        if "_HIDDEN" in globals():  # bound last: every table is there
            return
        targets = _literal_targets()
        # In byte order: the search's SIMD buckets are filled in the literals' order, and this
        # one verified fewer candidates over our texts than the rules' order (section 3c).
        literals = sorted(targets)
        _BUILTIN_PATTERNS = [None] * len(BUILTIN_RULES)
        _LITERALS, _PLACES = literals, tuple(targets[literal] for literal in literals)
        _LEFTMOST_LITERALS = ahocorasick_rs.BytesAhoCorasick(
            literals, matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
        )
        every = {
            literal.encode("ascii"): None
            for rule in BUILTIN_RULES
            for literal in (*rule.starts_with, *rule.follows)
        }
        _ANY_LITERAL = ahocorasick_rs.BytesAhoCorasick(
            list(every), matchkind=ahocorasick_rs.MATCHKIND_LEFTMOST_FIRST
        )
        _HIDDEN = _hidden_literals(literals)


# Hidden from type checkers, which see the declarations above.
if not TYPE_CHECKING:

    def __getattr__(name: str) -> object:
        if name not in _TABLES:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        _build_tables()
        return globals()[name]


def parts_holding_literals(parts: Sequence[bytes]) -> list[bool]:
    """For each of `parts`, whether it holds a literal of the built-in rules, in one search
    for all: `Redactor.encoded` leaves a part without one as it is. Only for the parts of a
    `Redactor`'s records (the first `Redactor()` builds the search)."""
    if not parts:  # a batch without a redacted record: no Redactor need exist
        return []
    return parts_holding(_ANY_LITERAL, parts)


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
