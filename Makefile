# slurm-watchdogs: everything a fresh machine needs, from the project's own files.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch lies on disk on this kind of machine; naming it first keeps pip
# from fetching a multi-GB CUDA build for the `torch` extra and for the framework extras
# (lightning, hf, accelerate), which all depend on torch.
TORCH_PIN ?= torch==2.13.0
# Both distributions are installed editable from this checkout (hatchling): trainguard from
# trainguard/pyproject.toml, slurm-watchdogs (which depends on it) from pyproject.toml. Each
# puts the checkout on sys.path as one plain .pth line, with no import hook for every Python
# start to load (benchmarks/cli_startup.py) and nothing alarming printed.
PACKAGES = -e ./trainguard -e .
TRAINGUARD_EXTRAS = ./trainguard[torch,lightning,hf,accelerate,hang]
DEV_EXTRAS = .[test,docs]
export WATCHDOGS_CLUSTER_DIR ?= /tmp/watchdogs-dev-cluster
PYTEST_ARGS ?=
# The Slurm release of the dev cluster: empty for the host's (22.05 here), or 24.11 / 26.05
# (a Debian root per release, built once; see slurm/dev_cluster_roots.py).
SLURM ?=
# Memory enforcement: empty/`no` = polling (OverMemoryKill: FAILED, signal 9), as some sites
# run; `yes` = cgroups (OUT_OF_MEMORY), as most production clusters do.
CGROUP ?=
SLURM_FLAG = $(if $(SLURM),--slurm $(SLURM)) $(if $(CGROUP),--cgroup $(CGROUP))
# A pytest -m expression both passes of tests/suite.py run (e.g. MARKERS=slurm).
MARKERS ?=

.PHONY: install install-demo install-dev test-tools test test-matrix demo cluster-up cluster-down cluster-status lint docs wheels dist bench clean

# What a login node needs to run the watchdog: the project and its few dependencies, no torch.
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml trainguard/pyproject.toml trainguard/_version.py
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(PACKAGES)
	touch $@

# + the local mailbox (aiosmtpd) that `make demo` delivers to.
install-demo: $(VENV)/.installed-demo

$(VENV)/.installed-demo: $(VENV)/.installed
	$(PY) -m pip install -q -e ./trainguard -e '.[demo]'
	touch $@

# Everything the test suite, the linters, the docs and the benchmarks need: the test and docs
# tools and the CPU torch (pinned first), with the framework integrations trainguard is
# tested against.
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q $(TORCH_PIN) -e '$(TRAINGUARD_EXTRAS)' -e '$(DEV_EXTRAS)'
	touch $@

cluster-up:
	slurm/dev-cluster up

cluster-down:
	slurm/dev-cluster down

cluster-status:
	slurm/dev-cluster status

# Debian programs the tests run for real: tinyproxy (the HTTP proxy the channels go through),
# msmtp (the email channel's sendmail program), chromium (the status page), sudo (the test
# user's privileged helper), node_exporter (the metrics textfile) and pipx (Debian 12's 1.1,
# which the README's pipx install line must work with: tests/foundation/test_install_routes.py). Installed when missing
# and we are root, after one `apt-get update` (a fresh machine's lists may be empty).
TEST_TOOLS = tinyproxy msmtp chromium sudo prometheus-node-exporter pipx
test-tools:
	missing=""; for t in $(TEST_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ] && [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null; then \
	  apt-get update -q >/dev/null; DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	elif [ -n "$$missing" ]; then echo "not installed:$$missing (their tests are skipped)"; fi

# Brings the cluster up, runs the whole suite, and brings the cluster down whatever the result.
# tests/suite.py runs it as users run the project: as the unprivileged user `wdtest` (made on
# first use), then, as root, only the tests marked `root` (mounts, daemons, other users).
# SLURM=24.11 runs it on another release (its clients first on PATH, through `env`);
# MARKERS=slurm selects what both passes run.
test: install-dev test-tools
	slurm/dev-cluster up $(SLURM_FLAG)
	set -o pipefail; rc=0; eval "$$(slurm/dev-cluster env)"; \
	SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf $(PY) tests/suite.py --markers "$(MARKERS)" \
	  --label "$(or $(SLURM),host)$(if $(filter yes,$(CGROUP)),/cgroup)" -- $(PYTEST_ARGS) || rc=$$?; \
	slurm/dev-cluster down; exit $$rc

# The release matrix (what CI runs): the whole suite on the host's release and the
# Slurm-facing tests (-m slurm) on the others, the latter side by side, each on a cluster of
# its own. A table of release, tests, result and time ends the output. `<release>/cgroup`
# runs the tests marked `cgroup` on a cluster enforcing memory with cgroups ("host": the
# host's release), so both recordings of a memory kill stay covered on a real cluster.
MATRIX_FULL ?=
MATRIX_SLURM ?= 24.11 26.05 host/cgroup 24.11/cgroup 26.05/cgroup
# Packages and the releases' roots are installed once, before the runs start side by side
# (apt and debootstrap do not share a machine well).
test-matrix: install-dev test-tools
	slurm/dev-cluster prepare $(foreach r,$(filter-out host,$(sort $(subst /cgroup,,$(MATRIX_FULL) $(MATRIX_SLURM)))),--slurm $(r))
	slurm/dev-matrix --full "$(MATRIX_FULL)" --slurm-only "$(MATRIX_SLURM)" -- $(PYTEST_ARGS)

# Installs, brings the cluster up, submits the scheduler with a demo config and drop-ins,
# waits for results and prints `watchdogs status` and where the logs are.
demo: install-demo
	slurm/dev-cluster up
	SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf PATH=$(CURDIR)/$(VENV)/bin:$$PATH slurm/demo

# Every benchmark (benchmarks/*.py; files starting with `_` are helpers), each interleaved
# against what a user would pick instead; then the table in docs/benchmarks.md is rebuilt
# from benchmarks/results/*.json. One benchmark: make bench BENCHMARKS=benchmarks/scan_du.py
# Needs the local cluster (squeue, scheduler) and, for the delayed filesystem of scan_du,
# libfuse3 (installed here from Debian when missing and we are root).
BENCHMARKS ?= $(filter-out benchmarks/_%,$(wildcard benchmarks/*.py))
bench: install-dev
	$(PY) -m pip install -q $(TORCH_PIN) -e ./trainguard -e '.[bench]'
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! ldconfig -p | grep -q 'libfuse3\.so\.3 '; then \
	  apt-get install -y -q libfuse3-3 || echo "libfuse3-3 not installed: the delayed-filesystem benchmark is skipped"; fi
	slurm/dev-cluster up
	failed=""; for b in $(BENCHMARKS); do echo "== $$b"; \
	  SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf $(PY) $$b || failed="$$failed $$b"; done; \
	$(PY) benchmarks/_table.py; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

# ruff, then the import contracts (import-linter: the layers of docs/architecture.md, no
# circles), then mypy over the three packages (configuration of all three in pyproject.toml),
# then the documentation site, strictly (a broken link or a page's error fails).
# --no-cache: its graph cache once kept a circle that an edit had removed (a stale BROKEN);
# building the graph afresh takes a third of a second here.
lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/lint-imports --no-cache
	$(VENV)/bin/mypy
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict --quiet

# The documentation site (mkdocs.yml, docs/) into build/site; the configuration reference
# is generated from the option declarations while it builds (docs/hooks/). The hook imports
# only the option declarations (watchdogs.config, trainguard.config): the docs extra
# (mkdocs) is all it needs, not torch and the framework extras of install-dev (1.5 GB).
docs: $(VENV)/.installed-docs
	NO_MKDOCS_2_WARNING=1 $(VENV)/bin/mkdocs build --strict

$(VENV)/.installed-docs: $(VENV)/.installed
	$(PY) -m pip install -q -e ./trainguard -e '.[docs]'
	touch $@

# The two wheels into dist/, and nothing else: what pip and pipx install from on a login
# node whose index carries neither distribution (README "Install"). pip builds each in
# isolation (hatchling from the index); all it needs is a venv with pip (Debian's python3
# has none), not torch or the test tools. The old wheels go first, so `dist/*.whl` names
# one version of each.
wheels: $(VENV)/bin/pip
	rm -f dist/slurm_watchdogs-*.whl dist/trainguard-*.whl
	$(PY) -m pip wheel -q --no-deps -w dist ./trainguard .

$(VENV)/bin/pip:
	$(PYTHON) -m venv $(VENV)

# Both distributions, wheel and sdist each, into dist/, checked by twine (the release build;
# `make wheels` is enough to install).
dist: $(VENV)/.installed-dist
	rm -rf dist trainguard/dist
	$(PY) -m build --outdir dist .
	$(PY) -m build --outdir dist trainguard
	$(VENV)/bin/twine check --strict dist/*

$(VENV)/.installed-dist: $(VENV)/.installed
	$(PY) -m pip install -q -e ./trainguard -e '.[dist]'
	touch $@

clean: cluster-down
	rm -rf $(VENV) .pytest_cache .import_linter_cache dist build
