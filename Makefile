# Two commands on a fresh machine (Python >= 3.10; Go >= 1.24.6 for the stack half of check):
#   make demo   the embedded demo: three fake endpoints (one a reasoning model) benchmarked side by side (bench, triage, waterfall)
#   make check  what CI runs (.ci/run): make test, then make stack-test; fails if either failed
# Its parts:
#   make test   lint, the test suite on openai 3.x / 2.x / 1.x and legacy httpx, the tests
#               marked slow (make slow-test), the observability-stack checks, the openai SDK's own tests instrumented, and the built
#               wheel installed into a fresh virtual environment (no Go), and a real agent (the
#               OpenAI Agents SDK, the agent extra: make agent-test)
# and, with Go >= 1.24.6 (CI runs it after `make test`, see .ci/run):
#   make stack-test  the real Collector, Jaeger v2 and Prometheus on loopback with the project's
#               configs (scripts/build-stack.sh builds them once into ~/.cache/openai-latency)
# and, with cmake and a C++ compiler (CI runs it after the stack test):
#   make realserver-test  llama.cpp's llama-server (scripts/build-llama-server.sh builds it once
#               from the llama-cpp-python sdist into ~/.cache/openai-latency) serving a tiny random
#               model generated at test time: every timing compared with the server's own account
# Each target creates .venv and installs what it needs on first use.

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
DEMO_STAMP := $(VENV)/.demo-installed
REALSERVER_STAMP := $(VENV)/.realserver-installed
AGENT_STAMP := $(VENV)/.agent-installed

.PHONY: demo check test lint unit matrix peer stack-tools browser stack-build stack-test realserver-build realserver-test slow-test agent-test dist dist-check clean

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check --upgrade pip

$(STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,lint,dist]"
	touch $(STAMP)

# The demo needs only what a user installs: the cli extra.
$(DEMO_STAMP): pyproject.toml | $(PY)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[cli]"
	touch $(DEMO_STAMP)

demo: $(DEMO_STAMP)
	$(VENV)/bin/openai-latency demo

lint: $(STAMP)
	$(VENV)/bin/ruff check src tests benchmarks examples deploy
	$(VENV)/bin/ruff format --check src tests benchmarks examples deploy
	$(VENV)/bin/mypy

stack-tools: $(STAMP)
	bash scripts/install-stack-tools.sh

# Headless Chromium for tests/cli/render/test_html.py (the --html pages), from Debian's package.
browser:
	bash scripts/install-browser.sh

# One run of the suite in .venv (openai 3.x): the quick loop while developing. No apt: tests/stack
# skips its docker-compose and promtool checks when they are missing (`make stack-tools` installs
# them; CI and `make matrix` do), tests/cli/render/test_html.py its browser check without chromium (`make
# browser`; under CI=true a missing chromium fails it). ARGS goes to pytest: make unit ARGS=tests/cli/bench/test_bench.py
unit: $(STAMP)
	bash scripts/pytest.sh $(PY) $(ARGS)

# The suite on every SDK generation, each in its own environment under .venv-matrix/.
matrix: stack-tools browser
	PYTHON=$(PYTHON) bash scripts/test-matrix.sh

peer: $(STAMP)
	bash scripts/peer-suite.sh $(PY)

# The sdist and the wheel in dist/, checked as PyPI would (twine check --strict).
dist: $(STAMP)
	rm -rf dist
	$(PY) -m build --no-isolation --outdir dist .
	$(VENV)/bin/twine check --strict dist/*

# The wheel as a user installs it: a fresh virtual environment, the console scripts, an app under
# opentelemetry-instrument (catches files missing from the package). About a minute (pip installs).
dist-check: dist
	OPENAI_LATENCY_DIST=dist bash scripts/pytest.sh $(PY) tests/installed

$(REALSERVER_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,lint,dist,realserver]"
	touch $(REALSERVER_STAMP)

$(AGENT_STAMP): $(STAMP)
	$(PY) -m pip install --quiet --disable-pip-version-check -e ".[test,lint,dist,agent]"
	touch $(AGENT_STAMP)

# The tests marked slow (load, starvation, whole demo runs), left out of the 5-minute suite: once,
# on the newest openai
slow-test: $(STAMP)
	bash scripts/pytest.sh $(PY) --slow-suite

# tests/agent: a real agent (the OpenAI Agents SDK, the agent extra) against the fake server; the
# suite skips it where the extra is not installed
agent-test: $(AGENT_STAMP)
	bash scripts/pytest.sh $(PY) tests/agent

# -k: every part runs and reports, and the target fails if any did
test:
	$(MAKE) -k lint matrix slow-test peer dist-check agent-test

# Every part always runs; the target fails if any failed.
check:
	@status=0; $(MAKE) test || status=1; $(MAKE) stack-test || status=1; $(MAKE) realserver-test || status=1; \
	if [ $$status -ne 0 ]; then echo "make check: FAILED (see above: make test, stack-test and/or realserver-test)" >&2; fi; \
	exit $$status

# Builds (or finds in its cache) the Collector and Jaeger, installs Prometheus if missing.
stack-build:
	bash scripts/build-stack.sh >/dev/null

# tests/realstack: not part of `make test` (pyproject's addopts ignore it unless named).
# STACK_TEST_COLLECTOR_CONFIG=path runs the single-collector tests with another collector config.
stack-test: $(STAMP) stack-build
	bash scripts/pytest.sh $(PY) tests/realstack -v -s

# llama-server from the llama-cpp-python sdist on PyPI (cmake, CPU only), cached by version:
# about 8 minutes cold on 2 cores, then reused.
realserver-build: $(REALSERVER_STAMP)
	PYTHON=$(abspath $(PY)) bash scripts/build-llama-server.sh >/dev/null

# tests/realserver: not part of `make test` (pyproject's addopts ignore it unless named).
realserver-test: $(REALSERVER_STAMP) realserver-build
	bash scripts/pytest.sh $(PY) tests/realserver -v -s

clean:
	rm -rf $(VENV) .venv-matrix .cache .pytest_cache .mypy_cache .ruff_cache
