"""Shared fixtures: a real OTel SDK with in-memory exporters and a fresh pipeline per test.

Providers are passed to the sinks explicitly (never set globally), so tests stay
independent. Tests that need the SDK are skipped where the `[otlp]` extra is
not installed (the core suite also runs on a bare `opentelemetry-api`).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import settings

from transcript_otel import TranscriptPipeline, set_pipeline
from transcript_otel.capture import defaults
from transcript_otel.sinks import JsonlMirror, OTelLogSink, SpanEventSink
from transcript_otel.sinks.base import Sink

from phoenix_server import PHOENIX_MISSING, Phoenix, phoenix_executable
from requirements_switch import missing, require
from rotel_collector import ROTEL_MISSING, Rotel, rotel_binary

if TYPE_CHECKING:
    from transcript_otel.sessions.watch import Watcher

# `make test` draws the same property-test examples at every run: its result never depends on
# luck. `make explore` draws new ones (HYPOTHESIS_PROFILE=explore), to look for what they miss.
settings.register_profile("repeatable", derandomize=True, print_blob=True)
settings.register_profile("explore", derandomize=False, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "repeatable"))


@dataclass
class OTelHarness:
    """A real SDK tracer and logger provider with in-memory exporters."""

    tracer_provider: Any
    logger_provider: Any
    span_exporter: Any
    log_exporter: Any

    @property
    def tracer(self) -> Any:
        return self.tracer_provider.get_tracer("tests")

    def finished_logs(self) -> list[Any]:
        self.logger_provider.force_flush()
        return list(self.log_exporter.get_finished_logs())

    def finished_spans(self) -> list[Any]:
        self.tracer_provider.force_flush()
        return list(self.span_exporter.get_finished_spans())


@pytest.fixture
def otel() -> Iterator[OTelHarness]:
    sdk_logs = pytest.importorskip("opentelemetry.sdk._logs")
    sdk_logs_export = pytest.importorskip("opentelemetry.sdk._logs.export")
    sdk_trace = pytest.importorskip("opentelemetry.sdk.trace")
    sdk_trace_export = pytest.importorskip("opentelemetry.sdk.trace.export")
    in_memory = pytest.importorskip("opentelemetry.sdk.trace.export.in_memory_span_exporter")

    span_exporter = in_memory.InMemorySpanExporter()
    tracer_provider = sdk_trace.TracerProvider(shutdown_on_exit=False)
    tracer_provider.add_span_processor(sdk_trace_export.SimpleSpanProcessor(span_exporter))
    log_exporter = sdk_logs_export.InMemoryLogRecordExporter()
    logger_provider = sdk_logs.LoggerProvider(shutdown_on_exit=False)
    logger_provider.add_log_record_processor(sdk_logs_export.SimpleLogRecordProcessor(log_exporter))
    yield OTelHarness(tracer_provider, logger_provider, span_exporter, log_exporter)
    tracer_provider.shutdown()
    logger_provider.shutdown()


@pytest.fixture
def runs_dir(tmp_path: Path) -> Path:
    return tmp_path / "runs"


@pytest.fixture
def make_pipeline() -> Iterator[Callable[..., TranscriptPipeline]]:
    """Build pipelines from sinks; every one is shut down after the test."""
    created: list[TranscriptPipeline] = []

    def build(sinks: list[Sink], **options: Any) -> TranscriptPipeline:
        pipeline = TranscriptPipeline(sinks, **options)
        created.append(pipeline)
        return pipeline

    yield build
    for pipeline in created:
        pipeline.shutdown(5.0)


@pytest.fixture
def polling_watcher(
    tmp_path: Path, make_pipeline: Callable[..., TranscriptPipeline]
) -> Callable[[], Watcher]:
    """A watcher of `tmp_path/home` that polls (no kernel changes), its state in
    `tmp_path/watch.json`, writing to the mirror `tmp_path/runs`."""
    from opentelemetry import trace

    from transcript_otel.sessions.watch import Watcher
    from transcript_otel.sessions.watch_state import WatchState

    def start() -> Watcher:
        return Watcher(
            [tmp_path / "home"],
            WatchState(tmp_path / "watch.json"),
            pipeline=make_pipeline([JsonlMirror(tmp_path / "runs")]),
            tracer=trace.get_tracer(__name__),
            kernel_changes=False,
        )

    return start


@pytest.fixture
def jsonl_pipeline(make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path) -> TranscriptPipeline:
    """A pipeline with the JSONL mirror only (no OTel SDK needed)."""
    return make_pipeline([JsonlMirror(runs_dir)])


@pytest.fixture
def full_pipeline(
    make_pipeline: Callable[..., TranscriptPipeline], runs_dir: Path, otel: OTelHarness
) -> TranscriptPipeline:
    """All three sinks: JSONL mirror, OTel log records, span events."""
    return make_pipeline([JsonlMirror(runs_dir), OTelLogSink(otel.logger_provider), SpanEventSink()])


@pytest.fixture
def default_pipeline(
    full_pipeline: TranscriptPipeline, monkeypatch: pytest.MonkeyPatch
) -> TranscriptPipeline:
    """`full_pipeline` as the default pipeline (what instrumentors use), the previous one restored after."""
    monkeypatch.setattr(defaults, "_pipeline", defaults._pipeline)  # undone by monkeypatch
    set_pipeline(full_pipeline)
    return full_pipeline


@pytest.fixture(scope="module")
def rotel(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Rotel]:
    """A real rotel collector on free loopback ports, one per test module."""
    binary = require(rotel_binary(), ROTEL_MISSING)
    collector = Rotel(binary, tmp_path_factory.mktemp("rotel")).start()
    try:
        yield collector
    finally:
        collector.stop()


# Phoenix takes 15-25 s to start: it is launched once collection shows a test that
# needs it, starts while the tests before that one run, and is stopped at the end.
_phoenix: Phoenix | None = None


def _skipped_by_mark(item: pytest.Item) -> bool:
    """Whether a `skipif` mark with a true condition (or a `skip` mark) skips `item` before it runs."""
    if item.get_closest_marker("skip") is not None:
        return True
    return any(mark.args and mark.args[0] is True for mark in item.iter_markers("skipif"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    # The default python3's run (`make test`) deselects them: Phoenix installs while it runs.
    for item in items:
        if "phoenix" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.phoenix)


def pytest_collection_finish(session: pytest.Session) -> None:
    global _phoenix
    wanted = any(
        "phoenix" in getattr(item, "fixturenames", ()) and not _skipped_by_mark(item)
        for item in session.items
    )
    executable = phoenix_executable()
    if wanted and executable is not None and _phoenix is None:
        _phoenix = Phoenix(executable)
        _phoenix.launch()


def pytest_sessionfinish(session: pytest.Session) -> None:
    if _phoenix is not None:
        _phoenix.close()


@pytest.fixture(scope="session")
def phoenix() -> Phoenix:
    """Arize Phoenix (`.venv-phoenix`) on free loopback ports, ready."""
    if _phoenix is None:
        missing(PHOENIX_MISSING)
    return _phoenix.wait_ready()
