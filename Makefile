# turnstile: every set-up step lives here, so a fresh clone needs only `make local` or `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python 3.12 matches the Lambda runtime; fall back to whatever python3 is there (code is 3.11-safe).
# Candidates in order: python3.12 on PATH; pyenv's 3.12 (`pyenv which` with PYENV_VERSION set to the
# newest installed 3.12.x: a bare shim for an inactive version exists but refuses); uv's; python3.
# Each must actually run and be >= 3.11; the first that does is used, by its absolute path.
PYTHON ?= $(shell { \
	echo python3.12; \
	v=$$(pyenv versions --bare 2>/dev/null | grep -E '^3\.12(\.[0-9]+)?$$' | sort -V | tail -n 1); \
	[ -n "$$v" ] && PYENV_VERSION=$$v pyenv which python3.12 2>/dev/null; \
	uv python find 3.12 2>/dev/null; \
	echo python3; } | while read -r p; do \
	"$$p" -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 3000
DYNAMODB_PORT ?= 8000
IDENTITY_PORT ?= 8100
DATA_DIR ?=

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help install lock layers local token test test-deployed lint typecheck synth bench chaos clean docs examples wheel fuzz

help:
	@echo "make local   run DynamoDB Local + the API on http://127.0.0.1:$(PORT) (+ stream consumers, identity provider)"
	@echo "make token USER=alice [ADMIN=1]   print an ID token of the local identity provider"
	@echo "make test    install everything, then lint, type-check and run every test tier"
	@echo "make bench   run the benchmarks against DynamoDB Local (tables in bench/results/)"
	@echo "make chaos   every pattern at once under a seeded nemesis (SECONDS=600 SEED=random)"
	@echo "make fuzz    schemathesis against the local stack, every check, more examples (EXAMPLES=50 SEED=random)"
	@echo "make synth   synthesize the CDK stack into cdk.out/ (offline, cdk-nag included)"
	@echo "make layers  build the dependency layer from requirements.lock (arm64 to deploy, x86_64 here)"
	@echo "make lock    relock requirements.lock (with hashes) after editing requirements*.txt"
	@echo "make test-deployed STACK=Turnstile   the post-deploy tier against a deployed stack"
	@echo "make docs    build the documentation site into .site/ (mkdocs --strict)"
	@echo "make examples  run examples/ from the installed wheel against DynamoDB Local"
	@echo "make wheel   build the library's wheel into dist/"

# One lock for everything that runs: the dev venv (and so synth, local, tests, bench, chaos) and
# the Lambda layer (infra/layer.py) are installed from requirements.lock, hashes required. The
# venv is recreated when the lock changes, so it holds exactly the lock.
LOCK := requirements.lock
CHECKOV_LOCK := requirements-checkov.txt

$(VENV)/.installed: $(LOCK)
	@test -n "$(PYTHON)" || { echo "no python3 found"; exit 1; }
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r $(LOCK)
	touch $@

# Relock after editing requirements.txt (what Lambda runs) or requirements-dev.txt; uv is pinned
# in the lock itself. Then `make layers` and the tests (tests/infra/test_versions.py).
lock: $(VENV)/.installed
	$(BIN)/uv pip compile --native-tls --quiet --generate-hashes --python-version 3.12 \
		--python-platform x86_64-unknown-linux-gnu --annotation-style split \
		--custom-compile-command "make lock" requirements-dev.txt -o $(LOCK).new
	@# Replaced only when it changed: an unchanged lock must not recreate the venv.
	@if cmp -s $(LOCK).new $(LOCK); then rm $(LOCK).new; echo "$(LOCK): unchanged"; \
	else mv $(LOCK).new $(LOCK); echo "$(LOCK): updated (make install layers to use it)"; fi
	$(BIN)/uv pip compile --native-tls --quiet --generate-hashes --python-version 3.12 \
		--python-platform x86_64-unknown-linux-gnu --annotation-style split \
		--custom-compile-command "make lock" requirements-checkov.in -o $(CHECKOV_LOCK).new
	@if cmp -s $(CHECKOV_LOCK).new $(CHECKOV_LOCK); then rm $(CHECKOV_LOCK).new; \
	echo "$(CHECKOV_LOCK): unchanged"; else mv $(CHECKOV_LOCK).new $(CHECKOV_LOCK); \
	echo "$(CHECKOV_LOCK): updated"; fi

# The project's own layer, from the lock, no Docker: build/layer/arm64 (deployed) and
# build/layer/x86_64 (this host); skipped when the lock's entries are unchanged.
layers: $(VENV)/.installed
	$(BIN)/python -m infra.layer --arch all
# checkov pins boto3, packaging and networkx below ours: it gets a venv of its own, installed from
# its own hashed lock (requirements-checkov.txt, compiled from requirements-checkov.in by make lock).
$(VENV)/checkov/.installed: $(CHECKOV_LOCK) $(VENV)/.installed
	$(PYTHON) -m venv --clear $(VENV)/checkov
	$(VENV)/checkov/bin/pip install --quiet --disable-pip-version-check --require-hashes \
		-r $(CHECKOV_LOCK)
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: .java
.java:
	@command -v java >/dev/null || { \
	  echo "installing Java 17 for DynamoDB Local"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

install: $(VENV)/.installed $(VENV)/checkov/.installed node_modules/.installed .java

synth: install layers
	$(BIN)/python app.py

local: install layers synth
	$(BIN)/python -m local.run --no-synth --port $(PORT) --dynamodb-port $(DYNAMODB_PORT) \
		--identity-port $(IDENTITY_PORT) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

# Needs `make local` running (it writes .local/auth.json). USER defaults to your login name.
token: $(VENV)/.installed
	@$(BIN)/python -m local.issue_token "$(USER)" $(if $(filter 1 true yes,$(ADMIN)),--admin)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The project as configured (pyproject.toml), then the library and its typing tests (tests/typing:
# assert_type on the public API) under --strict, as a user's strict checker would read them.
typecheck: install
	$(BIN)/mypy
	$(BIN)/mypy --strict functions/turnstile_ddb tests/typing

test: install layers lint typecheck
	$(BIN)/python -m pytest
	$(MAKE) --no-print-directory docs examples

# The library's wheel (pyproject.toml: hatchling from the dev venv, no build isolation).
wheel: install
	$(BIN)/python -m build --wheel --no-isolation --outdir dist .

# The documentation site; --strict turns every warning (a broken link, a missing page) into a failure.
docs: install
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Every example, from the installed wheel in a fresh venv, against DynamoDB Local.
examples: install
	$(BIN)/python -m examples.run

bench: install layers synth
	$(BIN)/python -m bench
	$(BIN)/python -m bench.import_time

# The post-deploy tier against a deployed stack: reads its outputs, creates its own users, runs the
# e2e scenarios through the deployed API, removes what it created. Needs AWS credentials.
STACK ?= Turnstile
OUTPUTS ?= .local/stack-outputs.json

test-deployed: $(VENV)/.installed
	$(BIN)/python -m tests.deployed.outputs --stack $(STACK) --out $(OUTPUTS)
	$(BIN)/python -m pytest tests/deployed -p no:cacheprovider --outputs $(OUTPUTS)

SECONDS ?= 600
SEED ?=

chaos: install layers synth
	$(BIN)/python -m chaos --seconds $(SECONDS) $(if $(SEED),--seed $(SEED))

EXAMPLES ?= 50

fuzz: install synth
	$(BIN)/python -m tests.e2e.conformance --max-examples $(EXAMPLES) $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(VENV) node_modules cdk.out build .pytest_cache .mypy_cache .ruff_cache bench/results .site .examples dist
