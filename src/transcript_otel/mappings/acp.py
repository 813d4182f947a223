"""What an ACP agent reports beside the updates weakincentives' bridge maps: token usage and cost.

weakincentives' `ACPTranscriptBridge` turns message, thought and tool call updates into
entries (mirrored as they are); it drops the `session/prompt` answer's usage and the
`usage_update` notifications. These map them, from their JSON form (`model_dump(by_alias=True)`):

* a `session/prompt` answer (`PromptResponse`) → `token_usage` where it reports usage: ACP's
  `usage` (`inputTokens`, `outputTokens`, `cachedReadTokens`, `cachedWriteTokens`,
  `thoughtTokens`, each a kind of its own, summed by `totalTokens`), else what Gemini CLI puts
  in its `_meta.quota` (`token_count.{input_tokens, output_tokens}` and the same per step in
  `model_usage`); nothing where it reports neither;
* a `usage_update` → `token_usage` with the session's cost so far (`cost.amount`), what of it
  is new since the last one (`turn_cost_usd`), and the context window's fill (`used`/`size`).

`detail.usage` holds the counts the way the conventions count them: `input_tokens` the whole
prompt (cache reads and writes included), `output_tokens` the answer with its thinking.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any, Final

from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings._split_usage import conventions_usage
from transcript_otel.model.entries import EntryType, RawJson

_TOKEN_USAGE: Final = EntryType.TOKEN_USAGE.value
USAGE_UPDATE: Final = "usage_update"


def _count(container: Mapping[str, Any], key: str) -> int | None:
    value = container.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def _acp_counts(usage: Mapping[str, Any]) -> dict[str, int]:
    """ACP's `Usage`: every kind counted apart (OpenCode: `inputTokens` leaves the cache reads
    out, `totalTokens` is the sum), so the whole prompt is input plus cache reads and writes."""
    return conventions_usage(
        _count(usage, "inputTokens"),
        _count(usage, "outputTokens"),
        _count(usage, "cachedReadTokens"),
        _count(usage, "cachedWriteTokens"),
        _count(usage, "thoughtTokens"),
        reasoning_key="reasoning_tokens",
    )


def _quota(response: Mapping[str, Any]) -> Mapping[str, Any] | None:
    meta = response.get("_meta")
    quota = meta.get("quota") if isinstance(meta, Mapping) else None
    return quota if isinstance(quota, Mapping) else None


def _quota_model(quota: Mapping[str, Any]) -> str | None:
    """The one model `model_usage` names, else None (Gemini CLI names each step's)."""
    steps = quota.get("model_usage")
    names = (
        {step.get("model") for step in steps if isinstance(step, Mapping)}
        if isinstance(steps, list)
        else set()
    )
    (name,) = names if len(names) == 1 else (None,)
    return name if isinstance(name, str) and name else None


def prompt_usage(response: Any) -> MappedEntry | None:
    """A `session/prompt` answer's usage as a `token_usage` entry; None where it tells none."""
    if not isinstance(response, Mapping):
        return None
    usage = response.get("usage")
    if isinstance(usage, Mapping):
        detail: dict[str, Any] = {"usage": _acp_counts(usage), "provider_usage": dict(usage)}
    else:
        quota = _quota(response)
        token_count = quota.get("token_count") if quota is not None else None
        if quota is None or not isinstance(token_count, Mapping):
            return None
        counts = {
            key: value
            for key in ("input_tokens", "output_tokens")
            if (value := _count(token_count, key)) is not None
        }
        detail = {"usage": counts, "provider_usage": dict(quota)}
        model = _quota_model(quota)
        if model is not None:
            detail["model"] = model
    stop_reason = response.get("stopReason")
    if isinstance(stop_reason, str):
        detail["stop_reason"] = stop_reason
    return MappedEntry(_TOKEN_USAGE, detail, RawJson(dict(response)))


class ACPMapper:
    """One run's `usage_update`s: the session's cost so far, to tell what each adds."""

    __slots__ = ("_cost",)

    def __init__(self) -> None:
        self._cost = 0.0

    def usage_update(self, update: Any) -> MappedEntry | None:
        """A `usage_update` as a `token_usage` entry: no tokens, the cost it adds, the context."""
        if not isinstance(update, Mapping) or update.get("sessionUpdate") != USAGE_UPDATE:
            return None
        detail: dict[str, Any] = {}
        for key, name in (("used", "context_tokens"), ("size", "context_window")):
            value = _count(update, key)
            if value is not None:
                detail[name] = value
        cost = update.get("cost")
        amount = cost.get("amount") if isinstance(cost, Mapping) else None
        if isinstance(amount, int | float) and not isinstance(amount, bool) and math.isfinite(amount):
            detail["session_cost"] = float(amount)
            detail["currency"] = cost.get("currency") if isinstance(cost, Mapping) else None
            if detail["currency"] == "USD":
                detail["turn_cost_usd"] = max(float(amount) - self._cost, 0.0)
                self._cost = max(float(amount), self._cost)
        return MappedEntry(_TOKEN_USAGE, detail, RawJson(dict(update)))
