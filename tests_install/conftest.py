"""The wheel as a user installs it (`make test-install`, minutes; not in `make test`).

JUDGE_TEST_WHEEL names the wheel (`make wheel` builds it into dist/); without it every test here fails, saying so.
"""

from __future__ import annotations

from tests.conftest import *  # noqa: F403  (the same fixtures as tests/: no network)
