# clustergym: `make train` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
TORCH_VERSION ?= 2.13.0
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
STAMP := $(VENV)/.installed

.PHONY: setup test test-slow test-rllib train bench clean

$(STAMP): pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(PIP) install --quiet torch==$(TORCH_VERSION)
	$(PIP) install --quiet -e ".[dev]"
	touch $(STAMP)

setup: $(STAMP)

test: setup
	$(PY) -m pytest -q

test-slow: setup
	$(PY) -m pytest -q -m slow

# Ray RLlib is an optional extra (it pins gymnasium 1.2.2, within our supported range)
test-rllib: setup
	$(PIP) install --quiet -e ".[dev,rllib]"
	$(PY) -m pytest -q -m rllib

train: setup
	$(PY) train/ppo.py $(ARGS)

bench: setup
	$(PY) eval/bench.py $(ARGS)

clean:
	rm -rf $(VENV) runs .pytest_cache
