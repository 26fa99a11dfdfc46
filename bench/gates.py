"""Wall time of the three gates (ruff, mypy, pytest) on the test project, sandboxed (bubblewrap)
and unsandboxed, in the same process, interleaved, each run on a fresh copy (so mypy's cache is
cold in both modes). Prints the median per gate and mode and the sandbox's overhead per gate;
the goal is at most 150 ms per gate.

Usage: python bench/gates.py [rounds]   (default 5)
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> None:
    from judges.code import sandbox
    from judges.code.gates import GateSettings, discard, run_gate, run_gates, sandbox_from
    from tests.test_code_judge import make_project

    bwrap, why = sandbox.detect()
    if bwrap is None:
        print(f"no sandbox here ({why}): nothing to compare")
        return
    print(f"sandbox: {why}")
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 5
    project = make_project(Path(tempfile.mkdtemp()) / "shop-project")
    modes = {"none": GateSettings(), "bwrap": GateSettings(sandbox=bwrap)}
    times: dict[tuple[str, str], list[float]] = {}
    empty: dict[str, list[float]] = {m: [] for m in modes}
    for _ in range(rounds):
        for mode, settings in modes.items():
            box = sandbox_from(project, None, [project.parent])
            try:
                _, runs = run_gates(box, settings)
                for r in runs:
                    times.setdefault((r.name, mode), []).append(r.duration_s)
                started = time.perf_counter()
                run_gate("empty", [sys.executable, "-c", "pass"], box, settings)
                empty[mode].append(time.perf_counter() - started)
            finally:
                discard(box)
    times.update({("python -c pass", m): empty[m] for m in modes})
    print(f"{rounds} runs per gate and mode, each on a fresh copy (min is the least disturbed by other load):")
    for name in ("lint", "types", "tests", "python -c pass"):
        line = f"  {name:14s}"
        for stat in (min, statistics.median):
            plain, boxed = stat(times[(name, "none")]), stat(times[(name, "bwrap")])
            line += (f"  {stat.__name__}: unsandboxed {plain * 1000:5.0f} ms, sandboxed {boxed * 1000:5.0f} ms, "
                     f"overhead {(boxed - plain) * 1000:+4.0f} ms")
        print(line)


if __name__ == "__main__":
    main()
