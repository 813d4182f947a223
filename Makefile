# The two commands of README.md: `make demo` and `make test`. Both set up what they need.
SHELL := /bin/bash
PY313 := $(shell p="$$(pyenv root 2>/dev/null)/versions/3.13.0/bin/python3.13"; \
	if [ -x "$$p" ]; then echo "$$p"; elif command -v python3.13 >/dev/null; then command -v python3.13; \
	else command -v python3; fi)
PY_DEFAULT := $(shell command -v python3)
PIP_QUIET := --quiet --disable-pip-version-check
# pip 25.1 is the first to install PEP 735 dependency groups (`--group test`); a new venv's
# bundled pip may be older.
PIP_GROUPS := 'pip >= 25.1'

DEMO_VENV := .venv-demo
BENCH_VENV := .venv-bench
TEST_VENV := .venv
TEST_VENV_DEFAULT := .venv-py-default
# Arize Phoenix, the trace store of the collector pipeline test (about 850 MB: its own venv).
PHOENIX_VENV := .venv-phoenix
PHOENIX_VERSION := 20.26.1
CHECKED := src tests examples benchmarks
# The claude-agent-sdk instrumentor is tested at both ends of its range, one per test environment.
CLAUDE_SDK_NEWEST := 0.2.187
CLAUDE_SDK_OLDEST := 0.1.0
# The real Claude Code CLI (a native binary from npm) that the tests and the demo run against
# the scripted model of examples/model_servers/. Named exactly: a bare install picks an old one.
CLAUDE_CODE_VERSION := 2.1.332
AGENTS_DIR := .agents
CLAUDE_CODE_CLI := $(AGENTS_DIR)/claude-code/node_modules/.bin/claude
# The real Codex CLI (its native binary comes from npm too), run against the scripted
# Responses API of examples/model_servers/.
CODEX_VERSION := 0.171.0
CODEX_CLI := $(AGENTS_DIR)/codex/node_modules/.bin/codex
# The real Gemini CLI (a node bundle from npm) and OpenCode (a native Bun binary from npm), run
# against the scripted Gemini API and OpenAI-compatible chat API of examples/model_servers/.
GEMINI_CLI_VERSION := 0.61.0
GEMINI_CLI := $(AGENTS_DIR)/gemini-cli/node_modules/.bin/gemini
OPENCODE_VERSION := 1.18.33
OPENCODE_CLI := $(AGENTS_DIR)/opencode/node_modules/.bin/opencode
# Every test of a real part this Makefile installs (the agent CLIs, Phoenix, rotel, Chromium,
# promtool, zsh, util-linux `script`, check-jsonschema) fails without it instead of skipping
# (tests/requirements_switch.py). `make test TRANSCRIPT_OTEL_REQUIRE_REAL=0` lets them skip.
TRANSCRIPT_OTEL_REQUIRE_REAL ?= 1
export TRANSCRIPT_OTEL_REQUIRE_REAL

.PHONY: demo test lint envs pytest pytest-default wink-envs browser promtool zsh bench clean agents fixtures explore canary

$(DEMO_VENV)/.installed: pyproject.toml Makefile
	$(PY313) -m venv $(DEMO_VENV)
	$(DEMO_VENV)/bin/pip install $(PIP_QUIET) -e '.[otlp-grpc]' weakincentives==0.27.0 claude-agent-sdk==$(CLAUDE_SDK_NEWEST)
	touch $@

$(TEST_VENV)/.installed: pyproject.toml Makefile
	$(PY313) -m venv $(TEST_VENV)
	$(TEST_VENV)/bin/pip install $(PIP_QUIET) --upgrade $(PIP_GROUPS)
	$(TEST_VENV)/bin/pip install $(PIP_QUIET) -e '.[otlp-grpc]' --group dev claude-agent-sdk==$(CLAUDE_SDK_NEWEST)
	touch $@

$(TEST_VENV_DEFAULT)/.installed: pyproject.toml Makefile
	$(PY_DEFAULT) -m venv $(TEST_VENV_DEFAULT)
	$(TEST_VENV_DEFAULT)/bin/pip install $(PIP_QUIET) --upgrade $(PIP_GROUPS)
	$(TEST_VENV_DEFAULT)/bin/pip install $(PIP_QUIET) -e '.[otlp-grpc]' --group test \
		claude-agent-sdk==$(CLAUDE_SDK_OLDEST)
	touch $@

$(PHOENIX_VENV)/.installed: Makefile
	$(PY_DEFAULT) -m venv $(PHOENIX_VENV)
	$(PHOENIX_VENV)/bin/pip install $(PIP_QUIET) arize-phoenix==$(PHOENIX_VERSION)
	touch $@

