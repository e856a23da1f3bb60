# Two entry points (see README): `make demo` runs the main job on a built-in example, `make test` runs every
# check CI runs. Both create ./.venv and install tcmp into it first; `make test` also needs Debian's chromium for the
# HTML report's browser tests (`apt-get install chromium`; .ci/run installs it).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install bench conformance clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(VENV)/.installed: pyproject.toml setup.py compare/_fused.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

demo: install
	$(BIN)/tcmp demo

test: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/run_all.py

# Runs the real torchair (from the torch-npu wheels on PyPI) on conformance/torchair's catalogue and checks tcmp's
# compare against what it wrote; builds its own environment under build/conformance-torchair (see its README).
conformance: install
	$(BIN)/python conformance/torchair/run.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .hypothesis
