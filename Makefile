# knell: the everyday commands. `make run` and `make test` work on a fresh clone.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: run test soak test-unit test-integration compose-test compose-images lint lint-workflows lint-kubernetes format matrix bench explore explore-short clean node-adapter docs

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $(STAMP)

## run: the quickstart chaos scenario on the embedded SQLite bus
run: $(STAMP)
	$(BIN)/knell run scenarios/quickstart.toml

## test: every test but the container ones (`make compose-test`) and the soaks (`make soak`;
## .ci/run runs their 60 s form on its own), spread over TEST_WORKERS pytest-xdist workers
## (one per CPU); tests that must not overlap share an xdist_group.
## tests/README.md maps the folders, their markers and times
TEST_WORKERS ?= logical
test: $(STAMP)
	$(BIN)/python -m pytest -q -m "not compose and not soak" -n $(TEST_WORKERS) --dist loadgroup

## soak: the soak acceptance for SOAK_SECONDS (10 minutes; .ci/run runs the 60 s form): a VALID
## soak's checker memory flat after warm-up and its disk within the bound, a mutant's first
## anomaly reported within 5 s and the soak stopped (tests/integration/test_soak.py); their run
## directories (soak.json, online.json) stay in reports/soak/ until the next make soak
SOAK_SECONDS ?= 600
soak: $(STAMP)
	KNELL_SOAK_SECONDS=$(SOAK_SECONDS) $(BIN)/python -m pytest -q -rA -m soak \
		-p no:cacheprovider --basetemp=reports/soak tests/integration/test_soak.py

## test-unit: the in-process tests (no child process, no server, no fuzz), under a minute
test-unit: $(STAMP)
	$(BIN)/python -m pytest -q -m "not integration and not slow"

## test-integration: the tests that start real processes and servers
test-integration: $(STAMP)
	$(BIN)/python -m pytest -q -m "integration and not compose and not soak" -n $(TEST_WORKERS) --dist loadgroup

## test-slow: the long in-process tests (the fuzzers' short form)
.PHONY: test-slow
test-slow: $(STAMP)
	$(BIN)/python -m pytest -q -m slow

## fuzz: every fuzzer (tests marked fuzz: scenario files, command lines, schedules, check
## histories, the bridge's API) with FUZZ_EXAMPLES cases per target instead of the short form
## that make test runs; about 10 min on 2 cores. tests/README.md lists the targets
FUZZ_EXAMPLES ?= 2000
.PHONY: fuzz
fuzz: $(STAMP)
	KNELL_FUZZ_EXAMPLES=$(FUZZ_EXAMPLES) $(BIN)/python -m pytest -q -m fuzz \
		-n $(TEST_WORKERS) --dist loadgroup --hypothesis-show-statistics

## compose-images: the stack's images (base image by debootstrap if no registry gives it)
compose-images: $(STAMP)
	compose/build-base.sh
	$(BIN)/knell compose build

## compose-test: needs a running Docker engine (compose/ensure-docker.sh installs and starts one)
compose-test: compose-images
	$(BIN)/python -m pytest -q -m compose

## matrix: every mutant bus against its scenarios on every store this machine has (SQLite,
## and Postgres / Redis when installed; portable scenarios re-targeted to each), short runs;
## fails on a miss
matrix: $(STAMP)
	$(BIN)/knell matrix --short --store all

## explore: knell explore against three mutants that only fail under a fault and the reference
## bus (5 min budgets, 10 re-runs of each reproduction; about 40 min); fails unless each is found,
## shrunk and reproduced in 8 of 10 runs, and the reference gives nothing (docs/explore.md)
explore: $(STAMP)
	$(BIN)/python tools/explore_gate.py

## explore-short: the CI form (one mutant and the reference bus, about 4 min)
explore-short: $(STAMP)
	$(BIN)/python tools/explore_gate.py --short

## bench: how close knell and its buses come to the limit (< 5 min); reports/bench/<timestamp>/
bench: $(STAMP)
	$(BIN)/knell bench

## lint: ruff (lint + format check), mypy --strict on src/ for Linux and Windows, the platform
## guard, the store guard (a store is named only in its own package)
lint: $(STAMP)
	$(BIN)/ruff check src tests tools
	$(BIN)/ruff format --check src tests tools
	$(BIN)/mypy
	$(BIN)/mypy --platform win32
	$(BIN)/python tools/platform_guard.py src/knell
	$(BIN)/python tools/store_guard.py src/knell
	$(BIN)/lint-imports --no-logo

## lint-workflows: the GitHub Actions workflows, offline: actionlint (with shellcheck on every
## run: script) and GitHub's workflow schema (check-jsonschema's vendored copy)
WORKFLOWS := .github/workflows/knell.yml .github/workflows/knell-reusable.yml .github/workflows/knell-campaign.yml
lint-workflows: $(STAMP)
	$(BIN)/actionlint -no-color -shellcheck $(BIN)/shellcheck $(WORKFLOWS)
	$(BIN)/check-jsonschema --builtin-schema vendor.github-workflows $(WORKFLOWS)

## lint-kubernetes: the campaign's Kubernetes manifests (deploy/kubernetes), offline, strictly
## (an unknown field fails) against the Kubernetes schemas kubernetes-validate ships
lint-kubernetes: $(STAMP)
	$(BIN)/kubernetes-validate --strict --quiet deploy/kubernetes/*.yaml

## docs: the documentation site into site/, strictly (a warning fails it); the README is its
## home page and the tables of checks, fault kinds, scenarios and mutants come from the registries
docs: $(STAMP)
	$(BIN)/mkdocs build --strict --quiet --site-dir site

format: $(STAMP)
	$(BIN)/ruff format src tests tools
	$(BIN)/ruff check --fix src tests tools

clean:
	rm -rf $(VENV) reports/*/ .pytest_cache .mypy_cache .ruff_cache $(NODE_ADAPTER)/node_modules

## node-adapter: the example Node.js bus's dependencies (npm ci from the committed lock file)
NODE_ADAPTER := examples/node-adapter
node-adapter: $(NODE_ADAPTER)/node_modules/.installed

$(NODE_ADAPTER)/node_modules/.installed: $(NODE_ADAPTER)/package.json $(NODE_ADAPTER)/package-lock.json
	cd $(NODE_ADAPTER) && npm ci --no-audit --no-fund
	touch $@
