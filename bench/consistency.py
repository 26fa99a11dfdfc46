"""Repeated samples, measured through a real `judge-mcp` process (stdio, the real MCP client) and the fake
model server in its own process, whose scores are drawn from N(50, sd) on a 0–100 scale after a fixed
300 ms latency:

1. the standard deviation the tool reports (pairwise_compare viescore, samples=10) tracks the true sd;
2. samples=5 costs ≤ 1.2× the wall time of samples=1 (the samples run concurrently);
3. the same two for judge_code's verdict (run_gates=false: the model's verdict alone), its tests_edge
   score drawn from N(0.5, sd) on 0–1.

Usage: python bench/consistency.py [calls per sd] [repeats]
"""

from __future__ import annotations

import base64
import io
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
LATENCY = 0.3
MEAN = 50.0


@contextmanager
def fake_model(sd: float, delay: float, seed: int, reply: str = '{"score": {score}}', mean: float = MEAN) -> Iterator[str]:
    fake = subprocess.Popen([sys.executable, "-m", "tests.fake_model_server", "--reply", reply,
                             "--delay", str(delay), "--noise-mean", str(mean), "--noise-sd", str(sd),
                             "--seed", str(seed)], cwd=ROOT, stdout=subprocess.PIPE, text=True)
    assert fake.stdout is not None
    try:
        yield f"http://127.0.0.1:{fake.stdout.readline().strip()}/v1"
    finally:
        fake.kill()
        fake.wait()


def image() -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 64), "red").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


CODE_VERDICT = json.dumps({"verdict": "revise", "scores": {
    "compilation": 1, "tests_functional": 1, "tests_edge": 0, "types": 1, "style": 1, "security": 1},
    "explanations": {"root_cause": "r", "minimal_fix": "m"}, "fix_plan": []}).replace('"tests_edge": 0', '"tests_edge": {score}')
CODE_ARGS = {"spec": "add two numbers", "run_gates": False,
             "files": [{"path": "calc.py", "content": "def add(a: int, b: int) -> int:\n    return a + b\n"}]}


async def session(base_url: str, calls: list[int], tool: str = "pairwise_compare",
                  args: dict[str, Any] | None = None) -> list[tuple[float, dict[str, Any]]]:
    """One server process; each entry of `calls` is one call (viescore by default) with that many samples."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home = Path(tempfile.mkdtemp())
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(PYTHONPATH=str(ROOT), JUDGE_MCP_HOME=str(home), JUDGE_MCP_MODEL="openai:bench", OPENAI_API_KEY="k",
               OPENAI_BASE_URL=base_url, JUDGE_MCP_WARM_EMBEDDINGS="false", JUDGE_MCP_LOG_LEVEL="WARNING")
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd=str(home))
    args = args or {"instruction": "make the square red", "candidates": [image()], "method": "viescore",
                    "score_scale": {"min": 0, "max": 100}}
    out = []
    with (home / "stderr.log").open("w") as err:
        async with Client(stdio_client(params, errlog=err)) as c:
            await c.call_tool(tool, {**args, "cache": False})  # SDK imported, connection open
            for n in calls:
                t = time.perf_counter()
                result = await c.call_tool(tool, {**args, "samples": n, "cache": False})
                wall = time.perf_counter() - t
                assert not result.is_error, result.content[0].text  # type: ignore[union-attr]
                out.append((wall, result.structured_content or {}))
    return out


def wall_times(timed: list[tuple[float, dict[str, Any]]]) -> tuple[float, float]:
    """Median wall time of the samples=1 and the samples=5 calls (alternating)."""
    one = statistics.median(w for i, (w, _) in enumerate(timed) if i % 2 == 0)
    five = statistics.median(w for i, (w, _) in enumerate(timed) if i % 2 == 1)
    return one, five


def report(label: str, key: str, sds: tuple[float, ...], stat: Callable[[dict[str, Any]], float], per_sd: int,
           repeats: int, seed_of: Callable[[float], int], tool: str = "pairwise_compare",
           args: dict[str, Any] | None = None, **fake: Any) -> None:
    """How the reported sd tracks the true one, then samples=5 against samples=1 in wall time."""
    print(f"{label}: true sd | reported sd (mean of {per_sd} calls, samples=10) | ratio")
    for sd in sds:
        with fake_model(sd, 0.0, seed=seed_of(sd), **fake) as url:
            results = anyio.run(session, url, [10] * per_sd, tool, args)
        reported = [stat(r) for _, r in results]
        mean_sd = statistics.fmean(reported)
        print(f"{sd:7.2f} | {mean_sd:6.3f} (min {min(reported):.3f}, max {max(reported):.3f}) | {mean_sd / sd:.3f}")
    with fake_model(sds[1], LATENCY, seed=1, **fake) as url:
        one, five = wall_times(anyio.run(session, url, [1, 5] * repeats, tool, args))
    print(f"{label} wall time, {LATENCY * 1000:.0f} ms per reply, median of {repeats}: samples=1 {one * 1000:.0f} ms, "
          f"samples=5 {five * 1000:.0f} ms, ratio {five / one:.3f} (target ≤ 1.2; serial would be 5.0)")
    print(json.dumps({f"{key}samples_1_ms": round(one * 1000), f"{key}samples_5_ms": round(five * 1000),
                      f"{key}ratio": round(five / one, 3)}))


def main() -> None:
    per_sd = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    repeats = int(sys.argv[2]) if len(sys.argv) > 2 else 7
    report("viescore", "", (2.0, 5.0, 10.0), lambda r: r["sample_stats"][0]["sd"], per_sd, repeats, int)
    report("judge_code", "judge_code_", (0.02, 0.05, 0.1), lambda r: r["sample_stats"]["tests_edge"]["sd"], per_sd,
           repeats, lambda sd: 1000 + int(sd * 100), tool="judge_code", args=CODE_ARGS, reply=CODE_VERDICT, mean=0.5)


if __name__ == "__main__":
    main()
