"""transcript-otel beside OpenInference's claude-agent-sdk instrumentor (docs/coexistence.md).

A claude-agent-sdk program with no code of ours (`tests/agents/coexistence_program.py`) runs
one `query()` on the real Claude Code CLI, against the scripted model, under
`opentelemetry-instrument`, which loads every installed instrumentor: ours
(`transcript_claude_agent_sdk`) and `openinference-instrumentation-claude-agent-sdk`'s
(`claude_agent_sdk`, from the `test` dependency group). The program adds an in-memory span
exporter to the tracer provider and prints what it finished. What a user sees:

* both loaded: two span trees in one trace, OpenInference's `ClaudeAgentSDK.query` around
  ours, and the run's prompt tokens on both (`llm.token_count.prompt` on its AGENT span,
  `gen_ai.usage.input_tokens` on our `chat` spans); our transcript and numbers are the same
  as without it; Arize Phoenix, which adds up LLM spans only, counts the tokens once;
* one of them named in `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`: only the other's spans.
"""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("opentelemetry.sdk")

from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet

from transcript_otel import read_records
from transcript_otel.model.invariants import check_invariants

TESTS = Path(__file__).resolve().parent
sys.path.insert(0, str(TESTS / "agents"))

import claude_code  # noqa: E402  (first: it puts examples/model_servers on the path)
from instrumented_program import run_instrumented  # noqa: E402

from test_real_claude_code import ClaudeRun, as_recorded, assert_numbers_are_the_clis, require_cli  # noqa: E402

from phoenix_server import Phoenix  # noqa: E402

OPENINFERENCE = "openinference-instrumentation-claude-agent-sdk"
# The entry point names `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS` takes (group `opentelemetry_instrumentor`).
OURS = "transcript_claude_agent_sdk"
THEIRS = "claude_agent_sdk"
OUR_SCOPE = "transcript_otel.instrumentation.claude_agent_sdk"
THEIR_SCOPE = "openinference.instrumentation.claude_agent_sdk"
SCENARIO = "tools"  # one turn with a Bash call: the same spans at every run
PROMPT_NAME = "claude-agent-sdk"  # our instrumentor's default name for a run


def openinference_range() -> tuple[str, str]:
    """(the claude-agent-sdk versions OpenInference's instrumentor takes, the installed one)."""
    for line in metadata.requires(OPENINFERENCE) or []:
        requirement = Requirement(line)
        marker = requirement.marker
        for_instruments = marker is not None and marker.evaluate({"extra": "instruments"})
        if requirement.name == "claude-agent-sdk" and for_instruments:
            return str(requirement.specifier), metadata.version("claude-agent-sdk")
    raise AssertionError(f"{OPENINFERENCE} names no claude-agent-sdk range in its `instruments` extra")


def openinference_instruments_this_sdk() -> bool:
    """Whether `opentelemetry-instrument` would load OpenInference's instrumentor here: it skips
    one whose library is outside its `instruments` range (0.1.22: claude-agent-sdk >= 0.1.45;
    `make test` runs this suite with 0.1.0 too, in .venv-py-default, the oldest we support)."""
    accepted, installed = openinference_range()
    return SpecifierSet(accepted).contains(installed, prereleases=True)


OPENINFERENCE_OUT_OF_RANGE = "{} {} instruments claude-agent-sdk {} only; this environment has {}".format(
    OPENINFERENCE, metadata.version(OPENINFERENCE), *openinference_range()
)


def require_openinference_instrumenting_this_sdk() -> None:
    if not openinference_instruments_this_sdk():
        pytest.skip(OPENINFERENCE_OUT_OF_RANGE)


@dataclass
class Instrumented:
    """One run of the program: the spans the process finished, and our mirror of the run."""

    spans: list[dict[str, Any]]
    mirror: list[dict[str, Any]]
    served: list[dict[str, Any]]

    def scoped(self, scope: str) -> list[dict[str, Any]]:
        return [span for span in self.spans if span["scope"] == scope]

    def named(self, name: str) -> dict[str, Any]:
        (span,) = [span for span in self.spans if span["name"] == name]
        return span

    def parent(self, span: dict[str, Any]) -> dict[str, Any]:
        (parent,) = [other for other in self.spans if other["span_id"] == span["parent_span_id"]]
        return parent

    def ours(self) -> ClaudeRun:
        """Our run as its mirror kept it (entries and `transcript.span` records)."""
        return ClaudeRun(SCENARIO, self.mirror, self.served, prompt_name=PROMPT_NAME)


def run_program(scratch: Path, disabled: str, **exporting: str) -> Instrumented:
    """The program under `opentelemetry-instrument` on the real CLI, with `disabled` as
    `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`; `exporting`: more variables (by default the
    program's in-memory exporter is the only one)."""
    cli = require_cli()
    require_openinference_instrumenting_this_sdk()
    program = TESTS / "agents" / "coexistence_program.py"
    variables = {"OTEL_PYTHON_DISABLED_INSTRUMENTATIONS": disabled, **exporting}
    run = run_instrumented(program, SCENARIO, cli, scratch, cwd=scratch, variables=variables)
    completed = run.completed
    assert completed.returncode == 0, completed.stderr
    printed = json.loads(completed.stdout.splitlines()[-1])
    assert printed["messages"][-1] == "ResultMessage"
    records = [record for path in sorted(run.mirror.glob("*.jsonl")) for record in read_records(path)]
    return Instrumented(printed["spans"], records, run.served)


@pytest.fixture(scope="module")
def runs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Instrumented]:
    """`run_program` by the value of `OTEL_PYTHON_DISABLED_INSTRUMENTATIONS`; each on first use."""

    class Runs(dict[str, Instrumented]):
        def __missing__(self, disabled: str) -> Instrumented:
            self[disabled] = run_program(tmp_path_factory.mktemp(disabled or "both"), disabled)
            return self[disabled]

    return Runs()


