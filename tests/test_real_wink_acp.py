"""weakincentives' ACP adapters on the real ACP agents: `OpenCodeACPAdapter` on `opencode acp`
(OpenCode 1.18.33) and `ACPAdapter` on `gemini --acp` (Gemini CLI 0.61.0), offline against the
scripted models, through `evaluate()` in the `shell` scenario (the agent runs a command, then
answers).

Two driver processes, each running both agents once: weakincentives 0.26 calling
`configure()`, 0.27 under `opentelemetry-instrument`, which also runs OpenCode's `continued`
scenario (its continuation loop sends a second prompt). Without the CLIs (`make agents`) these
tests skip, or fail where the Makefile requires them (tests/requirements_switch.py).
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from transcript_otel.model.invariants import check_invariants

from requirements_switch import require
from wink_harness import REPO, WinkRun, attributes, run_driver

sys.path[:0] = [str(REPO / "tests" / "agents"), str(REPO / "examples" / "model_servers")]

from opencode_offline import COST  # noqa: E402

pytestmark = pytest.mark.wink

OPENCODE = REPO / ".agents" / "opencode" / "node_modules" / ".bin" / "opencode"
GEMINI = REPO / ".agents" / "gemini-cli" / "node_modules" / ".bin" / "gemini"
# (weakincentives version, under `opentelemetry-instrument`)
CASES = (("0.26.0", False), ("0.27.0", True))
# The scenarios each case runs (0.26 has no continuation loop).
CASE_SCENARIOS = {CASES[0]: "shell", CASES[1]: "shell,continued"}
AGENTS = ("opencode_acp", "gemini_acp")
ADAPTER_NAMES = {"opencode_acp": "opencode_acp", "gemini_acp": "acp"}
# What the model the agent selected is called by it, and who provides it.
CHAT_MODELS = {"opencode_acp": "scripted-chat", "gemini_acp": "auto"}
PROVIDERS = {"opencode_acp": "scripted", "gemini_acp": "gcp.gemini"}
ANSWER = "data.txt has 2 lines: one and two."


def _cli(path: Path) -> Path:
    return require(path if path.is_file() else None, f"{path.name} is not installed (`make agents`)")


@pytest.fixture(scope="module")
def acp_runs(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, bool], WinkRun]:
    from wink_acp import GEMINI_CLI, OPENCODE_CLI

    environment = {OPENCODE_CLI: str(_cli(OPENCODE)), GEMINI_CLI: str(_cli(GEMINI))}

    class Runs(dict[tuple[str, bool], WinkRun]):
        def __missing__(self, key: tuple[str, bool]) -> WinkRun:
            version, zero_code = key
            run = run_driver(
                version,
                tmp_path_factory.mktemp(f"wink-acp-{version}"),
                ("--configure", "--adapter", "acp", "--scenarios", CASE_SCENARIOS[key]),
                zero_code=zero_code,
                extra_env=environment,
            )
            self[key] = run
            return run

    return Runs()


def _prompt(agent: str) -> str:
    return f"{agent}-shell"


def _span_named(run: WinkRun, prompt: str, name: str) -> Any:
    (span,) = [s for s in run.tree(prompt) if s.name == name]
    return span


def _ours(entry: dict[str, Any]) -> bool:
    """Our entries: what the agent reported that weakincentives drops (usage, cost)."""
    return bool(entry["entry_type"] == "token_usage")


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{'-zero-code' if c[1] else ''}")
@pytest.mark.parametrize("agent", AGENTS)
def test_each_prompt_is_a_chat_span_with_its_tool_call(
    acp_runs: dict[tuple[str, bool], WinkRun], case: tuple[str, bool], agent: str
) -> None:
    """The agent ran the command and answered; the run is a root span with a `chat <model>`
    turn holding the command's `execute_tool` span, with the provider and model it named."""
    run, prompt = acp_runs[case], _prompt(agent)
    result = run.results[prompt]
    assert result["ok"], result
    assert ANSWER in result["text"]
    root = run.root_span(prompt)
    # (agent-client-protocol traces each message it handles: `acp.*` spans beside the turn)
    (chat,) = [s for s in run.children(root) if s.name.startswith("chat ")]
    assert chat.name == f"chat {CHAT_MODELS[agent]}"
    chat_attributes = attributes(chat)
    assert chat_attributes["gen_ai.provider.name"] == PROVIDERS[agent]
    assert chat_attributes["gen_ai.request.model"] == CHAT_MODELS[agent]
    assert attributes(root)["gen_ai.provider.name"] == PROVIDERS[agent]
    (tool,) = [s for s in run.children(chat) if s.name.startswith("execute_tool ")]
    (tool_use,) = [e for e in run.entries(prompt) if e["entry_type"] == "tool_use"]
    assert attributes(tool)["gen_ai.tool.call.id"] == tool_use["detail"]["tool_call_id"]
    (tool_result,) = [e for e in run.entries(prompt) if e["entry_type"] == "tool_result"]
    assert tool_use["span_id"] == tool_result["span_id"] == tool.span_id.hex()
    run.assert_entries_exported(prompt)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{'-zero-code' if c[1] else ''}")
