# slurm-watchdogs: everything a fresh machine needs, from the project's own files.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch lies on disk on this kind of machine; naming it first keeps pip
# from fetching a multi-GB CUDA build for the `torch` extra and for the framework extras
# (lightning, hf, accelerate), which all depend on torch.
TORCH_PIN ?= torch==2.13.0
# The checkout goes on sys.path as a plain path (setuptools' "compat" editable mode), not
# through setuptools' import hook for flat layouts: that hook is imported by every Python
# start in the venv and consults every import, ~20-30 ms of each `watchdogs status` and of
# every probe child (benchmarks/cli_startup.py). Plain `-e` is the fallback should a future
# setuptools drop the mode.
EDITABLE = --config-settings editable_mode=compat
DEV_EXTRAS = .[test,torch,lightning,hf,accelerate,hang]
export WATCHDOGS_CLUSTER_DIR ?= /tmp/watchdogs-dev-cluster
PYTEST_ARGS ?=
# The Slurm release of the dev cluster: empty for the host's (22.05 here), or 24.11 / 26.05
# (a Debian root per release, built once; see slurm/dev_cluster_roots.py).
SLURM ?=
# Memory enforcement: empty/`no` = polling (OverMemoryKill: FAILED, signal 9), as some sites
# run; `yes` = cgroups (OUT_OF_MEMORY), as most production clusters do.
CGROUP ?=
SLURM_FLAG = $(if $(SLURM),--slurm $(SLURM)) $(if $(CGROUP),--cgroup $(CGROUP))

.PHONY: install install-demo install-dev test test-matrix demo cluster-up cluster-down cluster-status lint bench clean

# What a login node needs to run the watchdog: the project and its few dependencies, no torch.
install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e . $(EDITABLE) || $(PY) -m pip install -q -e .
	touch $@

# + the local mailbox (aiosmtpd) that `make demo` delivers to.
install-demo: $(VENV)/.installed-demo

$(VENV)/.installed-demo: $(VENV)/.installed
	$(PY) -m pip install -q -e '.[demo]' $(EDITABLE) || $(PY) -m pip install -q -e '.[demo]'
	touch $@

# Everything the test suite, the linters and the benchmarks need: the test tools and the
# CPU torch (pinned first), with the framework integrations trainguard is tested against.
install-dev: $(VENV)/.installed-dev

$(VENV)/.installed-dev: $(VENV)/.installed
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q $(TORCH_PIN) -e '$(DEV_EXTRAS)' $(EDITABLE) || \
	  $(PY) -m pip install -q $(TORCH_PIN) -e '$(DEV_EXTRAS)'
	touch $@

cluster-up:
	slurm/dev-cluster up

cluster-down:
	slurm/dev-cluster down

cluster-status:
	slurm/dev-cluster status

# Brings the cluster up, runs the whole suite, and brings the cluster down whatever the result.
test: install-dev
	slurm/dev-cluster up $(SLURM_FLAG)
	set -o pipefail; rc=0; eval "$$(slurm/dev-cluster env)"; \
	SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf $(PY) -m pytest $(PYTEST_ARGS) || rc=$$?; \
	slurm/dev-cluster down; exit $$rc

# The release matrix (what CI runs): the whole suite on the host's release and the
# Slurm-facing tests (-m slurm) on the others, the latter side by side, each on a cluster of
# its own. A table of release, tests, result and time ends the output. `<release>/cgroup`
# runs the tests marked `cgroup` on a cluster enforcing memory with cgroups ("host": the
# host's release), so both recordings of a memory kill stay covered on a real cluster.
MATRIX_FULL ?=
MATRIX_SLURM ?= 24.11 26.05 host/cgroup 24.11/cgroup 26.05/cgroup
test-matrix: install-dev
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
	$(PY) -m pip install -q $(TORCH_PIN) -e '.[bench]' $(EDITABLE) || $(PY) -m pip install -q $(TORCH_PIN) -e '.[bench]'
	if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null && ! ldconfig -p | grep -q 'libfuse3\.so\.3 '; then \
	  apt-get install -y -q libfuse3-3 || echo "libfuse3-3 not installed: the delayed-filesystem benchmark is skipped"; fi
	slurm/dev-cluster up
	failed=""; for b in $(BENCHMARKS); do echo "== $$b"; \
	  SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf $(PY) $$b || failed="$$failed $$b"; done; \
	$(PY) benchmarks/_table.py; \
	if [ -n "$$failed" ]; then echo "failed:$$failed"; exit 1; fi

# ruff, then mypy over the three packages (configuration in pyproject.toml).
lint: install-dev
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

clean: cluster-down
	rm -rf $(VENV) .pytest_cache
