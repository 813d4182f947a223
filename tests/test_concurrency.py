"""Many threads and many asyncio tasks emitting at once: numbering stays exact, per source."""

from __future__ import annotations

import asyncio
import sys
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from transcript_otel import TranscriptEmitter, TranscriptPipeline, check_invariants
from transcript_otel.sinks import JsonlMirror

from helpers import WRITTEN_WITHIN_S, entry_contexts, run_records

MakePipeline = Callable[..., TranscriptPipeline]
THREADS = 8
PER_THREAD = 10_000
SOURCES = ("main", "subagent:a", "subagent:b", "subagent:c")
BIG_BACKLOG = 1 << 34  # the test is about numbering, not about the drop policy


@pytest.fixture
def roomy_pipeline(make_pipeline: MakePipeline, runs_dir: Any) -> TranscriptPipeline:
    return make_pipeline([JsonlMirror(runs_dir)], max_backlog_bytes=BIG_BACKLOG)


@pytest.fixture
def fast_thread_switching() -> Iterator[None]:
    """Switch threads as often as possible, so races show up in a short test."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)
    yield
    sys.setswitchinterval(previous)


def run_threads(count: int, target: Callable[[int], None]) -> None:
    barrier = threading.Barrier(count)
    failures: list[BaseException] = []

    def body(index: int) -> None:
        barrier.wait()
        try:
            target(index)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=body, args=(index,)) for index in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert failures == []


def test_eight_threads_ten_thousand_entries_each(roomy_pipeline: TranscriptPipeline) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="claude_agent_sdk", pipeline=roomy_pipeline)
    emitter.start()

    def work(thread: int) -> None:
        source = SOURCES[thread % len(SOURCES)]  # two threads share each source
        for index in range(PER_THREAD):
            emitter.emit("assistant_message", source=source, detail={"t": thread, "i": index})

    run_threads(THREADS, work)
    summary = emitter.stop(WRITTEN_WITHIN_S)
    assert emitter.dropped_entries == 0
    contexts = entry_contexts(run_records(emitter))
    assert len(contexts) == THREADS * PER_THREAD
    by_source: dict[str, list[int]] = defaultdict(list)
    for context in contexts:
        by_source[context["source"]].append(context["sequence_number"])
    per_source = THREADS // len(SOURCES) * PER_THREAD
    for source in SOURCES:
        numbers = by_source[source]
        assert len(numbers) == per_source
        assert len(set(numbers)) == per_source, f"duplicate sequence numbers in {source}"
        assert sorted(numbers) == list(range(1, per_source + 1)), f"gap in {source}"
    # Every single emit() is there exactly once.
    assert Counter((c["detail"]["t"], c["detail"]["i"]) for c in contexts) == Counter(
        (t, i) for t in range(THREADS) for i in range(PER_THREAD)
    )
    assert summary.total_entries == THREADS * PER_THREAD
    assert summary.entries_by_source == dict.fromkeys(SOURCES, per_source)
    assert summary.entries_by_type == {"assistant_message": THREADS * PER_THREAD}


@pytest.mark.usefixtures("fast_thread_switching")
def test_file_order_follows_sequence_order_under_contention(roomy_pipeline: TranscriptPipeline) -> None:
    """Invariants 2 and 7 hold for what several threads emit into one source."""
    emitter = TranscriptEmitter(prompt_name="p", adapter="claude_agent_sdk", pipeline=roomy_pipeline)
    emitter.start()

    def work(thread: int) -> None:
        for index in range(10_000):
            emitter.emit("assistant_message", detail={"t": thread, "i": index})

    run_threads(4, work)
    emitter.stop(WRITTEN_WITHIN_S)
    records = run_records(emitter)
    assert len(entry_contexts(records)) == 40_000
    violations = check_invariants(records)
    assert violations == [], f"{len(violations)} violations, first: {violations[0]}"


def test_threads_with_one_emitter_each(roomy_pipeline: TranscriptPipeline) -> None:
    emitters = [
        TranscriptEmitter(prompt_name=f"prompt-{index}", adapter="a", pipeline=roomy_pipeline)
        for index in range(THREADS)
    ]

    def work(thread: int) -> None:
        with emitters[thread] as emitter:
            for index in range(1_000):
                emitter.emit("tool_use", source=SOURCES[index % 2], detail={"i": index})

    run_threads(THREADS, work)
    for emitter in emitters:
        contexts = entry_contexts(run_records(emitter))
        for source in SOURCES[:2]:
            assert [c["sequence_number"] for c in contexts if c["source"] == source] == list(range(1, 501))


def test_asyncio_tasks_into_several_emitters(roomy_pipeline: TranscriptPipeline) -> None:
    emitters = [
        TranscriptEmitter(prompt_name=f"agent-{index}", adapter="codex_app_server", pipeline=roomy_pipeline)
        for index in range(3)
    ]
    tasks_per_emitter = 20
    per_task = 100

    async def agent(emitter: TranscriptEmitter, task: int) -> None:
        for index in range(per_task):
            emitter.emit("assistant_message", detail={"task": task, "i": index})
            if index % 3 == 0:
                await asyncio.sleep(0)

    async def main() -> None:
        for emitter in emitters:
            emitter.start()
        await asyncio.gather(
            *(agent(emitter, task) for emitter in emitters for task in range(tasks_per_emitter))
        )

    asyncio.run(main())
    total = tasks_per_emitter * per_task
    for emitter in emitters:
        summary = emitter.stop(WRITTEN_WITHIN_S)
        assert summary.total_entries == total
        records = run_records(emitter)
        contexts = entry_contexts(records)
        assert [c["sequence_number"] for c in contexts] == list(range(1, total + 1))
        assert {c["prompt_name"] for c in contexts} == {summary.prompt_name}
        assert Counter(c["detail"]["task"] for c in contexts) == dict.fromkeys(
            range(tasks_per_emitter), per_task
        )
        # Within a task, its entries keep their order.
        for task in range(tasks_per_emitter):
            assert [c["detail"]["i"] for c in contexts if c["detail"]["task"] == task] == list(
                range(per_task)
            )
        assert check_invariants(records, expected_adapter="codex_app_server") == []


def test_asyncio_tasks_with_sources_in_one_emitter(roomy_pipeline: TranscriptPipeline) -> None:
    emitter = TranscriptEmitter(prompt_name="p", adapter="claude_agent_sdk", pipeline=roomy_pipeline)

    async def subagent(source: str) -> None:
        for _ in range(200):
            emitter.emit("thinking", source=source)
            await asyncio.sleep(0)

    async def main() -> None:
        with emitter:
            await asyncio.gather(*(subagent(source) for source in SOURCES for _ in range(2)))

    asyncio.run(main())
    records = run_records(emitter)
    contexts = entry_contexts(records)
    for source in SOURCES:
        assert [c["sequence_number"] for c in contexts if c["source"] == source] == list(range(1, 401))
    assert check_invariants(records) == []
