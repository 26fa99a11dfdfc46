# Two commands on a fresh machine: `make serve` and `make test` (and `make test-corpora` beside the corpora).
# Each creates .venv when absent and installs only when pyproject.toml changed
# (stamp files), so a second run starts at once.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: serve test test-corpora install bench clean

$(PY):
	python3 -m venv $(VENV)

# torch first, pinned: pip takes the local CPU build; asked for later by
# sentence-transformers it would pull a multi-GB CUDA build.
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e .
	touch $@

$(TEST_STAMP): pyproject.toml $(STAMP)
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(STAMP)

# stdout belongs to the stdio protocol: the install's output goes to stderr.
serve:
	@$(MAKE) --no-print-directory install 1>&2
	@exec $(VENV)/bin/judge-mcp $(ARGS)

# Everything a clone needs is in it: the tests write the documents they read.
test: $(TEST_STAMP)
	$(VENV)/bin/ruff check server judges rag prompts tests tests_corpora bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The tests on the shared real-world corpora (real PDFs and DOCX files, judges' stored replies, aider's
# edits, human ratings): not in a clone, they sit beside it. Without them this fails, saying where it looked.
CORPORA ?= ../shared/corpora
test-corpora: $(TEST_STAMP)
	@JUDGE_TEST_CORPORA="$(abspath $(CORPORA))" $(VENV)/bin/pytest tests_corpora $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc = 5 ]; then echo "test-corpora: no test selected" >&2; exit 0; fi; exit $$rc

bench: $(TEST_STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist
