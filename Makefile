# Poimen Memory Search. `make help` lists the targets.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
TOOLS ?= $(CURDIR)/.tools
export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export K8S_TOOLS_PREFIX := $(TOOLS)
export PATH := $(TOOLS)/bin:$(PATH)

.PHONY: help install install-tools run serve test test-unit test-all fuzz lint fmt migrate revision helm-lint eval bench bench-load bench-overload soak clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

$(VENV)/.installed: pyproject.toml clients/python/pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	# The CPU build of torch first: a bare `torch` requirement would pull a multi-GB CUDA build.
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e ".[test,lint]"
	# The Python client, its own package; tests/client runs it against a live `poimen serve`.
	$(PIP) install -q -e clients/python
	touch $@

install: $(VENV)/.installed ## create .venv and install the service with test and lint tools

install-tools: ## install helm, kubernetes-validate, yamllint, hadolint, checkov, promtool and chromium (CI)
	bash scripts/install_k8s_tools.sh $(TOOLS)
	# The chart's dependencies (ignored by git), so `helm lint/template charts/poimen-memory` work after set-up.
	bash scripts/chart_deps.sh || echo "chart dependencies not fetched: helm template of the chart needs scripts/chart_deps.sh"
	command -v promtool >/dev/null || (apt-get install -y -qq --no-install-recommends prometheus >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq --no-install-recommends prometheus >/dev/null)) || echo "promtool not installed (needs apt as root)"
	# Debian's Chromium for tests/browser (Playwright drives it by path; its own browser download cannot run here).
	test -x /usr/bin/chromium || (apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1 || (apt-get update -qq && apt-get install -y -qq --no-install-recommends chromium >/dev/null)) || echo "chromium not installed (needs apt as root): tests/browser will skip"

run: install ## install, then serve on the embedded default at http://127.0.0.1:8080
	$(VENV)/bin/poimen serve

serve: run

test-unit: install ## unit tier only (pure code, seconds)
	$(PY) -m pytest tests/unit -q

test: test-unit

test-all: install install-tools ## install everything, then run the whole suite (what CI runs)
	# In parallel (pytest-xdist): one worker per core, at most 4 (each starts its own embedded PostgreSQL and
	# model), and a whole test file per worker, so module fixtures are built once. Much of the suite waits on
	# processes it started, so two workers on two cores take about half the time. `pytest FILE` stays serial.
	$(PY) -m pytest -q --numprocesses=logical --maxprocesses=4 --dist=loadfile

fuzz: install ## schemathesis against a fresh service for DURATION_S (default 240) with SEED (default 1)
	$(PY) scripts/fuzz_api.py --duration-s $${DURATION_S:-240} --seed $${SEED:-1}

lint: install ## ruff, ruff format --check, mypy --strict, import-linter layers
	$(VENV)/bin/ruff check app clients tests scripts dashboards migrations
	$(VENV)/bin/ruff format --check app clients tests scripts dashboards migrations
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

fmt: install ## format and autofix
	$(VENV)/bin/ruff format app clients tests scripts dashboards migrations
	$(VENV)/bin/ruff check --fix app clients tests scripts dashboards migrations

migrate: install ## apply the schema to DATABASE_URL (or the embedded server)
	$(VENV)/bin/poimen migrate

revision: install ## new alembic revision: make revision m="what changed"
	$(VENV)/bin/alembic revision -m "$(m)"

helm-lint: install-tools ## helm lint + template + kubernetes-validate + yamllint + hadolint + checkov
	bash scripts/check_deploy.sh

eval: install ## evaluate on SciFact and LoCoMo (slow; see docs/evaluation.md)
	$(VENV)/bin/poimen eval --dataset ../shared/datasets/scifact --output docs/evaluation/scifact
	$(VENV)/bin/poimen eval --dataset ../shared/datasets/locomo --output docs/evaluation/locomo

bench-load: install ## load benchmark: QPS, p50/p95/p99 per strategy x 1/4/16/64 clients, cache off/on, during ingest (~15 min); ARGS=... passes options
	$(PY) scripts/bench_load.py $(ARGS)

bench-overload: install ## sustainable QPS, then 4x that rate open loop against MAX_CONCURRENT_REQUESTS: served, shed, p95, RSS (~5 min)
	$(PY) scripts/bench_overload.py $(ARGS)

bench: bench-load bench-overload ## both load benchmarks; reports under docs/benchmarks/

soak: install ## 10 minutes of mixed work at a fixed rate: RSS, descriptors, connections, backlog, p95, nothing lost (~15 min)
	$(PY) scripts/soak.py $(ARGS)

clean: ## remove the local data folder and caches
	rm -rf .poimen .pytest_cache .mypy_cache .ruff_cache
