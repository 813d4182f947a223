"""`write_html`: one self-contained page per run, checked as written and as a browser shows it.

The browser tests drive Debian's headless Chromium through selenium and chromedriver
(`apt-get install -y chromium chromium-driver`); they are skipped, with the reason,
where either is missing.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import json
import re
import shutil
import tempfile
import tracemalloc
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO

import pytest

from transcript_otel.cli.read_commands import format_summary
from transcript_otel.exports.devflow.reader import read_devflow
from transcript_otel.exports.devflow.writer import write_devflow
from transcript_otel.exports.html.page import write_html
from transcript_otel.reading.digest import RunDigest
from transcript_otel.reading.reconstruct import read_records
from transcript_otel.reading.sources import open_run
from transcript_otel.reading.text import assistant_parts, compact_json, entry_text, shown_tool_output
from transcript_otel.sessions.files import find_sessions
from transcript_otel.sessions.importer import import_session

from helpers import ListRun
from requirements_switch import missing
from session_fixtures import SESSIONS

RUNS = sorted((Path(__file__).parent / "fixtures" / "runs").glob("*.jsonl"))
SUBAGENT_RUN = Path(__file__).parent / "fixtures" / "runs" / "claude-sdk-parallel-subagents.jsonl"
# The turns of a captured run the CLI itself ran more than one of (its results).
TURNS_RUN = {"claude-sdk-parallel-subagents": 3}
XSS = "</script><script>window.__pwned = 1; alert(1)</script> <img src=x onerror=alert(1)> <!-- <script>"
START = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
_CHUNK = re.compile(r'<script type="application/json" class="tx-chunk">(.*?)</script>', re.DOTALL)
_META = re.compile(r'<script type="application/json" id="tx-meta">(.*?)</script>', re.DOTALL)


class GeneratedSource:
    """A run made up as it is read: nothing held in memory."""

    def __init__(self, make: Callable[[], Iterator[dict[str, Any]]]) -> None:
        self._make = make

    def records(self) -> Iterator[dict[str, Any]]:
        return self._make()


def render(source: Any, **options: Any) -> tuple[str, int]:
    out = io.StringIO()
    count = write_html(source, out, **options)
    return out.getvalue(), count


def page_entries(page: str) -> list[dict[str, Any]]:
    return [entry for chunk in _CHUNK.findall(page) for entry in json.loads(chunk)]


def page_meta(page: str) -> dict[str, Any]:
    found = _META.search(page)
    assert found is not None
    meta: dict[str, Any] = json.loads(found.group(1))
    return meta


def header_field(page: str, field: str) -> tuple[str, str | None]:
    """(shown text, data-value) of a header fact."""
    found = re.search(rf'data-field="{re.escape(field)}"(?: data-value="([^"]*)")?[^>]*>([^<]*)<', page)
    assert found is not None, f"no header field {field}"
    value = html.unescape(found.group(1)) if found.group(1) is not None else None
    return html.unescape(found.group(2)), value


def shown_words(context: Mapping[str, Any]) -> tuple[str | None, str]:
    """(thinking, text) a reader should see for an entry: a tool result's output, an assistant
    message's text apart from its thinking blocks, any other entry's `entry_text`."""
    entry_type, detail = context["entry_type"], context["detail"]
    if entry_type == "tool_result":
        return None, shown_tool_output(detail)
    if entry_type == "assistant_message":
        thinking, text = assistant_parts(detail)
        return thinking, text if text or thinking is not None else entry_text(entry_type, detail)
    return None, entry_text(entry_type, detail)


def entry_contexts(path: Path) -> list[dict[str, Any]]:
    return [r["context"] for r in read_records(path) if r.get("event") == "transcript.entry"]


# -- building runs ------------------------------------------------------------------------


def record(event: str, context: dict[str, Any], at: datetime = START) -> dict[str, Any]:
    return {
        "timestamp": at.isoformat(),
        "level": "DEBUG",
        "logger": "transcript_otel",
        "event": event,
        "message": event,
        "context": context,
    }


class RunBuilder:
    """Records of one run, entry by entry, each a millisecond after the previous."""

    def __init__(self, prompt_name: str = "demo", adapter: str = "cli") -> None:
        self.prompt_name = prompt_name
        self.adapter = adapter
        self.at = START
        self.numbers: dict[str, int] = {}
        self.records = [record("transcript.start", self._envelope(run_id="r1"))]

    def _envelope(self, **extra: Any) -> dict[str, Any]:
        return {"prompt_name": self.prompt_name, "adapter": self.adapter, **extra}

    def entry(self, entry_type: str, detail: dict[str, Any], source: str = "main") -> RunBuilder:
        self.at += timedelta(milliseconds=1)
        number = self.numbers[source] = self.numbers.get(source, 0) + 1
        context = self._envelope(
            entry_type=entry_type,
            sequence_number=number,
            source=source,
            timestamp=self.at.isoformat(),
            session_id="s1",
            detail=detail,
        )
        self.records.append(record("transcript.entry", context, self.at))
        return self

    def stop(self) -> list[dict[str, Any]]:
        self.records.append(record("transcript.stop", self._envelope(run_id="r1"), self.at))
        return self.records


def multi_turn_run() -> list[dict[str, Any]]:
    """A preamble, two user turns (the second opened by two user messages), a Codex turn_started turn."""
    run = RunBuilder()
    run.entry("system_event", {"subtype": "meta", "text": "agent v1 starting"})
    run.entry("user_message", {"text": "first question"})
    run.entry("system_event", {"subtype": "turn_started"})  # the user message opened this turn
    run.entry("assistant_message", {"text": "first answer"})
    run.entry("token_usage", {"usage": {"input_tokens": 10, "output_tokens": 2}})
    run.entry("user_message", {"text": "the system prompt"})
    run.entry("user_message", {"text": "second question"})
    run.entry("tool_use", {"tool_use_id": "t1", "tool_name": "shell", "input": {"cmd": "ls"}})
    run.entry("tool_use", {"tool_use_id": "t1", "tool_name": "shell", "input": {"cmd": "ls"}}, "subagent:x")
    run.entry("tool_result", {"tool_use_id": "t1", "tool_name": "shell", "output": "sub.txt"}, "subagent:x")
    run.entry("tool_result", {"tool_use_id": "t1", "tool_name": "shell", "output": "a.txt", "is_error": True})
    run.entry("token_usage", {"usage": {"input_tokens": 30, "output_tokens": 4}})
    run.entry("system_event", {"subtype": "turn_started"})  # no user message: a new turn
    run.entry("thinking", {"text": "hmm"})
    run.entry("assistant_message", {"text": "third answer"})
    return run.stop()


# -- the page as written ----------------------------------------------------------------------


def assert_self_contained(page: str) -> None:
    markup = _META.sub("", _CHUNK.sub("", page))
    markup = re.sub(r"<noscript>.*?</noscript>", "", markup, flags=re.DOTALL)
    for tag in re.findall(r"<[a-zA-Z][^>]*>", markup):
        assert not re.search(r"\b(src|href|srcset|action|poster|data)\s*=", tag), tag
    for forbidden in ("<link", "<iframe", "<img", "<object", "<embed", "@import", "url("):
        assert forbidden not in markup, forbidden
    assert "default-src 'none'" in page


@pytest.mark.parametrize("path", RUNS, ids=[path.stem for path in RUNS])
def test_fixture_page_is_self_contained_and_holds_every_entry(path: Path) -> None:
    page, count = render(open_run(path))
    contexts = entry_contexts(path)
    assert count == len(contexts)
    assert page.startswith("<!DOCTYPE html>")
    assert page.rstrip().endswith("</html>")
    assert_self_contained(page)
    written = page_entries(page)
    assert len(written) == len(contexts)
    for entry, context in zip(written, contexts, strict=True):
        assert (entry["k"], entry["s"], entry["n"]) == (
            context["entry_type"],
            context["source"],
            context["sequence_number"],
        )
        thinking, words = shown_words(context)
        assert entry.get("th") == thinking
        assert entry["d"] == context["detail"]
        if words == compact_json(context["detail"]):  # no words but the detail's own JSON
            assert entry["xj"] == 1
        else:
            assert entry["x"] == words
            # The plain list for browsers without JavaScript holds the words too, escaped.
            assert html.escape(words[:200]) in page


@pytest.mark.parametrize("path", RUNS, ids=[path.stem for path in RUNS])
def test_fixture_header_matches_the_digest(path: Path) -> None:
    digest = RunDigest.of(open_run(path).records())
    page, _ = render(open_run(path))
    assert header_field(page, "status")[0] == digest.status
    assert header_field(page, "adapter")[0] == digest.adapter
    assert header_field(page, "prompt_name")[0] == digest.prompt_name
    assert header_field(page, "session_id")[0] == (digest.session_id or "\u2014")
    assert header_field(page, "total_entries")[1] == str(sum(digest.by_type.values()))
    assert header_field(page, "error_count")[1] == str(digest.error_count)
    assert header_field(page, "tool_calls")[1] == str(sum(t.calls for t in digest.tools.values()))
    assert header_field(page, "cost_usd")[1] == str(round(digest.cost_usd, 6))
    duration = header_field(page, "duration_s")[1]
    assert duration is not None
    assert float(duration) == pytest.approx(digest.duration_s)
    assert header_field(page, "started")[1] == digest.started.isoformat()  # type: ignore[union-attr]
    for name, count in digest.tokens.items():
        shown, value = header_field(page, f"tokens.{name}")
        assert value == str(count)
        assert shown == f"{count:,}"
    assert page_meta(page)["digest"] == json.loads(json.dumps(digest.as_dict()))


def test_fixture_numbers_are_the_runs_own() -> None:
    page, _ = render(open_run(SUBAGENT_RUN))
    # All the model served the main agent and its two subagents (100 of the input read from the
    # cache), the CLI's last total cost, two Agent calls and a Bash call in each subagent.
    assert header_field(page, "tokens.input")[0] == "7,400"
    assert header_field(page, "tokens.output")[0] == "210"
    assert header_field(page, "cost_usd")[0] == "$0.03342"
    assert header_field(page, "tool_calls")[0] == "4"
    failed, _ = render(open_run(RUNS[0].parent / "wink-0.27-codex-failed.jsonl"))
    assert header_field(failed, "status")[0] == "failed"
    assert "currently experiencing high demand" in failed  # what the Codex CLI says of an HTTP 500


def test_text_is_escaped_everywhere() -> None:
    run = RunBuilder(prompt_name="<b>bold</b>")
    run.entry("user_message", {"text": XSS})
    run.entry("tool_use", {"tool_use_id": "c1", "tool_name": "<i>tool</i>", "input": {"q": XSS}})
    run.entry("tool_result", {"tool_use_id": "c1", "tool_name": "<i>tool</i>", "output": XSS})
    run.entry("error", {"exception": {"type": "E", "message": XSS}})
    records = run.stop()
    page, count = render(ListRun(records), title="</title><script>alert(1)</script>")
    assert count == 4
    for chunk in _CHUNK.findall(page):
        assert "<" not in chunk  # no text can end the data block or open a comment in it
    assert "<script>alert" not in page
    assert "<img" not in page
    assert "<b>bold" not in page
    assert "<i>tool" not in page
    assert "&lt;/title&gt;&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert html.escape(XSS) in page  # the no-script list
    assert page_entries(page)[0]["x"] == XSS
    assert page.count("<script>") == 1  # only the page's own script runs


def test_page_script_is_allowed_by_its_policy_and_nothing_else_is() -> None:
    page, _ = render(ListRun(multi_turn_run()))
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert len(scripts) == 1
    digest = base64.b64encode(hashlib.sha256(scripts[0].encode()).digest()).decode()
    policy = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert policy is not None
    assert f"script-src 'sha256-{digest}'" in policy.group(1)
    assert "default-src 'none'" in policy.group(1)


def test_empty_run_says_so() -> None:
    page, count = render(ListRun([]))
    assert count == 0
    assert "This run has no records" in page
    assert page.rstrip().endswith("</html>")
    assert page_entries(page) == []


def test_run_with_only_a_start_says_so() -> None:
    run = RunBuilder(prompt_name="just-started")
    page, count = render(ListRun(run.records))
    assert count == 0
    assert "No entries were recorded in this run" in page
    assert "it may still be running" in page
    assert header_field(page, "status")[0] == "incomplete"
    assert header_field(page, "prompt_name")[0] == "just-started"


def test_malformed_entries_and_capture_errors_are_shown_not_dropped() -> None:
    run = RunBuilder()
    run.entry("user_message", {"text": "hello"})
    bad = dict(run.records[-1]["context"], sequence_number="two", detail={"text": "bad number"})
    run.records.append(record("transcript.entry", bad))
    run.records.append({"event": "transcript.entry", "context": "not an object"})
    run.records.append(record("transcript.error", {"error": "sink failed: disk full", "sink": "JsonlMirror"}))
    run.entry("unknown", {"parse_error": "not JSON", "line": "{oops"})
    page, count = render(ListRun(run.stop()))
    assert count == 4  # the capture error is a notice, not an entry
    kinds = [entry["k"] for entry in page_entries(page)]
    assert kinds == ["user_message", "malformed", "malformed", "transcript.error", "unknown"]
    written = page_entries(page)
    assert "bad number" in written[1]["r"]
    assert written[3]["x"] == "sink failed: disk full"
    assert "(unreadable: not JSON)" in written[4]["x"]
    assert [entry["t"] for entry in written] == [1] * 5  # in the turn they came in, not before it


def test_large_run_is_written_streaming_with_bounded_memory(large_run: LargeRun) -> None:
    assert large_run.count == LARGE_ENTRIES
    assert large_run.size < LARGE_ENTRIES * 1200  # a few hundred bytes an entry
    # What the writer holds at its peak is a chunk of entries, far below the page.
    assert large_run.peak < large_run.size / 20
    assert large_run.peak < 16 * 1024 * 1024


# -- a large run, written once for the module ----------------------------------------------------

LARGE_ENTRIES = 100_000


class CountingWriter(io.StringIO):
    """A text sink that keeps only how many bytes were written, and passes them on to `copy_to`."""

    def __init__(self, copy_to: TextIO | None = None) -> None:
        super().__init__()
        self.size = 0
        self._copy_to = copy_to

    def write(self, text: str) -> int:
        self.size += len(text.encode("utf-8"))
        if self._copy_to is not None:
            self._copy_to.write(text)
        return len(text)


def _large_cycle(cycle: int) -> list[tuple[str, dict[str, Any], str]]:
    """The entries of one prompt of the long run: 44 (46 with a subagent, one prompt in ten)."""
    steps: list[tuple[str, dict[str, Any], str]] = [
        ("user_message", {"text": f"Task {cycle}: please look at module {cycle}."}, "main"),
        ("thinking", {"text": "Plan: read the module, run the tests, report. " * 2}, "main"),
        ("assistant_message", {"text": f"Working on task {cycle}; reading the code first."}, "main"),
    ]
    for call in range(20):
        call_id = f"c{cycle}-{call}"
        steps.append(
            ("tool_use", {"tool_use_id": call_id, "tool_name": "shell", "input": {"cmd": "ls"}}, "main")
        )
        result = {
            "tool_use_id": call_id,
            "tool_name": "shell",
            "output": "a.py\nb.py\n",
            "is_error": call % 7 == 0,
        }
        steps.append(("tool_result", result, "main"))
    if cycle % 10 == 0:
        steps.append(("user_message", {"text": "Sub-task: count files"}, "subagent:sub"))
        steps.append(("assistant_message", {"text": "12 files"}, "subagent:sub"))
    steps.append(("token_usage", {"usage": {"input_tokens": 1000, "output_tokens": 200}}, "main"))
    return steps


# Ten prompts' entries, built once and repeated: the run's records are made as they are read,
# with little allocation, so that tracing the writer's memory stays quick.
_LARGE_TEMPLATES: list[tuple[str, dict[str, Any], str]] = [
    step for cycle in range(10) for step in _large_cycle(cycle)
]


def large_records() -> Iterator[dict[str, Any]]:
    """A long run: prompts of 44 entries with tools, thinking, usage and a subagent now and then."""
    envelope = {"prompt_name": "long-run", "adapter": "cli", "session_id": "s1"}
    base = {"level": "DEBUG", "logger": "transcript_otel", "message": "transcript.entry"}
    start_us = int(START.timestamp() * 1_000_000)
    yield record("transcript.start", {**envelope, "run_id": "r1"})
    numbers: dict[str, int] = {}
    stamp = START.isoformat()
    for index in range(LARGE_ENTRIES):
        entry_type, detail, source = _LARGE_TEMPLATES[index % len(_LARGE_TEMPLATES)]
        number = numbers[source] = numbers.get(source, 0) + 1
        if index % 1000 == 0:
            stamp = datetime.fromtimestamp((start_us + index * 1000) / 1e6, UTC).isoformat()
        context = {
            **envelope,
            "entry_type": entry_type,
            "sequence_number": number,
            "source": source,
            "timestamp": stamp,
            "detail": detail,
        }
        yield {**base, "timestamp": stamp, "event": "transcript.entry", "context": context}
    yield record("transcript.stop", {**envelope, "run_id": "r1"})


class LargeRun:
    def __init__(self, path: Path, count: int, size: int, peak: int) -> None:
        self.path, self.count, self.size, self.peak = path, count, size, peak


@pytest.fixture(scope="module")
def large_run(tmp_path_factory: pytest.TempPathFactory) -> LargeRun:
    path = tmp_path_factory.mktemp("large") / "large.html"
    source = GeneratedSource(large_records)
    with open(path, "w", encoding="utf-8") as handle:
        writer = CountingWriter(handle)
        tracemalloc.start()
        try:
            count = write_html(source, writer)
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    return LargeRun(path, count, writer.size, peak)


# -- in a browser ---------------------------------------------------------------------------------


def _browser_or_reason() -> tuple[str, str] | str:
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "selenium is not installed (pip install selenium)"
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        return "Chromium or chromedriver is not installed (`make browser`)"
    return chromium, driver


def _chromium(*, javascript: bool = True) -> Iterator[Any]:
    """A headless Chromium driven by chromedriver, with a fresh profile (skips the test if missing)."""
    found = _browser_or_reason()
    if isinstance(found, str):
        missing(found)
    chromium, chromedriver = found
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    profile = tempfile.mkdtemp(prefix="chromium-profile-")
    for flag in (
        "--headless",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--window-size=1280,1000",
        f"--user-data-dir={profile}",
    ):
        options.add_argument(flag)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        options.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(options=options, service=Service(chromedriver))
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    yield from _chromium()


class Page:
    """A page open in the browser, and what its console said while it loaded."""

    def __init__(self, driver: Any, path: Path) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver = driver
        driver.get_log("browser")  # drop what earlier pages logged
        driver.get(path.as_uri())
        WebDriverWait(driver, 30).until(
            lambda d: d.execute_script(
                "return document.documentElement.dataset.ready === 'true'"
                " || !!document.querySelector('.failure')"
            )
        )
        self.console = driver.get_log("browser")

    def errors(self) -> list[dict[str, Any]]:
        return [
            entry for entry in self.driver.get_log("browser") + self.console if entry["level"] == "SEVERE"
        ]

    def js(self, script: str, *args: Any) -> Any:
        return self.driver.execute_script(script, *args)

    def text(self, selector: str = "#timeline") -> str:
        return str(self.js("return document.querySelector(arguments[0]).textContent", selector))

    def count(self, selector: str) -> int:
        return int(self.js("return document.querySelectorAll(arguments[0]).length", selector))

    def click(self, label: str) -> None:
        self.js(
            "for (const b of document.querySelectorAll('button'))"
            " if (b.textContent === arguments[0]) b.click()",
            label,
        )


def open_page(browser: Any, tmp_path: Path, source: Any, name: str = "run") -> Page:
    path = tmp_path / f"{name}.html"
    with open(path, "w", encoding="utf-8") as handle:
        write_html(source, handle)
    return Page(browser, path)


@pytest.mark.parametrize("path", RUNS, ids=[path.stem for path in RUNS])
def test_fixture_page_shows_the_run_in_chromium(browser: Any, tmp_path: Path, path: Path) -> None:
    page = open_page(browser, tmp_path, open_run(path))
    assert page.count(".failure") == 0
    page.click("Expand tool calls")
    page.click("Show thinking")
    assert page.errors() == []
    assert page.js("return performance.getEntriesByType('resource').length") == 0  # loaded nothing
    contexts = entry_contexts(path)
    shown = page.text()
    for context in contexts:
        thinking, words = shown_words(context)
        if context["entry_type"] == "token_usage":  # summed in its turn's line, its row hidden
            assert words[:80] not in shown
        elif context["detail"].get("subtype") == "turn_started":  # the turn's heading itself
            continue
        elif words != compact_json(context["detail"]):
            assert words[:80] in shown, (context["entry_type"], words)
        if thinking is not None:
            assert thinking[:80] in shown
    uses = sum(1 for c in contexts if c["entry_type"] == "tool_use")
    assert page.count("details.tool-call") >= uses
    assert page.count("details.tool-call[open]") == page.count("details.tool-call")
    for kind in ("unknown", "error", "thinking", "user_message"):
        assert page.count(f'.entry[data-kind="{kind}"]') == sum(
            1 for c in contexts if c["entry_type"] == kind
        )
    # Every fixture is one prompt, and so one turn; the CLI with background subagents ran a
    # turn of its own as each finished.
    assert page.text('[data-field="turns"]') == str(TURNS_RUN.get(path.stem, 1))
    assert page.count("details.turn[data-turn='1']") == 1


def test_subagents_are_lanes_beside_the_main_one(browser: Any, tmp_path: Path) -> None:
    page = open_page(browser, tmp_path, open_run(SUBAGENT_RUN))
    lanes = page.js("return [...document.querySelectorAll('.lane-head[data-lane]')].map(h => h.dataset.lane)")
    assert lanes == ["main", "subagent:toolu_agent_a", "subagent:toolu_agent_b"]
    heads = page.text(".lane-heads")
    assert "general-purpose · counter task" in heads
    assert "general-purpose · reader task" in heads
    # Each subagent's entries sit in its own column of the turn's grid, one row per moment.
    columns = page.js(
        "const out = {}; for (const cell of document.querySelectorAll('.cell[data-lane]')) {"
        " const row = cell.parentElement; out[cell.dataset.lane] = out[cell.dataset.lane] || new Set();"
        " out[cell.dataset.lane].add([...row.children].indexOf(cell)); }"
        " return Object.fromEntries(Object.entries(out).map(([k, v]) => [k, [...v]]));"
    )
    assert columns == {"main": [1], "subagent:toolu_agent_a": [2], "subagent:toolu_agent_b": [3]}
    rows = page.js("return [...document.querySelectorAll('.row')].map(r => r.offsetTop)")
    assert rows == sorted(rows)  # time runs down the page, across all lanes
    bash = page.js(
        "return document.querySelector("
        "'.cell[data-lane=\"subagent:toolu_agent_a\"] details.tool-call').textContent"
    )
    assert "Bash" in bash
    assert "echo 3" in bash
    assert "ok" in bash
    assert page.errors() == []


def test_turns_tool_pairs_and_usage_per_turn(browser: Any, tmp_path: Path) -> None:
    page = open_page(browser, tmp_path, ListRun(multi_turn_run()))
    assert page.text('[data-field="turns"]') == "3"
    turns = page.js("return [...document.querySelectorAll('details.turn')].map(t => t.dataset.turn)")
    assert turns == ["0", "1", "2", "3"]
    names = page.js("return [...document.querySelectorAll('.turn-name')].map(t => t.textContent)")
    assert names == ["Before the first turn", "Turn 1", "Turn 2", "Turn 3"]
    stats = page.js("return [...document.querySelectorAll('.turn-stats')].map(t => t.textContent)")
    assert "10 in" in stats[1]
    assert "2 out" in stats[1]
    assert "30 in" in stats[2]
    assert "2 tool calls (1 failed)" in stats[2]
    assert "tokens" not in stats[3]
    turn2 = "details.turn[data-turn='2']"
    assert page.count(f"{turn2} details.tool-call") == 2  # the main call and the subagent's, one card each
    main_call = page.js(
        f"return document.querySelector(\"{turn2} .cell[data-lane='main'] details.tool-call\").textContent"
    )
    assert "failed" in main_call
    assert "a.txt" in main_call
    sub_call = page.js(
        f"return document.querySelector(\"{turn2} .cell[data-lane='subagent:x'] details.tool-call\")"
        ".textContent"
    )
    assert "ok" in sub_call
    assert "sub.txt" in sub_call
    assert "a.txt" not in sub_call
    assert page.count("details.thinking:not([open])") == 1  # thinking starts folded
    assert page.errors() == []


def test_filter_shows_only_matching_entries(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    page = open_page(browser, tmp_path, ListRun(multi_turn_run()))
    rows = page.count(".row")
    browser.find_element(By.CSS_SELECTOR, "#toolbar input[type=search]").send_keys("second question")
    WebDriverWait(browser, 10).until(lambda _: page.count(".row") == 1)
    assert "second question" in page.text()
    browser.find_element(By.CSS_SELECTOR, "#toolbar input[type=search]").clear()
    page.js("const s = document.querySelector('#toolbar input'); s.dispatchEvent(new Event('input'))")
    WebDriverWait(browser, 10).until(lambda _: page.count(".row") == rows)
    assert page.errors() == []


def test_hostile_text_is_shown_as_text_in_chromium(browser: Any, tmp_path: Path) -> None:
    from selenium.common.exceptions import NoAlertPresentException

    run = RunBuilder(prompt_name=XSS)
    run.entry("user_message", {"text": XSS})
    run.entry("assistant_message", {"text": "<img src=x onerror=alert(1)>"})
    run.entry("tool_use", {"tool_use_id": "c1", "tool_name": "<b>x</b>", "input": {"q": XSS}})
    run.entry("tool_result", {"tool_use_id": "c1", "output": XSS})
    page = open_page(browser, tmp_path, ListRun(run.stop()))
    with pytest.raises(NoAlertPresentException):
        browser.switch_to.alert.text  # noqa: B018
    assert page.js("return window.__pwned") is None
    assert page.count("img") == 0
    assert page.count("#timeline b + b") == 0
    assert (
        page.js("return document.querySelector('.entry[data-kind=\"user_message\"] .text').textContent")
        == XSS
    )
    assert page.text("h1") == XSS
    assert page.errors() == []


def test_empty_runs_open_in_chromium(browser: Any, tmp_path: Path) -> None:
    empty = open_page(browser, tmp_path, ListRun([]), "empty")
    assert "This run has no records" in empty.text("#run")
    assert "No entries were recorded" in empty.text()
    assert empty.errors() == []
    started = open_page(browser, tmp_path, ListRun(RunBuilder().records), "started")
    assert "No entries were recorded" in started.text("#run")
    assert started.text('[data-field="turns"]') == "0"
    assert started.errors() == []


def test_large_run_opens_in_chromium_and_renders_as_it_scrolls(browser: Any, large_run: LargeRun) -> None:
    from selenium.webdriver.support.ui import WebDriverWait

    page = Page(browser, large_run.path)
    assert page.errors() == []
    first = page.count(".row")
    assert 0 < first < 5000  # a first batch, not 100,000 rows
    assert "of" in page.text("#more")
    turns = int(page.text('[data-field="turns"]').replace(",", ""))
    prompts = sum(
        1
        for r in large_records()
        if r["event"] == "transcript.entry"
        and r["context"]["entry_type"] == "user_message"
        and r["context"]["source"] == "main"
    )
    assert turns == prompts
    page.js("window.scrollTo(0, document.body.scrollHeight)")
    WebDriverWait(browser, 30).until(lambda _: page.count(".row") > first)
    page.js(
        "const s = document.querySelector('#toolbar select'); s.value = arguments[0];"
        " s.dispatchEvent(new Event('change'))",
        str(turns),
    )
    WebDriverWait(browser, 30).until(lambda _: page.count(f"details.turn[data-turn='{turns}']") == 1)
    assert page.errors() == []


# -- the figures agree with each other, on imported real sessions (issue 47 item 10) ---------------


def imported(scenario: str, directory: Path) -> Path:
    (session,) = find_sessions([SESSIONS / scenario])
    return import_session(session, directory).path


def main_turn_spans(path: Path) -> int:
    """The turns the import counted: its `chat` spans that are children of the run's root span."""
    spans = [r["context"] for r in read_records(path) if r.get("event") == "transcript.span"]
    roots = {span["span_id"] for span in spans if span.get("parent_span_id") is None}
    return len(
        {
            span["attributes"]["transcript.turn"]
            for span in spans
            if span.get("parent_span_id") in roots and "transcript.turn" in span["attributes"]
        }
    )


