# Two entry points (see README): `make demo` runs the main job on a built-in example, `make test` runs every
# check CI runs. Both create ./.venv and install tcmp into it first (the demo its runtime dependencies only, the
# tests the dev extra too); `make test` also installs Debian's chromium for the HTML report's browser tests when the
# machine has none (apt-get: needs root, or install it yourself).
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test install browser bench conformance clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# tcmp and its runtime dependencies: all `make demo` needs
$(VENV)/.runtime: pyproject.toml setup.py tcmp/summaries/compiled.c | $(BIN)/python
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e .
	touch $@

# and the dev extra (test tools, torch, ray, playwright): what `make test` needs
$(VENV)/.installed: $(VENV)/.runtime
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	touch $@

install: $(VENV)/.installed

# Playwright drives the system's chromium and never downloads a browser of its own
browser:
	@command -v chromium >/dev/null || { apt-get update -qq >/dev/null && \
		DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; }

demo: $(VENV)/.runtime
	$(BIN)/tcmp demo

test: install browser
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy
	$(BIN)/python -m pytest

bench: install
	$(BIN)/python bench/run_all.py

# Runs the real torchair (from the torch-npu wheels on PyPI) on conformance/torchair's catalogue and checks tcmp's
# compare against what it wrote; builds its own environment under build/conformance-torchair (see its README).
conformance: install
	$(BIN)/python conformance/torchair/run.py

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .ruff_cache .mypy_cache .hypothesis
