"""How far a daily budget is overrun: a real `judge-mcp` HTTP server with two organizations, the loopback fake model
server (which reports input tokens from the request's size and 300 output tokens a reply), a $0.05 budget, and
four ways to spend it: a pairwise jury of two models × 8 samples, rank_texts over 11 candidates, 20 concurrent
calls, and a background calibration of 40 items. Each runs on a fresh data home; the figure is the organization's
spend (get_usage) over its budget.

    PYTHONPATH=$PWD .venv/bin/python -m bench.budget
"""

from __future__ import annotations

import json
import subprocess
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio

from tests.fake_model_server import FakeModelServer, Recorded, Scripted
from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

BUDGET = 0.05
PRICES = {"gpt-fake": {"input": 2.0, "output": 10.0}, "gpt-fake-b": {"input": 2.0, "output": 10.0}}
OUTPUT_TOKENS = 300


def reply(rec: Recorded) -> Scripted:
    """A verdict for whatever was asked, with token counts that grow with the request."""
    text = rec.text()
    verdict = '{"winner": "Response A"}' if "response_a" in text else '{"score": 4, "reasoning": "fine"}'
    return Scripted(text=verdict, input_tokens=len(text.encode()) // 4, output_tokens=OUTPUT_TOKENS, delay_s=0.05)


def client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=300)))


async def jury_samples(url: str) -> None:
    async with client(url, "tok-a") as c:
        await c.call_tool("pairwise_compare", {"instruction": "Pick the better answer.", "candidates": [
            "The sky is blue because of Rayleigh scattering.", "Blue."], "candidate_type": "text",
            "samples": 8, "models": ["openai:gpt-fake", "openai:gpt-fake-b"]})


async def rank_eleven(url: str) -> None:
    async with client(url, "tok-a") as c:
        await c.call_tool("rank_texts", {"instruction": "Describe autumn.",
                                         "candidates": [f"Autumn, answer {i}: " + "leaves " * i for i in range(11)]})


async def twenty_at_once(url: str) -> None:
    async def one(i: int) -> None:
        async with client(url, "tok-a") as c:
            await c.call_tool("pairwise_compare", {"instruction": f"Pick the better answer ({i}).",
                                                   "candidates": ["Yes, it is.", "No."], "candidate_type": "text"})

    async with anyio.create_task_group() as tg:
        for i in range(20):
            tg.start_soon(one, i)


async def calibration(url: str) -> None:
    dataset = "\n".join(json.dumps({"instruction": f"Question {i}?", "candidates": [f"good {i}", "bad"],
                                    "human_winner": "A"}) for i in range(40))
    async with client(url, "tok-a") as c:
        started = (await c.call_tool("calibrate_judge", {"judge": "pairwise_compare", "dataset": dataset,
                                                         "background": True})).structured_content
        with anyio.fail_after(300):
            while True:
                job = (await c.call_tool("get_job", {"job_id": started["job_id"]})).structured_content
                if job["status"] != "working":
                    return
                await anyio.sleep(0.2)


async def spent(url: str) -> float:
    async with client(url, "tok-a") as c:
        usage = (await c.call_tool("get_usage", {"days": 1})).structured_content
    return float(usage["today_cost_usd"])


def measure(name: str, scenario: Callable[[str], Awaitable[None]], fake: FakeModelServer) -> None:
    fake.reset()
    fake.respond_with(reply)
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp) / "home"
        home.mkdir()
        port = free_port()
        with (home / "stderr.log").open("w") as log:
            proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], env=server_env(
                home, JUDGE_MCP_TOKENS="tok-a=org-a:member,tok-b=org-b:member", JUDGE_MCP_MODEL="openai:gpt-fake",
                OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.openai_url, JUDGE_MCP_WARM_EMBEDDINGS="false",
                JUDGE_MCP_PRICES=json.dumps(PRICES), JUDGE_MCP_DAILY_BUDGET_USD=str(BUDGET)),
                stdout=subprocess.DEVNULL, stderr=log)
            try:
                assert wait_for_port(port, 60), "the server did not start"
                url = f"http://127.0.0.1:{port}/mcp"
                anyio.run(scenario, url)
                total = anyio.run(spent, url)
            finally:
                proc.terminate()
                proc.wait(timeout=10)
    print(f"{name:<34} {len(fake.requests):>4} requests  spent ${total:.6f} of ${BUDGET}: {total / BUDGET:5.2f}× "
          f"the budget", flush=True)


def main() -> None:
    fake = FakeModelServer().start()
    try:
        measure("pairwise jury of 2 × 8 samples", jury_samples, fake)
        measure("rank_texts, 11 candidates", rank_eleven, fake)
        measure("20 concurrent pairwise calls", twenty_at_once, fake)
        measure("background calibration, 40 items", calibration, fake)
    finally:
        fake.stop()


if __name__ == "__main__":
    main()