def turn_lines(page: Page) -> list[str]:
    """Each turn's summary line (not that of what came before the first)."""
    found = page.js(
        "return [...document.querySelectorAll('details.turn:not([data-turn=\"0\"]) .turn-stats')]"
        ".map(t => t.textContent)"
    )
    return list(found)


@pytest.mark.parametrize("scenario", ["claude_code/interactive_compacted", "claude_code/background_subagent"])
def test_summary_and_the_page_say_the_same_turns_and_cost(tmp_path: Path, scenario: str) -> None:
    run = imported(scenario, tmp_path)
    digest = RunDigest.of(open_run(run).records())
    summary = format_summary(digest)
    page, _ = render(open_run(run))
    turns = header_field(page, "turns")[0]
    assert turns == str(main_turn_spans(run)) == str(digest.turns)
    assert f"\nturns     {turns}\n" in summary
    cost = header_field(page, "cost_usd")[0]
    assert summary.split("\ntokens")[1].split("\n")[0].endswith(f" · {cost}")


def test_every_report_takes_a_calls_duration_from_one_rule(tmp_path: Path) -> None:
    """A real Codex run under weakincentives: its items report how long they took (`durationMs`);
    the tools table, each call's tag and devflow's tool results all say that."""
    path = RUNS[0].parent / "wink-0.27-codex-real-demo.jsonl"
    table = sorted(
        d for stats in RunDigest.of(open_run(path).records()).tools.values() for d in stats.durations_ms
    )
    page, _ = render(open_run(path))
    assert sorted(entry["ms"] for entry in page_entries(page) if "ans" in entry) == table
    devflow = read_devflow(write_devflow(open_run(path), tmp_path))
    results = sorted(turn.duration_ms for turn in devflow.turns if turn.role == "tool_result")
    assert results == [round(took) for took in table]
    assert 0.0 in table  # a command that reported 0 ms, not the time between its lines


