"""The Codex app-server adapter.

0.25 has no transcript of its own: these patches build it with `CodexMapper` at the
specification's nine emission points (the prompt before `turn/start`, every
notification, bridged tool calls and the responses sent back), plus a `unknown`
entry for every line the client could not parse. 0.26+ emit entries natively
(mirrored by `_native`), so only turn boundaries and unparsable lines are taken here,
and what their bridge loses with Codex 0.171: reasoning items, warnings and errors
(added as `CodexMapper` maps them, only where the bridge emitted nothing) and diffs (its
`unknown` recorded as the `system_event` 0.25 gets), so both give the same entries.

Where a run's `CodexMapper` keeps its state differs: 0.25 maps every notification on the
agent's thread (deferring a delta would cost the agent more than mapping it); with 0.26+
the bridge has done that work, and what is added is mapped on the writer (`record_later`).

In every version the client's `thread/start` request tells the run what no entry does:
the WINK tools offered to Codex (its `dynamicTools`, the adapter's `dynamic_tool_specs`)
as tool definitions, and the model Codex resolved (its answer's `thread.model`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from contextvars import ContextVar
from typing import Any, Final

from transcript_otel.instrumentation._calls import argument, guarded
from transcript_otel.instrumentation._patching import Factory, Patch, Replacement, Wrapper, takes
from transcript_otel.instrumentation.span_tree.agent_run import AgentRun, TurnPolicy
from transcript_otel.instrumentation.weakincentives._native import HarnessCall
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import (
    WinkInstrumentation,
    in_run_async,
    observing,
)
from transcript_otel.instrumentation.weakincentives._turns import turn_wrapper
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.codex import (
    BRIDGE_DROPPED_ITEM_TYPES,
    REASONING_COMPLETED,
    SYSTEM_NOTIFICATIONS,
    TURN_DIFF,
    CodexMapper,
    bridge_drops,
    native_detail,
)

ADAPTER_MODULE: Final = "weakincentives.adapters.codex_app_server.adapter"
PROTOCOL_MODULE: Final = "weakincentives.adapters.codex_app_server._protocol"
CLIENT_MODULE: Final = "weakincentives.adapters.codex_app_server.client"
BRIDGE_MODULE: Final = "weakincentives.adapters.codex_app_server._transcript"
ADAPTER_CLASS: Final = "CodexAppServerAdapter"

SPEC: Final = AdapterSpec(
    default_name="codex_app_server",
    provider="openai",
    model=nested_model("_model_config", "model"),
    policy=TurnPolicy.PROMPT_OPENS_TURN,
    native_detail=native_detail,
)

# The bridged tool call whose response is being sent (0.25: `_handle_tool_call` → `send_response`).
_PENDING_TOOL_CALL: ContextVar[tuple[Any, Any] | None] = ContextVar(
    "transcript_otel_codex_call", default=None
)


def _user_message(run: AgentRun, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """0.25 `_start_turn(client, thread_id, prompt_text, ...)`: the prompt is the user message."""
    run.record_mapped([run.mapper(CodexMapper).user_message(argument(args, kwargs, "prompt_text", 2))])


def _notification(run: AgentRun, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """0.25 `_process_notification(message, ...)`, called for every notification."""
    message = argument(args, kwargs, "message", 0)
    if isinstance(message, dict):
        entry = run.mapper(CodexMapper).notification(message.get("method"), message.get("params"))
    else:
        entry = CodexMapper.malformed(repr(message), "notification is not an object")
    if entry is not None:  # most are deltas, folded into the message they end in
        run.record(entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw)


def _tool_call(run: AgentRun, params: Any) -> None:
    run.record_mapped([run.mapper(CodexMapper).tool_call(params)])


def _unparsable(run: AgentRun, line: Any) -> None:
    reason = "not a JSON object: the Codex client skipped this line"
    run.record_mapped([CodexMapper.malformed(line, reason)])


async def _handle_tool_call(
    run: AgentRun, wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> Any:
    """0.25 `_handle_tool_call(client, request_id, params, tool_lookup)`: the bridged call."""
    params = argument(args, kwargs, "params", 2)
    guarded("tool call", _tool_call, run, params)
    token = _PENDING_TOOL_CALL.set((argument(args, kwargs, "request_id", 1), params))
    try:
        return await wrapped(*args, **kwargs)
    finally:
        _PENDING_TOOL_CALL.reset(token)


def _tool_result(run: AgentRun, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """`send_response(request_id, result)`: the bridged tool's result, when it answers that call."""
    pending = _PENDING_TOOL_CALL.get()
    if pending is not None and pending[0] == argument(args, kwargs, "request_id", 0):
        result = argument(args, kwargs, "result", 1)
        run.record_mapped([run.mapper(CodexMapper).tool_result(pending[1], result)])


