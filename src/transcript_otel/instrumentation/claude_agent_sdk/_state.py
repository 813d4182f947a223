"""What the claude-agent-sdk wrappers share: the tracer, the on/off switch, the clients' runs."""

from __future__ import annotations

import logging
import os
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from opentelemetry import trace
from opentelemetry.instrumentation.utils import is_instrumentation_enabled

from transcript_otel.genai.lookup import nonempty_text
from transcript_otel.instrumentation.claude_agent_sdk._sdk_run import SdkRun
from transcript_otel.instrumentation.cli_logs import resumed_cost_state
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy, current_run

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())

ADAPTER: Final = "claude_agent_sdk"
PROVIDER: Final = "anthropic"


@dataclass(slots=True)
class Connection:
    """A connected `ClaudeSDKClient`'s run, and what ends it if the client is dropped connected."""

    sdk_run: SdkRun
    finalizer: weakref.finalize[Any, Any]


@dataclass(slots=True)
class SdkInstrumentation:
    """Shared by the wrappers of one `instrument()`; `active` is cleared by `uninstrument()`."""

    tracer: trace.Tracer
    prompt_name: str
    active: bool = True
    # The connection of each `ClaudeSDKClient` (its run), from `connect()` to `disconnect()`.
    clients: weakref.WeakKeyDictionary[Any, Connection] = field(default_factory=weakref.WeakKeyDictionary)
    # Every run this instrumentation started (to tell them from other instrumentations' runs).
    runs: weakref.WeakSet[AgentRun] = field(default_factory=weakref.WeakSet)

    def start_run(self, options: Any) -> SdkRun | None:
        """A new run for a conversation with these `ClaudeAgentOptions`, or None not to capture it.

        Not captured: capture switched off or suppressed, and a conversation run by the
        weakincentives Claude adapter, whose instrumentation captures it already (from
        the CLI's transcript files).
        """
        if not self.active or not is_instrumentation_enabled():
            return None
        outer = current_run()
        if outer is not None and outer.adapter == ADAPTER and outer not in self.runs:
            return None
        try:
            run = AgentRun(
                self.tracer,
                prompt_name=self.prompt_name,
                adapter=ADAPTER,
                session_id=_text_option(options, "session_id") or _text_option(options, "resume"),
                provider=PROVIDER,
                model=_text_option(options, "model"),
                policy=TurnPolicy.STREAM_JSON,  # each result tells its turn's usage
            )
        except Exception:
            _logger.debug("transcript-otel: could not start a claude-agent-sdk run", exc_info=True)
            return None
        self.runs.add(run)
        try:
            instructions = system_instructions(getattr(options, "system_prompt", None))
        except Exception:  # options we misread must not reach the program
            _logger.debug("transcript-otel: could not read the system prompt", exc_info=True)
            instructions = None
        if instructions is not None:
            run.describe_agent(system_instructions=instructions)
        return SdkRun(run, _resumed_cost_state(options))


def system_instructions(system_prompt: Any) -> str | None:
    """The text of `ClaudeAgentOptions.system_prompt` that the program wrote: the prompt itself
    (a string, or `{"type": "custom", "prompt": ...}`), or what a preset appends to Claude
    Code's own prompt (`{"type": "preset", "append": ...}`, the rest of which no one here
    knows). None for a preset without `append`, a prompt file, or no prompt."""
    if isinstance(system_prompt, str):
        return system_prompt or None
    if isinstance(system_prompt, Mapping):
        kind = system_prompt.get("type")
        text = system_prompt.get("append") if kind == "preset" else system_prompt.get("prompt")
        if kind in ("preset", "custom") and isinstance(text, str) and text:
            return text
    return None


def _resumed_cost_state(options: Any) -> bytes | None:
    """The totals of the session the conversation resumes (`resume`, `continue_conversation`),
    read before it starts: the CLI's results report them with this run's own."""
    resumes = _text_option(options, "resume")
    if resumes is None and getattr(options, "continue_conversation", False) is not True:
        return None
    try:
        cwd = getattr(options, "cwd", None)
        environment = getattr(options, "env", None)
        return resumed_cost_state(
            resumes,
            str(cwd) if cwd else os.getcwd(),
            {**os.environ, **environment} if isinstance(environment, Mapping) else None,
        )
    except Exception:  # options we misread must not reach the program
        _logger.debug("transcript-otel: could not read the resumed session's totals", exc_info=True)
        return None


def _text_option(options: Any, name: str) -> str | None:
    return nonempty_text(getattr(options, name, None))
