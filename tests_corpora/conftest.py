"""The tests on the shared real-world corpora (`make test-corpora`): real PDFs and DOCX files from pypdf's
and mammoth's own test suites, real judges' stored replies, aider's recorded edits, the VIEScore raters.

They are not in a clone: they sit beside it, at ../shared/corpora (or where JUDGE_TEST_CORPORA says).
Without them every test here fails with where it looked; `make test` needs none of them.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tests.conftest import *  # noqa: F403  (the same fixtures as tests/: no network, fake model server, engines)

CORPORA = Path(os.environ.get("JUDGE_TEST_CORPORA") or Path(__file__).resolve().parents[2] / "shared" / "corpora")
MISSING = (f"the shared corpora are not at {CORPORA}: put them there (../shared/corpora beside the clone) or "
           "name their folder, e.g. `make test-corpora CORPORA=/path/to/corpora`")


def corpus(*parts: str) -> Path:
    """A file or folder of the corpora; a test that needs one that is missing fails, saying where it looked."""
    path = CORPORA.joinpath(*parts)
    if not path.exists():
        pytest.fail(f"{path} is missing; {MISSING}", pytrace=False)
    return path


def pytest_configure(config: pytest.Config) -> None:
    """Without the corpora the run stops at once with where it looked (a usage error: it fails, never skips)."""
    if not CORPORA.is_dir():
        raise pytest.UsageError(MISSING)