ITEM_STARTED: Final = "item/started"
ITEM_COMPLETED: Final = "item/completed"
# Notifications the bridge has no handler for, and drops, though they are content.
_UNHANDLED_CONTENT: Final = tuple(sorted(SYSTEM_NOTIFICATIONS - {TURN_DIFF}))


def _handlers(state: WinkInstrumentation) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """0.26+ `CodexTranscriptBridge._NOTIFICATION_HANDLERS`, the table `on_notification` looks
    each notification's method up in (deltas aside): the same table, with the handlers of what
    the bridge may lose wrapped (items, reasoning) and handlers added for the content it has
    none for (warnings, errors). Most of a turn (its deltas) never reaches our code, and a
    diff (which the bridge calls `unknown`) is retyped where its entry is mirrored
    (`bridge_unknown`)."""

    def make(original: dict[str, Any]) -> dict[str, Any]:
        table = _HandlerTable(original)
        for method in (ITEM_STARTED, ITEM_COMPLETED):
            if method in table:
                table[method] = _item_handler(state, method, table[method])
        if REASONING_COMPLETED in table:
            table[REASONING_COMPLETED] = _reasoning_handler(state, table[REASONING_COMPLETED])
        for method in _UNHANDLED_CONTENT:
            table.setdefault(method, _content_handler(state, method))
        return table

    return make


class _HandlerTable(dict[str, Any]):
    """A copy of the bridge's handler table that can carry the marks of a replacement."""


def _item_handler(state: WinkInstrumentation, method: str, handler: Callable[..., Any]) -> Callable[..., Any]:
    def handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        params = args[0] if args else kwargs.get("params")  # inline: every item event passes here
        item = params.get("item") if type(params) is dict else None
        if type(item) is not dict or item.get("type") not in BRIDGE_DROPPED_ITEM_TYPES:
            return handler(self, *args, **kwargs)
        run = state.run()
        if run is None:
            return handler(self, *args, **kwargs)
        return _bridged(run, handler, (self, *args), kwargs, method, params)

    return handle


def _reasoning_handler(state: WinkInstrumentation, handler: Callable[..., Any]) -> Callable[..., Any]:
    def handle(self: Any, *args: Any, **kwargs: Any) -> Any:
        run = state.run()
        if run is None:
            return handler(self, *args, **kwargs)
        params = argument(args, kwargs, "params", 0)
        return _bridged(run, handler, (self, *args), kwargs, REASONING_COMPLETED, params)

    return handle


def _content_handler(state: WinkInstrumentation, method: str) -> Callable[..., None]:
    def handle(self: Any, *args: Any, **kwargs: Any) -> None:
        run = state.run()
        if run is not None:
            run.record_later(_mapped_dropped, (method, argument(args, kwargs, "params", 0)))

    return handle


def _bridged(
    run: AgentRun,
    handler: Callable[..., Any],
    args: tuple[Any, ...],
    kwargs: dict[str, Any],
    method: str,
    params: Any,
) -> Any:
    """The bridge's handler of a notification it may lose, with what it loses added (mapped on
    the writer, like every use of the run's `CodexMapper`)."""
    try:
        drops = bridge_drops(method, params)
    except Exception:  # params of a shape no Codex sends: the bridge alone decides
        drops = False
    if not drops and method != REASONING_COMPLETED:
        return handler(*args, **kwargs)
    with HarnessCall() as call:
        result = handler(*args, **kwargs)
    if drops and call.emitted == 0:
        run.record_later(_mapped_dropped, (method, params))
    elif call.emitted and method == REASONING_COMPLETED:  # the bridge's `thinking`: not again
        run.record_later(_noted_thought, params)
    return result


def _mapped_dropped(run: AgentRun, notification: tuple[Any, Any]) -> list[MappedEntry | None]:
    return [run.mapper(CodexMapper).notification(*notification)]


def _noted_thought(run: AgentRun, params: Any) -> tuple[()]:
    run.mapper(CodexMapper).thought(params)
    return ()


