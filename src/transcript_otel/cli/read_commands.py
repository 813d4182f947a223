"""`show`, `summary` and `validate`: reading one captured run on the command line."""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, TextIO

from transcript_otel.model.invariants import INVARIANTS
from transcript_otel.reading.text import usd_text

if TYPE_CHECKING:
    from transcript_otel.reading.digest import RunDigest

RUN_HELP = (
    "a JSONL mirror file, a debug bundle (.zip), an OTLP JSON export, or a run id, session id or "
    "part of a file name in the mirror directory ($TRANSCRIPT_OTEL_JSONL_DIR); 'last' is the newest run "
    "(the one that started last, not the file written last)"
)


Handler = Callable[[argparse.Namespace, TextIO], int]


def add_run_command(
    commands: Any, name: str, handler: Handler, *, help_text: str, description: str, epilog: str | None = None
) -> argparse.ArgumentParser:
    """A command that reads one captured run (its RUN argument), carried out by `handler`; the
    caller adds the command's options. A command with examples (`epilog`) keeps its texts' line
    breaks, which lay the examples out."""
    parser: argparse.ArgumentParser = commands.add_parser(
        name,
        help=help_text,
        description=description,
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter if epilog else argparse.HelpFormatter,
    )
    parser.add_argument("run", metavar="RUN", help=RUN_HELP)
    parser.set_defaults(handler=handler)
    return parser


def _utc(text: str) -> datetime:
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(
            f"not an ISO 8601 time: {text!r} (e.g. 2026-11-23T14:33:40Z)"
        ) from exc
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def add_show(commands: Any) -> None:
    show = add_run_command(
        commands,
        "show",
        run_show,
        help_text="print a run's transcript for people to read",
        description="Print a run's transcript: time, a symbol per role (⚙️ system, 👤 user, 🤖 assistant, "
        "🔧 tool), and a [source] prefix for subagents. Coloured on a terminal, plain when piped; on a "
        "terminal, a transcript longer than the screen goes through $PAGER (default: less -R).",
        epilog="examples:\n  transcript-otel show last\n  transcript-otel show run.jsonl --type tool_use "
        "--type tool_result\n  transcript-otel show last --follow",
    )
    show.add_argument(
        "--source",
        action="append",
        default=[],
        help="only this source: main, subagent:<id>, or subagent for every subagent (repeatable)",
    )
    show.add_argument(
        "--type", action="append", default=[], dest="types", help="only this entry type (repeatable)"
    )
    show.add_argument(
        "--since", type=_utc, help="only entries at or after this time (ISO 8601, UTC if no zone)"
    )
    show.add_argument("--until", type=_utc, help="only entries at or before this time")
    show.add_argument(
        "--follow", "-f", action="store_true", help="keep reading while the agent writes the run"
    )
    show.add_argument("--full", action="store_true", help="never shorten long texts")
    show.add_argument("--color", choices=("auto", "always", "never"), default="auto", help="colour headers")
    show.add_argument(
        "--no-pager",
        action="store_true",
        help="never through $PAGER (default: less -R), which a transcript longer than the terminal's "
        "screen goes through when stdout is a terminal (not with --follow)",
    )


def run_show(args: argparse.Namespace, out: TextIO) -> int:
    from transcript_otel.cli.pager import paged
    from transcript_otel.reading.show import ShowFilter, ShowWriter, follow, wants_colour
    from transcript_otel.reading.sources import open_run

    source = open_run(args.run)
    if args.follow:
        if source.kind != "jsonl":
            raise ValueError(f"--follow reads a JSONL mirror file; {source.path} is a {source.kind} file")
        records: Iterator[dict[str, Any]] = follow(source.path)
    else:
        records = source.records()
    # A pager would hold a followed run back until it filled a screen.
    with paged(out, wanted=not (args.no_pager or args.follow)) as shown_on:
        writer = ShowWriter(
            shown_on,
            colour=wants_colour(out, args.color),  # the pager shows them on `out`'s terminal
            only=ShowFilter(frozenset(args.source), frozenset(args.types), args.since, args.until),
            max_chars=None if args.full else 4000,
        )
        try:
            for record in records:
                writer.write(record)
                if args.follow:
                    out.flush()
        except KeyboardInterrupt:
            return 130
    if writer.shown == 0:
        print("(no entries to show)", file=sys.stderr)
    return 0


def add_summary(commands: Any) -> None:
    summary = add_run_command(
        commands,
        "summary",
        run_summary,
        help_text="what a run did: tokens, tools, errors, duration",
        description="Summarize a run: status, duration, entries by type and source, tokens in and out, "
        "cost, tool calls per tool with failures and durations, errors.",
    )
    summary.add_argument("--json", action="store_true", help="one JSON object, for scripts")


def run_summary(args: argparse.Namespace, out: TextIO) -> int:
    from transcript_otel.reading.digest import RunDigest
    from transcript_otel.reading.escapes import visible
    from transcript_otel.reading.sources import open_run

    digest = RunDigest.of(open_run(args.run).records())
    if args.json:
        json.dump(digest.as_dict(), out, indent=2, ensure_ascii=False)
        out.write("\n")
    else:
        out.write(visible(format_summary(digest)))
    return 0


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{name} {count}" for name, count in sorted(counts.items(), key=lambda kv: -kv[1]))


