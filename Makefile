# clustergym: `make train` and `make test` set everything up on a fresh machine.
PYTHON ?= python3
VENV ?= .venv
# the Ray RLlib extra pins other versions (gymnasium 1.2.2): it lives in a venv of its own
RLLIB_VENV ?= .venv-rllib
TORCH_VERSION ?= 2.13.0
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
RLLIB_STAMP := $(RLLIB_VENV)/.installed
# make tensorboard RUN=runs/<run>: one run's curves; without RUN, every run under runs/
RUN ?= runs
comma := ,

.PHONY: setup test test-slow test-rllib train tensorboard bench bench-choochoo clean

# $(call install,VENV,EXTRAS): a venv with the pinned CPU torch, then this package (editable) and its extras
define install
	test -x $(1)/bin/python || $(PYTHON) -m venv $(1)
	# torch first and pinned: an unpinned torch pulls a multi-GB CUDA build.
	$(1)/bin/pip install --quiet torch==$(TORCH_VERSION)
	$(1)/bin/pip install --quiet -e ".[$(2)]"
	touch $(1)/.installed
endef

$(STAMP): pyproject.toml
	$(call install,$(VENV),dev)

$(RLLIB_STAMP): pyproject.toml
	$(call install,$(RLLIB_VENV),dev$(comma)rllib)

setup: $(STAMP)

test: setup
	$(PY) -m pytest -q

# the slow tests and the reliability suite (tests/test_reliability.py, tests/test_bad_inputs.py, the
# interrupt/resume tests of training and sweeps)
test-slow: setup
	$(PY) -m pytest -q -m "slow or reliability"

# the rllib-marked tests against a local two-node Ray cluster (1 CPU per node), torn down afterwards even on
# failure; tests/ray_cluster.py starts and stops it by process group
test-rllib: $(RLLIB_STAMP)
	$(RLLIB_VENV)/bin/python tests/ray_cluster.py --nodes 2 --num-cpus 1 -- $(RLLIB_VENV)/bin/python -m pytest -q -m rllib

train: setup
	$(PY) train/ppo.py $(ARGS)

tensorboard: setup
	$(VENV)/bin/tensorboard --logdir $(RUN)

bench: setup
	$(PY) eval/bench.py $(ARGS)

# clustergym vs gpu-choochoo on one core (gpu-choochoo goes into a scratch venv, never into .venv)
bench-choochoo: setup
	$(PY) eval/bench_vs_choochoo.py $(ARGS)

clean:
	rm -rf $(VENV) $(RLLIB_VENV) .venv-choochoo runs .pytest_cache
