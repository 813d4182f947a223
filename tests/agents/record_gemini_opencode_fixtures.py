"""Record what the real Gemini CLI and OpenCode print and store, run offline against the scripted
model servers, as fixtures (groundwork for issue 50; not in `make fixtures` yet).

    python tests/agents/record_gemini_opencode_fixtures.py [gemini|opencode|CLI/SCENARIO ...]

Each scenario of `examples/model_servers/chat_scenarios.py` runs once per output mode, each run
in a scratch folder of its own (throwaway HOME, XDG folders, TMPDIR and working directory; the
settings of `gemini_offline.py` / `opencode_offline.py`):

* gemini: `gemini -p PROMPT --output-format text|json|stream-json --approval-mode yolo`;
* opencode: `opencode run --format default|json [--thinking] PROMPT`.

What lands in `tests/fixtures/`:

* `line_streams/<cli>/<scenario>.<mode>.{txt,json,jsonl}`: the stdout as printed;
* `line_streams/<cli>/<scenario>.<mode>.meta.json`: the CLI version, arguments, exit status,
  stderr, what the scripted model served (every request, unknown routes included) and every
  `connect()` the CLI's processes made (strace; the recording fails on any not to loopback);
* `sessions/gemini/<scenario>/`: from the stream-json run, every file Gemini CLI wrote under
  `~/.gemini` (the session `.jsonl` under `tmp/<project>/chats/`, `projects.json`; not the
  settings, which are ours);
* `sessions/opencode/<scenario>/`: from the json run, `export.json` (what `opencode export <id>`
  printed), `tables.json` (the rows of `session`, `message`, `part`, `session_message`,
  `session_input` and `event` of `~/.local/share/opencode/opencode.db`, read-only with the
  stdlib's sqlite3; each JSON text column parsed, see `JSON_COLUMNS`) and `schema.sql`.

The scratch folder's path becomes `/scratch` in every file. Ids, timestamps and durations are
as the CLIs wrote them. The CLIs: `.agents/<name>/node_modules/.bin/` when installed there, else
`.agents-new/<name>/...` (this branch's install, `npm install --prefix .agents-new/gemini-cli
@google/gemini-cli@0.61.0`, `npm install --prefix .agents-new/opencode opencode-ai@1.18.33`).
"""

from __future__ import annotations

import json
import re
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "examples" / "model_servers"))

import chat_scenarios  # noqa: E402
import gemini_offline  # noqa: E402
import opencode_offline  # noqa: E402
from recording import record_all  # noqa: E402

LINE_STREAMS = ROOT / "tests" / "fixtures" / "line_streams"
SESSIONS = ROOT / "tests" / "fixtures" / "sessions"
VERSIONS = {"gemini": "0.61.0", "opencode": "1.18.33"}
PACKAGES = {"gemini": "gemini-cli", "opencode": "opencode"}
# Per CLI: mode name -> (its arguments, the fixture's extension).
MODES: dict[str, dict[str, tuple[tuple[str, ...], str]]] = {
    "gemini": {
        "text": (("--output-format", "text"), "txt"),
        "json": (("--output-format", "json"), "json"),
        "stream-json": (("--output-format", "stream-json"), "jsonl"),
    },
    "opencode": {
        "default": (("--format", "default"), "txt"),
        "default-thinking": (("--format", "default", "--thinking"), "txt"),
        "json": (("--format", "json"), "jsonl"),
        "json-thinking": (("--format", "json", "--thinking"), "jsonl"),
    },
}
# The run whose session storage is kept.
SESSION_MODE = {"gemini": "stream-json", "opencode": "json"}
# Scenarios that end with the CLI failing (a failing command is not one).
FAILING = {"error_500"}
TABLES = ("session", "message", "part", "session_message", "session_input", "event")
JSON_COLUMNS = {"data", "model", "permission", "metadata", "summary_diffs", "revert", "prompt"}
CONNECT = re.compile(r'connect\(\d+, \{sa_family=(AF_INET6?), sin6?_port=htons\((\d+)\),[^"]*"([^"]+)"')