def format_summary(digest: RunDigest) -> str:
    """The summary as a few aligned lines of text."""
    found = digest.as_dict()
    lines = [f"{digest.prompt_name or '?'} · {digest.adapter or '?'} · {digest.status}"]
    ids = [f"{name} {value}" for name in ("session", "run", "trace") if (value := found[f"{name}_id"])]
    if ids:
        lines.append("ids       " + "   ".join(ids))
    if digest.started and digest.ended:
        lines.append(
            f"time      {digest.started.astimezone(UTC):%Y-%m-%d %H:%M:%S} → "
            f"{digest.ended.astimezone(UTC):%H:%M:%S} UTC ({digest.duration_s:.1f} s)"
        )
    lines.append(f"turns     {digest.turns}")
    lines.append(f"entries   {found['total_entries']}: {_counts(found['entries_by_type']) or 'none'}")
    if len(digest.by_source) > 1:
        lines.append(f"sources   {_counts(found['entries_by_source'])}")
    tokens = digest.tokens
    if tokens or digest.cost_usd:
        words = [f"{count} {name.replace('_', ' ')}" for name, count in tokens.items()]
        cost = f" · {usd_text(digest.cost_usd)}" if digest.cost_usd else ""
        lines.append(f"tokens    {' · '.join(words) or 'none'}{cost}")
    for index, (name, stats) in enumerate(sorted(found["tools"].items())):
        parts = [f"{stats['calls']} call{'s' if stats['calls'] != 1 else ''}"]
        if stats["failures"]:
            parts.append(f"{stats['failures']} failed")
        if stats["unanswered"]:
            parts.append(f"{stats['unanswered']} without result")
        if stats["max_ms"] is not None:
            parts.append(f"{stats['total_ms']:.0f} ms in all, longest {stats['max_ms']:.0f} ms")
        lines.append(f"{'tools' if index == 0 else '':<10}{name}: {', '.join(parts)}")
    for index, error in enumerate(digest.errors):
        first_line = error.splitlines()[0] if error else ""
        lines.append(f"{'errors' if index == 0 else '':<10}{first_line}")
    problems = {
        "malformed entries": digest.malformed,
        "transcript errors": digest.transcript_errors,
        "dropped entries": digest.dropped,
    }
    if any(problems.values()):
        lines.append("capture   " + ", ".join(f"{count} {name}" for name, count in problems.items() if count))
    return "\n".join(lines) + "\n"


def number_at_least(minimum: int) -> Callable[[str], int]:
    """An argparse `type`: a whole number, `minimum` or more (argparse's message names the option)."""

    def number(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if value < minimum:
            raise argparse.ArgumentTypeError(f"must be {minimum} or more, not {value}")
        return value

    return number


def add_validate(commands: Any) -> None:
    validate = add_run_command(
        commands,
        "validate",
        run_validate,
        help_text="check a run against the specification's invariants",
        description="Check every record of a run: readable JSON, the entry envelope, and the seven "
        "invariants ("
        + ", ".join(f"{number} {name}" for number, name in INVARIANTS.items())
        + "). Prints one line per problem (where, which invariant, what) and exits 1 if there is any.",
    )
    validate.add_argument("--adapter", help="the adapter every entry must name (invariant 5)")
    validate.add_argument(
        "--max", type=number_at_least(0), default=200, help="print at most this many problems (default 200)"
    )
    validate.add_argument(
        "--json",
        action="store_true",
        help="one JSON object (run, records, ok, problems: where, invariant, what), for scripts",
    )


def run_validate(args: argparse.Namespace, out: TextIO) -> int:
    from transcript_otel.model.invariants import check_invariants
    from transcript_otel.reading.lines import TranscriptReadWarning
    from transcript_otel.reading.sources import open_run

    source = open_run(args.run)
    counted = {"records": 0}
    with warnings.catch_warnings(record=True) as unreadable:
        warnings.simplefilter("always", TranscriptReadWarning)

        def located() -> Iterator[tuple[str, dict[str, Any]]]:
            for item in source.located_records():
                counted["records"] += 1
                yield item

        violations = check_invariants(located(), expected_adapter=args.adapter)
    found: list[dict[str, Any]] = [
        {"location": None, "invariant": None, "message": f"{warning.message} (not a record)"}
        for warning in unreadable
    ]
    found += (
        {
            "location": v.location,
            "invariant": v.invariant,
            "invariant_name": v.invariant_name,
            "message": v.message,
        }
        for v in violations
    )
    if counted["records"] == 0:
        found.append(
            {
                "location": str(source.path),
                "invariant": None,
                "message": "no records (a run has at least its transcript.start)",
            }
        )
    if args.json:
        verdict_of = {"run": str(source.path), "records": counted["records"], "ok": not found}
        json.dump({**verdict_of, "problems": found[: args.max], "problems_total": len(found)}, out, indent=2)
        out.write("\n")
        return 1 if found else 0
    problems = [
        f"{problem['message']}" if problem["location"] is None else _problem_line(problem)
        for problem in found
    ]
    for problem in problems[: args.max]:
        out.write(problem + "\n")
    if len(problems) > args.max:
        out.write(f"… and {len(problems) - args.max} more\n")
    verdict = "ok" if not problems else f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    print(f"{source.path}: {counted['records']} records: {verdict}", file=sys.stderr)
    return 1 if problems else 0


def _problem_line(problem: dict[str, Any]) -> str:
    if problem["invariant"] is None:
        return f"{problem['location']}: {problem['message']}"
    name = problem["invariant_name"]
    return f"{problem['location']}: invariant {problem['invariant']} ({name}): {problem['message']}"
