"""Time to validate and to dry-run 50 edit ops against a 5,000-line file (target < 50 ms each).

Baseline in the same process: reading the file and doing the 50 str.replace calls by hand.
Usage: python bench/patch.py [repeats]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from judges.patches.ops import apply_patch, validate_patch


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 30
    root = Path(tempfile.mkdtemp())
    lines = [f"def function_{i}(value):\n    return value * {i}  # line {i}\n" for i in range(2500)]
    (root / "big.py").write_text("".join(lines))
    ops = [{"kind": "edit", "path": "big.py", "find": f"return value * {i * 50}  # line {i * 50}\n",
            "replace": f"return value + {i * 50}  # line {i * 50}\n"} for i in range(50)]
    patch = {"ops": ops}

    def baseline() -> None:
        text = (root / "big.py").read_text()
        for op in ops:
            assert text.count(op["find"]) == 1
            text = text.replace(op["find"], op["replace"])

    def timed(fn: object) -> float:
        samples = []
        for _ in range(repeats):
            t = time.perf_counter()
            fn()  # type: ignore[operator]
            samples.append((time.perf_counter() - t) * 1000)
        return statistics.median(samples)

    assert validate_patch(patch, root).ok
    base = timed(baseline)
    v = timed(lambda: validate_patch(patch, root))
    d = timed(lambda: apply_patch(patch, root, dry_run=True))
    print(f"50 edit ops on a 5,000-line file, median of {repeats}: validate {v:.1f} ms, dry-run {d:.1f} ms "
          f"(bare read + 50 str.replace: {base:.1f} ms; ratio {v / base:.1f}x / {d / base:.1f}x)")


if __name__ == "__main__":
    main()
