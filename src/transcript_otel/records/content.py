"""How much of what agents say a transcript keeps: one policy for every sink.

* `full` (the default, the specification's `transcript_emit_raw=True`): everything;
* `metadata`: entry types, ids, names, numbers and flags stay; every other string
  becomes `[text: <length> chars, sha256 <8 hex>]`, so runs stay comparable
  (the same text gives the same digest) and sizes stay visible, with no text;
* `none`: entries keep their envelope (type, source, sequence, time) and an empty
  `detail`.

Per category (`user_text`, `assistant_text`, `thinking`, `tool_arguments`,
`tool_results`) a `full` policy can be lowered to `metadata`. `raw` (the harness's
own line) is kept only under `full` and when `TRANSCRIPT_OTEL_EMIT_RAW` allows.
`OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`, the GenAI instrumentations'
switch, is honoured when set: `false`/`NO_CONTENT` means `metadata`, other values
`full`. Applied on the writer thread, before redaction and encoding.

The same variable also says where GenAI content goes beside the transcript
(`GenAiContent`, `genai_content_from()`): span attributes (`SPAN_ONLY`, the default),
`gen_ai.client.inference.operation.details` events (`EVENT_ONLY`), both
(`SPAN_AND_EVENT`, `true`) or neither (`NO_CONTENT`, `false`). The span wiring writes
content only where this policy's mode is `full`, so `TRANSCRIPT_OTEL_CONTENT=metadata`
or `none` keeps it off spans and events too.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from transcript_otel import environment_variables as env

_logger = logging.getLogger(__name__)

Mode = Literal["full", "metadata", "none"]
MODES: Final[tuple[Mode, ...]] = ("full", "metadata", "none")
CATEGORIES: Final = {
    "user_message": "user_text",
    "assistant_message": "assistant_text",
    "thinking": "thinking",
    "tool_use": "tool_arguments",
    "tool_result": "tool_results",
}
CONTENT_VARIABLE: Final = "TRANSCRIPT_OTEL_CONTENT"
EXCLUDE_VARIABLE: Final = "TRANSCRIPT_OTEL_CONTENT_EXCLUDE"
GENAI_CAPTURE_VARIABLE: Final = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
_GENAI_NO_CONTENT: Final = frozenset({"false", "0", "no", "no_content"})
# The capture variable's values (lowered) -> (content on spans, content in events). `true`
# predates the four modes; the GenAI instrumentations read it as spans and events.
_GENAI_DESTINATIONS: Final[Mapping[str, tuple[bool, bool]]] = {
    "span_only": (True, False),
    "event_only": (False, True),
    "span_and_event": (True, True),
    **dict.fromkeys(("true", "1", "yes"), (True, True)),
    **dict.fromkeys(_GENAI_NO_CONTENT, (False, False)),
}
_CAPTURE_VALUES: Final = "SPAN_ONLY, EVENT_ONLY, SPAN_AND_EVENT, NO_CONTENT, true, false"
DEFAULT_GENAI_CONTENT_MAX_LENGTH: Final = 16 * 1024

# Keys whose string values identify rather than say: kept under `metadata`.
IDENTIFYING_KEYS: Final = frozenset(
    {
        "id",
        "type",
        "subtype",
        "role",
        "name",
        "model",
        "status",
        "tool",
        "tool_name",
        "toolName",
        "tool_use_id",
        "tool_call_id",
        "call_id",
        "callId",
        "toolCallId",
        "itemId",
        "threadId",
        "turnId",
        "session_id",
        "sessionId",
        "uuid",
        "parentUuid",
        "parent_tool_use_id",
        "subagent_type",
        "stop_reason",
        "server",
        "kind",
        "tag",
    }
)


def text_digest(text: str) -> str:
    """What `metadata` keeps of a text: its length and a short SHA-256."""
    import hashlib  # not at the top: it loads OpenSSL, which importing us need not (issue 30)

    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:8]
    return f"[text: {len(text)} chars, sha256 {digest}]"


def _metadata(value: Any, key: str | None = None) -> Any:
    if isinstance(value, str):
        return value if key in IDENTIFYING_KEYS else text_digest(value)
    if isinstance(value, Mapping):
        return {name: _metadata(item, str(name)) for name, item in value.items()}
    if isinstance(value, list | tuple):
        return [_metadata(item, key) for item in value]
    if value is None or isinstance(value, bool | int | float):
        return value
    return text_digest(repr(value))


@dataclass(frozen=True, slots=True)
class ContentPolicy:
    """`mode` for everything, lowered to `metadata` for the categories in `excluded`."""

    mode: Mode = "full"
    excluded: frozenset[str] = frozenset()
    # The default: every entry as it is. Read for every entry on the writer, so a field.
    keeps_everything: bool = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"content mode must be one of {', '.join(MODES)}, not {self.mode!r}")
        unknown = self.excluded - set(CATEGORIES.values())
        if unknown:
            raise ValueError(
                f"unknown content categories {sorted(unknown)}; known: {', '.join(CATEGORIES.values())}"
            )
        object.__setattr__(self, "keeps_everything", self.mode == "full" and not self.excluded)

    def mode_for(self, entry_type: str) -> Mode:
        if self.mode == "full" and CATEGORIES.get(entry_type) in self.excluded:
            return "metadata"
        return self.mode

    def detail(self, entry_type: str, detail: dict[Any, Any]) -> dict[Any, Any]:
        """`detail` as the policy lets it be written (a new dict when reduced)."""
        mode = self.mode_for(entry_type)
        if mode == "full":
            return detail
        if mode == "none":
            return {}
        reduced: dict[Any, Any] = _metadata(detail)
        return reduced


def policy_from(
    mode: str | None = None, exclude: Iterable[str] | None = None, environ: Mapping[str, str] = os.environ
) -> ContentPolicy:
    """Arguments > `TRANSCRIPT_OTEL_CONTENT[_EXCLUDE]` > the GenAI capture variable > `full`.

    A bad argument is a ValueError. A variable we cannot read warns and keeps metadata
    only: less, not more, and capture goes on (under `opentelemetry-instrument` an
    exception here would switch off every sink and instrumentor).
    """
    exclude = None if exclude is None else tuple(exclude)  # read once: it may be an iterator
    if mode is not None and mode not in MODES:
        raise ValueError(f"content must be one of {', '.join(MODES)}, not {mode!r}")
    if exclude is not None:
        ContentPolicy("full", frozenset(exclude))  # raises for an unknown category
    try:
        return _policy_from(mode, exclude, environ)
    except ValueError as exc:
        _logger.warning("transcript-otel: %s; keeping metadata only", exc)
        return ContentPolicy("metadata")


def _policy_from(
    mode: str | None, exclude: Iterable[str] | None, environ: Mapping[str, str]
) -> ContentPolicy:
    chosen = mode or environ.get(CONTENT_VARIABLE, "").strip().lower()
    if not chosen:
        genai = environ.get(GENAI_CAPTURE_VARIABLE, "").strip().lower()
        chosen = ("metadata" if genai in _GENAI_NO_CONTENT else "full") if genai else "full"
    if exclude is None:
        exclude = [part.strip() for part in environ.get(EXCLUDE_VARIABLE, "").split(",") if part.strip()]
    for known in MODES:
        if chosen == known:
            return ContentPolicy(known, frozenset(exclude))
    raise ValueError(f"{CONTENT_VARIABLE} must be one of {', '.join(MODES)}, not {chosen!r}")


@dataclass(frozen=True, slots=True)
class GenAiContent:
    """Where GenAI content goes beside the transcript (spans, the operation-details event)
    and how long it may be.

    Only where the entries' `ContentPolicy` keeps a category `full`: this says where such
    content goes, the policy says whether there is any.
    """

    on_spans: bool = True  # content attributes on spans (`gen_ai.input.messages`, ...)
    in_events: bool = False  # gen_ai.client.inference.operation.details events with content
    openinference: bool = False  # also input.value / output.value (Arize Phoenix's columns)
    max_length: int = DEFAULT_GENAI_CONTENT_MAX_LENGTH  # characters per content attribute

    def __post_init__(self) -> None:
        if isinstance(self.max_length, bool) or not isinstance(self.max_length, int) or self.max_length < 1:
            raise ValueError(f"GenAI content max length must be a positive integer, not {self.max_length!r}")


def genai_content_from(
    capture: str | None = None,
    openinference: bool | None = None,
    max_length: int | None = None,
    environ: Mapping[str, str] = os.environ,
    *,
    profile_openinference: bool = False,
    profile_max_length: int = DEFAULT_GENAI_CONTENT_MAX_LENGTH,
) -> GenAiContent:
    """Each setting: the argument, else its variable, else the backend profile's.

    `capture` takes the values of `OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT`
    (case-insensitive); `openinference` and `max_length` default to
    `TRANSCRIPT_OTEL_OPENINFERENCE` and `TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH`. A bad
    argument is a ValueError; a variable we cannot read warns once and keeps the default
    (an unknown capture value: spans only, the same content as when unset).
    """
    if capture and capture.strip().lower() not in _GENAI_DESTINATIONS:
        raise ValueError(f"GenAI content capture must be one of {_CAPTURE_VALUES}, not {capture!r}")
    if max_length is not None:
        GenAiContent(max_length=max_length)  # raises for a bad length
    on_spans, in_events = _destinations(capture, environ)
    if openinference is None:
        openinference = env.env_flag(env.TRANSCRIPT_OTEL_OPENINFERENCE, profile_openinference, environ)
    if max_length is None:
        number = env.env_number(env.TRANSCRIPT_OTEL_GENAI_CONTENT_MAX_LENGTH, profile_max_length, environ)
        max_length = int(number) if number >= 1 else profile_max_length  # 0.5: positive, but no length
    return GenAiContent(on_spans, in_events, openinference, max_length)


def _destinations(capture: str | None, environ: Mapping[str, str]) -> tuple[bool, bool]:
    value = capture or environ.get(GENAI_CAPTURE_VARIABLE, "")  # an empty argument: as not given
    lowered = value.strip().lower()
    if not lowered:
        return True, False  # unset: our policy is `full`, and spans are where backends show it
    destinations = _GENAI_DESTINATIONS.get(lowered)
    if destinations is None:
        # Not "no content": the entries keep `full` for this value too (`policy_from`), so
        # spans keep what the transcript already carries; events are opt-in.
        _logger.warning(
            "transcript-otel: %s=%r is not one of %s; GenAI content goes on spans only",
            GENAI_CAPTURE_VARIABLE,
            value,
            _CAPTURE_VALUES,
        )
        return True, False
    return destinations
