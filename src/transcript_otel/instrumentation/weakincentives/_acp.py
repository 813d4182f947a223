"""The ACP and OpenCode ACP adapters (0.26+): root span, a turn per prompt, usage and cost.

Their entries are native (`ACPTranscriptBridge`, mirrored by `_native`): the prompt as
`user_message`, text and thoughts, `tool_use`/`tool_result` per tool call, whose spans the
span tree makes from them. What the bridge drops is taken at the agent-client-protocol
connection, the same in 0.26 (which prompts inline) and 0.27 (`_send_prompt`):

* `ClientSideConnection.prompt`: each `session/prompt` is a turn (the first one opened by its
  `user_message`; a 0.27 continuation prompt ends the turn before it and opens its own), and
  its answer's usage becomes a `token_usage` entry (`mappings.acp.prompt_usage`);
* `ClientSideConnection.initialize`/`new_session`: the agent and the model it selected;
* `ACPClient.session_update`: `usage_update` notifications (cost), mapped on the writer;
* `ACPTranscriptBridge.flush`: the run's last text is out, the turn ends.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Mapping
from typing import Any, Final

from transcript_otel.instrumentation._patching import Patch, Wrapper
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation, in_run_async
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.acp import ACPMapper, prompt_usage

ADAPTER_MODULE: Final = "weakincentives.adapters.acp.adapter"
CLIENT_MODULE: Final = "weakincentives.adapters.acp.client"
BRIDGE_MODULE: Final = "weakincentives.adapters.acp._transcript"
# agent-client-protocol's, the same for both versions.
CONNECTION: Final = "acp.client.connection", "ClientSideConnection"

# OpenCodeACPAdapter inherits `evaluate`; `_adapter_name()` tells them apart. The prompt is
# the first thing a turn says, as with Codex.
SPEC: Final = AdapterSpec(
    default_name="acp",
    provider=None,
    model=nested_model("_adapter_config", "model_id"),
    policy=TurnPolicy.PROMPT_OPENS_TURN,
)

# `gen_ai.provider.name` of agents whose model provider their name tells.
AGENT_PROVIDERS: Final = {"gemini-cli": "gcp.gemini"}

# agent-client-protocol's model of a `usage_update` notification.
USAGE_UPDATE_CLASS: Final = "UsageUpdate"

# Connections that sent a prompt already: their next prompt is a new turn.
_prompted: weakref.WeakSet[Any] = weakref.WeakSet()


def _as_json(answer: Any) -> Any:
    """A pydantic ACP message as the JSON it was sent as (camelCase keys, no nulls)."""
    dump = getattr(answer, "model_dump", None)
    return dump(by_alias=True, exclude_none=True) if callable(dump) else answer


def _answer_usage(run: AgentRun, answer: Any) -> list[MappedEntry | None]:
    return [prompt_usage(_as_json(answer))]


def _usage_update(run: AgentRun, update: Any) -> list[MappedEntry | None]:
    return [run.mapper(ACPMapper).usage_update(_as_json(update))]


async def _prompt(
    run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """`session/prompt`: a turn; its answer's usage recorded (mapped on the writer)."""
    if instance in _prompted:
        run.end_turn()
    else:
        _prompted.add(instance)
    run.begin_turn()
    answer = await wrapped(*args, **kwargs)
    run.record_later(_answer_usage, answer)
    return answer


def _agent(run: AgentRun, answer: Any) -> tuple[()]:
    """`initialize`'s answer: the agent's `agentInfo.name` may tell the provider."""
    info = _as_json(answer).get("agentInfo")
    name = info.get("name") if isinstance(info, Mapping) else None
    provider = AGENT_PROVIDERS.get(name) if isinstance(name, str) else None
    if provider is not None:
        run.set_provider(provider)
    return ()


def _session_model(run: AgentRun, answer: Any) -> tuple[()]:
    """`session/new`'s answer: the model the session runs, as the agent names it (OpenCode:
    the `model` config option, `provider/model`; Gemini CLI: `models.currentModelId`)."""
    session = _as_json(answer)
    model: Any = None
    for option in session.get("configOptions") or ():
        if isinstance(option, Mapping) and option.get("category") == "model":
            model = option.get("currentValue")
    models = session.get("models")
    if model is None and isinstance(models, Mapping):
        model = models.get("currentModelId")
    if isinstance(model, str) and model:
        provider, _, name = model.rpartition("/")
        if provider:
            run.set_provider(provider)
        run.note_model(name)
    return ()


def _noting(describe: Callable[[AgentRun, Any], tuple[()]]) -> Callable[..., Any]:
    """A hook that makes the request, then has `describe` read its answer on the writer."""

    async def call(run: AgentRun, wrapped: Callable[..., Any], _: Any, args: Any, kwargs: Any) -> Any:
        answer = await wrapped(*args, **kwargs)
        run.record_later(describe, answer)
        return answer

    return call


def _session_update(state: WinkInstrumentation) -> Wrapper:
    """`ACPClient.session_update(session_id, update)`: every update passes here, so only its
    type is looked at; a `usage_update` (the bridge drops it) is kept, mapped on the writer."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        update = args[1] if len(args) > 1 else kwargs.get("update")
        if type(update).__name__ == USAGE_UPDATE_CLASS:
            run = state.run()
            if run is not None:
                run.record_later(_usage_update, update)
        return wrapped(*args, **kwargs)

    return wrapper


def _flushed(state: WinkInstrumentation) -> Wrapper:
    """`ACPTranscriptBridge.flush()` (the run's end): its last text is out; the turn ends."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        result = wrapped(*args, **kwargs)
        run = state.run()
        if run is not None:
            run.end_turn()
        return result

    return wrapper


def patches(state: WinkInstrumentation) -> list[Patch]:
    module, connection = CONNECTION
    return [
        Patch(ADAPTER_MODULE, "ACPAdapter.evaluate", evaluate_wrapper(state, SPEC)),
        Patch(module, f"{connection}.initialize", in_run_async(state, _noting(_agent))),
        Patch(module, f"{connection}.new_session", in_run_async(state, _noting(_session_model))),
        Patch(module, f"{connection}.prompt", in_run_async(state, _prompt)),
        Patch(CLIENT_MODULE, "ACPClient.session_update", _session_update(state)),
        Patch(BRIDGE_MODULE, "ACPTranscriptBridge.flush", _flushed(state)),
    ]
