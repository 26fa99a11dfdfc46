"""p50/p99 of a cheap tool call (get_agent), in process and over stdio.

Usage: python bench/call_overhead.py [calls]
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pct(values: list[float], p: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, round(p / 100 * (len(values) - 1)))]


async def measure(client: object, calls: int) -> list[float]:
    created = await client.call_tool("create_agent", {"name": "bench", "system_prompt": "p"})  # type: ignore[attr-defined]
    agent_id = created.structured_content["id"]
    times = []
    for _ in range(calls):
        t = time.perf_counter()
        await client.call_tool("get_agent", {"agent_id": agent_id})  # type: ignore[attr-defined]
        times.append((time.perf_counter() - t) * 1000)
    return times


async def main() -> None:
    from mcp import Client, StdioServerParameters

    from server.app import create_server
    from server.settings import Settings

    calls = int(sys.argv[1]) if len(sys.argv) > 1 else 500
    home = Path(tempfile.mkdtemp())
    async with Client(create_server(Settings(home=home, log_level="WARNING"))) as c:
        in_process = await measure(c, calls)
    env = {**os.environ, "JUDGE_MCP_HOME": str(home / "stdio"), "JUDGE_MCP_LOG_LEVEL": "WARNING"}
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("judge-mcp")), env=env)
    async with Client(params) as c:
        stdio = await measure(c, calls)
    for name, t in (("in process", in_process), ("stdio", stdio)):
        print(f"get_agent {name}: p50 {statistics.median(t):.2f} ms, p99 {pct(t, 99):.2f} ms ({calls} calls)")


if __name__ == "__main__":
    anyio.run(main)
