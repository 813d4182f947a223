"""`run.py --against REV`: the chosen sections for the current code and for REV, side by side.

REV is checked out in a git worktree (`.bench-worktrees/<commit>`, gitignored, kept for the
next run). Each side runs its OWN `benchmarks/run.py --only SECTION --json FILE` (REV's
sections may be laid out differently), with `PYTHONPATH=<side>/src` so that side's package
is imported instead of the editable install (checked in a child before anything runs; the
installed metadata, such as entry points, stays the current install's). Both sides use this
interpreter. The processes alternate, current then REV, for each round, so the machine's
drift hits both; each figure is the median over the rounds, and the ratio current / REV is
taken of those medians.

Rows are paired by name: each side's JSON is flattened into figures, one per
(group, name). A section's `rows` give one figure per row and entry size (the cell's median
over its runs); any other number in the payload is named by its path of keys, list items by
the identifying strings they carry (`label`, `key`, `kind`, ...) and skipped without one
(raw samples, per-run captures). A figure on one side only is shown as such.
"""

from __future__ import annotations

import ast
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from results import format_value

WORKTREES = ".bench-worktrees"
# The fields that name an item of a list of results (a memory variant, an outage run, ...).
IDENTITY_KEYS = ("label", "key", "kind", "size", "backend", "queue", "mode", "name", "scenario")
SKIPPED_KEYS = frozenset({"error", "traceback", "info"})

Key = tuple[str, str]  # (group, name)
Figure = tuple[float, str]  # (value, unit)


def figures(payload: Mapping[str, Any], labels: Mapping[str, str] | None = None) -> dict[Key, Figure]:
    """Every figure of one section's JSON, named so that the same figure pairs up across revisions."""
    labels = labels or {}
    found: dict[Key, Figure] = {}
    for row in payload.get("rows", []):
        for cell_key, cell in row["cells"].items():
            name = f"{row['name']}, {labels.get(cell_key, cell_key)}"
            found[(str(row["section"]), name)] = (float(cell["median"]), str(row["unit"]))
    for top, value in payload.items():
        if top != "rows" and top not in SKIPPED_KEYS:
            _leaves(value, top, [], found)
    return found


def _leaves(value: Any, group: str, path: list[str], found: dict[Key, Figure]) -> None:
    if isinstance(value, bool) or value is None:
        return
    if isinstance(value, int | float):
        if path:
            found[(group, " / ".join(path))] = (float(value), unit_of(path))
        else:  # a number at the top of the payload (`elapsed_s`)
            found[("the section's process", group)] = (float(value), unit_of([group]))
    elif isinstance(value, Mapping):
        for key, item in value.items():
            if key not in SKIPPED_KEYS:
                _leaves(item, group, [*path, str(key)], found)
    elif isinstance(value, list):
        for item in value:
            if isinstance(item, Mapping):
                identity = ", ".join(
                    str(item[key]) for key in IDENTITY_KEYS if isinstance(item.get(key), str)
                )
                if identity:
                    _leaves(item, group, [*path, identity], found)


def unit_of(path: Sequence[str]) -> str:
    """The unit a figure's name says: `*_ns`, `*_s`, `*bytes*`/`*rss*` in its nearest key that
    has one (`latency_s / p99` is in seconds), else `*ratio*` in any; else a plain number."""
    for part in reversed(path):
        if part.endswith("_ns"):
            return "ns"
        if part.endswith("_s"):
            return "s"
        if "bytes" in part or "rss" in part:
            return "bytes"
    if any("ratio" in part for part in path):
        return "ratio"
    return ""


def format_figure(value: float, unit: str) -> str:
    if unit == "s":
        return f"{value * 1000:.1f} ms" if abs(value) < 1 else f"{value:.2f} s"
    if unit in ("ns", "rate", "bytes", "ratio") or float(value).is_integer():
        return format_value(unit, value)
    return f"{value:,.4g}"


# key, unit, current's values, REV's values, current / REV of each round both sides measured
Paired = tuple[Key, str, list[float], list[float], list[float]]


def pair(current: Sequence[Mapping[Key, Figure]], previous: Sequence[Mapping[Key, Figure]]) -> list[Paired]:
    """The figures of both sides by name (current's order, then REV's own); round i of one side
    ran right before round i of the other (a failed round: an empty mapping)."""
    order: dict[Key, str] = {}
    for side in (current, previous):
        for found in side:
            for key, (_, unit) in found.items():
                order.setdefault(key, unit)
    return [
        (
            key,
            unit,
            [found[key][0] for found in current if key in found],
            [found[key][0] for found in previous if key in found],
            [
                mine[key][0] / theirs[key][0]
                for mine, theirs in zip(current, previous, strict=False)
                if key in mine and key in theirs and theirs[key][0] != 0
            ],
        )
        for key, unit in order.items()
    ]