def test_a_calls_tag_and_the_tools_table_say_the_same_duration(browser: Any, tmp_path: Path) -> None:
    """A background subagent's `Agent` call ends when the CLI says it did, not at its launch notice."""
    run = imported("claude_code/background_subagent", tmp_path)
    (took,) = RunDigest.of(open_run(run).records()).tools["Agent"].durations_ms
    assert took > 100  # the subagent's run, not the 27 ms its launch notice took
    page = open_page(browser, tmp_path, open_run(run))
    tag = page.js("return document.querySelector('details.tool-call .badge').textContent")
    assert tag == f"\u2713 ok \u00b7 {round(took)} ms"
    row = page.js(
        "return [...document.querySelector('tr[data-tool=\"Agent\"]').cells].map(c => c.textContent)"
    )
    assert row[4] == row[5] == f"{took:,.1f}"
    page.click("Expand tool calls")
    card = page.text("details.tool-call")
    assert "Async agent launched" in card  # the launch notice, inside its call's card
    assert page.count('.entry[data-kind="tool_result"]') == 0  # no card of its own
    assert page.errors() == []


@pytest.mark.parametrize(
    "scenario",
    [
        "claude_code/interactive_compacted",  # the /compact is a turn of its own
        "claude_code/background_subagent",  # so is the one the CLI starts when the subagent ends
        "claude_code/interactive_subagents",
        "codex/compacted",
        "codex/interactive_interrupted",
    ],
)
def test_the_header_counts_the_turns_the_import_ran(browser: Any, tmp_path: Path, scenario: str) -> None:
    run = imported(scenario, tmp_path)
    turns = main_turn_spans(run)
    page = open_page(browser, tmp_path, open_run(run))
    assert page.text('[data-field="turns"]') == str(turns)
    sections = page.js("return [...document.querySelectorAll('details.turn')].map(t => t.dataset.turn)")
    assert [number for number in sections if number != "0"] == [str(n) for n in range(1, turns + 1)]
    assert page.errors() == []


