"""The one switch (`TRANSCRIPT_OTEL_REQUIRE_REAL`) that makes a missing real part fail a test."""

from __future__ import annotations

from pathlib import Path

import pytest

from requirements_switch import REQUIRE_VARIABLE, missing, require

REASON = "the real Frobnicator CLI is not installed (`make frob`)"


@pytest.mark.parametrize("value", ["1", "true", "TRUE", "True", "yes", "Yes", "on", "ON", " on "])
def test_any_true_value_turns_a_missing_part_into_a_failure_saying_why(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(REQUIRE_VARIABLE, value)
    with pytest.raises(pytest.fail.Exception) as failed:
        missing(REASON)
    assert str(failed.value) == f"{REASON} ({REQUIRE_VARIABLE} is set: this test may not skip)"


@pytest.mark.parametrize("value", [None, "", "0", "false", "False", "no", "NO", "off", "Off"])
def test_unset_or_false_skips_with_the_reason(value: str | None, monkeypatch: pytest.MonkeyPatch) -> None:
    if value is None:
        monkeypatch.delenv(REQUIRE_VARIABLE, raising=False)
    else:
        monkeypatch.setenv(REQUIRE_VARIABLE, value)
    with pytest.raises(pytest.skip.Exception) as skipped:
        missing(REASON)
    assert str(skipped.value) == REASON


@pytest.mark.parametrize("value", ["2", "maybe", "required", "y"])
def test_a_value_neither_true_nor_false_fails_naming_the_switch(
    value: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A typo must not quietly skip what its author meant to require."""
    monkeypatch.setenv(REQUIRE_VARIABLE, value)
    with pytest.raises(pytest.fail.Exception) as failed:
        missing(REASON)
    assert str(failed.value).startswith(f"{REQUIRE_VARIABLE}={value!r} is neither true")


def test_a_found_part_is_returned_whatever_the_switch_says(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_VARIABLE, "1")
    assert require(Path("/usr/bin/frob"), REASON) == Path("/usr/bin/frob")
    monkeypatch.delenv(REQUIRE_VARIABLE)
    assert require("frob", REASON) == "frob"


def test_require_without_the_part_fails_when_required(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(REQUIRE_VARIABLE, "yes")
    with pytest.raises(pytest.fail.Exception, match="Frobnicator"):
        require(None, REASON)