def _cell(values: list[float], unit: str, missing: str) -> str:
    if not values:
        return missing
    median = format_figure(statistics.median(values), unit)
    if min(values) == max(values):
        return median
    return f"{median} ({format_figure(min(values), unit)} to {format_figure(max(values), unit)})"


def render_pairs(paired: list[Paired], current_name: str, previous_name: str) -> str:
    """A Markdown table: one line per figure, grouped as the sections group them."""
    lines = [
        f"| figure | {current_name}: median (lowest to highest round) | {previous_name} "
        f"| {current_name} / {previous_name}: of the medians | median of the rounds' ratios |",
        "|---|---|---|---|---|",
    ]
    group = None
    for (row_group, name), unit, mine, theirs, ratios in paired:
        if row_group != group:
            group = row_group
            lines.append(f"| **{group}** | | | | |")
        of_medians = "—"
        if mine and theirs and statistics.median(theirs) != 0:
            of_medians = f"{statistics.median(mine) / statistics.median(theirs):.3f}x"
        by_round = f"{statistics.median(ratios):.3f}x" if ratios else "—"
        lines.append(
            f"| {name} | {_cell(mine, unit, f'— (not in {current_name})')} "
            f"| {_cell(theirs, unit, f'— (not at {previous_name})')} | {of_medians} | {by_round} |"
        )
    return "\n".join(lines)


def sections_of(run_py: Path) -> tuple[str, ...] | None:
    """The sections a revision's `run.py` knows (SECTIONS + ON_DEMAND), read without running it."""
    try:
        tree = ast.parse(run_py.read_text())
    except (OSError, SyntaxError):
        return None
    names: list[str] = []
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id in ("SECTIONS", "ON_DEMAND") for target in node.targets
        ):
            try:
                names += [str(name) for name in ast.literal_eval(node.value)]
            except ValueError:
                return None
    return tuple(names)


# -- running both sides ------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True).stdout.strip()


def worktree(repo: Path, rev: str) -> tuple[Path, str]:
    """REV checked out under `.bench-worktrees/` (made once, then reused); its path and commit."""
    commit = _git(repo, "rev-parse", "--verify", f"{rev}^{{commit}}")
    path = repo / WORKTREES / commit[:12]
    if (path / ".git").exists():
        if _git(path, "rev-parse", "HEAD") != commit:
            raise SystemExit(f"{path} is not at {commit}: remove it (git worktree remove --force {path})")
    else:
        _git(repo, "worktree", "add", "--detach", str(path), commit)
    return path, commit


def code_state(repo: Path) -> str:
    """The commit checked out and a digest of the uncommitted changes to what the sections run."""
    import hashlib

    diff = subprocess.run(
        ["git", "diff", "HEAD", "--", "src", "benchmarks", "examples", "tests"],
        cwd=repo,
        capture_output=True,
        check=True,
    ).stdout
    return f"{_git(repo, 'rev-parse', '--short', 'HEAD')}+{hashlib.sha256(diff).hexdigest()[:12]}"


# The real agent CLIs `make agents` installs under the checkout: tools both sides run, not code
# under test, so a worktree (which has none) uses the checkout's.
AGENT_CLIS = {"TRANSCRIPT_OTEL_CLAUDE_CLI": Path(".agents/claude-code/node_modules/.bin/claude")}


def side_environment(root: Path) -> dict[str, str]:
    environment = dict(os.environ)
    environment["PYTHONPATH"] = str(root / "src")
    checkout = Path(__file__).resolve().parent.parent
    for variable, installed in AGENT_CLIS.items():
        if variable not in environment and (checkout / installed).exists():
            environment[variable] = str(checkout / installed)
    return environment


