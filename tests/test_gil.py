"""The background threads' let-go of the GIL: `LettingGoBatch`, the batch the OTLP exporters read."""

from __future__ import annotations

import pytest

from transcript_otel._gil import YIELD_EVERY_S, LettingGoBatch


class _Clock:
    """`perf_counter` that moves only when told; `sleep` calls recorded."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def perf_counter(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr("transcript_otel._gil.perf_counter", fake.perf_counter)
    monkeypatch.setattr("transcript_otel._gil.sleep", fake.sleep)
    return fake


def test_batch_is_the_list_of_its_records() -> None:
    batch = LettingGoBatch(iter(["a", "b", "c"]))
    assert isinstance(batch, list)
    assert batch == ["a", "b", "c"]
    assert batch[1] == "b"
    batch.clear()  # a failed export clears it, so the exporter's frames hold nothing
    assert list(batch) == []


def test_quick_reader_never_lets_go(clock: _Clock) -> None:
    assert list(LettingGoBatch(range(100))) == list(range(100))
    assert clock.sleeps == []


def test_slow_reader_lets_go_once_per_interval(clock: _Clock) -> None:
    """An encoder that takes 0.2 ms per item lets go after every third item (0.6 ms >= 0.5 ms)."""
    read: list[int] = []
    for item in LettingGoBatch(range(9)):
        read.append(item)
        clock.now += 0.0002
    assert read == list(range(9))
    assert clock.sleeps == [0, 0, 0]
    assert YIELD_EVERY_S == 0.0005
