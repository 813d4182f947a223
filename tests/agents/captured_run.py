"""What a real agent's run left in the JSONL mirror, for the real-CLI tests to read.

`CapturedRun` holds one run's records (entries and `transcript.span` records) with what the
scripted model served and what the CLI printed; `require_agent` skips a test without the
CLI, or fails it where the Makefile requires the real agents.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

REQUIRE_VARIABLE = "TRANSCRIPT_OTEL_REQUIRE_REAL_AGENTS"


def require_agent(path: Path | None, reason: str) -> Path:
    """`path`, else a skip (or, under `TRANSCRIPT_OTEL_REQUIRE_REAL_AGENTS=1`, a failure) with `reason`."""
    if path is None:
        if os.environ.get(REQUIRE_VARIABLE) == "1":
            pytest.fail(reason)
        pytest.skip(reason)
    return path


@dataclass
class CapturedRun:
    """One scenario's run: what the CLI did and what the mirror holds (spans included)."""

    scenario: str
    records: list[dict[str, Any]]
    served: list[dict[str, Any]]
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    prompt_name: str = ""

    @property
    def messages(self) -> list[dict[str, Any]]:
        """What the CLI printed as JSON lines (under `transcript-otel run`)."""
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]

    @property
    def entries(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.entry"]

    @property
    def spans(self) -> list[dict[str, Any]]:
        return [r["context"] for r in self.records if r["event"] == "transcript.span"]

    def named(self, prefix: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["name"].startswith(prefix)]

    def span(self, span_id: str) -> dict[str, Any]:
        (found,) = [span for span in self.spans if span["span_id"] == span_id]
        return found

    def parent(self, span: dict[str, Any]) -> dict[str, Any]:
        return self.span(span["parent_span_id"])

    @property
    def root(self) -> dict[str, Any]:
        (root,) = self.named(f"invoke_agent {self.prompt_name}")
        return root

    def tool(self, call_id: str) -> dict[str, Any]:
        (found,) = [s for s in self.spans if s["attributes"].get("gen_ai.tool.call.id") == call_id]
        return found

    def chat_spans(self) -> list[dict[str, Any]]:
        return sorted(self.named("chat"), key=lambda span: span["attributes"]["transcript.turn"])