def _try_parse(state: WinkInstrumentation) -> Factory:
    """The client's `_try_parse(line)`: a line it drops is kept as an `unknown` entry. Called
    for every line the app-server writes, so a plain function (see `Replacement`), with the
    known signature where it has it."""

    def dropped(line: Any) -> None:
        run = state.run()
        if run is not None:
            guarded("unparsable line", _unparsable, run, line)

    def make(original: Callable[..., Any]) -> Callable[..., Any]:
        if takes(original, "(self, line)"):

            def try_parse(self: Any, line: str) -> Any:
                parsed = original(self, line)
                if parsed is None:
                    dropped(line)
                return parsed

            return try_parse

        def try_parse_any(self: Any, *args: Any, **kwargs: Any) -> Any:
            parsed = original(self, *args, **kwargs)
            if parsed is None:
                dropped(argument(args, kwargs, "line", 0))
            return parsed

        return try_parse_any

    return make


THREAD_START: Final = "thread/start"


def _send_request(state: WinkInstrumentation) -> Wrapper:
    """`CodexAppServerClient.send_request(method, params, timeout)` (the same in 0.25 to 0.27):
    of `thread/start`, the tools it offers and the model in its answer describe the run. Other
    requests pass untouched; nothing is recorded as an entry."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        run = state.run()
        if run is None or argument(args, kwargs, "method", 0) != THREAD_START:
            return wrapped(*args, **kwargs)
        guarded("thread tools", _describe_tools, run, argument(args, kwargs, "params", 1))
        if not inspect.iscoroutinefunction(wrapped):
            answer = wrapped(*args, **kwargs)
            guarded("thread model", _note_model, run, answer)
            return answer

        async def noting_model() -> Any:  # the request is made when the caller awaits it
            result = await wrapped(*args, **kwargs)
            guarded("thread model", _note_model, run, result)
            return result

        return noting_model()

    return wrapper


def _describe_tools(run: AgentRun, params: Any) -> None:
    """The WINK tools a thread offers Codex: `dynamicTools` (`{name, description, inputSchema}`,
    absent when the prompt has none). Codex's own tools are not told."""
    specs = params.get("dynamicTools") if isinstance(params, Mapping) else None
    if isinstance(specs, list) and specs:
        definitions = [_tool_definition(spec) for spec in specs if isinstance(spec, Mapping)]
        run.describe_agent(tool_definitions=[d for d in definitions if d is not None])


def _tool_definition(spec: Mapping[str, Any]) -> dict[str, Any] | None:
    """`{name, description?, parameters?}` of a WINK tool spec (`inputSchema` = JSON schema)."""
    name = spec.get("name")
    if not isinstance(name, str) or not name:
        return None
    definition: dict[str, Any] = {"name": name}
    if isinstance(spec.get("description"), str):
        definition["description"] = spec["description"]
    if isinstance(spec.get("inputSchema"), Mapping):
        definition["parameters"] = spec["inputSchema"]
    return definition


def _note_model(run: AgentRun, result: Any) -> None:
    """The model of the thread Codex started: `result.thread.model` (else `result.model`)."""
    if not isinstance(result, Mapping):
        return
    thread = result.get("thread")
    model = thread.get("model") if isinstance(thread, Mapping) else None
    if not isinstance(model, str) or not model:
        model = result.get("model")
    if isinstance(model, str) and model:
        run.note_model(model)


def patches(state: WinkInstrumentation) -> list[Patch | Replacement]:
    ends_turn = turn_wrapper(state, opens=False, closes=True)
    opens_turn = turn_wrapper(state, opens=True, closes=False)
    return [
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}.evaluate", evaluate_wrapper(state, SPEC)),
        Replacement(CLIENT_MODULE, "CodexAppServerClient._try_parse", _try_parse(state)),
        Patch(CLIENT_MODULE, "CodexAppServerClient.send_request", _send_request(state)),
        # 0.25: methods of the adapter; we build the transcript.
        Patch(
            ADAPTER_MODULE, f"{ADAPTER_CLASS}._start_turn", observing(state, "user message", _user_message)
        ),
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}._stream_turn", ends_turn),
        Patch(
            ADAPTER_MODULE,
            f"{ADAPTER_CLASS}._process_notification",
            observing(state, "notification", _notification),
        ),
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}._handle_tool_call", in_run_async(state, _handle_tool_call)),
        Patch(
            CLIENT_MODULE, "CodexAppServerClient.send_response", observing(state, "tool result", _tool_result)
        ),
        # 0.26+: module functions; weakincentives builds the transcript (see `_native`).
        Patch(PROTOCOL_MODULE, "start_turn", opens_turn),
        Patch(PROTOCOL_MODULE, "stream_turn", ends_turn),
        Replacement(BRIDGE_MODULE, "CodexTranscriptBridge._NOTIFICATION_HANDLERS", _handlers(state)),
    ]
