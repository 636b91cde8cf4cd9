# turnstile: every set-up step lives here, so a fresh clone needs only `make local` or `make test`.
SHELL := /bin/bash
.DEFAULT_GOAL := help

# Python 3.12 matches the Lambda runtime; fall back to whatever python3 is there (code is 3.11-safe).
# Each candidate must actually run: a pyenv shim for an inactive version exists but fails.
PYTHON ?= $(shell for p in python3.12 /root/.pyenv/versions/3.12.1/bin/python3.12 python3; do \
	"$$p" -c 'import sys; assert sys.version_info >= (3, 11)' >/dev/null 2>&1 && { command -v "$$p"; break; }; done)
VENV ?= .venv
BIN := $(VENV)/bin
PORT ?= 3000
DYNAMODB_PORT ?= 8000
IDENTITY_PORT ?= 8100
DATA_DIR ?=

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: help install local token test lint typecheck synth bench chaos fuzz clean

help:
	@echo "make local   run DynamoDB Local + the API on http://127.0.0.1:$(PORT) (+ stream consumers, identity provider)"
	@echo "make token USER=alice [ADMIN=1]   print an ID token of the local identity provider"
	@echo "make test    install everything, then lint, type-check and run every test tier"
	@echo "make bench   run the benchmarks against DynamoDB Local (tables in bench/results/)"
	@echo "make chaos   every pattern at once under a seeded nemesis (SECONDS=600 SEED=random)"
	@echo "make fuzz    schemathesis against the local stack, every check, more examples (EXAMPLES=50 SEED=random)"
	@echo "make synth   synthesize the CDK stack into cdk.out/ (offline, cdk-nag included)"

$(VENV)/.installed: requirements.txt requirements-dev.txt
	@test -n "$(PYTHON)" || { echo "no python3 found"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $@

node_modules/.installed: package.json package-lock.json
	npm ci --no-audit --no-fund --loglevel=error
	touch $@

.PHONY: .java
.java:
	@command -v java >/dev/null || { \
	  echo "installing Java 17 for DynamoDB Local"; \
	  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless; }

install: $(VENV)/.installed node_modules/.installed .java

synth: install
	$(BIN)/python app.py

local: install synth
	$(BIN)/python -m local.run --no-synth --port $(PORT) --dynamodb-port $(DYNAMODB_PORT) \
		--identity-port $(IDENTITY_PORT) $(if $(DATA_DIR),--data-dir $(DATA_DIR))

# Needs `make local` running (it writes .local/auth.json). USER defaults to your login name.
token: $(VENV)/.installed
	@$(BIN)/python -m local.token "$(USER)" $(if $(filter 1 true yes,$(ADMIN)),--admin)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

typecheck: install
	$(BIN)/mypy

test: install lint typecheck
	$(BIN)/python -m pytest

bench: install synth
	$(BIN)/python -m bench

SECONDS ?= 600
SEED ?=

chaos: install synth
	$(BIN)/python -m chaos --seconds $(SECONDS) $(if $(SEED),--seed $(SEED))

EXAMPLES ?= 50

fuzz: install synth
	$(BIN)/python -m tests.e2e.conformance --max-examples $(EXAMPLES) $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(VENV) node_modules cdk.out .pytest_cache .mypy_cache .ruff_cache bench/results