def cli_path(cli: str) -> Path:
    binary = {"gemini": "gemini", "opencode": "opencode"}[cli]
    for folder in (".agents", ".agents-new"):
        path = ROOT / folder / PACKAGES[cli] / "node_modules" / ".bin" / binary
        if path.exists():
            return path
    raise RuntimeError(f"no {cli} CLI under .agents/ or .agents-new/ (see this script's docstring)")


def without_scratch(text: str, scratch: Path) -> str:
    """`/scratch` for the scratch folder's path (OpenCode also stores it without its leading `/`)."""
    for path in {str(scratch.resolve()), str(scratch)}:
        text = text.replace(path, "/scratch").replace(path.lstrip("/"), "scratch")
    return text


def outside_connects(strace_file: Path) -> tuple[list[str], int]:
    """(every connect() to an address that is not loopback, how many connects there were)."""
    if not strace_file.exists():
        return [], 0
    outside, count = [], 0
    for match in CONNECT.finditer(strace_file.read_text(errors="replace")):
        count += 1
        family, port, address = match.groups()
        if address not in ("127.0.0.1", "::1", "::ffff:127.0.0.1"):
            outside.append(f"{family} {address}:{port}")
    return outside, count


def traced(command: list[str], strace_file: Path) -> list[str]:
    if shutil.which("strace") is None:
        return command
    return ["strace", "-f", "-qq", "-e", "trace=connect", "-o", str(strace_file), *command]


