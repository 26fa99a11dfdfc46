"""A repeated evaluate_image answered from the result cache against the same call asked of the model: a real
stdio `judge-mcp` (python -m server, this checkout), the real MCP client, the model behind the loopback fake
model server (real OpenAI SDK) answering after `--latency` seconds.

Per round: a new image (so the first call is a cache miss and asks the model), then the same call `--repeats`
times (each answered from the cache: 0 model requests, usage.cached true). Prints the medians of the uncached
and the cached call, server side (the call's own log line, duration_ms) and end to end (client), and checks the
cached ones made no model request. The issue's target: a cached call in ≤ 5 ms.
The calls are timed once the server's warm-up (heavy imports and loads in a thread, the first seconds of a
process) has ended: while it runs, it holds the interpreter lock for stretches and every call waits (≈ +2.5 ms
a cached call here); `--during-warmup` times them from the start instead.
Usage: python bench/cache.py [--rounds 10] [--repeats 5] [--latency 0.3] [--judges 1] [--during-warmup]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.fake_model_server import FakeModelServer, Scripted

DURATION = re.compile(r"tool=evaluate_image .*duration_ms=(\d+) outcome=ok requests=(\d+).* cached=(\w+)")
VERDICT = ('{"score": 72, "TOP_ISSUE": {"problem": "dull", "severity": "major", "fix": "brighten"}, '
           '"whatWorked": ["lighting"], "promptInstructions": [], "feedback": "ok"}')


VALIDATION: list[float] = []  # the client's own check of each result against the tool's output schema


def png_b64(seed: int) -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (64, 64), (seed % 256, (seed * 7) % 256, (seed * 13) % 256)).save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def server_env(fake: FakeModelServer, home: str) -> dict[str, str]:
    cache = os.environ.get("JUDGE_MCP_MODEL_CACHE") or str(Path(tempfile.gettempdir()) / "judge-mcp-test-models")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("JUDGE_MCP_", "OPENAI_", "ANTHROPIC_"))}
    env.update(JUDGE_MCP_HOME=home, JUDGE_MCP_LOG_LEVEL="INFO", JUDGE_MCP_MODEL_CACHE=cache, HF_HUB_OFFLINE="1",
               JUDGE_MCP_ALLOWED_ROOTS=home, JUDGE_MCP_MODEL="openai:gpt-4.1-mini", OPENAI_API_KEY="bench",
               OPENAI_BASE_URL=fake.openai_url, PYTHONPATH=str(Path(__file__).resolve().parents[1]))
    return env


def warmed_up(log_path: Path, timeout_s: float = 180) -> None:
    """Until the server logs the end of its warm-up (rag/warmup.py)."""
    deadline = time.monotonic() + timeout_s
    while "warm-up done" not in log_path.read_text(errors="replace"):
        if time.monotonic() > deadline:
            raise SystemExit(f"the server's warm-up has not ended after {timeout_s:g} s")
        time.sleep(0.1)


async def run(env: dict[str, str], errlog: Any, rounds: int, repeats: int, judges: int,
              log_path: Path | None) -> tuple[list[float], list[float]]:
    """End-to-end seconds of the uncached calls and of the cached ones."""
    from mcp import Client, StdioServerParameters
    from mcp.client.session import ClientSession
    from mcp.client.stdio import stdio_client

    validate = ClientSession.validate_tool_result

    async def timed_validate(self: Any, name: str, result: Any) -> None:
        started = time.perf_counter()
        await validate(self, name, result)
        VALIDATION.append(time.perf_counter() - started)

    ClientSession.validate_tool_result = timed_validate  # type: ignore[method-assign]
    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], env=env, cwd="/")
    uncached: list[float] = []
    cached: list[float] = []
    async with Client(stdio_client(params, errlog=errlog)) as client:
        if log_path is not None:
            await anyio.to_thread.run_sync(warmed_up, log_path)
        for j in range(judges):
            agent = await client.call_tool("create_agent", {"name": f"judge {j}",
                                                            "system_prompt": f"You are judge {j}."})
        floor = []
        for _ in range(20):  # a call that asks no model and writes nothing: the transport's own cost
            started = time.perf_counter()
            await client.call_tool("get_agent", {"agent_id": agent.structured_content["id"]})
            floor.append(time.perf_counter() - started)
        print(f"  floor (get_agent, end to end): median {statistics.median(floor) * 1000:.1f} ms")
        for r in range(rounds):
            args = {"brief": "a coloured square", "images": [png_b64(r)]}
            for i in range(1 + repeats):
                started = time.perf_counter()
                result = await client.call_tool("evaluate_image", args)
                took = time.perf_counter() - started
                assert not result.is_error, result.content[0].text
                usage = result.structured_content["usage"]
                assert usage["cached"] is (i > 0), usage
                (cached if i else uncached).append(took)
    return uncached, cached


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--latency", type=float, default=0.3, help="the fake model's answer time, seconds")
    parser.add_argument("--judges", type=int, default=1)
    parser.add_argument("--during-warmup", action="store_true", help="time the calls while the warm-up runs")
    args = parser.parse_args()

    fake = FakeModelServer().start()
    fake.respond_with(lambda rec: Scripted(text=VERDICT, delay_s=args.latency))
    with tempfile.TemporaryDirectory() as home:
        log_path = Path(home) / "stderr.log"
        with log_path.open("w") as errlog:
            uncached, cached = anyio.run(run, server_env(fake, home), errlog, args.rounds, args.repeats, args.judges,
                                        None if args.during_warmup else log_path)
        lines = [m.groups() for m in DURATION.finditer(log_path.read_text())]
    fake.stop()
    server_uncached = [float(d) for d, _, c in lines if c == "false"]
    server_cached = [float(d) for d, _, c in lines if c == "true"]
    asked = sum(int(n) for _, n, c in lines if c == "true")
    ms = 1000.0
    print(f"evaluate_image, {args.judges} judge(s), model latency {args.latency:g} s, {args.rounds} rounds × "
          f"(1 uncached + {args.repeats} cached); model requests sent: {len(fake.requests)}")
    print(f"  uncached: median {statistics.median(uncached) * ms:.1f} ms end to end, "
          f"{statistics.median(server_uncached):.0f} ms in the server")
    print(f"  cached:   median {statistics.median(cached) * ms:.1f} ms end to end (max {max(cached) * ms:.1f}), "
          f"{statistics.median(server_cached):.0f} ms in the server; model requests by cached calls: {asked}")
    print(f"  the MCP client's own output-schema validation of an evaluate_image result: median "
          f"{statistics.median(VALIDATION[-len(cached):]) * ms:.1f} ms (client side, in the end-to-end figure)")
    verdict = "met" if statistics.median(server_cached) <= 5.0 else "NOT met"
    print(f"  target (a cached call answered by the server in ≤ 5 ms, median): {verdict}")


if __name__ == "__main__":
    main()
