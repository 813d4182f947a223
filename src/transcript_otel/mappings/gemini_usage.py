"""The token usage the Gemini CLI prints, per model, as canonical usage.

The CLI prints its session's tokens once, at the end (`stats.models` of stream-json's
`result` and of json's object), summed per model over the steps. With `--model auto`, its
default, it first asks a small router model (`gemini-3.5-flash-lite` in 0.61.0, role
`utility_router` in json's stats) which model should answer, then calls that one (the main
model): the printed totals count both. The turn's `chat` span is the main model's calls, so
its usage is the main model's tokens alone; the run's totals (`session_usage`: the root span's
`transcript.usage.*`, `summary`) are everything the CLI printed, router included, so the
router's tokens are neither hidden nor counted twice. `models` keeps each model's usage.

Which model is the main one: json names each model's roles (`roles.main`); stream-json names
none, so there it is the model `init` named when that was not `auto` (a `--model` given), else
the last model listed (the CLI lists models in the order it first called them, and calls the
router before the main model).

The counts, in the names `genai.attributes` reads (Gemini's API counts: prompt P, of it cached
C, candidates O, thoughts T, total P+O+T):

* `input_tokens` = P, cached included (the conventions' input), `cached_input_tokens` = C;
* `reasoning_output_tokens` = T: json prints it (`tokens.thoughts`); stream-json does not, and
  its `total_tokens` counts thoughts where its `output_tokens` does not, so T = `total_tokens` -
  `input_tokens` - `output_tokens` there (json's `tokens.tool`, tool-use prompt tokens, would be
  in that difference too; it was 0 in every run measured);
* `output_tokens` = O + T: the conventions count reasoning within the output tokens, as
  OpenAI's and Anthropic's counts (and so this package's other harnesses) do.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

MAIN_ROLE: Final = "main"
_KEYS: Final = ("input_tokens", "cached_input_tokens", "output_tokens", "reasoning_output_tokens")


def _count(container: Mapping[str, Any], key: str) -> int:
    value = container.get(key)
    return value if isinstance(value, int) and not isinstance(value, bool) and value > 0 else 0


def _usage(prompt: int, cached: int, candidates: int, thoughts: int) -> dict[str, int]:
    return {
        "input_tokens": prompt,
        "cached_input_tokens": cached,
        "output_tokens": candidates + thoughts,
        "reasoning_output_tokens": thoughts,
    }


def stream_model_usage(stats: Mapping[str, Any]) -> dict[str, int]:
    """One model's counts in stream-json's `result.stats.models` (see the module docstring)."""
    prompt, candidates = _count(stats, "input_tokens"), _count(stats, "output_tokens")
    thoughts = max(_count(stats, "total_tokens") - prompt - candidates, 0)
    return _usage(prompt, _count(stats, "cached"), candidates, thoughts)


def json_tokens_usage(tokens: Mapping[str, Any]) -> dict[str, int]:
    """One model's (or role's) `tokens` in json's `stats.models`."""
    return _usage(
        _count(tokens, "prompt"),
        _count(tokens, "cached"),
        _count(tokens, "candidates"),
        _count(tokens, "thoughts"),
    )


def session_tokens_usage(tokens: Mapping[str, Any]) -> dict[str, int]:
    """A model message's `tokens` in the session file (`input` is the prompt, cached included)."""
    return _usage(
        _count(tokens, "input"),
        _count(tokens, "cached"),
        _count(tokens, "output"),
        _count(tokens, "thoughts"),
    )


def _summed(usages: list[dict[str, int]]) -> dict[str, int]:
    return {key: sum(usage[key] for usage in usages) for key in _KEYS}


def stream_usage_detail(stats: Any, init_model: str | None) -> dict[str, Any]:
    """What a token_usage entry says of stream-json's `result.stats`: `model` (the main model),
    `usage` (its tokens), `session_usage` (every model's) and `models` (each one's); nothing
    where the stats list no model."""
    models = stats.get("models") if isinstance(stats, Mapping) else None
    if not isinstance(models, Mapping):
        return {}
    listed = [
        (name, stream_model_usage(counts)) for name, counts in models.items() if isinstance(counts, Mapping)
    ]
    if not listed:
        return {}
    names = [str(name) for name, _ in listed]
    main = init_model if init_model is not None and init_model in names else names[-1]
    return _detail(main, [(name, None, usage) for name, usage in listed])


def json_usage_detail(stats: Any) -> dict[str, Any]:
    """As `stream_usage_detail`, of json's `stats`: per model and role (`roles`), the main model
    the last one with role `main` (else the last listed)."""
    models = stats.get("models") if isinstance(stats, Mapping) else None
    if not isinstance(models, Mapping):
        return {}
    listed: list[tuple[str, str | None, dict[str, int]]] = []
    for name, counts in models.items():
        if not isinstance(counts, Mapping):
            continue
        roles = counts.get("roles")
        by_role = [
            (name, role, json_tokens_usage(facts.get("tokens") or {}))
            for role, facts in (roles.items() if isinstance(roles, Mapping) else ())
            if isinstance(facts, Mapping) and isinstance(facts.get("tokens") or {}, Mapping)
        ]
        tokens = counts.get("tokens")
        listed += by_role or [(name, None, json_tokens_usage(tokens if isinstance(tokens, Mapping) else {}))]
    if not listed:
        return {}
    mains = [name for name, role, _ in listed if role == MAIN_ROLE]
    return _detail(mains[-1] if mains else listed[-1][0], listed)


def _detail(main: str, listed: list[tuple[str, str | None, dict[str, int]]]) -> dict[str, Any]:
    has_roles = any(role is not None for _, role, _ in listed)
    chat = [
        usage
        for name, role, usage in listed
        if name == main and (role == MAIN_ROLE or not has_roles or role is None)
    ]
    models = [
        {"model": name, **({"role": role} if role is not None else {}), "usage": usage}
        for name, role, usage in listed
    ]
    return {
        "model": main,
        "usage": _summed(chat),
        "session_usage": _summed([usage for _, _, usage in listed]),
        "models": models,
    }
