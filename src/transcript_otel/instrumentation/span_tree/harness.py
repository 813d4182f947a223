"""What a harness tells an `AgentRun` after the run began, for its spans.

Its session id, its provider, what it told the model before the conversation (system prompt
and tool definitions) and attributes only the run's end tells (`describe()`). Never raising;
what must reach spans is applied on the writer, in queue order.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from transcript_otel.instrumentation.span_tree.span_slot import SpanSlot
from transcript_otel.instrumentation.span_tree.state import RunState
from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import GEN_AI_PROVIDER_NAME


class HarnessFacts(RunState):
    """The run's facts the harness learns late: session id, provider, agent description."""

    def set_session_id(self, session_id: str) -> None:
        """The harness told its session id after the run began: spans and later entries get it."""
        try:
            with self._lock:
                if session_id == self._session_id:
                    return
                self._session_id = session_id
            self._on_writer("could not set the session id", self._set_span_session_id, session_id)
            self.emitter.set_session_id(session_id)
        except Exception as exc:
            self._report("could not set the session id", exc)

    def _set_span_session_id(self, session_id: str) -> None:
        with self._lock:
            slots: list[SpanSlot | None] = [self._root, self._turn, *self._turns_awaiting_result]
            slots += [*self._tools.values(), *self._background_calls.values(), *self._subagents.values()]
            slots += [subagent.chat for subagent in self._subagents.values()]
            for slot in slots:
                if slot is not None:
                    slot.span.set_attribute(attr.GEN_AI_CONVERSATION_ID, session_id)

    @property
    def session_id(self) -> str | None:
        return self._session_id

    def describe_agent(
        self,
        *,
        system_instructions: str | None = None,
        tool_definitions: Sequence[Mapping[str, Any]] | None = None,
    ) -> None:
        """What the harness told the model before the conversation: its system prompt and the
        tools it may call (`{"name", "description"?, "parameters"?}`). Content: the root and
        every chat span carry them where the content settings let them. Never raises."""
        self._on_writer(
            "could not describe the agent", self._set_agent_description, system_instructions, tool_definitions
        )

    def _set_agent_description(
        self, system_instructions: str | None, tool_definitions: Sequence[Mapping[str, Any]] | None
    ) -> None:
        with self._lock:
            if system_instructions is not None:
                self._description.system_instructions = system_instructions
            if tool_definitions is not None:
                self._description.tool_definitions = tuple(tool_definitions)

    def set_provider(self, provider: str) -> None:
        """The provider (`gen_ai.provider.name`), learned after the run began (`run` learns it
        from the lines the agent prints): the root's, and every span's opened from now on."""
        self._on_writer("could not set the provider", self._set_provider, provider)

    def _set_provider(self, provider: str) -> None:
        with self._lock:
            self._provider = provider
            for slot in (self._root, self._turn, *self._turns_awaiting_result):
                if slot is not None:
                    slot.span.set_attribute(GEN_AI_PROVIDER_NAME, provider)

    def describe(self, key: str, value: str | int | float | bool) -> None:
        """Add an attribute to the run's root span (what only the end of the run tells)."""
        try:
            self._root.span.set_attribute(key, value)
        except Exception as exc:
            self._report("could not set a root span attribute", exc)
