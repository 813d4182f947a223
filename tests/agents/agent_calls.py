"""How many Python calls transcript-otel makes on the agent's thread per native event.

    <python> tests/agents/agent_calls.py PATH --out RESULT.json

Runs one harness path, instrumented by `transcript_otel.configure()` (JSONL mirror, no
backend), and counts on the thread that runs the agent, during one evaluation after a
warm-up, the work of our package: every function of ours that starts there, and every call
made from our code (to any function, Python or C). One extra `json.dumps` per notification
is one more call per notification. The count is of work, not time, so it is the same on a
busy machine and an idle one: `tests/test_agent_thread_budget.py` holds it against a budget.

Paths (each a way users run their agents; see `PATHS`):

* `wink-codex`: weakincentives' `CodexAppServerAdapter.evaluate()` over the 2,000-notification
  turn of `examples/fake_agents/fake_codex.py` (scenario `bulk`); an event is a line the
  client reads from the app-server;
* `wink-claude`: weakincentives' `ClaudeAgentSDKAdapter.evaluate()` on the scripted CLI
  `examples/fake_agents/fake_claude.py` (scenario `rich`; weakincentives 0.25 reads no
  entries from the real CLI, see tests/test_real_claude_code.py); an event is a message
  claude-agent-sdk parses;
* `wink-acp`: weakincentives' `OpenCodeACPAdapter.evaluate()` on the real `opencode acp`
  against the scripted model (scenario `shell`, `tests/agents/wink_acp.py`); an event is a
  session update the ACP client receives;
* `sdk-query`, `sdk-client`: claude-agent-sdk's `query()` and `ClaudeSDKClient` on the real
  Claude Code CLI against the scripted model (scenario `tools`); an event is a message
  claude-agent-sdk parses.

Writes `{"path", "calls", "events", "entries", "python", "busiest"}`: `entries` is what the
counted run mirrored, `busiest` the functions of ours with the most calls. Counted with
`sys.monitoring` on Python 3.12+, `sys.setprofile` before (which sees the same calls; budgets
are kept for 3.13).
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import os
import sys
import tempfile
import threading
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import CodeType, FrameType
from typing import Any, Final

HERE = Path(__file__).resolve().parent
EXAMPLES = HERE.parent.parent / "examples"
sys.path[:0] = [str(HERE), str(EXAMPLES), str(EXAMPLES / "fake_agents"), str(EXAMPLES / "model_servers")]

PATHS: Final = ("wink-codex", "wink-claude", "wink-acp", "sdk-query", "sdk-client")
# The functions whose calls are the native events: a line the Codex client reads, a message
# claude-agent-sdk parses.
CODEX_EVENT: Final = "CodexAppServerClient._try_parse"
CLAUDE_EVENT: Final = "parse_message"
ACP_EVENT: Final = "ACPClient.session_update"
EVENTS: Final = {"wink-codex": CODEX_EVENT, "wink-acp": ACP_EVENT}
INSTALLED_CLAUDE_CLI: Final = (
    HERE.parent.parent / ".agents" / "claude-code" / "node_modules" / ".bin" / "claude"
)
INSTALLED_OPENCODE_CLI: Final = (
    HERE.parent.parent / ".agents" / "opencode" / "node_modules" / ".bin" / "opencode"
)


class CallCounter:
    """Counts, on the thread that made it, calls of our code and calls made from it.

    `package`: the folder whose code is ours; `event`: the qualified name of a function
    outside it whose calls (on any thread) are counted as events."""

    def __init__(self, package: str, event: str) -> None:
        self.package = package
        self.event = event
        self.calls = 0
        self.events = 0
        # Where the calls are: `module:function` of our code started, or making a call.
        self.by_function: Counter[CodeType] = Counter()
        self._thread = threading.get_ident()
        self._ours: dict[CodeType, bool] = {}

    def busiest(self, count: int) -> dict[str, int]:
        """The `count` functions of ours with the most calls: started, or made from them."""
        return {
            f"{Path(code.co_filename).relative_to(self.package).with_suffix('')}:{code.co_qualname}": calls
            for code, calls in self.by_function.most_common(count)
        }

    def _is_ours(self, code: CodeType) -> bool:
        ours = self._ours.get(code)
        if ours is None:
            ours = self._ours[code] = code.co_filename.startswith(self.package)
        return ours

    def _is_event(self, code: CodeType) -> bool:
        return code.co_qualname == self.event and "transcript_otel" not in code.co_filename

    @contextmanager
    def counting(self) -> Iterator[CallCounter]:
        if sys.version_info >= (3, 12):
            with self._monitoring():
                yield self
        else:
            with self._profiling():
                yield self

    @contextmanager
    def _monitoring(self) -> Iterator[None]:
        monitoring: Any = getattr(sys, "monitoring")  # noqa: B009  (3.12+; mypy checks for 3.11)
        tool = monitoring.PROFILER_ID
        monitoring.use_tool_id(tool, "transcript-otel agent calls")
        disable = monitoring.DISABLE

        def started(code: CodeType, offset: int) -> Any:
            if self._is_ours(code):
                if threading.get_ident() == self._thread:
                    self.calls += 1
                    self.by_function[code] += 1
                return None
            if self._is_event(code):
                self.events += 1
                return None
            return disable  # never ours, never an event: not reported again

        def called(code: CodeType, offset: int, callee: object, arg0: object) -> Any:
            if not self._is_ours(code):
                return disable
            if threading.get_ident() == self._thread:
                self.calls += 1
                self.by_function[code] += 1
            return None

        monitoring.register_callback(tool, monitoring.events.PY_START, started)
        monitoring.register_callback(tool, monitoring.events.CALL, called)
        monitoring.set_events(tool, monitoring.events.PY_START | monitoring.events.CALL)
        try:
            yield
        finally:
            monitoring.set_events(tool, 0)
            monitoring.register_callback(tool, monitoring.events.PY_START, None)
            monitoring.register_callback(tool, monitoring.events.CALL, None)
            monitoring.free_tool_id(tool)

    @contextmanager
    def _profiling(self) -> Iterator[None]:
        # `sys.setprofile` sees this thread only; events on others are counted by `threading.setprofile`.
        def on_this_thread(frame: FrameType, event: str, arg: object) -> None:
            code = frame.f_code
            if event == "call":
                caller = frame.f_back
                if self._is_ours(code):
                    self.calls += 1
                    self.by_function[code] += 1
                if caller is not None and self._is_ours(caller.f_code):
                    self.calls += 1
                    self.by_function[caller.f_code] += 1
                elif self._is_event(code):
                    self.events += 1
            elif event == "c_call" and self._is_ours(code):
                self.calls += 1
                self.by_function[code] += 1

        def on_other_threads(frame: FrameType, event: str, arg: object) -> None:
            if event == "call" and self._is_event(frame.f_code):
                self.events += 1

        threading.setprofile(on_other_threads)
        sys.setprofile(on_this_thread)
        try:
            yield
        finally:
            sys.setprofile(None)
            threading.setprofile(None)


def _package_folder() -> str:
    import transcript_otel

    return str(Path(transcript_otel.__file__).resolve().parent) + os.sep


def _steady_pipeline() -> None:
    """The agent's thread wakes the writer, and measures the backlog, once the writer falls 256
    entries behind: how often depends on the machine's pace, not on our code, so it is left out."""
    from transcript_otel.capture import emitter

    vars(emitter)["WAKE_THRESHOLD"] = sys.maxsize


