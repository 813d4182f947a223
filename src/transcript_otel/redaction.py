"""Secrets taken out of transcript content before any sink sees it.

Agents paste credentials into prompts, read `.env` files with tools and echo
`Authorization` headers. On the writer thread (never the agent's), every entry is
redacted before it is written anywhere: API keys and tokens of the common
providers, bearer and basic credentials, and PEM private keys are replaced by
`[REDACTED:<kind>:<length>:<hash>]`, where the length and the first 8 hex digits of
the SHA-256 of the secret keep transcripts comparable (the same key gives the same
marker) without keeping the secret.

The built-in patterns run over the entry's encoded JSON, so nothing escapes them:
not a value deep in a cycle-broken structure, not the `repr` of an object JSON
could not hold. None of them can match a `"`, so they never cross a JSON string's
end and the JSON stays valid. User patterns and the user's function see the
entry's plain strings instead (what a person means by "text"), and `raw`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any, Final

# (kind, pattern, literals one of which any match contains): the credential formats
# the common providers document. A pattern runs only on text holding one of its
# literals (a fast `in` test), so ordinary text costs a few substring searches. No
# pattern may match `"` (see above). `sk-ant-` goes before `sk-`: the first match names it.
BUILTIN_PATTERNS: Final[tuple[tuple[str, str, tuple[str, ...]], ...]] = (
    (
        "private_key",
        r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY-----[^\"]*?-----END [A-Z0-9 ]*PRIVATE KEY-----",
        ("PRIVATE KEY-----",),
    ),
    ("anthropic_key", r"\bsk-ant-[A-Za-z0-9_-]{20,}", ("sk-",)),
    ("openai_key", r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}", ("sk-",)),
    ("aws_access_key", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b", ("AKIA", "ASIA")),
    (
        "github_token",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,})",
        ("gh",),
    ),
    ("gitlab_token", r"\bglpat-[A-Za-z0-9_-]{20,}", ("glpat-",)),
    ("slack_token", r"\bxox[abposr]-[A-Za-z0-9-]{10,}", ("xox",)),
    ("google_api_key", r"\bAIza[0-9A-Za-z_-]{35}", ("AIza",)),
    ("stripe_key", r"\b(?:sk|rk)_(?:live|test)_[A-Za-z0-9]{20,}", ("k_",)),
    ("huggingface_token", r"\bhf_[A-Za-z0-9]{30,}", ("hf_",)),
    ("jwt", r"\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{8,}", ("eyJ",)),
    # The credential after `Bearer` / `Basic` in an Authorization header or a curl line.
    (
        "bearer",
        r"(?<=[Bb]earer )[A-Za-z0-9._~+/-]{16,}=*|(?<=[Bb]asic )[A-Za-z0-9+/]{16,}=*",
        ("earer ", "asic "),
    ),
)
_MAX_DEPTH: Final = 64

Replacer = Callable[[str], str]


def marker(kind: str, secret: str) -> str:
    """`[REDACTED:<kind>:<length>:<hash>]` for `secret`: comparable, not reversible."""
    digest = hashlib.sha256(secret.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"[REDACTED:{kind}:{len(secret)}:{digest}]"


def _compile(kinds: Iterable[tuple[str, str]]) -> re.Pattern[str]:
    return re.compile("|".join(f"(?P<{kind}>{pattern})" for kind, pattern in kinds))


def _replace(match: re.Match[str]) -> str:
    return marker(match.lastgroup or "secret", match.group(0))


_BUILTIN_RULES: Final = tuple(
    (_compile([(kind, pattern)]), tuple(literal.encode() for literal in literals))
    for kind, pattern, literals in BUILTIN_PATTERNS
)
# Each distinct literal is looked for once (bytes: the fastest substring search).
_GATES: Final = tuple(dict.fromkeys(literal for _, literals in _BUILTIN_RULES for literal in literals))


def _builtin(text: str, data: bytes) -> str:
    """`text` (whose UTF-8 is `data`) with the rules applied whose literal `data` holds."""
    present = {gate for gate in _GATES if gate in data}
    if not present:
        return text
    for pattern, literals in _BUILTIN_RULES:
        if not present.isdisjoint(literals):
            text = pattern.sub(_replace, text)
    return text


class Redactor:
    """The built-in patterns, plus the user's patterns and function."""

    __slots__ = ("_custom", "_user")

    def __init__(self, patterns: Iterable[tuple[str, str]] = (), custom: Replacer | None = None) -> None:
        user = list(patterns)
        seen: set[str] = set()
        for kind in [*(kind for kind, _, _ in BUILTIN_PATTERNS), *(kind for kind, _ in user)]:
            if not kind.isidentifier() or kind in seen:
                raise ValueError(f"a redaction kind must be a new identifier: {kind!r}")
            seen.add(kind)
        self._user = _compile(user) if user else None
        self._custom = custom

    @property
    def has_user_rules(self) -> bool:
        return self._user is not None or self._custom is not None

    def text(self, text: str) -> str:
        """Plain text with every rule applied: built-in, user patterns, user function."""
        return self._user_rules(_builtin(text, text.encode("utf-8", "surrogatepass")))

    def encoded(self, data: bytes) -> bytes:
        """Encoded JSON with the built-in patterns applied (it stays valid JSON)."""
        if not any(gate in data for gate in _GATES):
            return data  # the common case: no literal of any secret, nothing decoded
        text = data.decode("utf-8", "surrogatepass")
        redacted = _builtin(text, data)
        return data if redacted == text else redacted.encode("utf-8", "surrogatepass")

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
