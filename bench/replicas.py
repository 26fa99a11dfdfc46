"""Calls/s of judge-mcp with 1 and with 3 HTTP replicas sharing one state: a cheap tool (get_agent) and
evaluate_image with a fake model that answers in 300 ms.

Starts what tests/test_replicas.py starts (tests/replicas.py): a throwaway PostgreSQL cluster (tests/postgres.py),
a `chroma run` server and the replicas, plus the fake model server (tests/fake_model_server.py, real OpenAI SDK
on the replicas' side) in a process of its own. A client of `--sessions` concurrent MCP sessions (streamable
HTTP, bearer token) spreads its sessions round-robin over the replicas in use; each session calls in a loop for
`--seconds`. "1 replica" uses the first replica of the same topology (the others idle). Each replica lets
`--concurrency` model calls run at once (JUDGE_MCP_CONCURRENCY), so evaluate_image is bound by the model's
latency, and its calls/s should grow with the replicas; get_agent is bound by the CPU (of one machine here).
evaluate_image is called with cache=false (every call asks the model) and no guideline documents.
Usage: python bench/replicas.py [--replicas 1 3] [--sessions 24] [--seconds 15] [--model-delay 0.3]
                                [--concurrency 4] [--tools get_agent evaluate_image]
"""

from __future__ import annotations

import argparse
import base64
import io
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bench.http_load import load  # noqa: E402
from tests.postgres import PgCluster, pg_bin  # noqa: E402
from tests.replicas import Topology, start_topology  # noqa: E402

TOKEN = "bench-token"

FAKE_MODEL = """
import sys, time
sys.path.insert(0, sys.argv[1])
from tests.fake_model_server import FakeModelServer, Scripted
from tests.test_long_work import image_verdict
server = FakeModelServer().start()
server.respond_with(lambda rec: Scripted(text=image_verdict(70), delay_s=float(sys.argv[2])))
print(server.port, flush=True)
while True:
    server.requests.clear()
    time.sleep(5)
"""


def png_b64() -> str:
    from PIL import Image

    out = io.BytesIO()
    Image.new("RGB", (8, 8), "red").save(out, "PNG")
    return base64.b64encode(out.getvalue()).decode()


def client(url: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {TOKEN}"}, timeout=120)))


async def measure(top: Topology, a: argparse.Namespace) -> None:
    urls = [r.url for r in top.replicas]
    async with client(urls[0]) as c:
        created = await c.call_tool("create_agent", {"name": "bench", "system_prompt": "You are judge A."})
        agent_id = created.structured_content["id"]
    calls = {"get_agent": {"agent_id": agent_id}, "list_agents": {},
             "evaluate_image": {"brief": "a red square", "images": [png_b64()], "cache": False}}
    print(f"{'tool':>14} {'replicas':>8} {'sessions':>8} {'calls/s':>8} {'p50 ms':>8} {'p99 ms':>8} "
          f"{'errors':>6} {'vs 1':>6}", flush=True)
    for tool in a.tools:
        first: float | None = None
        for n in a.replicas:
            rate, p50, p99, errors, _, _ = await load(urls[:n], TOKEN, tool, calls[tool], a.sessions, a.seconds)
            first = rate if first is None else first
            print(f"{tool:>14} {n:>8} {a.sessions:>8} {rate:>8.1f} {p50:>8.1f} {p99:>8.1f} {errors:>6} "
                  f"{rate / first:>5.2f}x", flush=True)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("--replicas", type=int, nargs="+", default=[1, 3])
    p.add_argument("--sessions", type=int, default=24)
    p.add_argument("--seconds", type=float, default=15)
    p.add_argument("--model-delay", type=float, default=0.3, help="seconds the fake model takes per reply")
    p.add_argument("--concurrency", type=int, default=4, help="JUDGE_MCP_CONCURRENCY of each replica")
    p.add_argument("--tools", nargs="+", default=["get_agent", "evaluate_image"],
                   choices=["get_agent", "list_agents", "evaluate_image"])
    a = p.parse_args()

    bindir = pg_bin()
    if bindir is None:
        raise SystemExit("PostgreSQL binaries not found (/usr/lib/postgresql/*/bin): apt-get install postgresql")
    root = Path(tempfile.mkdtemp(prefix="bench-replicas-"))
    fake = subprocess.Popen([sys.executable, "-c", FAKE_MODEL, str(ROOT), str(a.model_delay)],
                            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    cluster = PgCluster(bindir).start()
    top: Topology | None = None
    try:
        assert fake.stdout is not None
        port = int(fake.stdout.readline())
        env = {"JUDGE_MCP_TOKENS": f"{TOKEN}=bench", "JUDGE_MCP_MODEL": "openai:gpt-fake",
               "OPENAI_API_KEY": "sk-bench", "OPENAI_BASE_URL": f"http://127.0.0.1:{port}/v1",
               "JUDGE_MCP_CONCURRENCY": str(a.concurrency), "JUDGE_MCP_WARM_EMBEDDINGS": "false",
               "PYTHONPATH": str(ROOT)}
        top = start_topology(cluster.create_database(), root, env, replicas=max(a.replicas))
        print(f"# {os.cpu_count()} CPUs; fake model {a.model_delay * 1000:.0f} ms per reply; "
              f"JUDGE_MCP_CONCURRENCY={a.concurrency} per replica; {a.seconds:g} s per row", flush=True)
        anyio.run(measure, top, a)
    finally:
        if top is not None:
            top.stop()
        cluster.stop()
        fake.terminate()
        fake.wait(timeout=10)


if __name__ == "__main__":
    main()