# -- the paths ----------------------------------------------------------------------------------


def _wink_codex(work: Path) -> Callable[[], object]:
    from weakincentives.adapters.codex_app_server import CodexAppServerAdapter, CodexAppServerClientConfig
    from weakincentives.runtime import Session

    import codex_agent

    os.environ["FAKE_SCENARIO"] = "bulk"
    launcher = codex_agent.write_launcher(work, "codex", EXAMPLES / "fake_agents" / "fake_codex.py")

    def evaluate() -> object:
        workspace = Path(tempfile.mkdtemp(dir=work))
        adapter = CodexAppServerAdapter(
            client_config=CodexAppServerClientConfig(codex_bin=launcher, cwd=str(workspace))
        )
        prompt = codex_agent.build_prompt("calls-codex", "Call the echo tool with the text 'hi', then reply.")
        return adapter.evaluate(prompt, session=Session())

    return evaluate


def _wink_driven(work: Path, adapter: str, scenario: str) -> Callable[[], object]:
    """One `wink_driver` scenario of `adapter`, evaluated each time."""
    import wink_driver

    def evaluate() -> object:
        record = wink_driver.run_one(adapter, scenario, work, "counted")
        if not record["ok"]:
            raise RuntimeError(f"the weakincentives {adapter} run failed: {record['error']}")
        return record

    return evaluate


