# slurm-watchdogs: everything a fresh machine needs, from the project's own files.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
# The CPU build of torch lies on disk on this kind of machine; naming it first keeps pip
# from fetching a multi-GB CUDA build for the `torch` extra and for the framework extras
# (lightning, hf, accelerate), which all depend on torch.
TORCH_PIN ?= torch==2.13.0
export WATCHDOGS_CLUSTER_DIR ?= /tmp/watchdogs-dev-cluster
PYTEST_ARGS ?=

.PHONY: install test demo cluster-up cluster-down cluster-status lint bench clean

install: $(VENV)/.installed

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q $(TORCH_PIN)
	$(PY) -m pip install -q $(TORCH_PIN) -e '.[test,torch,lightning,hf,accelerate,hang]'
	touch $@

cluster-up:
	slurm/dev-cluster up

cluster-down:
	slurm/dev-cluster down

cluster-status:
	slurm/dev-cluster status

# Brings the cluster up, runs the whole suite, and brings the cluster down whatever the result.
test: install
	slurm/dev-cluster up
	set -o pipefail; rc=0; \
	SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf $(PY) -m pytest $(PYTEST_ARGS) || rc=$$?; \
	slurm/dev-cluster down; exit $$rc

# Installs, brings the cluster up, submits the scheduler with a demo config and drop-ins,
# waits for results and prints `watchdogs status` and where the logs are.
demo: install
	slurm/dev-cluster up
	SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf PATH=$(CURDIR)/$(VENV)/bin:$$PATH slurm/demo

# Every benchmark script; each compares against the alternative in the same run (figures
# in the README). Needs the local cluster for the squeue and scheduler benchmarks.
BENCHMARKS := $(wildcard benchmarks/*.py)
bench: install
	slurm/dev-cluster up
	set -e; for b in $(BENCHMARKS); do echo "== $$b"; \
	  SLURM_CONF=$(WATCHDOGS_CLUSTER_DIR)/slurm.conf $(PY) $$b; done

lint: install
	$(VENV)/bin/ruff check .

clean: cluster-down
	rm -rf $(VENV) .pytest_cache