def test_a_cost_is_on_its_turn_only_when_it_is_that_turns(browser: Any, tmp_path: Path) -> None:
    # Two `claude -p` runs of one session, one turn each: each turn its own cost.
    resumed = open_page(browser, tmp_path, open_run(imported("claude_code/resumed", tmp_path / "r")), "r")
    costs = [line.split("$")[1].split(" ")[0] for line in turn_lines(resumed)]
    assert costs == ["0.0038", "0.00424"]
    assert resumed.text('[data-field="cost_usd"]') == "$0.00804"
    # One `claude -p` run of two turns, one report for both: the run's cost, on the header only.
    both = open_page(
        browser, tmp_path, open_run(imported("claude_code/background_subagent", tmp_path / "b")), "b"
    )
    assert len(turn_lines(both)) == 2
    assert not any("$" in line for line in turn_lines(both))
    assert both.text('[data-field="cost_usd"]') == "$0.01878"


def test_codex_turns_are_headed_by_their_prompts(browser: Any, tmp_path: Path) -> None:
    page = open_page(browser, tmp_path, open_run(imported("codex/interactive_two_prompts", tmp_path)))
    headings = page.js(
        "return [...document.querySelectorAll('details.turn[data-turn]:not([data-turn=\"0\"]) .turn-opener')]"
        ".map(t => t.textContent)"
    )
    assert headings == ["\U0001f464 PLAIN-SCENARIO: please do the task.", "\U0001f464 And now?"]
    assert "turn started" not in page.text()
    assert page.errors() == []


