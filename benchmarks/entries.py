"""The three test entries of `shared/reference/perf.md` section 0.

Each is a Codex app-server `item/completed` notification as the weakincentives
Codex bridge turns it into a transcript entry: `detail = {"notification": params}`
and `raw = json.dumps({"method": ..., "params": ...})` (stdlib, ASCII-escaped).
The texts hold a few non-ASCII characters (→ é ✓ 🚀), so the parsed strings are
UCS-2/UCS-4 Python strings, as in a real run.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Final

import orjson

METHOD: Final = "item/completed"
THREAD_ID: Final = "thr_7f3c2a1e9b4d4c0e8a6f5b3d2c1e0f9a"
TURN_ID: Final = "turn_3"

# (key, label) in table order.
SIZES: Final = (
    ("1kb", "1 KB"),
    ("50kb", "50 KB string-heavy"),
    ("50kb_nested", "50 KB nested"),
)


@dataclass(frozen=True, slots=True)
class Entry:
    """One transcript entry as an adapter hands it to `emit()`."""

    key: str
    label: str
    entry_type: str
    detail: dict[str, Any]
    raw: str

    @property
    def detail_json_bytes(self) -> int:
        return len(orjson.dumps(self.detail))

    @property
    def raw_bytes(self) -> int:
        return len(self.raw.encode("utf-8"))

    @property
    def nodes(self) -> int:
        return count_nodes(self.detail)


def count_nodes(value: Any) -> int:
    """Containers and scalars in a JSON value (every dict, list and leaf counts one)."""
    if isinstance(value, dict):
        return 1 + sum(count_nodes(item) for item in value.values())
    if isinstance(value, list):
        return 1 + sum(count_nodes(item) for item in value)
    return 1


def _agent_message(variant: int) -> dict[str, Any]:
    sentence = (
        "I ran the failing test → test_parse_unicode_path and found the cause: the parser "
        "normalises 'café' (é) before splitting on '/', so the index is off by one ✓. "
    )
    text = (sentence * 6)[:900] + " Shipping the fix now 🚀."
    return {
        "threadId": THREAD_ID,
        "turnId": TURN_ID,
        "item": {"type": "agentMessage", "id": f"msg_{variant:08d}", "text": text},
    }


def _pytest_output(target_chars: int) -> str:
    lines = [
        "============================= test session starts ==============================",
        "platform linux -- Python 3.13.0, pytest-8.3.4, pluggy-1.5.0",
        "rootdir: /work/repo → configfile: pyproject.toml",
        "collected 412 items",
        "",
    ]
    index = 0
    while sum(len(line) + 1 for line in lines) < target_chars - 200:
        module = f"tests/test_module_{index // 40:02d}.py"
        status = "FAILED" if index % 37 == 0 else "PASSED"
        mark = " ✓" if index % 10 == 0 else ""
        lines.append(f"{module}::test_case_{index:04d}[cafe-{index % 7}] {status}{mark} [{index % 100:3d}%]")
        index += 1
    lines.append("=========== 12 failed, 400 passed in 5.23s (🚀 fast path enabled) ===========")
    return "\n".join(lines)


_OUTPUT: Final = _pytest_output(46_500)


def _command_execution(variant: int) -> dict[str, Any]:
    return {
        "threadId": THREAD_ID,
        "turnId": TURN_ID,
        "item": {
            "type": "commandExecution",
            "id": f"call_{variant:08d}",
            "command": "bash -lc 'pytest -q tests'",
            "cwd": "/work/repo",
            "status": "completed",
            "commandActions": [{"type": "unknown", "command": "pytest -q tests"}],
            "aggregatedOutput": _OUTPUT,
            "exitCode": 1,
            "durationMs": 5230,
        },
    }


def _mcp_tool_call(variant: int) -> dict[str, Any]:
    results = [
        {
            "number": 1000 + index,
            "title": f"Parser mishandles é in path #{index}",
            "state": "open" if index % 3 else "closed",
            "url": f"https://git.invalid/i/{1000 + index}",
            "score": round(1.0 - index / 400, 4),
            "author": f"dev-{index % 17}",
        }
        for index in range(345)
    ]
    return {
        "threadId": THREAD_ID,
        "turnId": TURN_ID,
        "item": {
            "type": "mcpToolCall",
            "id": f"call_{variant:08d}",
            "server": "issues",
            "tool": "search_issues",
            "status": "completed",
            "arguments": {"query": "parser unicode path 🚀", "limit": 345},
            "result": {"content": [], "structuredContent": {"results": results}},
            "error": None,
        },
    }


_BUILDERS: Final = {
    "1kb": ("assistant_message", _agent_message),
    "50kb": ("tool_result", _command_execution),
    "50kb_nested": ("tool_result", _mcp_tool_call),
}


def make_entry(key: str, variant: int = 0) -> Entry:
    """A fresh entry: `raw` as the bridge serializes it, `detail` parsed from the wire.

    Every call returns new objects (as when an adapter parses each line), so
    entries built with different `variant`s share no strings.
    """
    entry_type, build = _BUILDERS[key]
    params = build(variant)
    raw = json.dumps({"method": METHOD, "params": params})
    parsed = orjson.loads(raw)
    label = dict(SIZES)[key]
    return Entry(key, label, entry_type, {"notification": parsed["params"]}, raw)


def all_entries() -> list[Entry]:
    return [make_entry(key) for key, _ in SIZES]
