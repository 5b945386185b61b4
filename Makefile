# Hazel: the two quick-start commands are `make demo` and `make test`; both create .venv themselves.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin

.PHONY: demo demo-langgraph walkthrough test bench bench-quick clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e .
	touch $@

$(VENV)/.installed-langgraph: pyproject.toml | $(BIN)/python
	$(BIN)/python -m pip install --quiet -e '.[langgraph]'
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

## Start a run of the LangGraph example (examples/langgraph_review.py, graph langgraph-review) on SQLite
## (./hazel.db) and print the commands that answer its review.
demo-langgraph: $(VENV)/.installed-langgraph
	@echo "The commands printed below need the example's workflow loaded: in this shell, first"
	@echo "  export HAZEL_WORKFLOWS=examples.migration_plan,examples.langgraph_review"
	@echo
	@HAZEL_WORKFLOWS=examples.langgraph_review $(BIN)/hazel run langgraph-review --input '{"topic": "tide pools"}'
	@echo
	@echo "Those commands need the example's workflow loaded (without it they answer: set HAZEL_WORKFLOWS); in this shell, first:"
	@echo "  export HAZEL_WORKFLOWS=examples.migration_plan,examples.langgraph_review"
	@echo "then answer, e.g.:  $(BIN)/hazel approve RUN   (or feedback RUN 'text', edit, reject, rewind)"
	@echo "and look:           $(BIN)/hazel history RUN"

## Drive a run through approve, edit, feedback, rewind and sign-off, then print its history.
walkthrough: $(VENV)/.installed
	$(BIN)/hazel demo --walkthrough

## The layering contracts (import-linter, see pyproject.toml), then the whole test suite (SQLite, and
## PostgreSQL when it is reachable; see README). It writes bytecode caches (the gitignored __pycache__/) even
## where PYTHONDONTWRITEBYTECODE is set: without them each of the Python processes the suite starts (the CLI,
## `hazel serve`, workers killed mid-step) compiled Hazel's modules again (0.15-0.35 s each on a 2-core VM),
## and each pytest process rewrote every test module's asserts (13 s of collection against 6).
test: $(VENV)/.installed-test
	$(BIN)/lint-imports
	env -u PYTHONDONTWRITEBYTECODE $(BIN)/python -m pytest $(PYTEST_ARGS)

bench: $(VENV)/.installed-bench
	$(BIN)/python -m bench

bench-quick: $(VENV)/.installed-bench
	$(BIN)/python -m bench --quick

clean:
	rm -rf $(VENV) hazel.db hazel.db-wal hazel.db-shm out .pytest_cache
