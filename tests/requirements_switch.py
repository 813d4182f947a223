"""The one switch that turns a missing real part into a failure instead of a skip.

A real part is a program or service a test drives and `make test` installs: the Claude Code
and Codex CLIs, Phoenix, rotel, oteltap, Chromium and chromedriver, util-linux `script`, zsh,
promtool, check-jsonschema. Without one, its tests skip, saying what is missing; where
`TRANSCRIPT_OTEL_REQUIRE_REAL` is true (`make test` and so CI set it), they fail with the same
words, so nothing real is skipped there in silence. The validators `make test` does not install
(`docker compose`, otelcol-contrib, dclint) skip without it, saying so.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import NoReturn, TypeVar

import pytest

REQUIRE_VARIABLE = "TRANSCRIPT_OTEL_REQUIRE_REAL"
TRUE_VALUES = frozenset({"1", "true", "yes", "on"})
FALSE_VALUES = frozenset({"", "0", "false", "no", "off"})

Found = TypeVar("Found")


def real_parts_required(environ: Mapping[str, str] = os.environ) -> bool:
    """Whether the switch is on: any of 1/true/yes/on, in any case; off when unset or false.

    Any other value fails the test: a typo must not quietly turn requiring into skipping."""
    value = environ.get(REQUIRE_VARIABLE, "").strip().lower()
    if value in TRUE_VALUES:
        return True
    if value not in FALSE_VALUES:
        pytest.fail(
            f"{REQUIRE_VARIABLE}={environ[REQUIRE_VARIABLE]!r} is neither true (1, true, yes, on) "
            "nor false (0, false, no, off, empty)",
            pytrace=False,
        )
    return False


def missing(reason: str) -> NoReturn:
    """Skip the test with `reason`, or fail it with `reason` where real parts are required."""
    if real_parts_required():
        pytest.fail(f"{reason} ({REQUIRE_VARIABLE} is set: this test may not skip)", pytrace=False)
    pytest.skip(reason)


def require(found: Found | None, reason: str) -> Found:
    """`found` (a path, a command...), or, when it is None, `missing(reason)`."""
    if found is None:
        missing(reason)
    return found