@pytest.mark.parametrize("agent", AGENTS)
def test_entries_are_weakincentives_own_plus_the_usage_the_agent_reported(
    acp_runs: dict[tuple[str, bool], WinkRun], case: tuple[str, bool], agent: str
) -> None:
    """Every entry weakincentives emitted, once and as it emitted it; ours only add the usage
    the agent reported (which weakincentives drops); a valid transcript."""
    run, prompt = acp_runs[case], _prompt(agent)
    entries = run.entries(prompt)
    assert check_invariants(run.mirror[prompt]) == []
    assert {e["adapter"] for e in entries} == {ADAPTER_NAMES[agent]}
    native = [(e["entry_type"], e.get("detail")) for e in run.native[prompt]]
    assert [(e["entry_type"], e["detail"]) for e in entries if not _ours(e)] == native
    assert [e["entry_type"] for e in run.native[prompt]] == [
        "user_message",
        "assistant_message",
        "tool_use",
        "tool_result",
        "assistant_message",
    ]
    # OpenCode: the prompt's usage and a `usage_update`; Gemini CLI: the prompt's `_meta.quota`.
    assert sum(map(_ours, entries)) == (2 if agent == "opencode_acp" else 1)


def _usage(span: Any) -> dict[str, Any]:
    return {k: v for k, v in attributes(span).items() if k.startswith("gen_ai.usage.")}


def _opencode_cost(calls: list[dict[str, Any]]) -> float:
    """What OpenCode charges for `calls` (chat completions usage) at `opencode_offline.COST`."""
    cost: float = sum(
        (
            (u["prompt_tokens"] - u["prompt_tokens_details"]["cached_tokens"]) * COST["input"]
            + u["completion_tokens"] * COST["output"]
            + u["prompt_tokens_details"]["cached_tokens"] * COST["cache_read"]
        )
        / 1e6
        for u in calls
    )
    return cost


def _tokens(usage: dict[str, Any]) -> dict[str, int]:
    """A chat completions usage as the `chat` span counts it."""
    return {
        "gen_ai.usage.input_tokens": usage["prompt_tokens"],
        "gen_ai.usage.output_tokens": usage["completion_tokens"],
        "gen_ai.usage.cache_read.input_tokens": usage["prompt_tokens_details"]["cached_tokens"],
    }


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{'-zero-code' if c[1] else ''}")
def test_opencode_tokens_are_its_last_step_and_its_cost_the_sessions(
    acp_runs: dict[tuple[str, bool], WinkRun], case: tuple[str, bool]
) -> None:
    """OpenCode's `session/prompt` answer reports the usage of the turn's last model call only
    (2300 in, 1800 of them cached, 12 out), not of the first (2000/35); its `usage_update`
    reports the session's cost, which covers every step (title request aside)."""
    run, prompt = acp_runs[case], "opencode_acp-shell"
    steps = [s["usage"] for s in run.results[prompt]["served"] if s.get("kind") == "turn"]
    assert len(steps) == 2
    last = steps[-1]
    chat = _span_named(run, prompt, "chat scripted-chat")
    cost = _opencode_cost(steps)
    assert _usage(chat) == {**_tokens(last), "gen_ai.usage.cost": pytest.approx(cost)}
    root = attributes(run.root_span(prompt))
    assert root["transcript.usage.input_tokens"] == last["prompt_tokens"]
    assert root["transcript.usage.cost_usd"] == pytest.approx(cost)


@pytest.mark.parametrize("case", CASES, ids=lambda c: f"{c[0]}{'-zero-code' if c[1] else ''}")
def test_gemini_tokens_are_its_turns_model_calls(
    acp_runs: dict[tuple[str, bool], WinkRun], case: tuple[str, bool]
) -> None:
    """Gemini CLI's answer reports (in `_meta.quota`) the prompt and output tokens of the turn's
    model calls, summed, the router's left out, and no cached count and no cost."""
    run, prompt = acp_runs[case], "gemini_acp-shell"
    steps = [s["usage"] for s in run.results[prompt]["served"] if s.get("kind") == "stream"]
    assert len(steps) == 2
    chat = _span_named(run, prompt, "chat auto")
    assert _usage(chat) == {
        "gen_ai.usage.input_tokens": sum(u["promptTokenCount"] for u in steps),
        "gen_ai.usage.output_tokens": sum(u["candidatesTokenCount"] for u in steps),
    }


def test_a_continuation_prompt_is_a_turn_of_its_own(acp_runs: dict[tuple[str, bool], WinkRun]) -> None:
    """0.27's continuation loop: the task completion checker's feedback is a second
    `session/prompt`, a second `chat` span with the usage its answer reported (its one model
    call); the run's cost is the session's (every call). The continuation has no `user_message`
    of its own (weakincentives emits none), and the bridge folds its answer into the previous
    one's `assistant_message` (it flushes text only when another kind of update comes)."""
    run, prompt = acp_runs[CASES[1]], "opencode_acp-continued"
    assert run.results[prompt]["ok"], run.results[prompt]
    calls = [s["usage"] for s in run.results[prompt]["served"] if s.get("kind") == "turn"]
    assert len(calls) == 3  # the command, the answer; the answer again
    root = run.root_span(prompt)
    first, second = [s for s in run.children(root) if s.name == "chat scripted-chat"]
    assert [s.name for s in run.children(first) if s.name.startswith("execute_tool")] == ["execute_tool bash"]
    assert run.children(second) == []
    assert {k: v for k, v in _usage(first).items() if k != "gen_ai.usage.cost"} == _tokens(calls[1])
    assert {k: v for k, v in _usage(second).items() if k != "gen_ai.usage.cost"} == _tokens(calls[2])
    assert attributes(root)["transcript.usage.cost_usd"] == pytest.approx(_opencode_cost(calls))
    native = [e["entry_type"] for e in run.native[prompt]]
    assert native == ["user_message", "assistant_message", "tool_use", "tool_result", "assistant_message"]
    assert run.native[prompt][-1]["detail"]["text"] == ANSWER * 2
    last = [e for e in run.entries(prompt) if e["entry_type"] == "assistant_message"][-1]
    assert last["span_id"] == second.span_id.hex()
    assert check_invariants(run.mirror[prompt]) == []
