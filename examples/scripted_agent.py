"""A small scripted agent, instrumented with transcript-otel's public API.

It plays one agent run the way a harness would: a user prompt, thinking, two
tool calls, a subagent with its own tool call, the final answer and token usage,
inside GenAI-convention spans (`invoke_agent`, a turn, `execute_tool`). The
transcript goes to the local JSONL mirror and, when OTEL_EXPORTER_OTLP_ENDPOINT
is set, to that OTLP backend.

    python examples/scripted_agent.py [--prompt-name NAME] [--jsonl-dir DIR]
"""

from __future__ import annotations

import argparse
import sys
import time
import uuid
from typing import Any

from opentelemetry import trace

import transcript_otel
from transcript_otel import TranscriptEmitter, subagent_source

PROVIDER = "scripted"
MODEL = "scripted-model-1"


def _tool_call(
    emitter: TranscriptEmitter,
    tracer: trace.Tracer,
    name: str,
    arguments: dict[str, Any],
    result: str,
    *,
    source: str = "main",
) -> None:
    call_id = f"call_{uuid.uuid4().hex[:8]}"
    with tracer.start_as_current_span(
        f"execute_tool {name}",
        attributes={
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": call_id,
        },
    ):
        emitter.emit(
            "tool_use",
            source=source,
            detail={"tool_use_id": call_id, "tool_name": name, "input": arguments},
        )
        time.sleep(0.01)  # the tool runs
        emitter.emit(
            "tool_result",
            source=source,
            detail={"tool_use_id": call_id, "tool_name": name, "content": result},
        )
        emitter.flush()  # the entries become events of this span before it ends


def run_agent(prompt_name: str) -> TranscriptEmitter:
    tracer = trace.get_tracer("examples.scripted_agent")
    session_id = str(uuid.uuid4())
    emitter = TranscriptEmitter(prompt_name=prompt_name, adapter="scripted_agent", session_id=session_id)
    with (
        tracer.start_as_current_span(
            f"invoke_agent {prompt_name}",
            attributes={
                "gen_ai.operation.name": "invoke_agent",
                "gen_ai.agent.name": prompt_name,
                "gen_ai.conversation.id": session_id,
                "gen_ai.provider.name": PROVIDER,
                "gen_ai.request.model": MODEL,
            },
        ),
        emitter,
        tracer.start_as_current_span("turn 1"),
    ):
        emitter.emit("user_message", detail={"text": "Why does test_parse fail? Fix it."})
        emitter.emit("thinking", detail={"text": "Run the test first, then read parse()."})
        _tool_call(
            emitter,
            tracer,
            "bash",
            {"command": "pytest -q tests/test_parse.py"},
            "1 failed: expected 3, got 2",
        )
        _tool_call(
            emitter,
            tracer,
            "read_file",
            {"path": "src/parse.py"},
            "def parse(s):\n    return s.split(',')[:-1]\n",
        )
        with tracer.start_as_current_span("invoke_agent reviewer"):
            reviewer = subagent_source("reviewer-1")
            emitter.emit("user_message", source=reviewer, detail={"text": "Check the off-by-one in parse()."})
            _tool_call(emitter, tracer, "grep", {"pattern": "split"}, "src/parse.py:2", source=reviewer)
            emitter.emit(
                "assistant_message", source=reviewer, detail={"text": "The slice drops the last field."}
            )
            emitter.flush()
        emitter.emit(
            "assistant_message", detail={"text": "parse() dropped the last field; the slice is removed."}
        )
        emitter.emit(
            "token_usage",
            detail={"usage": {"input_tokens": 1840, "output_tokens": 212, "cache_read_input_tokens": 1024}},
        )
        emitter.flush()
    return emitter


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--prompt-name", default="demo-fix-parse")
    parser.add_argument(
        "--jsonl-dir",
        default=None,
        help="directory of the JSONL mirror (default: TRANSCRIPT_OTEL_JSONL_DIR "
        "or ~/.local/state/transcript-otel/runs)",
    )
    args = parser.parse_args(argv)

    configuration = transcript_otel.configure(service_name="scripted-agent", jsonl_dir=args.jsonl_dir)
    emitter = run_agent(args.prompt_name)
    summary = emitter.stop()
    exported = transcript_otel.flush()

    records = list(transcript_otel.read_records(emitter.jsonl_path or ""))
    violations = transcript_otel.check_invariants(records)
    print(
        f"transcript: {summary.total_entries} entries "
        f"({', '.join(f'{k}={v}' for k, v in sorted(summary.entries_by_type.items()))})"
    )
    print(f"sources: {', '.join(summary.sources)}")
    print(f"JSONL mirror: {emitter.jsonl_path}")
    if configuration.otlp_endpoint:
        outcome = "flushed" if exported else "flush timed out"
        print(
            f"OTLP export: {configuration.otlp_protocol} to {configuration.otlp_endpoint} "
            f"({outcome}; the OTel SDK reports failed exports as warnings on stderr)"
        )
    else:
        print("OTLP export: off (set OTEL_EXPORTER_OTLP_ENDPOINT to send the run to a backend)")
    for violation in violations:
        print(f"invariant violation: {violation}", file=sys.stderr)
    return 1 if violations else 0


if __name__ == "__main__":
    sys.exit(main())
