# Two entry points (see README): `make demo` runs the main job, `make test` runs the tests.
# Both set up a virtual environment in .venv first (idempotent).
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip install --quiet --disable-pip-version-check
TORCH_PIN ?= torch==2.13.0

.PHONY: demo test bench clean

$(VENV)/.base: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) --upgrade pip
	$(PIP) -e .
	touch $@

# the simulator alone: no torch, no ray
demo: $(VENV)/.base
	$(VENV)/bin/infersim simulate --out runs/demo

$(VENV)/.dev: $(VENV)/.base
	$(PIP) "$(TORCH_PIN)"
	$(PIP) -e ".[dev,calibrate,cluster]"
	touch $@

test: $(VENV)/.dev
	$(PY) -m pytest

bench: $(VENV)/.dev
	$(PY) bench/bench_simulate.py

clean:
	rm -rf $(VENV) runs .pytest_cache
