"""Arize Phoenix, a real trace store with a REST API, for the collector pipeline test.

Phoenix lives in its own virtual environment (`.venv-phoenix`, which `make test`
builds: about 850 MB, so nowhere else). It takes 15-25 s to start, so the test
session launches it as soon as collection shows a test that needs it, and the
fixture only waits for it. It runs offline on two free loopback ports, with its
SQLite database in a temporary directory, and is stopped when the session ends.
Spans are read back over REST; cost and sessions only GraphQL gives (`graphql()`).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

from loopback import LOOPBACK, free_port_pair, owns_listening_port, port_accepts, stop_process, subprocess_env

REPO = Path(__file__).resolve().parent.parent
PHOENIX_VERSION = "20.26.1"  # pinned by the Makefile; its REST routes move between versions
PHOENIX_MISSING = "Phoenix is not installed (.venv-phoenix, built by `make test`)"


def phoenix_executable() -> Path | None:
    """The `phoenix` command of `.venv-phoenix`, or None when that environment is missing."""
    candidate = REPO / ".venv-phoenix" / "bin" / "phoenix"
    return candidate if candidate.is_file() else None


class Phoenix:
    """One Phoenix server: launched without waiting, then awaited once by the fixture."""

    def __init__(self, executable: Path) -> None:
        self.executable = executable
        self.http_port = 0
        self.grpc_port = 0
        self.process: subprocess.Popen[bytes] | None = None
        self._workdir = Path(tempfile.mkdtemp(prefix="transcript-otel-phoenix-"))
        self._log_path = self._workdir / "phoenix.log"
        self._launched_at = 0.0
        self.ready_after_s = 0.0

    @property
    def base_url(self) -> str:
        return f"http://{LOOPBACK}:{self.http_port}"

    @property
    def grpc_endpoint(self) -> str:
        return f"http://{LOOPBACK}:{self.grpc_port}"

    def launch(self) -> None:
        """Start the server on fresh free ports, without waiting for it."""
        self.http_port, self.grpc_port = free_port_pair()
        database = self._workdir / "data"
        shutil.rmtree(database, ignore_errors=True)
        database.mkdir()
        env = subprocess_env(
            PHOENIX_WORKING_DIR=str(database),
            PHOENIX_HOST=LOOPBACK,
            PHOENIX_PORT=str(self.http_port),
            PHOENIX_GRPC_PORT=str(self.grpc_port),
            # Offline: no telemetry, no downloads (a WASM sandbox, fonts) at startup.
            PHOENIX_TELEMETRY_ENABLED="false",
            PHOENIX_ALLOW_EXTERNAL_RESOURCES="false",
        )
        self._launched_at = time.monotonic()
        with open(self._log_path, "ab") as log:
            self.process = subprocess.Popen(
                [str(self.executable), "serve"], stdout=log, stderr=subprocess.STDOUT, env=env
            )

    def wait_ready(self, timeout_s: float = 180.0, attempts: int = 3) -> Phoenix:
        """Wait until *this* process answers on both ports; relaunch if a port was taken."""
        if self.process is None:
            self.launch()
        for attempt in range(attempts):
            if self._await_own_ports(timeout_s):
                self.ready_after_s = time.monotonic() - self._launched_at
                return self
            if attempt < attempts - 1:
                self.stop()
                self.launch()
        self.stop()
        raise RuntimeError(f"Phoenix did not start:\n{self.log_tail()}")

    def _await_own_ports(self, timeout_s: float) -> bool:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            process = self.process
            if process is None or process.poll() is not None:
                return False  # e.g. "Failed to bind to address [::]:<port>"
            # Another server on the same port would answer /healthz too: check the owner.
            if (
                all(
                    port_accepts(port) and owns_listening_port(process.pid, port)
                    for port in (self.http_port, self.grpc_port)
                )
                and self._healthy()
            ):
                return True
            time.sleep(0.2)
        return False

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.base_url}/healthz", timeout=2) as response:
                return bool(response.status == 200)
        except (OSError, urllib.error.URLError):
            return False

    def version(self) -> str:
        with urllib.request.urlopen(f"{self.base_url}/arize_phoenix_version", timeout=5) as response:
            return str(response.read().decode())

    def spans(self, project: str, trace_id: str) -> list[dict[str, Any]]:
        """Every span of `trace_id` in `project`, in Phoenix's native REST shape."""
        spans: list[dict[str, Any]] = []
        cursor: str | None = None
        while True:
            query = {"trace_id": trace_id, "limit": "1000", **({"cursor": cursor} if cursor else {})}
            path = f"/v1/projects/{urllib.parse.quote(project)}/spans?{urllib.parse.urlencode(query)}"
            try:
                with urllib.request.urlopen(self.base_url + path, timeout=10) as response:
                    page = json.loads(response.read())
            except urllib.error.HTTPError as error:
                if error.code == 404:
                    return []  # the project does not exist until its first span is stored
                raise
            spans.extend(page["data"])
            cursor = page.get("next_cursor")
            if not cursor:
                return spans

    def wait_for_spans(self, project: str, trace_id: str, count: int, timeout_s: float = 20.0) -> list[Any]:
        """Poll until `count` spans of the trace are stored (Phoenix inserts asynchronously)."""
        deadline = time.monotonic() + timeout_s
        while True:
            spans = self.spans(project, trace_id)
            if len(spans) >= count or time.monotonic() > deadline:
                return spans
            time.sleep(0.1)

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The `data` of a GraphQL query (`POST /graphql`); its errors raise, with the query."""
        body = json.dumps({"query": query, "variables": variables or {}}).encode()
        request = urllib.request.Request(
            f"{self.base_url}/graphql", data=body, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            answer = json.loads(response.read())
        if answer.get("errors"):
            raise RuntimeError(f"Phoenix GraphQL errors: {answer['errors']}\nquery: {query}")
        data: dict[str, Any] = answer["data"]
        return data

    def project_id(self, name: str) -> str:
        """The GraphQL global id of the project `name` (REST `GET /v1/projects`)."""
        cursor: str | None = None
        while True:
            query = {"limit": "100", **({"cursor": cursor} if cursor else {})}
            path = f"/v1/projects?{urllib.parse.urlencode(query)}"
            with urllib.request.urlopen(self.base_url + path, timeout=10) as response:
                page = json.loads(response.read())
            for project in page["data"]:
                if project["name"] == name:
                    return str(project["id"])
            cursor = page.get("next_cursor")
            if not cursor:
                raise KeyError(f"no Phoenix project {name!r}")

    def span_costs(self, span_ids: Iterable[str]) -> dict[str, float | None]:
        """Each span's total cost as Phoenix priced it (`costSummary.total.cost`; None where
        Phoenix did not price the span). `span_ids` are the REST spans' `id`s, which are the
        GraphQL global ids."""
        ids = list(dict.fromkeys(span_ids))
        costs: dict[str, float | None] = {}
        for start in range(0, len(ids), 50):  # one request per 50 spans, each an aliased `node`
            batch = ids[start : start + 50]
            declarations = ", ".join(f"$id{index}: ID!" for index in range(len(batch)))
            selections = " ".join(
                f"s{index}: node(id: $id{index}) {{ ...SpanCost }}" for index in range(len(batch))
            )
            fragment = "fragment SpanCost on Span { costSummary { total { cost tokens } } }"
            data = self.graphql(
                f"query({declarations}) {{ {selections} }} {fragment}",
                {f"id{index}": span_id for index, span_id in enumerate(batch)},
            )
            for index, span_id in enumerate(batch):
                summary = (data[f"s{index}"] or {}).get("costSummary")
                cost = ((summary or {}).get("total") or {}).get("cost")
                costs[span_id] = float(cost) if cost is not None else None
        return costs

    def price_model(self, name: str, dollars_per_million: Mapping[str, float]) -> None:
        """Phoenix prices spans of model `name` (exactly) at `dollars_per_million` per token type
        (`input`, `output`, `cache_read`, `cache_write`): a model its table does not know, priced
        as a user would in its settings (GraphQL `createModel`)."""
        prompt_types = {"input", "cache_read", "cache_write", "audio"}
        costs = [
            {
                "tokenType": token_type,
                "costPerMillionTokens": price,
                "kind": "PROMPT" if token_type in prompt_types else "COMPLETION",
            }
            for token_type, price in dollars_per_million.items()
        ]
        self.graphql(
            "mutation($input: CreateModelMutationInput!) { createModel(input: $input) { model { id } } }",
            {"input": {"name": name, "namePattern": f"^{re.escape(name)}$", "costs": costs}},
        )

    def sessions(self, project: str) -> list[dict[str, Any]]:
        """The project's sessions as Phoenix's UI lists them (GraphQL `Project.sessions`): each
        `{"sessionId", "firstInput": {"value"} | None, "lastOutput": {"value"} | None, "numTraces"}`."""
        query = """
            query($id: ID!, $after: String) {
              node(id: $id) {
                ... on Project {
                  sessions(first: 100, after: $after) {
                    edges { node { sessionId firstInput { value } lastOutput { value } numTraces } }
                    pageInfo { hasNextPage endCursor }
                  }
                }
              }
            }
        """
        project_id = self.project_id(project)
        sessions: list[dict[str, Any]] = []
        after: str | None = None
        while True:
            page = self.graphql(query, {"id": project_id, "after": after})["node"]["sessions"]
            sessions.extend(edge["node"] for edge in page["edges"])
            if not page["pageInfo"]["hasNextPage"]:
                return sessions
            after = page["pageInfo"]["endCursor"]

    def log_tail(self, characters: int = 3000) -> str:
        try:
            return self._log_path.read_text(errors="replace")[-characters:]
        except FileNotFoundError:
            return ""

    def stop(self) -> None:
        process, self.process = self.process, None
        if process is not None:
            stop_process(process, grace_s=10)

    def close(self) -> None:
        self.stop()
        shutil.rmtree(self._workdir, ignore_errors=True)
