"""How the deterministic work of three judges grows with their input (issue 28, item 3): each input at
n, 2n and 4n, the best of a few runs in CPU time of this process (its threads included, other processes'
load not), and the ratio t(4n)/t(n) — about 4 for linear work, about 16 for quadratic. Absolute times
depend on the machine; the ratios are the figure.

1. evaluate_analysis's deterministic checks D-1..D-5 on an analysis holding one long string ("a." repeated:
   the D-5 URL pattern backtracked over it); n = 21,000 characters.
2. evaluate_rag_answer with a scripted judge: the answer split into claims and the faithfulness prompt
   rendered with one fence per claim; n = 23,000 characters ("Ok. " repeated).
3. evaluate_trajectory with a scripted judge: the deterministic checks and the prompt, one fence per
   step; n = 9,000 steps, every step a failed call of its own tool.

Usage: python bench/linear_work.py [--runs 3]
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from judges.analysis import judge as analysis  # noqa: E402
from judges.text.rag import RagContext, evaluate_rag_answer  # noqa: E402
from judges.text.trajectory import Step, evaluate_trajectory  # noqa: E402
from tests.scripted_model import ScriptedModel  # noqa: E402


def deterministic_checks(n: int) -> Callable[[], Any]:
    data = {"company_name": "Acme", "website_url": "https://acme.io", "insights": ["Moat: data"] * 3,
            "notes": "a." * (n // 2)}

    def run() -> None:
        analysis.d1_json_validation(data)
        analysis.d2_schema_compliance(data, analysis.DEFAULT_SCHEMA)
        analysis.d3_format_compliance(data, analysis.DEFAULT_INSIGHT_FIELDS)
        analysis.d4_field_cardinality(data, analysis.DEFAULT_CARDINALITY)
        analysis.d5_url_preservation(data, "https://acme.io")
    return run


def rag_answer(n: int) -> Callable[[], Any]:
    answer = "Ok. " * (n // 4)

    async def run() -> None:
        client = ScriptedModel(lambda request: '{"score": 3, "claims": [], "contexts": []}')
        await evaluate_rag_answer(client, question="What?", answer=answer, contexts=[RagContext(text="A passage.")])
    return run


def trajectory(n: int) -> Callable[[], Any]:
    steps = [Step(tool=f"tool_{i}", arguments={"i": i}, result="Error: failed") for i in range(n)]

    async def run() -> None:
        client = ScriptedModel(lambda request: '{"goal_reached": false, "score": 1}')
        await evaluate_trajectory(client, goal="Do it.", steps=steps)
    return run


CASES: list[tuple[str, int, str, Callable[[int], Callable[[], Any]]]] = [
    ("evaluate_analysis D-1..D-5", 21_000, "characters", deterministic_checks),
    ("evaluate_rag_answer claims", 23_000, "characters", rag_answer),
    ("evaluate_trajectory", 9_000, "steps", trajectory),
]


def best_of(run: Callable[[], Any], runs: int) -> float:
    """The fastest of `runs` runs (a synchronous function, or an async one timed inside its event loop)."""
    async def timed() -> float:
        gc.collect()  # the garbage of the run before is not this run's cost
        started = time.process_time()
        result = run()
        if result is not None:
            await result
        return time.process_time() - started
    return min(anyio.run(timed) for _ in range(runs))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    for name, n, unit, make in CASES:
        best_of(make(100), 1)  # imports and first compiles out of the figures
        times = [best_of(make(k * n), args.runs) for k in (1, 2, 4)]
        shown = ", ".join(f"{k * n:,} {unit}: {t * 1000:,.0f} ms" for k, t in zip((1, 2, 4), times, strict=True))
        print(f"{name}: {shown}; t(4n)/t(n) = {times[2] / times[0]:.1f}")


if __name__ == "__main__":
    main()
