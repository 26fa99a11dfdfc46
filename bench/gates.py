"""Wall time of the three gates (ruff, mypy, pytest) on the test project: first run, and a repeated
run on the same sandbox (mypy's cache warm).

Usage: python bench/gates.py
"""

from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from judges.gates import GateSettings, run_gates, sandbox_from
    from tests.test_code_judge import make_project

    project = make_project(Path(tempfile.mkdtemp()) / "shop-project")
    box = sandbox_from(project, None, [project.parent])
    for label in ("first run", "repeated run"):
        started = time.perf_counter()
        _, runs = run_gates(box, GateSettings())
        total = time.perf_counter() - started
        parts = ", ".join(f"{r.name} {r.duration_s:.2f} s" for r in runs)
        print(f"gates on the test project, {label}: {total:.2f} s ({parts})")


if __name__ == "__main__":
    main()
