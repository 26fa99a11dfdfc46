# Two commands on a fresh machine: `make serve` and `make test`.
# Each creates .venv when absent and installs only when pyproject.toml changed
# (stamp files), so a second run starts at once.
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(PY) -m pip --disable-pip-version-check
STAMP := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

.PHONY: serve test install bench clean

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

test: $(TEST_STAMP)
	$(VENV)/bin/ruff check server judges rag prompts tests bench
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports
	$(VENV)/bin/pytest $(PYTEST_ARGS)

bench: $(TEST_STAMP)
	@for b in bench/*.py; do echo "== $$b"; $(PY) $$b || exit 1; done

clean:
	rm -rf $(VENV) build dist
