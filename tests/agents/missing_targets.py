"""Which patch targets of an instrumentor the installed library lacks (run in its environment).

    missing_targets.py weakincentives|claude_agent_sdk

Imports every patched module there is, applies the patches, and prints one JSON list: the
patched modules the distribution's files lack, and the `module:attribute` targets of the
imported modules that were not found.
"""

from __future__ import annotations

import importlib
import json
import sys

from opentelemetry import trace

from transcript_otel.instrumentation._instrumentor import PatchingInstrumentor, missing_modules
from transcript_otel.instrumentation.claude_agent_sdk import ClaudeAgentSdkInstrumentor
from transcript_otel.instrumentation.weakincentives import WeakincentivesInstrumentor

INSTRUMENTORS: dict[str, type[PatchingInstrumentor]] = {
    "weakincentives": WeakincentivesInstrumentor,
    "claude_agent_sdk": ClaudeAgentSdkInstrumentor,
}


def missing(which: str) -> list[str]:
    instrumentor = INSTRUMENTORS[which]
    imported = []
    for name in instrumentor.patched_modules:
        try:
            importlib.import_module(name)
        except ModuleNotFoundError:  # a module of older versions only
            continue
        imported.append(name)
    _state, patch_set = instrumentor()._build(trace.NoOpTracer())
    patch_set.activate()
    try:
        targets = {f"{p.module}:{p.attribute}" for p in patch_set.patches if p.module in imported}
        return sorted({*missing_modules(instrumentor), *(targets - set(patch_set.applied))})
    finally:
        patch_set.deactivate()


if __name__ == "__main__":
    print(json.dumps(missing(sys.argv[1])))
