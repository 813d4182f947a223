"""What Claude Code reports as running totals: the session's cost and tokens so far.

A stream-json `result` (`total_cost_usd`, `modelUsage`) and a session file's `cost-state`
(`totalCostUSD`, `modelUsage`) both give the session's totals up to then, per model:
`RunningCost` turns each report into what it adds (`turn_cost_usd`, `session_usage`), from
where the run went on (a resumed or forked session, a session taken up part-way).
"""

from __future__ import annotations

import math
from typing import Any, Final

from transcript_otel.records.serialize import parse_json

# `modelUsage` (camelCase, per model) to the usage keys of a result's `usage`.
MODEL_USAGE_KEYS: Final = (
    ("inputTokens", "input_tokens"),
    ("outputTokens", "output_tokens"),
    ("cacheReadInputTokens", "cache_read_input_tokens"),
    ("cacheCreationInputTokens", "cache_creation_input_tokens"),
)


class RunningCost:
    """The session's cost and tokens as Claude Code reports them, running totals (stream-json
    `result`'s `total_cost_usd` and `modelUsage`, a session file's `cost-state`): what each
    report adds. A run that goes on from earlier totals (a resumed or forked session, a session
    taken up part-way) counts from them (`resume_at`)."""

    __slots__ = ("baseline", "so_far")

    def __init__(self) -> None:
        self.so_far = 0.0
        self.baseline: dict[str, int] = {}  # the token totals this run went on from

    def add_report(self, detail: dict[str, Any], total: Any, model_usage: Any) -> dict[str, int]:
        """Put in `detail` what a main agent's report of the running `total` and `modelUsage`
        says: `turn_cost_usd`, the cost since the last report, and `session_usage`, the token
        totals (summed over the models) since the run's start; returns the session's totals."""
        if _finite_number(total):
            detail["turn_cost_usd"] = max(0.0, total - self.so_far)
            self.so_far = max(self.so_far, float(total))
        session_usage = summed_model_usage(model_usage)
        if session_usage:
            detail["session_usage"] = {
                key: max(0, value - self.baseline.get(key, 0)) for key, value in session_usage.items()
            }
        return session_usage

    def resume_at(self, report: str | bytes) -> dict[str, Any] | None:
        """Reports up to `report` (a `cost-state` line: the session's totals when this run went on)
        were another run's: go on from its totals. The line parsed; None if it is no object."""
        try:
            entry = parse_json(report)
        except (ValueError, RecursionError):
            return None
        if not isinstance(entry, dict):
            return None
        total: Any = entry.get("totalCostUSD")
        if _finite_number(total):
            self.so_far = float(total)
        self.baseline = summed_model_usage(entry.get("modelUsage"))
        return entry


def _finite_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def summed_model_usage(model_usage: Any) -> dict[str, int]:
    """`modelUsage` (per model, the session's running totals) summed over the models."""
    summed: dict[str, int] = {}
    if not isinstance(model_usage, dict):
        return summed
    for usage in model_usage.values():
        if not isinstance(usage, dict):
            continue
        for source_key, key in MODEL_USAGE_KEYS:
            value = usage.get(source_key)
            if isinstance(value, int) and not isinstance(value, bool):
                summed[key] = summed.get(key, 0) + value
    return summed
