# Two commands (README): `make book` (the main job) and `make test` (what CI runs).
# Each sets itself up: a virtual environment in .venv with requirements.txt installed.
PYTHON ?= python3
VENV ?= .venv
BUDGET ?= toy
PY := $(VENV)/bin/python

.PHONY: setup book test plan clean help

help:
	@echo "make book   # run every chapter at BUDGET=$(BUDGET) with papermill, save figures, build the HTML book"
	@echo "make test   # unit tests + every chapter at the smoke budget (papermill + nbval-lax) + book build check"
	@echo "make plan   # the inputs BUDGET=$(BUDGET) needs (exit 2 if any is missing) and its compute per chapter"

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	touch $@

setup: $(VENV)/.installed

book: setup
	$(PY) -m nblib.book run --budget $(BUDGET)

plan: setup
	$(PY) -m nblib.book.plan --budget $(BUDGET)

test: setup
	$(PY) -m pytest -q -n auto --dist loadfile --durations=15 tests
	$(PY) -m nblib.book test

clean:
	rm -rf _build