def _wink_acp(work: Path) -> Callable[[], object]:
    import wink_acp

    if not INSTALLED_OPENCODE_CLI.exists():
        raise RuntimeError(f"OpenCode is not installed at {INSTALLED_OPENCODE_CLI} (`make agents`)")
    os.environ[wink_acp.OPENCODE_CLI] = str(INSTALLED_OPENCODE_CLI)
    return _wink_driven(work, "opencode_acp", "shell")


def _sdk(work: Path, client: bool) -> Callable[[], object]:
    import claude_agent_sdk
    import claude_offline

    # As tests/agents/claude_code.cli_path() finds it (that module needs pytest; this venv has none).
    cli = Path(os.environ.get("TRANSCRIPT_OTEL_CLAUDE_CLI") or INSTALLED_CLAUDE_CLI)
    if not cli.exists():
        raise RuntimeError(f"the real Claude Code CLI is not installed at {cli} (`make agents`)")
    fields = {field.name for field in dataclasses.fields(claude_agent_sdk.ClaudeAgentOptions)}
    if "cli_path" not in fields:
        os.environ["PATH"] = f"{cli.parent}{os.pathsep}{os.environ.get('PATH', '')}"

    async def drive(options: Any, prompt: str) -> None:
        if client:
            async with claude_agent_sdk.ClaudeSDKClient(options=options) as session:
                await session.query(prompt)
                async for _ in session.receive_response():
                    pass
        else:
            async for _ in claude_agent_sdk.query(prompt=prompt, options=options):
                pass

    def run() -> object:
        folder = Path(tempfile.mkdtemp(dir=work))
        home, cwd = folder / "home", folder / "work"
        home.mkdir()
        cwd.mkdir()
        with claude_offline.model_server("tools", folder) as model:
            given: dict[str, Any] = {
                "env": claude_offline.offline_environment(model, home),
                "cwd": str(cwd),
                "permission_mode": "bypassPermissions",
            }
            if "cli_path" in fields:
                given["cli_path"] = str(cli)
            options = claude_agent_sdk.ClaudeAgentOptions(**given)
            asyncio.run(drive(options, model.prompt))
        return None

    return run


def _mirrored_entries(folder: Path) -> int:
    return sum(
        line.count('"event": "transcript.entry"') + line.count('"event":"transcript.entry"')
        for path in folder.glob("*.jsonl")
        for line in path.read_text().splitlines()
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("path", choices=PATHS)
    parser.add_argument("--out", required=True, type=Path)
    args = parser.parse_args(argv)

    import transcript_otel

    with tempfile.TemporaryDirectory(prefix="agent-calls-") as tmp:
        work = Path(tmp)
        configuration = transcript_otel.configure(service_name="agent-calls", jsonl_dir=str(work / "runs"))
        _steady_pipeline()
        path: str = args.path
        if path == "wink-codex":
            evaluate = _wink_codex(work)
        elif path == "wink-claude":
            evaluate = _wink_driven(work, "claude", "rich")
        elif path == "wink-acp":
            evaluate = _wink_acp(work)
        else:
            evaluate = _sdk(work, client=path == "sdk-client")
        evaluate()  # warm-up: imports, patches and first-use setup are not per event
        transcript_otel.flush(30.0)
        before = _mirrored_entries(work / "runs")
        counter = CallCounter(_package_folder(), EVENTS.get(path, CLAUDE_EVENT))
        with counter.counting():
            evaluate()
        transcript_otel.flush(30.0)
        configuration.shutdown()
        entries = _mirrored_entries(work / "runs") - before
    result = {
        "path": path,
        "calls": counter.calls,
        "events": counter.events,
        "entries": entries,
        "python": sys.version.split()[0],
        "busiest": counter.busiest(40),
    }
    args.out.write_text(json.dumps(result))
    return 0


if __name__ == "__main__":
    sys.exit(main())