def test_both_loaded_make_two_span_trees_in_one_trace_each_with_the_runs_tokens(
    runs: dict[str, Instrumented],
) -> None:
    run = runs[""]
    # OpenInference's tree: its AGENT span for the query(), a TOOL span for the Bash call.
    query = run.named("ClaudeAgentSDK.query")
    assert query["scope"] == THEIR_SCOPE
    assert query["parent_span_id"] is None
    assert query["attributes"]["openinference.span.kind"] == "AGENT"
    (their_tool,) = [span for span in run.scoped(THEIR_SCOPE) if span is not query]
    assert (their_tool["name"], their_tool["attributes"]["openinference.span.kind"]) == ("Bash", "TOOL")
    assert their_tool["parent_span_id"] == query["span_id"]
    # Ours, inside it: it wraps the public query(), we wrap the SDK's client below it.
    root = run.named(f"invoke_agent {PROMPT_NAME}")
    assert root["scope"] == OUR_SCOPE
    assert run.parent(root) is query
    assert {span["trace_id"] for span in run.spans} == {query["trace_id"]}
    chats = [span for span in run.scoped(OUR_SCOPE) if span["attributes"]["gen_ai.operation.name"] == "chat"]
    (chat,) = chats
    assert run.parent(run.named("execute_tool Bash")) is chat
    # The same prompt tokens on both trees: a backend adding up the trace counts them twice.
    whole_prompt = as_recorded(claude_code.served_usage(run.served))["input_tokens"]
    assert chat["attributes"]["gen_ai.usage.input_tokens"] == whole_prompt
    assert query["attributes"]["llm.token_count.prompt"] == whole_prompt
    # And no token attribute of one convention on the other's spans.
    assert not [key for span in run.scoped(OUR_SCOPE) for key in span["attributes"] if key.startswith("llm.")]
    assert not [
        key for span in run.scoped(THEIR_SCOPE) for key in span["attributes"] if key.startswith("gen_ai.")
    ]


def test_beside_openinference_our_transcript_is_what_it_is_alone(runs: dict[str, Instrumented]) -> None:
    both, alone = runs[""], runs[THEIRS]
    for run in (both, alone):
        assert check_invariants(run.mirror) == []
        assert_numbers_are_the_clis(run.ours())

    def shape(run: Instrumented) -> list[tuple[str, str]]:
        return [(e["entry_type"], e["source"]) for e in run.ours().entries]

    assert shape(both) == shape(alone)


def test_disabling_ours_leaves_only_openinferences_spans_and_no_transcript(
    runs: dict[str, Instrumented],
) -> None:
    run = runs[OURS]
    assert {span["scope"] for span in run.spans} == {THEIR_SCOPE}
    assert sorted(span["name"] for span in run.spans) == ["Bash", "ClaudeAgentSDK.query"]
    assert run.mirror == []


def test_disabling_openinference_leaves_only_our_spans(runs: dict[str, Instrumented]) -> None:
    run = runs[THEIRS]
    assert {span["scope"] for span in run.spans} == {OUR_SCOPE}
    root = run.named(f"invoke_agent {PROMPT_NAME}")
    assert root["parent_span_id"] is None
    assert sorted(span["name"] for span in run.spans if span is not root) == [
        "chat claude-opus-5-5",
        "execute_tool Bash",
    ]


PHOENIX_PROJECT = "transcript-otel-coexistence"


@pytest.mark.skipif(not openinference_instruments_this_sdk(), reason=OPENINFERENCE_OUT_OF_RANGE)
def test_phoenix_counts_the_runs_tokens_once_with_both_loaded(phoenix: Phoenix, tmp_path: Path) -> None:
    """Phoenix adds up LLM spans only: OpenInference's counts stay on its AGENT span, and the
    trace's and the project's totals are our chat span's, once."""
    run = run_program(
        tmp_path,
        "",
        OTEL_TRACES_EXPORTER="otlp",
        OTEL_EXPORTER_OTLP_TRACES_ENDPOINT=f"{phoenix.base_url}/v1/traces",
        OTEL_RESOURCE_ATTRIBUTES=f"openinference.project.name={PHOENIX_PROJECT}",
    )
    (trace_id,) = {span["trace_id"] for span in run.spans}
    stored = phoenix.wait_for_spans(PHOENIX_PROJECT, trace_id, len(run.spans))
    assert sorted(span["name"] for span in stored) == sorted(span["name"] for span in run.spans)
    kinds = {span["name"]: span["span_kind"] for span in stored}
    assert kinds["ClaudeAgentSDK.query"] == kinds[f"invoke_agent {PROMPT_NAME}"] == "AGENT"
    assert kinds["chat claude-opus-5-5"] == "LLM"
    usage = run.named("chat claude-opus-5-5")["attributes"]
    once = usage["gen_ai.usage.input_tokens"] + usage["gen_ai.usage.output_tokens"]
    query = """
        query($id: ID!, $trace: ID!) {
          node(id: $id) {
            ... on Project {
              tokenCountPrompt
              tokenCountTotal
              trace(traceId: $trace) { costSummary { prompt { tokens } total { tokens } } }
            }
          }
        }
    """
    project = phoenix.graphql(query, {"id": phoenix.project_id(PHOENIX_PROJECT), "trace": trace_id})["node"]
    summary = project["trace"]["costSummary"]
    whole_prompt = usage["gen_ai.usage.input_tokens"]
    assert (summary["prompt"]["tokens"], summary["total"]["tokens"]) == (whole_prompt, once)
    assert (project["tokenCountPrompt"], project["tokenCountTotal"]) == (whole_prompt, once)