def run(
    command: list[str], environment: dict[str, str], work: Path, scratch: Path, name: str
) -> dict[str, Any]:
    strace_file = scratch / f"connect-{name}.txt"
    started = time.monotonic()
    completed = subprocess.run(
        traced(command, strace_file),
        env=environment,
        cwd=work,
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    outside, count = outside_connects(strace_file)
    return {
        "stdout": completed.stdout,
        "stderr": completed.stderr,
        "exit_code": completed.returncode,
        "seconds": round(time.monotonic() - started, 1),
        "connects": count,
        "outside_connects": outside,
    }


def environment_for(cli: str, model: Any, home: Path, work: Path, scratch: Path) -> dict[str, str]:
    tmp = scratch / "tmp"
    tmp.mkdir(exist_ok=True)
    if cli == "gemini":
        environment = gemini_offline.offline_environment(model, home)
        environment["PWD"] = str(work)
    else:
        environment = opencode_offline.offline_environment(model, home, work)
    environment["TMPDIR"] = str(tmp)  # Gemini CLI writes its error reports to os.tmpdir()
    return environment


def command_for(cli: str, mode: str, scenario: str) -> list[str]:
    arguments, _ = MODES[cli][mode]
    prompt = chat_scenarios.prompt_for(scenario)
    if cli == "gemini":
        return [str(cli_path(cli)), "-p", prompt, *arguments, "--approval-mode", "yolo"]
    return [str(cli_path(cli)), "run", *arguments, prompt]


def keep_gemini_session(home: Path, scratch: Path, directory: Path) -> list[str]:
    kept = []
    gemini_home = home / ".gemini"
    for path in sorted(p for p in gemini_home.rglob("*") if p.is_file()):
        relative = path.relative_to(gemini_home)
        if relative.name == "settings.json" and len(relative.parts) == 1:
            continue  # ours
        target = directory / "home" / ".gemini" / without_scratch(str(relative), scratch)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(without_scratch(path.read_text(), scratch))
        kept.append(str(target.relative_to(directory)))
    return kept


def _column(name: str, value: Any) -> Any:
    if name in JSON_COLUMNS and isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return value
    return value


def opencode_tables(database: Path) -> tuple[dict[str, list[dict[str, Any]]], str]:
    """The rows of `TABLES` and their schema, read-only (`mode=ro`: the WAL is read, not written)."""
    connection = sqlite3.connect(f"file:{database}?mode=ro", uri=True)
    try:
        tables = {}
        for table in TABLES:
            cursor = connection.execute(f"SELECT * FROM {table} ORDER BY rowid")
            names = [column[0] for column in cursor.description]
            tables[table] = [{n: _column(n, v) for n, v in zip(names, row, strict=True)} for row in cursor]
        marks = ",".join("?" * len(TABLES))
        query = f"SELECT sql FROM sqlite_master WHERE sql IS NOT NULL AND tbl_name IN ({marks})"
        rows = connection.execute(query + " ORDER BY tbl_name, type DESC, name", TABLES)
        schema = "\n".join(sql + ";" for (sql,) in rows)
        return tables, schema + "\n"
    finally:
        connection.close()


def keep_opencode_session(
    environment: dict[str, str], home: Path, work: Path, scratch: Path, directory: Path
) -> dict[str, Any]:
    database = home / ".local" / "share" / "opencode" / "opencode.db"
    tables, schema = opencode_tables(database)
    directory.mkdir(parents=True, exist_ok=True)
    (directory / "tables.json").write_text(without_scratch(json.dumps(tables, indent=1), scratch) + "\n")
    (directory / "schema.sql").write_text(schema)
    sessions = [row["id"] for row in tables["session"]]
    exported = run([str(cli_path("opencode")), "export", sessions[0]], environment, work, scratch, "export")
    (directory / "export.json").write_text(without_scratch(exported["stdout"], scratch))
    return {
        "sessions": sessions,
        "export": {k: v for k, v in exported.items() if k != "stdout"},
    }


def record_run(cli: str, mode: str, scenario: str) -> list[str]:
    """One run recorded; what is wrong with it (an unexpected exit status, an outside call)."""
    problems = []
    with tempfile.TemporaryDirectory(prefix=f"{cli}-{scenario}-") as name:
        scratch = Path(name)
        home, work = scratch / "home", scratch / "work"
        home.mkdir()
        work.mkdir()
        with (gemini_offline if cli == "gemini" else opencode_offline).model_server(
            scenario, scratch
        ) as model:
            environment = environment_for(cli, model, home, work, scratch)
            command = command_for(cli, mode, scenario)
            result = run(command, environment, work, scratch, "cli")
            served = model.served()
        extension = MODES[cli][mode][1]
        folder = LINE_STREAMS / cli
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{scenario}.{mode}.{extension}").write_text(without_scratch(result["stdout"], scratch))
        meta: dict[str, Any] = {
            "cli": cli,
            "version": VERSIONS[cli],
            "arguments": [without_scratch(a, scratch) for a in command[1:]],
            "exit_code": result["exit_code"],
            "seconds": result["seconds"],
            "stderr": without_scratch(result["stderr"], scratch),
            "connects": result["connects"],
            "outside_connects": result["outside_connects"],
            "served": served,
        }
        if mode == SESSION_MODE[cli]:
            directory = SESSIONS / cli / scenario
            shutil.rmtree(directory, ignore_errors=True)
            if cli == "gemini":
                meta["session_files"] = keep_gemini_session(home, scratch, directory)
            else:
                meta["session"] = keep_opencode_session(environment, home, work, scratch, directory)
                problems += [f"export called {c}" for c in meta["session"]["export"]["outside_connects"]]
        leftovers = sorted(str(p.relative_to(scratch / "tmp")) for p in (scratch / "tmp").rglob("*"))
        meta["tmpdir_files"] = leftovers
        (folder / f"{scenario}.{mode}.meta.json").write_text(json.dumps(meta, indent=1) + "\n")
    expected = 0 if scenario not in FAILING else None
    if expected is not None and result["exit_code"] != expected:
        problems.append(f"exit {result['exit_code']}")
    if scenario in FAILING and result["exit_code"] == 0:
        problems.append("exit 0 for a failing scenario")
    problems += [f"called {c}" for c in result["outside_connects"]]
    print(f"{cli} {mode} {scenario}: exit {result['exit_code']}, {result['seconds']}s, {len(served)} served")
    return problems


def record(name: str) -> None:
    cli, _, scenario = name.partition("/")
    for mode in MODES[cli]:
        problems = record_run(cli, mode, scenario)
        if problems:
            raise RuntimeError(f"{mode}: {'; '.join(problems)}")


def main(arguments: Sequence[str]) -> None:
    names = []
    for argument in arguments or MODES:
        if "/" in argument:
            names.append(argument)
        else:
            names += [f"{argument}/{scenario}" for scenario in chat_scenarios.SCENARIOS]
    record_all(names, record, "CLI scenarios")


if __name__ == "__main__":
    main(sys.argv[1:])
