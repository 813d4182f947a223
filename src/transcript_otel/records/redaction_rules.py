"""The credential formats redaction looks for (`BUILTIN_RULES`), and the literals that place them.

Each rule's pattern runs over an entry's encoded JSON bytes (`records.redaction`), so none
may match a `"`: a match never crosses a JSON string's end and the JSON stays valid. A key
counts as starting where no ASCII letter, digit or `_` precedes it, or a JSON escape does
(`\\n`, `\\u001b`). Every match of a rule begins with, holds or follows one of its
literals (`Literal`), or is found otherwise (`BuiltinRule.found_by`): the rule's pattern is
tried only there.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Final


@dataclass(frozen=True, slots=True)
class Literal:
    """A literal that places a rule: where it occurs, a match can start at each of `offsets`
    from its first byte (0: the match starts with it; negative: the match holds it; past its
    length: the match follows it). The search's speed is in its first three bytes (a SIMD
    fingerprint): a literal whose first bytes are common in ordinary text (`---`, `git`,
    `sk_`) is a literal from further into the match, placed back from there."""

    text: str
    offsets: tuple[int, ...] = (0,)


def _starting(*texts: str) -> tuple[Literal, ...]:
    """Literals a match starts with."""
    return tuple(Literal(text) for text in texts)


def _within(text: str, at: int) -> Literal:
    """A literal found `at` bytes into a match."""
    return Literal(text, (-at,))


def _before(texts: Iterable[str], gaps: tuple[int, ...]) -> tuple[Literal, ...]:
    """Literals a match follows after one of `gaps` bytes (each gap is tried)."""
    return tuple(Literal(text, tuple(len(text) + gap for gap in gaps)) for text in texts)


@dataclass(frozen=True, slots=True)
class BuiltinRule:
    """A credential format the common providers document, and the literals that place it.

    Every match of `pattern` is placed by one of `literals` (a pattern that follows its
    literal opens with a lookbehind on what it follows): it is tried at those places only.
    No pattern may match `"` (see above).
    """

    kind: str
    pattern: str
    literals: tuple[Literal, ...] = ()
    # For a pattern that also matches ordinary words: whether a match is a secret after all.
    accepts: Callable[[bytes], bool] | None = None
    # For literals too common to try the pattern at each: the sorted places where a match can
    # start, found otherwise. Texts are then searched whatever literals they hold.
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


def _scheme_and_gaps(scheme: str) -> list[str]:
    """An auth scheme as it precedes a credential: one of its usual three spellings (schemes
    are case-insensitive), then a space, a tab, or a tab as JSON writes it (the rules read JSON)."""
    spellings = [scheme.capitalize(), scheme, scheme.upper()]
    return [spelling + gap for spelling in spellings for gap in (" ", "\t", "\\t")]


def _after_scheme(scheme: str) -> str:
    return "(?:" + "|".join(f"(?<={re.escape(literal)})" for literal in _scheme_and_gaps(scheme)) + ")"


def _after_any(literals: Iterable[str], quotes: Iterable[str] = ("",)) -> str:
    """A lookbehind on any of `literals`, each followed by one of `quotes`."""
    behind = (f"(?<={re.escape(literal + quote)})" for literal in literals for quote in quotes)
    return "(?:" + "|".join(behind) + ")"


# What a `.env` line, an `export` or a `docker run -e` names a secret with: a NAME ending so.
_SECRET_NAME_ENDINGS: Final = ("_KEY=", "_SECRET=", "_TOKEN=", "PASSWORD=", "PASSWD=")
# Where a value may open with a quote: none, `'`, `"` (plain text), or `"` as JSON writes it.
_VALUE_QUOTES: Final = ("", "'", '"', '\\"')
_QUOTE_GAPS: Final = (0, 1, 2)  # no quote; `'` or `"`; `"` as JSON writes it


# In order: where two matches overlap, the earlier rule names the secret
# (`sk-ant-` before `sk-`).
BUILTIN_RULES: Final = (
    # PEM and PGP blocks; one cut short (no END line, a base64 line after the header) up to
    # the end of its text. A header alone is not a key.
    BuiltinRule(
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----"
        r"(?:[^\"]*?-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|(?:\\[rn]|\s)+[A-Za-z0-9+/=]{16,}[^\"]*)",
        literals=(_within("BEGIN ", 5),),  # `---` opens Markdown rules and table lines
    ),
    BuiltinRule("anthropic_key", _KEY_START + r"sk-ant-[A-Za-z0-9_-]{20,}", literals=_starting("sk-ant-")),
    BuiltinRule(
        "openai_key",
        _KEY_START + r"sk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
        literals=_starting("sk-"),
    ),
    BuiltinRule(
        "aws_access_key", _KEY_START + r"(?:AKIA|ASIA)[0-9A-Z]{16}\b", literals=_starting("AKIA", "ASIA")
    ),
    BuiltinRule(
        "github_token",
        _KEY_START + r"(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        literals=(*_starting("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _within("b_pat_", 5)),  # not `git`
    ),
    BuiltinRule("gitlab_token", _KEY_START + r"glpat-[A-Za-z0-9_-]{20,}", literals=_starting("glpat-")),
    BuiltinRule("slack_token", _KEY_START + r"xox[abposr]-[A-Za-z0-9-]{10,}", literals=_starting("xox")),
    BuiltinRule("google_api_key", _KEY_START + r"AIza[0-9A-Za-z_-]{35}", literals=_starting("AIza")),
    BuiltinRule(
        "stripe_key",
        _KEY_START + r"(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}",
        literals=(_within("k_live_", 1), _within("k_test_", 1)),  # not `sk_` (`task_`, `disk_`)
    ),
    BuiltinRule("huggingface_token", _KEY_START + r"hf_[A-Za-z0-9]{30,}", literals=_starting("hf_")),
    BuiltinRule(
        "jwt",
        _KEY_START + r"eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}",
        literals=_starting("eyJ"),
    ),
    # The credential after `Bearer` / `Basic` and a space or tab in an Authorization header or
    # a curl line. Basic credentials are base64 of any length; a word is not (`Basic Auth`).
    BuiltinRule(
        "bearer",
        _after_scheme("bearer") + r"[A-Za-z0-9._~+/-]{16,}=*"
        "|" + _after_scheme("basic") + r"(?:[A-Za-z0-9+/]{4})+(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?"
        r"(?![A-Za-z0-9+/=])"
        "|" + _after_scheme("basic") + r"[A-Za-z0-9+/]{16,}=*",
        # Not `Bas` (`Bash`, `base`): `asic` for Basic and basic.
        literals=_before(("Bearer", "bearer", "BEARER", "asic", "ASIC"), (1, 2)),
        accepts=_basic_credentials,
    ),
    # The user and password of a URL (`https://user:pw@host`, `postgres://user:pw@db/x`).
    BuiltinRule(
        "url_credentials",
        r"(?<=://)[^\s/:@\"\\]{1,256}:[^\s/@\"\\]{1,256}(?=@)",
        found_by=_url_credentials_starts,
    ),
    # An AWS secret access key where it is named (the environment, a credentials file).
    BuiltinRule(
        "aws_secret_key",
        r"(?:(?<=AWS_SECRET_ACCESS_KEY=)|(?<=aws_secret_access_key=)|(?<=aws_secret_access_key = ))"
        r"[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+])",
        literals=(*_before(("EY=",), (0,)), *_before(("aws_secret_access_key",), (1, 3))),  # `=`, ` = `
    ),
    BuiltinRule("npm_token", _KEY_START + r"npm_[A-Za-z0-9]{36}(?![A-Za-z0-9])", literals=_starting("npm_")),
    # PyPI and TestPyPI API tokens: `pypi-` and a base64url macaroon (over 100 characters).
    BuiltinRule("pypi_token", _KEY_START + r"pypi-[A-Za-z0-9_-]{50,}", literals=_starting("pypi-")),
    BuiltinRule("groq_key", _KEY_START + r"gsk_[A-Za-z0-9]{40,}", literals=_starting("gsk_")),
    BuiltinRule(
        "sendgrid_key",
        _KEY_START + r"SG\.[A-Za-z0-9_-]{16,32}\.[A-Za-z0-9_-]{30,64}",
        literals=_starting("SG."),
    ),
    # The key of an Azure storage or Service Bus connection string (base64).
    BuiltinRule(
        "azure_key",
        _after_any(("AccountKey=", "SharedAccessKey=")) + r"[A-Za-z0-9+/]{20,}={0,2}",
        literals=_before(("Key=",), (0,)),
    ),
    # `NAME=value` where NAME ends in _KEY, _SECRET, _TOKEN, PASSWORD or PASSWD (a `.env` line,
    # an `export`), the value perhaps quoted. Last: a provider's own rule names its keys first.
    # Not a `$VARIABLE`, a `<placeholder>` or a marker an earlier rule left (`[REDACTED:...]`),
    # nor a value shorter than 6.
    BuiltinRule(
        "secret_assignment",
        _after_any(_SECRET_NAME_ENDINGS, _VALUE_QUOTES) + r"[^\s\"'\\$<\[][^\s\"'\\]{5,}",
        # The names' ends with the `=`, rare in ordinary text where `KEY`, `TOKEN` and `PASS` are
        # not; `SSW` for both passwords (`ORD=` or `D=` between it and the quote).
        literals=(*_before(("EY=", "EN=", "ET="), _QUOTE_GAPS), *_before(("SSW",), (2, 3, 4, 5, 6))),
    ),
)