$(BENCH_VENV)/.installed: pyproject.toml Makefile
	$(PY313) -m venv $(BENCH_VENV)
	$(BENCH_VENV)/bin/pip install $(PIP_QUIET) -e '.[otlp-grpc]' weakincentives==0.27.0 rotel==0.0.1a15 \
		claude-agent-sdk==$(CLAUDE_SDK_NEWEST)
	touch $@

$(CLAUDE_CODE_CLI): Makefile
	mkdir -p $(AGENTS_DIR)/claude-code
	npm install --prefix $(AGENTS_DIR)/claude-code --no-audit --no-fund --loglevel=error \
		@anthropic-ai/claude-code@$(CLAUDE_CODE_VERSION)
	$@ --version | grep -q '^$(CLAUDE_CODE_VERSION) '
	touch $@

$(CODEX_CLI): Makefile
	mkdir -p $(AGENTS_DIR)/codex
	npm install --prefix $(AGENTS_DIR)/codex --no-audit --no-fund --loglevel=error @openai/codex@$(CODEX_VERSION)
	$@ --version | grep -qx 'codex-cli $(CODEX_VERSION)'
	touch $@

$(GEMINI_CLI): Makefile
	mkdir -p $(AGENTS_DIR)/gemini-cli
	npm install --prefix $(AGENTS_DIR)/gemini-cli --no-audit --no-fund --loglevel=error \
		@google/gemini-cli@$(GEMINI_CLI_VERSION)
	HOME=$$(mktemp -d) $@ --version | grep -qx '$(GEMINI_CLI_VERSION)'
	touch $@

$(OPENCODE_CLI): Makefile
	mkdir -p $(AGENTS_DIR)/opencode
	npm install --prefix $(AGENTS_DIR)/opencode --no-audit --no-fund --loglevel=error opencode-ai@$(OPENCODE_VERSION)
	HOME=$$(mktemp -d) $@ --version | grep -qx '$(OPENCODE_VERSION)'
	touch $@

## agents: install the real agent CLIs the tests and the demo run (pinned npm versions, under .agents/)
agents: $(CLAUDE_CODE_CLI) $(CODEX_CLI) $(GEMINI_CLI) $(OPENCODE_CLI)

## fixtures: record the real CLIs' output again (tests/fixtures/claude_code/, claude_sdk/, codex/, acp/,
## line_streams/{gemini,opencode}/, sessions/{gemini,opencode}/, a run)
fixtures: agents $(TEST_VENV)/.installed wink-envs
	$(TEST_VENV)/bin/python tests/agents/record_claude_fixtures.py
	$(TEST_VENV)/bin/python tests/agents/record_sdk_stdout.py
	$(TEST_VENV)/bin/python tests/agents/record_sdk_run.py
	$(TEST_VENV)/bin/python tests/agents/record_codex_fixtures.py
	$(TEST_VENV)/bin/python tests/agents/record_gemini_opencode_fixtures.py
	$(TEST_VENV)/bin/python tests/agents/record_wink_run.py
	$(TEST_VENV)/bin/python tests/agents/record_wink_run.py --scenario fatal_500
	.venvs/wink-0.27.0/bin/python tests/agents/record_acp_fixtures.py

## demo: set up a Python 3.13 environment and run two real agents, instrumented: a weakincentives
## Codex agent and a claude-agent-sdk agent on the real Claude Code CLI with parallel subagents
demo: $(DEMO_VENV)/.installed agents
	$(DEMO_VENV)/bin/python examples/codex_agent.py
	@echo
	$(DEMO_VENV)/bin/python examples/claude_sdk_agent.py

## test: set up and run ruff, mypy --strict and the suite (Python 3.13 and the default python3)
# The default python3's suite needs neither weakincentives nor Phoenix: it runs while their
# environments install (mostly downloads and unpacking), each target's output kept together.
test: browser promtool zsh lint
	$(MAKE) --no-print-directory -j3 --output-sync=target pytest-default wink-envs $(PHOENIX_VENV)/.installed
	$(MAKE) --no-print-directory pytest

# Debian's chromium and chromedriver for the HTML export's browser tests: installed when
# missing and we may (root with apt-get); without them those tests fail, saying why.
browser:
	@if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null) \
				|| echo "make browser: could not install chromium; the browser tests will fail"; \
		else echo "make browser: no chromium and no root apt-get; the browser tests will fail"; fi; \
	fi

