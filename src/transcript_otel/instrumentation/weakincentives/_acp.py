"""The ACP and OpenCode adapters (0.26+): a root span per `evaluate()`; entries are native."""

from __future__ import annotations

from typing import Final

from transcript_otel.instrumentation._patching import Patch
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation

ADAPTER_MODULE: Final = "weakincentives.adapters.acp.adapter"

# OpenCodeACPAdapter inherits `evaluate`; `_adapter_name()` tells them apart.
SPEC: Final = AdapterSpec(default_name="acp", provider=None, model=nested_model("_model_config", "model"))


def patches(state: WinkInstrumentation) -> list[Patch]:
    return [Patch(ADAPTER_MODULE, "ACPAdapter.evaluate", evaluate_wrapper(state, SPEC))]
