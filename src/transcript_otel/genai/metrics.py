"""GenAI metrics: token usage and durations of the run's spans, through the OTel metrics API.

Recorded on the pipeline's writer thread as each span of an `AgentRun` ends (`record_span_end()`),
and only while a real MeterProvider is set (the application's, or `configure()`'s with
`OTEL_METRICS_EXPORTER=otlp`); otherwise every recorder returns after a check that costs well
under a microsecond, and the instruments are never made. Nothing here raises into the caller.

What is emitted (meter `transcript_otel`, schema URL 1.41.0), all histograms with the bucket
boundaries the conventions advise:

* semantic conventions v1.41.0 (the last core release holding GenAI, `docs/gen-ai/gen-ai-metrics.md`):
  * `gen_ai.client.token.usage` (`{token}`), one point per `chat` span for `gen_ai.token.type`
    `input` and one for `output`, each only where the span counted it: the turn's
    `gen_ai.usage.input_tokens` / `gen_ai.usage.output_tokens`. Only chat spans: the root and
    subagent spans repeat what their model calls counted, and must not count it twice;
  * `gen_ai.client.operation.duration` (`s`), the `chat` span's duration (a whole turn: the model
    calls and the tools run between them);
  * attributes: `gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
    `gen_ai.response.model` where the span knows them (a harness that does not say leaves them
    out: nothing is guessed), `error.type` on failed operations (duration only).
* open-telemetry/semantic-conventions-genai, `docs/gen-ai/gen-ai-metrics.md` at commit 004902b8
  (unreleased; the repo that continues the core's GenAI conventions):
  * `gen_ai.invoke_agent.duration` (`s`), each `invoke_agent` span (the run's root and every
    subagent): `gen_ai.agent.name` (left out where it is only the agent's id: ids never go on
    metrics), `gen_ai.request.model`, `error.type`;
  * `gen_ai.execute_tool.duration` (`s`), each `execute_tool` span whose result came (a call
    ended by the turn's or run's end was not bounded by the tool): `gen_ai.tool.name`,
    `gen_ai.tool.type`, `gen_ai.agent.name` where the span has it, `error.type`.
  That repo replaces `gen_ai.client.token.usage` with `gen_ai.client.inference.*` token metrics
  (unreleased, still changing); they are not emitted.
* ours, since no convention names one: `transcript_otel.usage.cost` (`{USD}`), a counter that
  adds each `chat` span's `gen_ai.usage.cost` (what the harness said the turn cost, Claude's
  only), with the chat span's model attributes.

Durations need the span's start time, which only SDK spans keep: a run traced by the API alone
records no metrics.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Final, NamedTuple, cast

from transcript_otel.otel import attributes as attr
from transcript_otel.otel.attributes import (
    ERROR_TYPE,
    GEN_AI_AGENT_ID,
    GEN_AI_AGENT_NAME,
    GEN_AI_OPERATION_NAME,
    GEN_AI_PROVIDER_NAME,
    GEN_AI_REQUEST_MODEL,
    GEN_AI_RESPONSE_MODEL,
    GEN_AI_TOKEN_TYPE,
    GEN_AI_TOOL_TYPE,
)
from transcript_otel.version import SEMCONV_SCHEMA_URL, __version__

if TYPE_CHECKING:
    from opentelemetry.metrics import Counter, Histogram, MeterProvider

_logger = logging.getLogger(__name__)
_logger.addHandler(logging.NullHandler())

METER_NAME: Final = "transcript_otel"
SCHEMA_URL: Final = SEMCONV_SCHEMA_URL

TOKEN_USAGE: Final = "gen_ai.client.token.usage"
OPERATION_DURATION: Final = "gen_ai.client.operation.duration"
AGENT_DURATION: Final = "gen_ai.invoke_agent.duration"
TOOL_DURATION: Final = "gen_ai.execute_tool.duration"
COST: Final = "transcript_otel.usage.cost"
# The chat span's cost attribute (instrumentation.span_tree.completion sets it).
_GEN_AI_USAGE_COST: Final = "gen_ai.usage.cost"

# The conventions' advised boundaries, as they write them.
# fmt: off
TOKEN_USAGE_BUCKETS: Final[Sequence[float]] = (
    1, 4, 16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576, 4194304, 16777216, 67108864,
)
OPERATION_DURATION_BUCKETS: Final[Sequence[float]] = (
    0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92,
)
AGENT_DURATION_BUCKETS: Final[Sequence[float]] = (
    0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 51.2, 102.4, 204.8, 409.6,
)
# fmt: on
TOOL_DURATION_BUCKETS: Final = OPERATION_DURATION_BUCKETS

_CHAT: Final = "chat"
_INVOKE_AGENT: Final = "invoke_agent"
_EXECUTE_TOOL: Final = "execute_tool"


class _Instruments(NamedTuple):
    token_usage: Histogram
    operation_duration: Histogram
    agent_duration: Histogram
    tool_duration: Histogram
    cost: Counter


# The instruments of the provider they were made from: made once, on the first recording.
_made: tuple[MeterProvider, _Instruments] | None = None
_making = threading.Lock()
_UNKNOWN: Final = object()


@functools.cache
def _provider_named_in_environment() -> bool:
    # The API makes this provider on the first `get_meter_provider()`, whoever calls it.
    return "OTEL_PYTHON_METER_PROVIDER" in os.environ


@functools.cache
def _metrics_api() -> tuple[Callable[[], MeterProvider], tuple[type, ...]]:
    """`get_meter_provider` and the provider types that record nothing (proxy and no-op)."""
    from opentelemetry import metrics
    from opentelemetry.metrics._internal import _ProxyMeterProvider

    return metrics.get_meter_provider, (_ProxyMeterProvider, metrics.NoOpMeterProvider)


def _meter_provider() -> MeterProvider | None:
    """The MeterProvider set for the process, None while there is none worth recording into.

    Called for every span that ends: it reads the API's global rather than calling
    `get_meter_provider()`, which looks in `os.environ` each time no provider is set.
    """
    api = sys.modules.get("opentelemetry.metrics._internal")
    provider: Any = getattr(api, "_METER_PROVIDER", _UNKNOWN) if api is not None else None
    if provider is None:
        if not _provider_named_in_environment():
            return None  # the usual case without metrics: nothing set a provider
        provider = _UNKNOWN  # the API makes it on the first ask
    get_meter_provider, recording_nothing = _metrics_api()
    if provider is _UNKNOWN:  # also an API that moved its global
        provider = get_meter_provider()
    return None if isinstance(provider, recording_nothing) else cast("MeterProvider", provider)


def _instruments(provider: MeterProvider) -> _Instruments:
    global _made
    made = _made
    if made is not None and made[0] is provider:
        return made[1]
    with _making:  # two writers may end their first spans at once: one set of instruments
        made = _made
        if made is not None and made[0] is provider:
            return made[1]
        meter = provider.get_meter(METER_NAME, __version__, schema_url=SCHEMA_URL)
        instruments = _Instruments(
            meter.create_histogram(
                TOKEN_USAGE,
                unit="{token}",
                description="Number of input and output tokens used.",
                explicit_bucket_boundaries_advisory=TOKEN_USAGE_BUCKETS,
            ),
            meter.create_histogram(
                OPERATION_DURATION,
                unit="s",
                description="GenAI operation duration.",
                explicit_bucket_boundaries_advisory=OPERATION_DURATION_BUCKETS,
            ),
            meter.create_histogram(
                AGENT_DURATION,
                unit="s",
                description="The end-to-end duration of a single agent invocation.",
                explicit_bucket_boundaries_advisory=AGENT_DURATION_BUCKETS,
            ),
            meter.create_histogram(
                TOOL_DURATION,
                unit="s",
                description="The duration of a single tool execution.",
                explicit_bucket_boundaries_advisory=TOOL_DURATION_BUCKETS,
            ),
            # `{USD}`, an annotation: Prometheus names it transcript_otel_usage_cost_total.
            meter.create_counter(
                COST, unit="{USD}", description="Cost of GenAI operations, as the harness reported it."
            ),
        )
        _made = (provider, instruments)
        return instruments


def _present(attributes: Mapping[str, Any]) -> dict[str, str]:
    """The attributes whose value is a non-empty string: unknown ones are left out, not guessed."""
    return {key: value for key, value in attributes.items() if isinstance(value, str) and value}


# -- recorders ---------------------------------------------------------------------------------


def record_chat(
    *,
    duration_s: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    provider: str | None = None,
    request_model: str | None = None,
    response_model: str | None = None,
    error_type: str | None = None,
    operation: str = _CHAT,
) -> None:
    """One model operation (a `chat` span): its duration and the tokens it counted. Never raises."""
    try:
        meter_provider = _meter_provider()
        if meter_provider is not None:
            common = _model_attributes(operation, provider, request_model, response_model)
            _record_chat(
                _instruments(meter_provider), duration_s, input_tokens, output_tokens, common, error_type
            )
    except Exception as exc:  # a broken MeterProvider is the application's: the run goes on
        _logger.debug("transcript-otel: could not record GenAI chat metrics", exc_info=exc)


def record_agent(
    *,
    duration_s: float,
    agent_name: str | None = None,
    request_model: str | None = None,
    error_type: str | None = None,
) -> None:
    """One agent invocation (an `invoke_agent` span). `agent_name`: a low-cardinality name, never
    an id. Never raises."""
    try:
        meter_provider = _meter_provider()
        if meter_provider is not None:
            attributes = _present(
                {GEN_AI_AGENT_NAME: agent_name, GEN_AI_REQUEST_MODEL: request_model, ERROR_TYPE: error_type}
            )
            _instruments(meter_provider).agent_duration.record(duration_s, attributes)
    except Exception as exc:
        _logger.debug("transcript-otel: could not record GenAI agent metrics", exc_info=exc)


def record_tool(
    *,
    duration_s: float,
    tool_name: str,
    tool_type: str | None = None,
    agent_name: str | None = None,
    error_type: str | None = None,
) -> None:
    """One tool execution (an `execute_tool` span bounded by its result). Never raises."""
    try:
        meter_provider = _meter_provider()
        if meter_provider is not None:
            attributes = _tool_attributes(tool_name, tool_type, agent_name, error_type)
            _instruments(meter_provider).tool_duration.record(duration_s, attributes)
    except Exception as exc:
        _logger.debug("transcript-otel: could not record GenAI tool metrics", exc_info=exc)


def record_span_end(span: object, end_ns: int, usage: Mapping[str, int], error_type: str | None) -> None:
    """The metrics of an `AgentRun` span ending at `end_ns`, by its `gen_ai.operation.name`:
    `usage` is what it counted (`gen_ai.usage.*`), the rest is read from its attributes.
    Never raises."""
    try:
        meter_provider = _meter_provider()
        if meter_provider is None:
            return
        attributes = getattr(span, "attributes", None)
        start_ns = getattr(span, "start_time", None)
        if not isinstance(attributes, Mapping) or not isinstance(start_ns, int):
            return  # a span of the API alone: neither its operation nor its start is known
        operation = attributes.get(GEN_AI_OPERATION_NAME)
        duration_s = max(end_ns - start_ns, 0) / 1e9
        if operation == _CHAT:
            common = _model_attributes(
                operation,
                attributes.get(GEN_AI_PROVIDER_NAME),
                attributes.get(GEN_AI_REQUEST_MODEL),
                attributes.get(GEN_AI_RESPONSE_MODEL),
            )
            input_tokens = usage.get(attr.GEN_AI_USAGE_INPUT_TOKENS)
            output_tokens = usage.get(attr.GEN_AI_USAGE_OUTPUT_TOKENS)
            instruments = _instruments(meter_provider)
            _record_chat(instruments, duration_s, input_tokens, output_tokens, common, error_type)
            cost = attributes.get(_GEN_AI_USAGE_COST)
            if isinstance(cost, float) and cost > 0:
                instruments.cost.add(cost, common)
        elif operation == _INVOKE_AGENT:
            agent_name = attributes.get(GEN_AI_AGENT_NAME)
            if agent_name == attributes.get(GEN_AI_AGENT_ID):
                agent_name = None  # a subagent known by its id only
            agent = _present(
                {
                    GEN_AI_AGENT_NAME: agent_name,
                    GEN_AI_REQUEST_MODEL: attributes.get(GEN_AI_REQUEST_MODEL),
                    ERROR_TYPE: error_type,
                }
            )
            _instruments(meter_provider).agent_duration.record(duration_s, agent)
        elif operation == _EXECUTE_TOOL and not attributes.get(attr.TOOL_RESULT_MISSING):
            tool = _tool_attributes(
                attributes.get(attr.GEN_AI_TOOL_NAME),
                attributes.get(GEN_AI_TOOL_TYPE),
                attributes.get(GEN_AI_AGENT_NAME),
                error_type,
            )
            _instruments(meter_provider).tool_duration.record(duration_s, tool)
    except Exception as exc:
        _logger.debug("transcript-otel: could not record GenAI span metrics", exc_info=exc)


def _model_attributes(
    operation: Any, provider: Any, request_model: Any, response_model: Any
) -> dict[str, str]:
    return _present(
        {
            GEN_AI_OPERATION_NAME: operation,
            GEN_AI_PROVIDER_NAME: provider,
            GEN_AI_REQUEST_MODEL: request_model,
            GEN_AI_RESPONSE_MODEL: response_model,
        }
    )


def _tool_attributes(tool_name: Any, tool_type: Any, agent_name: Any, error_type: Any) -> dict[str, str]:
    return _present(
        {
            attr.GEN_AI_TOOL_NAME: tool_name,
            GEN_AI_TOOL_TYPE: tool_type,
            GEN_AI_AGENT_NAME: agent_name,
            ERROR_TYPE: error_type,
        }
    )


def _record_chat(
    instruments: _Instruments,
    duration_s: float | None,
    input_tokens: int | None,
    output_tokens: int | None,
    common: dict[str, str],
    error_type: str | None,
) -> None:
    # Token counts only where the harness reported them: the conventions forbid made-up ones.
    if isinstance(input_tokens, int):
        instruments.token_usage.record(input_tokens, {**common, GEN_AI_TOKEN_TYPE: "input"})
    if isinstance(output_tokens, int):
        instruments.token_usage.record(output_tokens, {**common, GEN_AI_TOKEN_TYPE: "output"})
    if duration_s is not None:
        failed = {ERROR_TYPE: error_type} if error_type else {}
        instruments.operation_duration.record(duration_s, {**common, **failed})
