"""Tokens (and OpenCode's cost) per recorded Gemini CLI / OpenCode fixture: what the scripted model
served, what the CLI printed, what it stored. Standalone (not a test: nothing runs a CLI).

    python tests/agents/gemini_opencode_usage.py [--check]

prints one markdown table per CLI; `--check` also asserts the relations that
docs/gemini-opencode-notes.md states, and exits 1 naming those that do not hold.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
LINES = ROOT / "tests" / "fixtures" / "line_streams"
SESSIONS = ROOT / "tests" / "fixtures" / "sessions"
# $ per token, as opencode_offline.COST gives them per million.
PRICE = {"input": 1.0e-6, "output": 4.0e-6, "cache_read": 0.1e-6, "cache_write": 1.25e-6}

problems: list[str] = []


def check(condition: bool, what: str) -> None:
    if not condition:
        problems.append(what)


def meta(cli: str, scenario: str, mode: str) -> dict[str, Any]:
    result: dict[str, Any] = json.loads((LINES / cli / f"{scenario}.{mode}.meta.json").read_text())
    return result


def scenarios(cli: str) -> list[str]:
    return sorted({path.name.split(".")[0] for path in (LINES / cli).glob("*.meta.json")})


def gemini_served(scenario: str) -> dict[str, int]:
    """Σ over the main model's answered streams (the router's generateContent apart)."""
    total = {"P": 0, "C": 0, "O": 0, "T": 0, "router_in": 0, "router_out": 0}
    for call in meta("gemini", scenario, "stream-json")["served"]:
        usage = call.get("usage") or {}
        if call.get("status") != 200:
            continue
        if call.get("kind") == "utility":
            total["router_in"] += usage["promptTokenCount"]
            total["router_out"] += usage["candidatesTokenCount"]
            continue
        total["P"] += usage["promptTokenCount"]
        total["C"] += usage.get("cachedContentTokenCount", 0)
        total["O"] += usage["candidatesTokenCount"]
        total["T"] += usage.get("thoughtsTokenCount", 0)
    return total


def gemini_session(scenario: str) -> dict[str, int]:
    """Σ of `tokens` over the model records, the last record per id winning."""
    (path,) = (SESSIONS / "gemini" / scenario).rglob("session-*.jsonl")
    last: dict[str, dict[str, Any]] = {}
    for line in path.read_text().splitlines():
        record = json.loads(line)
        if record.get("type") == "gemini":
            last[record["id"]] = record
    total = {"input": 0, "cached": 0, "output": 0, "thoughts": 0, "total": 0}
    for record in last.values():
        for key in total:
            total[key] += record["tokens"][key]
    return total


def gemini_row(scenario: str) -> str:
    served = gemini_served(scenario)
    stored = gemini_session(scenario)
    stream = [json.loads(line) for line in (LINES / "gemini" / f"{scenario}.stream-json.jsonl").open()]
    result = stream[-1]["stats"] if stream and stream[-1]["type"] == "result" else {}
    printed = json.loads((LINES / "gemini" / f"{scenario}.json.json").read_text() or "{}")
    models = (printed.get("stats") or {}).get("models") or {}
    main: dict[str, Any] = next(
        (m["tokens"] for name, m in models.items() if "main" in m.get("roles", {})), {}
    )
    p, c, o, t = served["P"], served["C"], served["O"], served["T"]
    router = served["router_in"] + served["router_out"]
    check(
        stored == {"input": p, "cached": c, "output": o, "thoughts": t, "total": p + o + t},
        f"gemini {scenario}: session",
    )
    if result:
        check(
            result["input_tokens"] == p + served["router_in"], f"gemini {scenario}: stream-json input_tokens"
        )
        check(result["cached"] == c, f"gemini {scenario}: stream-json cached")
        check(result["input"] == p + served["router_in"] - c, f"gemini {scenario}: stream-json input")
        check(
            result["output_tokens"] == o + served["router_out"],
            f"gemini {scenario}: stream-json output_tokens",
        )
        check(result["total_tokens"] == p + o + t + router, f"gemini {scenario}: stream-json total_tokens")
    if main:
        check(
            main
            == {
                "input": p - c,
                "prompt": p,
                "candidates": o,
                "total": p + o + t,
                "cached": c,
                "thoughts": t,
                "tool": 0,
            },
            f"gemini {scenario}: json stats main model",
        )
    shown = ", ".join(
        f"{k} {result.get(k)}" for k in ("input_tokens", "cached", "output_tokens", "total_tokens")
    )
    kept = ", ".join(f"{k} {v}" for k, v in stored.items())
    utility = f"router {served['router_in']} / {served['router_out']}"
    return f"| {scenario} | {p} / {c} / {o} / {t} ({utility}) | {shown if result else '(none)'} | {kept} |"


def opencode_row(scenario: str) -> str:
    served = {"P": 0, "C": 0, "K": 0, "R": 0}
    for call in meta("opencode", scenario, "json")["served"]:
        if call.get("status") == 200 and call.get("kind") == "turn":
            usage = call["usage"]
            served["P"] += usage["prompt_tokens"]
            served["C"] += usage["prompt_tokens_details"]["cached_tokens"]
            served["K"] += usage["completion_tokens"]
            served["R"] += usage["completion_tokens_details"]["reasoning_tokens"]
    p, c, k, r = served["P"], served["C"], served["K"], served["R"]
    steps = [
        json.loads(line)["part"]
        for line in (LINES / "opencode" / f"{scenario}.json.jsonl").open()
        if json.loads(line)["type"] == "step_finish"
    ]
    printed = {
        "input": sum(s["tokens"]["input"] for s in steps),
        "output": sum(s["tokens"]["output"] for s in steps),
        "reasoning": sum(s["tokens"]["reasoning"] for s in steps),
        "cache_read": sum(s["tokens"]["cache"]["read"] for s in steps),
        "cost": round(sum(s["cost"] for s in steps), 9),
    }
    session = json.loads((SESSIONS / "opencode" / scenario / "tables.json").read_text())["session"][0]
    stored = {
        "input": session["tokens_input"],
        "output": session["tokens_output"],
        "reasoning": session["tokens_reasoning"],
        "cache_read": session["tokens_cache_read"],
        "cost": round(session["cost"], 9),
    }
    expected_cost = round((p - c) * PRICE["input"] + k * PRICE["output"] + c * PRICE["cache_read"], 9)
    expected = {"input": p - c, "output": k - r, "reasoning": r, "cache_read": c, "cost": expected_cost}
    check(printed == expected, f"opencode {scenario}: json step_finish sums {printed} != {expected}")
    check(stored == expected, f"opencode {scenario}: session row {stored} != {expected}")
    shown = ", ".join(f"{key} {value}" for key, value in printed.items())
    kept = ", ".join(f"{key} {value}" for key, value in stored.items())
    return f"| {scenario} | {p} / {c} / {k} / {r} | {shown} | {kept} |"


def main() -> int:
    print(
        "Gemini CLI: served prompt / cached / candidates / thoughts (main model, Σ), stream-json "
        "`result.stats`, session file (Σ, last record per id)\n"
    )
    print("| Scenario | Served | Printed (stream-json) | Stored (session) |\n|---|---|---|---|")
    for scenario in scenarios("gemini"):
        print(gemini_row(scenario))
    print(
        "\nOpenCode: served prompt / cached / completion / reasoning (turns, Σ; the title request "
        "apart), json `step_finish` Σ, `session` row\n"
    )
    print("| Scenario | Served | Printed (json) | Stored (session row) |\n|---|---|---|---|")
    for scenario in scenarios("opencode"):
        print(opencode_row(scenario))
    if "--check" in sys.argv[1:]:
        for problem in problems:
            print(f"DOES NOT HOLD: {problem}", file=sys.stderr)
        return 1 if problems else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
