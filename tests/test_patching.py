"""`PatchSet` with `Replacement`s: plain functions for the hooks called on every line or entry.

Driven against a module made for the test, imported after the set is active, as a
harness module would be.
"""

from __future__ import annotations

import logging
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from transcript_otel.instrumentation._patching import Patch, PatchSet, Replacement, takes

MODULE = "transcript_otel_test_harness"


class _Client:
    def parse(self, line: str) -> dict[str, Any] | None:
        return {"line": line} if line.startswith("{") else None

    def emit(self, entry_type: str, *, source: str = "main", detail: Any = None) -> str:
        return f"{entry_type}@{source}"


@pytest.fixture
def harness() -> Iterator[types.ModuleType]:
    module = types.ModuleType(MODULE)
    client = type("Client", (), dict(vars(_Client)))  # a class of its own, patched freely
    module.Client = client  # type: ignore[attr-defined]
    yield module
    sys.modules.pop(MODULE, None)


def _recording(seen: list[Any]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        def parse(self: Any, line: str) -> Any:
            parsed = original(self, line)
            if parsed is None:
                seen.append(line)
            return parsed

        return parse

    return make


def test_a_replacement_applies_on_import_and_deactivate_restores_the_original(
    harness: types.ModuleType,
) -> None:
    seen: list[Any] = []
    original = harness.Client.parse
    patches = PatchSet("test", [Replacement(MODULE, "Client.parse", _recording(seen))])
    patches.activate()
    sys.modules[MODULE] = harness
    patches._on_import(harness)  # what the post-import hook does when the module is imported

    client = harness.Client()
    assert client.parse('{"a": 1}') == {"line": '{"a": 1}'}
    assert client.parse("not json") is None
    assert seen == ["not json"]
    assert harness.Client.__dict__["parse"].__wrapped__ is original
    assert harness.Client.__dict__["parse"].__name__ == "parse"
    assert patches.applied == [f"{MODULE}:Client.parse"]

    patches.deactivate()
    assert harness.Client.__dict__["parse"] is original
    assert harness.Client().parse("again") is None
    assert seen == ["not json"]
    assert patches.applied == []


def test_a_replacement_seen_again_is_not_replaced_twice(harness: types.ModuleType) -> None:
    seen: list[Any] = []
    original = harness.Client.parse
    replacement = Replacement(MODULE, "Client.parse", _recording(seen))
    patches = PatchSet("test", [replacement])
    patches.activate()
    patches._on_import(harness)
    installed = harness.Client.__dict__["parse"]
    patches._applied.clear()  # as when the module is met again (a name imported from it)
    patches._apply(harness, replacement)
    assert harness.Client.__dict__["parse"] is installed
    harness.Client().parse("x")
    assert seen == ["x"]
    patches.deactivate()
    assert harness.Client.__dict__["parse"] is original


def test_a_table_of_handlers_is_replaced_by_the_table_made_from_it_and_restored(
    harness: types.ModuleType,
) -> None:
    """A harness that dispatches through a class's table (weakincentives' Codex bridge): the
    table is replaced by one made from it, so what it has no entry for never reaches us."""
    seen: list[Any] = []

    def on_ping(self: Any, params: Any) -> str:
        return f"pong {params}"

    original = {"ping": on_ping}
    harness.Client.HANDLERS = original

    class Table(dict[str, Any]):
        pass

    def make(table: dict[str, Any]) -> dict[str, Any]:
        def on_ping_seen(self: Any, params: Any) -> Any:
            seen.append(params)
            return table["ping"](self, params)

        return Table(table, ping=on_ping_seen)

    patches = PatchSet("test", [Replacement(MODULE, "Client.HANDLERS", make)])
    patches.activate()
    patches._on_import(harness)
    client = harness.Client()
    assert client.HANDLERS["ping"](client, 1) == "pong 1"
    assert seen == [1]
    assert harness.Client.__dict__["HANDLERS"].__wrapped__ is original
    assert original == {"ping": on_ping}  # the harness's own table is left as it was
    patches._applied.clear()  # met again: not made from our own table
    patches._apply(harness, patches.patches[0])
    assert harness.Client.HANDLERS["ping"](client, 2) == "pong 2"
    assert seen == [1, 2]
    patches.deactivate()
    assert harness.Client.__dict__["HANDLERS"] is original


def test_patches_and_replacements_mix_in_one_set(harness: types.ModuleType) -> None:
    calls: list[str] = []

    def wrapper(wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
        calls.append("wrapt")
        return wrapped(*args, **kwargs)

    patches = PatchSet(
        "test",
        [Patch(MODULE, "Client.emit", wrapper), Replacement(MODULE, "Client.parse", _recording([]))],
    )
    patches.activate()
    patches._on_import(harness)
    assert harness.Client().emit("tool_use", source="main") == "tool_use@main"
    assert calls == ["wrapt"]
    assert patches.applied == [f"{MODULE}:Client.emit", f"{MODULE}:Client.parse"]
    patches.deactivate()
    assert harness.Client().emit("x") == "x@main"
    assert calls == ["wrapt"]


def test_a_missing_attribute_is_skipped(harness: types.ModuleType) -> None:
    patches = PatchSet("test", [Replacement(MODULE, "Client.gone", _recording([]))])
    patches.activate()
    patches._on_import(harness)
    assert patches.applied == []


def _missing_report(caplog: pytest.LogCaptureFixture, patches: PatchSet, harness: types.ModuleType) -> None:
    with caplog.at_level(logging.DEBUG, logger="transcript_otel"):
        patches.activate()
        patches._on_import(harness)
        patches._on_import(harness)  # seen again: reported once


def test_a_target_missing_in_a_tested_version_is_a_debug_line(
    harness: types.ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    _missing_report(caplog, PatchSet("test", [Replacement(MODULE, "Client.gone", _recording([]))]), harness)
    assert [(r.levelno, r.getMessage()) for r in caplog.records] == [
        (logging.DEBUG, f"test: {MODULE}.Client.gone not found; not patched")
    ]


def test_a_target_missing_in_an_untested_version_is_one_warning(
    harness: types.ModuleType, caplog: pytest.LogCaptureFixture
) -> None:
    """Unless the newest tested version lacked it already (`expected_missing`)."""
    patches = PatchSet(
        "untested-test",
        [Replacement(MODULE, name, _recording([])) for name in ("Client.gone", "Client.old")],
    )
    patches.untested = "lib 9.0"
    patches.expected_missing = frozenset({f"{MODULE}:Client.old"})
    _missing_report(caplog, patches, harness)
    again = PatchSet("untested-test", patches.patches)  # instrumented again: not warned again
    again.untested, again.expected_missing = patches.untested, patches.expected_missing
    _missing_report(caplog, again, harness)
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warnings == [
        f"transcript-otel: {MODULE}.Client.gone not found in lib 9.0 (untested); not patched: "
        "what it captured is missing"
    ]
    assert f"untested-test: {MODULE}.Client.old not found; not patched" in caplog.messages


def test_takes_compares_parameters_without_annotations() -> None:
    assert takes(_Client.parse, "(self, line)")
    assert takes(_Client.emit, "(self, entry_type, *, source='main', detail=None)")
    assert not takes(_Client.emit, "(self, entry_type, *, source='main', detail=None, raw=None)")
    assert not takes(_Client.parse, "(self, line, strict)")
    assert takes(len, "(obj, /)")
    not_a_function: Any = 5
    assert not takes(not_a_function, "(self)")


def test_the_native_emit_hook_takes_any_signature_it_does_not_know() -> None:
    """The known signature gets the fast form; another one still gets every argument through."""
    from opentelemetry import trace

    from transcript_otel.instrumentation.weakincentives import _native
    from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation

    state = WinkInstrumentation(trace.get_tracer("tests"), active=False)
    make = _native._emit(state)

    def known(
        self: Any, entry_type: str, *, source: str = "main", detail: Any = None, raw: Any = None
    ) -> Any:
        return (entry_type, source, detail, raw)

    def newer(self: Any, entry_type: str, extra: int, *, source: str = "main", tag: str = "") -> Any:
        return (entry_type, extra, source, tag)

    fast, generic = make(known), make(newer)
    assert fast.__name__ == "emit"
    assert generic.__name__ == "emit_any"
    assert fast(None, "tool_use", detail={"a": 1}) == ("tool_use", "main", {"a": 1}, None)
    assert generic(None, "tool_use", 3, tag="t") == ("tool_use", 3, "main", "t")