def imported_from(root: Path) -> str:
    """Where a child with this side's environment imports `transcript_otel` from."""
    return subprocess.run(
        [sys.executable, "-c", "import transcript_otel; print(transcript_otel.__file__)"],
        cwd=root,
        env=side_environment(root),
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()


def run_side(root: Path, section: str, scratch: Path, tag: str) -> dict[str, Any]:
    """One side's own `run.py` for one section in a fresh process; that section's payload."""
    output, report = scratch / f"{tag}.json", scratch / f"{tag}.txt"
    started = time.monotonic()
    with report.open("w") as printed:
        completed = subprocess.run(
            [sys.executable, str(root / "benchmarks" / "run.py"), "--only", section, "--json", str(output)],
            cwd=root,
            env=side_environment(root),
            stdout=printed,
            stderr=subprocess.STDOUT,
            check=False,
        )
    if not output.exists():
        tail = report.read_text()[-1500:]
        return {"error": f"run.py exited with {completed.returncode} and no JSON: {tail}"}
    data: dict[str, Any] = json.loads(output.read_text())
    payload: dict[str, Any] = data["sections"].get(section) or {"error": "section missing from the JSON"}
    payload["elapsed_s"] = time.monotonic() - started
    return payload


def run_against(
    rev: str,
    sections: Sequence[str],
    *,
    rounds: int,
    repo: Path,
    labels: Mapping[str, str],
    machine: str,
    current_code: str,
    json_path: Path | None,
) -> int:
    path, commit = worktree(repo, rev)
    previous_name, current_name = commit[:7], "current"
    for root in (repo, path):
        where = imported_from(root)
        if not Path(where).is_relative_to(root / "src"):
            raise SystemExit(f"a child with PYTHONPATH={root / 'src'} imports transcript_otel from {where}")
        print(f"[ab] {root}: transcript_otel from {where}", file=sys.stderr, flush=True)
    known = sections_of(path / "benchmarks" / "run.py")
    subject = _git(repo, "log", "-1", "--format=%h %cs %s", commit)
    load_before, state_before = os.getloadavg(), code_state(repo)
    started = time.monotonic()
    out = [
        f"A/B: {current_name} ({current_code}) against {previous_name} ({subject[:100]}), worktree {path}",
        "",
    ]
    results: dict[str, Any] = {}
    failed = False
    with tempfile.TemporaryDirectory(prefix="transcript-otel-ab-") as scratch:
        for section in sections:
            if known is not None and section not in known:
                out += [f"Section `{section}`: not at {previous_name} (its run.py has no such section).", ""]
            runs: dict[str, list[dict[str, Any]]] = {"current": [], "previous": []}
            for index in range(rounds):
                for side, root in (("current", repo), ("previous", path)):
                    if side == "previous" and known is not None and section not in known:
                        continue
                    name = current_name if side == "current" else previous_name
                    print(f"[ab] {section}, round {index + 1}/{rounds}: {name}", file=sys.stderr, flush=True)
                    runs[side].append(run_side(root, section, Path(scratch), f"{section}-{side}-{index}"))
            results[section] = runs
            paired = pair(
                [{} if "error" in payload else figures(payload, labels) for payload in runs["current"]],
                [{} if "error" in payload else figures(payload, labels) for payload in runs["previous"]],
            )
            out += [
                f"Section `{section}`, {rounds} round{'s' if rounds != 1 else ''}:",
                "",
                render_pairs(paired, current_name, previous_name),
            ]
            for side, payloads in runs.items():
                for index, payload in enumerate(payloads):
                    if "error" in payload:
                        failed = True
                        name = current_name if side == "current" else previous_name
                        out.append(f"{name}, round {index + 1}, FAILED: {payload['error'][-1500:]}")
            out.append("")
    load_after, state_after = os.getloadavg(), code_state(repo)
    if state_after != state_before:
        out.append(
            f"The current code changed while this ran ({state_before} -> {state_after}: commit + digest of "
            "the uncommitted changes to src/, benchmarks/, examples/, tests/): rounds may differ in code."
        )
    out.insert(
        1,
        f"Machine: {machine}; load average (1 min) {load_before[0]:.2f} before, {load_after[0]:.2f} after; "
        f"{time.monotonic() - started:.0f} s. Each side's own run.py in fresh processes, alternating "
        f"{current_name}, {previous_name}, ...; a figure is the median over the rounds of each side's "
        "figure (itself a median over that section's runs); the ratios: of those medians, and the "
        "median of each round's (its two processes ran back to back, less exposed to the machine's "
        "drift). For times, < 1 means faster now; for rates (/s), > 1 means faster now.",
    )
    print("\n".join(out).rstrip() + "\n")
    if json_path is not None:
        json_path.write_text(
            json.dumps(
                {"against": commit, "machine": machine, "rounds": rounds, "sections": results}, indent=1
            )
        )
    return 1 if failed else 0
