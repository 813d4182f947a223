"""The OpenAI and LiteLLM adapters (0.18 to 0.24; removed in 0.25).

weakincentives keeps these conversations as an OpenAI-format message list in the
provider loop (`InnerLoop._messages`) and keeps no transcript of its own, so these
patches build one with `ChatMapper` at the points of the role-based capture seed:

* before each provider request: the messages not recorded yet (the rendered prompt,
  sent as `system`, on the first request); a `chat` span opens for the round;
* after each response: its token usage (recorded after the entries of that response);
* when the tools of a round start (`ToolExecutor.execute`): the assistant message
  with its tool calls, just appended to the list (opening `execute_tool` spans), and
  when they finish: their results as the model will receive them;
* `_finalize_response(message)`: the final assistant message, which the loop never
  appends; the round's span ends after it, or after its tools;
* an exception out of `InnerLoop.run()`: an `error` entry, and the round fails.

The entries hold copies of the messages: the OpenAI adapter rewrites tool messages
in place (into Responses API items) when it sends them again, and entries are
serialized later, on the writer thread.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final

from transcript_otel.instrumentation._calls import argument, guarded
from transcript_otel.instrumentation._patching import Patch
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation, in_run
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.chat import ChatMapper, usage_entry

OPENAI_MODULE: Final = "weakincentives.adapters.openai"
LITELLM_MODULE: Final = "weakincentives.adapters.litellm"
LOOP_MODULE: Final = "weakincentives.adapters.inner_loop"
TOOLS_MODULE: Final = "weakincentives.adapters.tool_executor"

# LiteLLM model names start with their provider (`anthropic/claude-…`); the
# semantic conventions' names for the providers both know.
_LITELLM_PROVIDERS: Final = {
    "openai": "openai",
    "anthropic": "anthropic",
    "azure": "azure.ai.openai",
    "bedrock": "aws.bedrock",
    "vertex_ai": "gcp.vertex_ai",
    "gemini": "gcp.gemini",
    "groq": "groq",
    "mistral": "mistral_ai",
    "deepseek": "deepseek",
    "xai": "x_ai",
    "cohere": "cohere",
    "perplexity": "perplexity",
}


def litellm_provider(adapter: Any) -> str | None:
    """The provider a LiteLLM model name starts with (`openai/gpt-4o` → `openai`), if known."""
    model = getattr(adapter, "_model", None)
    if not isinstance(model, str) or "/" not in model:
        return None
    return _LITELLM_PROVIDERS.get(model.split("/", 1)[0])


OPENAI_SPEC: Final = AdapterSpec(default_name="openai", provider="openai", model=nested_model("_model"))
LITELLM_SPEC: Final = AdapterSpec(
    default_name="litellm", provider=None, model=nested_model("_model"), provider_of=litellm_provider
)

# The provider loop whose tool calls are being handled (`_handle_tool_calls` → `execute`).
_HANDLING_LOOP: ContextVar[tuple[AgentRun, Any] | None] = ContextVar(
    "transcript_otel_chat_loop", default=None
)


def _plain(value: Any) -> Any:
    """A provider SDK object (pydantic) as plain data; plain data copied."""
    dump = getattr(value, "model_dump", None)
    if callable(dump):
        return dump(mode="json")
    if isinstance(value, Mapping):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(item) for item in value]
    return copy.deepcopy(value)


class _Conversation:
    """One run's capture: the messages recorded so far, and the usage of the last response.

    The usage is held until the entries of the response it counts are recorded, so
    that a `token_usage` entry follows what it measured.
    """

    __slots__ = ("chat", "usage")

    def __init__(self) -> None:
        self.chat = ChatMapper()
        self.usage: MappedEntry | None = None

    def record_new_messages(self, run: AgentRun, loop: Any) -> None:
        """Record the messages appended to `loop._messages` since the last call."""
        for message in self.chat.unseen(getattr(loop, "_messages", None)):
            run.record_mapped(self.chat.message(copy.deepcopy(message)))

    def hold_usage(self, response: Any) -> None:
        get = response.get if isinstance(response, Mapping) else functools.partial(getattr, response)
        usage, model = get("usage", None), get("model", None)
        if usage is not None:
            self.usage = usage_entry(_plain(usage), model=model if isinstance(model, str) else None)

    def record_usage(self, run: AgentRun) -> None:
        usage, self.usage = self.usage, None
        if usage is not None:
            run.record_mapped([usage])

    def record_final_message(self, run: AgentRun, message: Any) -> None:
        """The answer the loop returns without appending it: an assistant message."""
        final: dict[str, Any] = {"role": "assistant", "content": _plain(getattr(message, "content", None))}
        parsed = getattr(message, "parsed", None)
        if parsed is not None:
            final["parsed"] = _plain(parsed)
        run.record_mapped(self.chat.message(final))
        self.record_usage(run)


def _conversation(run: AgentRun) -> _Conversation:
    return run.mapper(_Conversation)


def _loop_run(run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """`InnerLoop.run()`: whatever ends the loop with an exception is an `error` entry."""
    try:
        return wrapped(*args, **kwargs)
    except BaseException as error:
        guarded("chat usage", _conversation(run).record_usage, run)
        run.record_failure(error)
        run.end_turn(error)
        raise


def _provider_request(
    run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any
) -> Any:
    """`InnerLoop._issue_provider_request()`: a round opens with the messages it sends."""
    run.begin_turn()
    conversation = _conversation(run)
    guarded("chat messages", conversation.record_new_messages, run, instance)
    response = wrapped(*args, **kwargs)
    guarded("chat usage", conversation.hold_usage, response)
    return response


def _tool_calls(run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """`InnerLoop._handle_tool_calls(message, tool_calls)`: the round ends with its tools."""
    token = _HANDLING_LOOP.set((run, instance))
    try:
        result = wrapped(*args, **kwargs)
    finally:
        _HANDLING_LOOP.reset(token)
        conversation = _conversation(run)
        guarded("tool results", conversation.record_new_messages, run, instance)
        guarded("chat usage", conversation.record_usage, run)
    run.end_turn()
    return result


def _execute_tools(run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """`ToolExecutor.execute(tool_calls, payload)`: the assistant message with the calls, first."""
    handling = _HANDLING_LOOP.get()
    # Only for the loop of this very run: a tool may run an agent of its own.
    if handling is not None and handling[0] is run:
        conversation = _conversation(run)
        guarded("tool calls", conversation.record_new_messages, run, handling[1])
        guarded("chat usage", conversation.record_usage, run)
    return wrapped(*args, **kwargs)


def _final_response(run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: Any, kwargs: Any) -> Any:
    """`InnerLoop._finalize_response(message)`: the final answer ends the last round."""
    message = argument(args, kwargs, "message", 0)
    guarded("final message", _conversation(run).record_final_message, run, message)
    result = wrapped(*args, **kwargs)
    run.end_turn()
    return result


def patches(state: WinkInstrumentation) -> list[Patch]:
    return [
        Patch(OPENAI_MODULE, "OpenAIAdapter.evaluate", evaluate_wrapper(state, OPENAI_SPEC)),
        Patch(LITELLM_MODULE, "LiteLLMAdapter.evaluate", evaluate_wrapper(state, LITELLM_SPEC)),
        Patch(LOOP_MODULE, "InnerLoop.run", in_run(state, _loop_run)),
        Patch(LOOP_MODULE, "InnerLoop._issue_provider_request", in_run(state, _provider_request)),
        Patch(LOOP_MODULE, "InnerLoop._handle_tool_calls", in_run(state, _tool_calls)),
        Patch(LOOP_MODULE, "InnerLoop._finalize_response", in_run(state, _final_response)),
        Patch(TOOLS_MODULE, "ToolExecutor.execute", in_run(state, _execute_tools)),
    ]