def test_usage_is_in_the_turns_line_and_no_card_shows_json(browser: Any, tmp_path: Path) -> None:
    page = open_page(browser, tmp_path, open_run(imported("codex/tour", tmp_path)))
    assert page.count('.entry[data-kind="token_usage"]') == 0
    (line,) = turn_lines(page)
    assert "tokens 21,500 in" in line  # the six reports' sum, as the header counts
    assert page.text('[data-field="tokens.input"]') == "21,500"
    faces = page.js(
        "return [...document.querySelectorAll('.entry')].map(card => {"
        " const face = card.cloneNode(true); face.querySelectorAll('details').forEach(d => d.remove());"
        " return face.textContent; })"
    )
    assert faces
    assert not [face for face in faces if '{"' in face]
    page.click("Expand tool calls")
    assert "searched: counting lines in a file" in page.text()
    assert page.errors() == []


def shown_tokens(line: str) -> tuple[int, int]:
    """The input and output tokens a turn's line (or the page's last usage line) shows."""
    counts = dict.fromkeys(("in", "out"), 0)
    for count, word in re.findall(r"([\d,]+) (in|out)(?= \u00b7|$)", line):
        counts[word] += int(count.replace(",", ""))
    return counts["in"], counts["out"]


@pytest.mark.parametrize("scenario", ["claude-sdk-parallel-subagents", "claude_code/background_subagent"])
def test_the_turns_tokens_add_up_to_the_header(browser: Any, tmp_path: Path, scenario: str) -> None:
    """Every token of the header is on exactly one turn's line, or on the last line that says the
    session counts it beyond all turns (as devflow's turns count them): a subagent's calls too."""
    run = SUBAGENT_RUN if scenario == SUBAGENT_RUN.stem else imported(scenario, tmp_path)
    page = open_page(browser, tmp_path, open_run(run))
    page.click("Show all")
    lines = page.js(
        "return [...document.querySelectorAll('details.turn .turn-stats span, .usage-rest')]"
        ".map(s => s.textContent).filter(t => t.includes('tokens '))"
    )
    shown = [shown_tokens(line.split("tokens ", 1)[1]) for line in lines]
    header = tuple(
        int(page.text(f'[data-field="tokens.{name}"]').replace(",", "")) for name in ("input", "output")
    )
    assert (sum(tokens[0] for tokens in shown), sum(tokens[1] for tokens in shown)) == header
    digest = RunDigest.of(open_run(run).records())
    assert header == (digest.tokens["input"], digest.tokens["output"])
    # The last line is devflow's last turn, where the session counts more than its turns.
    rest = (
        [shown_tokens(page.text(".usage-rest").split("tokens ", 1)[1])] if page.count(".usage-rest") else []
    )
    devflow = read_devflow(write_devflow(open_run(run), tmp_path))
    assert rest == [
        (turn.tokens_in, turn.tokens_out)
        for turn in devflow.turns
        if turn.content.startswith("[usage] in the session's total")
    ]
    assert page.errors() == []


@pytest.fixture(scope="module")
def browser_without_javascript() -> Iterator[Any]:
    yield from _chromium(javascript=False)


def test_page_lists_the_entries_without_javascript(browser_without_javascript: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    driver = browser_without_javascript
    path = tmp_path / "run.html"
    with open(path, "w", encoding="utf-8") as handle:
        write_html(open_run(SUBAGENT_RUN), handle)
    driver.get(path.as_uri())
    items = [item.text for item in driver.find_elements(By.CSS_SELECTOR, "ol.nojs li")]
    contexts = entry_contexts(SUBAGENT_RUN)
    assert len(items) == len(contexts)
    for item, context in zip(items, contexts, strict=True):
        assert shown_words(context)[1][:60] in item
        assert context["source"] in item
    assert driver.find_element(By.CSS_SELECTOR, '[data-field="status"]').text == "completed"
    assert "JavaScript is off" in driver.find_element(By.ID, "timeline").text
