"""`make test-corpora` (tests_corpora/): without the shared corpora it fails, saying where it looked; it never
passes by skipping them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_the_corpora_tests_fail_without_the_corpora_and_say_where_they_looked(tmp_path: Path) -> None:
    missing = tmp_path / "no-corpora"
    env = {**os.environ, "JUDGE_TEST_CORPORA": str(missing)}
    proc = subprocess.run([sys.executable, "-m", "pytest", "tests_corpora", "-q"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 4  # a usage error: failed, nothing skipped
    assert f"the shared corpora are not at {missing}: put them there (../shared/corpora beside the clone)" in proc.stderr