# Debian's prometheus for its promtool, which checks collector-config/prometheus.yaml and the
# dashboard's PromQL (tests/test_collector_metrics.py): installed when missing and we may (root
# with apt-get); without it those tests fail, saying why.
promtool:
	@if ! command -v promtool >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
				|| echo "make promtool: could not install prometheus; the promtool tests will fail"; \
		else echo "make promtool: no promtool and no root apt-get; the promtool tests will fail"; fi; \
	fi

# zsh, which tests/test_cli_completion.py loads `transcript-otel completion zsh` in: installed
# when missing and we may (root with apt-get); without it those tests fail, saying why.
zsh:
	@if ! command -v zsh >/dev/null; then \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
			(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends zsh >/dev/null) \
				|| echo "make zsh: could not install zsh; the zsh completion tests will fail"; \
		else echo "make zsh: no zsh and no root apt-get; the zsh completion tests will fail"; fi; \
	fi

lint: $(TEST_VENV)/.installed
	$(TEST_VENV)/bin/ruff check $(CHECKED)
	$(TEST_VENV)/bin/ruff format --check $(CHECKED)
	$(TEST_VENV)/bin/mypy --strict

# One Python 3.13 environment per weakincentives version (.venvs/wink-*), built in parallel.
wink-envs: $(TEST_VENV)/.installed
	$(TEST_VENV)/bin/python tests/wink_harness.py

# The other environments, built at the same time (mostly downloads and unpacking).
envs: $(TEST_VENV)/.installed
	$(MAKE) --no-print-directory -j3 wink-envs $(PHOENIX_VENV)/.installed $(TEST_VENV_DEFAULT)/.installed agents

pytest: envs
	$(TEST_VENV)/bin/python -m pytest

# The weakincentives tests run their agents in .venvs/ whatever runs pytest: once is enough. So
# do the Phoenix tests, which the Python 3.13 run has: Phoenix is still installing during this one.
pytest-default: $(TEST_VENV_DEFAULT)/.installed agents
	$(TEST_VENV_DEFAULT)/bin/python -m pytest -m "not wink and not phoenix"

# Not CI: a real part it does not set up (Phoenix, for the converter's test) may skip.
## explore: the property tests with new random examples (`make test` draws the same ones each run)
explore: $(TEST_VENV)/.installed
	HYPOTHESIS_PROFILE=explore TRANSCRIPT_OTEL_REQUIRE_REAL=0 $(TEST_VENV)/bin/python -m pytest -q $$(grep -l "@given" tests/test_*.py)

# `make canary`: a throwaway Python 3.13 environment with the newest releases on PyPI.
CANARY_VENV := .venv-canary
CANARY_NEWEST := claude-agent-sdk 'weakincentives[claude-agent-sdk,wink]' opentelemetry-api opentelemetry-sdk \
	opentelemetry-instrumentation opentelemetry-exporter-otlp-proto-http opentelemetry-exporter-otlp-proto-grpc
# The tests that run the real Claude Code and Codex CLIs (weakincentives' among them: its newest
# release stands in for the newest tested one, tests/wink_harness.py), and the SDK's own.
CANARY_TESTS := tests/test_real_claude_code.py tests/test_real_codex.py tests/test_claude_sdk_instrumentor.py

## canary: the real-CLI tests against the newest claude-agent-sdk, weakincentives and OpenTelemetry
## releases on PyPI, in a new .venv-canary (before a release, and when a harness ships; not in `make test`)
canary: agents
	rm -rf $(CANARY_VENV)
	$(PY313) -m venv $(CANARY_VENV)
	$(CANARY_VENV)/bin/pip install $(PIP_QUIET) --upgrade $(PIP_GROUPS)
	$(CANARY_VENV)/bin/pip install $(PIP_QUIET) --upgrade -e '.[otlp-grpc]' --group test $(CANARY_NEWEST)
	@$(CANARY_VENV)/bin/pip list --disable-pip-version-check | grep -E '^(claude-agent-sdk|weakincentives|opentelemetry-(api|sdk|instrumentation)) '
	TRANSCRIPT_OTEL_CANARY_PYTHON=$(CURDIR)/$(CANARY_VENV)/bin/python $(CANARY_VENV)/bin/python -m pytest $(CANARY_TESTS)

## bench: set up .venv-bench (Python 3.13) and the Claude Code CLI of `make agents` (section sdk runs
## it), then run every benchmark, printing one table
bench: $(BENCH_VENV)/.installed $(CLAUDE_CODE_CLI)
	$(BENCH_VENV)/bin/python benchmarks/run.py

clean:
	rm -rf $(AGENTS_DIR) $(DEMO_VENV) $(TEST_VENV) $(TEST_VENV_DEFAULT) $(BENCH_VENV) $(PHOENIX_VENV) $(CANARY_VENV) .venvs .pytest_cache .mypy_cache .ruff_cache
