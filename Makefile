# Hazel: the two quick-start commands are `make demo` and `make test`; both create .venv themselves.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo walkthrough test bench bench-quick clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-test: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $@

$(VENV)/.installed-bench: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[test,bench]'
	touch $@

## Start a run of the example migration-plan workflow on SQLite (./hazel.db) and show its steering request.
demo: $(VENV)/.installed
	$(BIN)/hazel demo

## Drive a run through approve, edit, feedback, rewind and sign-off, then print its history.
walkthrough: $(VENV)/.installed
	$(BIN)/hazel demo --walkthrough

## The layering contracts (import-linter, see pyproject.toml), then the whole test suite (SQLite, and
## PostgreSQL when it is reachable; see README).
test: $(VENV)/.installed-test
	$(BIN)/lint-imports
	$(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench

bench-quick: $(VENV)/.installed-bench
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) hazel.db hazel.db-wal hazel.db-shm out .pytest_cache
