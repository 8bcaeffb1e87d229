# Two commands (README): `make book` (the main job) and `make test` (what CI runs); for readers,
# `make html`: the toy book from its committed executed chapters (book/toy/), executing nothing.
# Each sets itself up: a virtual environment in .venv with requirements.txt installed.
PYTHON ?= python3
VENV ?= .venv
BUDGET ?= toy
# A budget file instead of BUDGET (README, "Your own data"), and field overrides:
# make book BUDGET_FILE=examples/toy-own-data.toml SET="n_boot=50 scales.S1.lr=5e-3"
BUDGET_FILE ?=
SET ?=
PY := $(VENV)/bin/python
# Python writes each module's bytecode the first time a process imports it, even where the
# environment sets PYTHONDONTWRITEBYTECODE (as some CI images do): otherwise every process
# recompiles every module it imports, and compiling all 16,000 files of the environment up front
# took about 35 s of a 2-core setup, most of them never imported.
export PYTHONDONTWRITEBYTECODE :=
BUDGET_ARGS = $(if $(BUDGET_FILE),--budget-file $(BUDGET_FILE),--budget $(BUDGET)) $(foreach s,$(SET),--set $(s))

.PHONY: setup book html test plan clean help

help:
	@echo "make book   # run every chapter at BUDGET=$(BUDGET) with papermill, save figures, build the HTML book"
	@echo "make html   # the toy book from the committed executed chapters (book/toy/), no training: _build/committed/"
	@echo "make test   # unit tests + every chapter at the smoke budget (each executed once, under nbval-lax) + book build check"
	@echo "make plan   # the inputs BUDGET=$(BUDGET) needs (exit 2 if any is missing) and its compute per chapter"
	@echo "            # BUDGET_FILE=my.toml (README, 'Your own data') and SET='key=value ...' work with book and plan"

$(VENV)/.installed: requirements.txt pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	# no bytecode at install: each module is compiled when first imported (PYTHONDONTWRITEBYTECODE above)
	$(PY) -m pip install -q --no-compile -r requirements.txt
	$(PY) -m pip install -q --no-deps -e .
	# jupyter-events asks for jsonschema[format-nongpl], which brings rfc3987-syntax; when it is
	# installed, `import jsonschema` builds its Lark grammar, 1.1-2.2 s in every process that
	# imports nbformat (each papermill worker, nbval and pytest process; at least 25 in one `make test`).
	# Nothing here checks IRI formats; without it jsonschema leaves out that one format checker.
	$(PY) -m pip uninstall -y -q rfc3987-syntax
	touch $@

setup: $(VENV)/.installed

book: setup
	$(PY) -m nblib.book run $(BUDGET_ARGS)

html: setup
	$(PY) -m nblib.book html

plan: setup
	$(PY) -m nblib.book.plan $(BUDGET_ARGS)

# The unit tests run beside the smoke chapters: the chapter chain 2 -> 3 -> 4 -> 5 -> 12 (each
# reads the runs of the one before) leaves a core idle for minutes, which the tests fill. Both
# run one torch thread per process (tests/conftest.py; a chapter gets the cores no other chapter
# holds), so sharing the cores costs no extra CPU time (README, "make test"). The chapters'
# output goes to _build/book-test.log, printed once the unit tests have ended.
# Every core is shared the whole time, so a run that trains at two threads (chapter 2's LongPPL
# reference, chapter 9's fine-tunes: RunConfig.threads) must not spin-wait for a thread the OS
# has parked: with OpenMP's default policy chapter 9's two fine-tunes took 5.6-29.5 s and 5-29
# CPU-s beside two busy processes, passive 4.1-4.6 s and 2.4-2.7 CPU-s (the same weights: the
# wait policy changes no sum). Alone they are faster spinning (1.6 s against 4.4), so only here.
test: export OMP_WAIT_POLICY ?= PASSIVE
test: setup
	@mkdir -p _build
	@echo "[test] the smoke chapters, nbval and the book check run beside the unit tests; their log: _build/book-test.log"
	@$(PY) -m nblib.book test > _build/book-test.log 2>&1 & book=$$!; \
	trap 'kill $$book 2>/dev/null; exit 130' INT TERM; \
	$(PY) -m pytest -q -n auto --dist loadfile --no-loadscope-reorder --durations=15 tests; unit_rc=$$?; \
	wait $$book; book_rc=$$?; cat _build/book-test.log; \
	echo "[test] unit tests: exit $$unit_rc; smoke chapters, nbval and the book check: exit $$book_rc"; \
	[ $$unit_rc -eq 0 ] && [ $$book_rc -eq 0 ]
	$(PY) -m nblib.book html --out _build/committed

clean:
	rm -rf _build
