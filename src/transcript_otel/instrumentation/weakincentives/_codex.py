"""The Codex app-server adapter.

0.25 has no transcript of its own: these patches build it with `CodexMapper` at the
specification's nine emission points (the prompt before `turn/start`, every
notification, bridged tool calls and the responses sent back), plus a `unknown`
entry for every line the client could not parse. 0.26+ emit entries natively
(mirrored by `_native`), so only turn boundaries and unparsable lines are taken here.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextvars import ContextVar
from typing import Any, Final

from transcript_otel.instrumentation._agent_run import AgentRun
from transcript_otel.instrumentation._patching import Patch, Wrapper
from transcript_otel.instrumentation.weakincentives._runs import AdapterSpec, evaluate_wrapper, nested_model
from transcript_otel.instrumentation.weakincentives._state import WinkInstrumentation, argument, guarded
from transcript_otel.instrumentation.weakincentives._turns import turn_wrapper
from transcript_otel.mappings._entry import MappedEntry
from transcript_otel.mappings.codex import CodexMapper

ADAPTER_MODULE: Final = "weakincentives.adapters.codex_app_server.adapter"
PROTOCOL_MODULE: Final = "weakincentives.adapters.codex_app_server._protocol"
CLIENT_MODULE: Final = "weakincentives.adapters.codex_app_server.client"
ADAPTER_CLASS: Final = "CodexAppServerAdapter"

SPEC: Final = AdapterSpec(
    default_name="codex_app_server",
    provider="openai",
    model=nested_model("_model_config", "model"),
    turns_start_with_user_message=True,
)

# The bridged tool call whose response is being sent (0.25: `_handle_tool_call` → `send_response`).
_PENDING_TOOL_CALL: ContextVar[tuple[Any, Any] | None] = ContextVar(
    "transcript_otel_codex_call", default=None
)


def _mapper(run: AgentRun) -> CodexMapper:
    if not isinstance(run.mapper, CodexMapper):
        run.mapper = CodexMapper()
    return run.mapper


def _record(run: AgentRun, entry: MappedEntry | None) -> None:
    if entry is not None:
        run.record(entry.entry_type, source=entry.source, detail=entry.detail, raw=entry.raw)


def _start_turn_with_prompt(state: WinkInstrumentation) -> Wrapper:
    """0.25 `_start_turn(client, thread_id, prompt_text, ...)`: the prompt is the user message."""

    def wrapper(
        wrapped: Callable[..., Coroutine[Any, Any, Any]],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Coroutine[Any, Any, Any]:
        run = state.run()
        if run is not None:
            text = argument(args, kwargs, "prompt_text", 2)
            guarded("user message", lambda: _record(run, _mapper(run).user_message(text)))
        return wrapped(*args, **kwargs)

    return wrapper


def _process_notification(state: WinkInstrumentation) -> Wrapper:
    """0.25 `_process_notification(message, ...)`, called for every notification."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        run = state.run()
        if run is not None:
            message = argument(args, kwargs, "message", 0)

            def record() -> None:
                if isinstance(message, dict):
                    _record(run, _mapper(run).notification(message.get("method"), message.get("params")))
                else:
                    _record(run, _mapper(run).malformed(repr(message), "notification is not an object"))

            guarded("notification", record)
        return wrapped(*args, **kwargs)

    return wrapper


def _handle_tool_call(state: WinkInstrumentation) -> Wrapper:
    """0.25 `_handle_tool_call(client, request_id, params, tool_lookup)`: the bridged call."""

    def wrapper(
        wrapped: Callable[..., Coroutine[Any, Any, Any]],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Coroutine[Any, Any, Any]:
        async def traced() -> Any:
            run = state.run()
            if run is None:
                return await wrapped(*args, **kwargs)
            params = argument(args, kwargs, "params", 2)
            guarded("tool call", lambda: _record(run, _mapper(run).tool_call(params)))
            token = _PENDING_TOOL_CALL.set((argument(args, kwargs, "request_id", 1), params))
            try:
                return await wrapped(*args, **kwargs)
            finally:
                _PENDING_TOOL_CALL.reset(token)

        return traced()

    return wrapper


def _send_response(state: WinkInstrumentation) -> Wrapper:
    """`send_response(request_id, result)`: the bridged tool's result, when it answers that call."""

    def wrapper(
        wrapped: Callable[..., Coroutine[Any, Any, Any]],
        instance: Any,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
    ) -> Coroutine[Any, Any, Any]:
        pending = _PENDING_TOOL_CALL.get()
        run = state.run() if pending is not None else None
        if run is not None and pending is not None and pending[0] == argument(args, kwargs, "request_id", 0):
            result = argument(args, kwargs, "result", 1)
            guarded("tool result", lambda: _record(run, _mapper(run).tool_result(pending[1], result)))
        return wrapped(*args, **kwargs)

    return wrapper


def _try_parse(state: WinkInstrumentation) -> Wrapper:
    """The client's `_try_parse(line)`: a line it drops is kept as an `unknown` entry."""

    def wrapper(
        wrapped: Callable[..., Any], instance: Any, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> Any:
        parsed = wrapped(*args, **kwargs)
        if parsed is None:
            run = state.run()
            if run is not None:
                line = argument(args, kwargs, "line", 0)
                reason = "not a JSON object: the Codex client skipped this line"
                guarded("unparsable line", lambda: _record(run, _mapper(run).malformed(line, reason)))
        return parsed

    return wrapper


def patches(state: WinkInstrumentation) -> list[Patch]:
    ends_turn = turn_wrapper(state, opens=False, closes=True)
    opens_turn = turn_wrapper(state, opens=True, closes=False)
    return [
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}.evaluate", evaluate_wrapper(state, SPEC)),
        Patch(CLIENT_MODULE, "CodexAppServerClient._try_parse", _try_parse(state)),
        # 0.25: methods of the adapter; we build the transcript.
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}._start_turn", _start_turn_with_prompt(state)),
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}._stream_turn", ends_turn),
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}._process_notification", _process_notification(state)),
        Patch(ADAPTER_MODULE, f"{ADAPTER_CLASS}._handle_tool_call", _handle_tool_call(state)),
        Patch(CLIENT_MODULE, "CodexAppServerClient.send_response", _send_response(state)),
        # 0.26+: module functions; weakincentives builds the transcript (see `_native`).
        Patch(PROTOCOL_MODULE, "start_turn", opens_turn),
        Patch(PROTOCOL_MODULE, "stream_turn", ends_turn),
    ]
