"""The result cache, cost and budgets as hosts meet them: real `judge-mcp` processes (stdio, and HTTP for two
organizations) through the mcp client, model replies from the loopback fake model server through the real
OpenAI SDK, which counts every request the server sends."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import JUDGE_MCP, call, error_of, free_port, server_env, wait_for_port
from tests.test_long_work import image_verdict, png_b64

pytestmark = [pytest.mark.anyio, pytest.mark.e2e, pytest.mark.usefixtures("on_engine")]  # on both engines

# The fake model's usage per reply is 11 input and 7 output tokens; at these prices a reply costs
# 11 × 2 / 1e6 + 7 × 10 / 1e6 = 0.000092 USD.
PRICES = json.dumps({"gpt-fake": {"input": 2.0, "output": 10.0}})


class Running:
    def __init__(self, client: Any, log: Path):
        self.client, self.log = client, log

    def stderr(self) -> str:
        return self.log.read_text(errors="replace")


@asynccontextmanager
async def judge_mcp(home: Path, fake: FakeModelServer, name: str = "server", **env: str) -> AsyncIterator[Running]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    home.mkdir(parents=True, exist_ok=True)
    log = home / f"{name}.stderr"
    params = StdioServerParameters(command=JUDGE_MCP, args=[], env=server_env(
        home, JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.openai_url,
        JUDGE_MCP_WARM_EMBEDDINGS="false", **env))
    with log.open("a") as err:
        async with Client(stdio_client(params, errlog=err)) as client:
            yield Running(client, log)


@pytest.fixture
def fake(fake_server: FakeModelServer) -> FakeModelServer:
    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(70)))
    return fake_server


async def evaluate(client: Any, **extra: Any) -> dict[str, Any]:
    return await call(client, "evaluate_image", brief="a red square", images=[png_b64()], **extra)


async def with_agent(client: Any) -> None:
    await call(client, "create_agent", name="Judge", system_prompt="You are judge A.")


async def test_a_repeated_evaluate_image_makes_no_model_request_and_says_cached(tmp_path: Path,
                                                                               fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake) as s:
        await with_agent(s.client)
        first = await evaluate(s.client)
        asked = len(fake.requests)
        again = await evaluate(s.client)
    assert asked == 1 and len(fake.requests) == 1
    assert (first["usage"]["cached"], first["usage"]["requests"]) == (False, 1)
    assert (again["usage"]["cached"], again["usage"]["requests"], again["usage"]["cache_hits"]) == (True, 0, 1)
    assert again["usage"]["cost_usd"] == 0.0 and again["evaluations"][0]["usage"]["cached"] is True
    assert again["evaluations"][0]["score"] == first["evaluations"][0]["score"] == 70.0


async def test_cache_false_asks_the_model_again(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake) as s:
        await with_agent(s.client)
        await evaluate(s.client)
        again = await evaluate(s.client, cache=False)
    assert len(fake.requests) == 2 and again["usage"]["cached"] is False and again["usage"]["requests"] == 1


async def test_cache_false_asks_each_model_of_a_calls_jury_again(tmp_path: Path, fake: FakeModelServer) -> None:
    jury = ["openai:gpt-fake", "openai:gpt-fake-2"]
    async with judge_mcp(tmp_path / "home", fake) as s:
        await with_agent(s.client)
        await evaluate(s.client, models=jury)
        again = await evaluate(s.client, models=jury, cache=False)
    assert len(fake.requests) == 4 and again["usage"]["cached"] is False and again["usage"]["requests"] == 2


async def test_a_failed_reading_is_not_cached(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="It is a fine picture, I suppose."))
    async with judge_mcp(tmp_path / "home", fake_server) as s:
        await with_agent(s.client)
        first = await evaluate(s.client)
        again = await evaluate(s.client)
    assert first["evaluations"][0]["failure_kind"] == again["evaluations"][0]["failure_kind"] == "parse_error"
    assert len(fake_server.requests) == 4  # each call: the ask and its repair round, none from the cache
    assert again["usage"]["cached"] is False and again["usage"]["requests"] == 2


async def test_a_truncated_reply_is_not_cached(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(70), stop="max_tokens"))
    async with judge_mcp(tmp_path / "home", fake_server) as s:
        await with_agent(s.client)
        await evaluate(s.client)
        again = await evaluate(s.client)
    assert again["evaluations"][0]["failure_kind"] == "truncated" and len(fake_server.requests) == 2


async def test_a_repaired_reading_is_replayed_from_the_cache(tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(40) if "could not be used" in rec.text()
                                                  else "No JSON here."))
    async with judge_mcp(tmp_path / "home", fake_server) as s:
        await with_agent(s.client)
        first = await evaluate(s.client)
        again = await evaluate(s.client)
    assert (first["evaluations"][0]["read_as"], first["evaluations"][0]["score"]) == ("repair", 40.0)
    assert (again["evaluations"][0]["read_as"], again["evaluations"][0]["score"]) == ("repair", 40.0)
    assert len(fake_server.requests) == 2 and again["usage"]["cache_hits"] == 2


async def test_two_processes_on_one_home_share_the_cache(tmp_path: Path, fake: FakeModelServer) -> None:
    home = tmp_path / "home"
    async with judge_mcp(home, fake, "one") as one, judge_mcp(home, fake, "two") as two:
        await with_agent(one.client)
        await evaluate(one.client)
        from_two = await evaluate(two.client)
    assert len(fake.requests) == 1 and from_two["usage"]["cached"] is True


async def test_the_cost_is_in_the_result_and_the_call_log_at_the_configured_price(
        tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES) as s:
        await with_agent(s.client)
        result = await evaluate(s.client)
        await evaluate(s.client)
    log = s.stderr()  # once the server has ended: every queued log line is written
    assert result["usage"]["cost_usd"] == 0.000092 and result["evaluations"][0]["usage"]["cost_usd"] == 0.000092
    assert "tool=evaluate_image org=default" in log
    assert "requests=1 tokens=11/7 cost_usd=0.000092 cached=false" in log
    assert "requests=0 tokens=0/0 cost_usd=0.000000 cached=true" in log


async def test_a_runs_cost_is_totalled_over_its_iterations(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES) as s:
        await with_agent(s.client)
        first = await evaluate(s.client)
        second = await evaluate(s.client, run_id=first["run_id"])  # iteration 2: another prompt, asked anew
        report = await call(s.client, "get_run", run_id=first["run_id"])
    assert (first["run_usage"]["cost_usd"], second["usage"]["cost_usd"]) == (0.000092, 0.000092)
    assert second["run_usage"]["cost_usd"] == report["usage"]["cost_usd"] == 0.000184
    assert [it["usage"]["requests"] for it in report["iterations"]] == [1, 1]


async def test_an_unknown_models_cost_is_null(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake) as s:
        await with_agent(s.client)
        result = await evaluate(s.client)
    log = s.stderr()
    assert result["usage"]["cost_usd"] is None and result["usage"]["input_tokens"] == 11
    assert "requests=1 tokens=11/7 cost_usd=null cached=false" in log


async def test_get_usage_reports_the_days_requests_tokens_and_cost(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES, JUDGE_MCP_DAILY_BUDGET_USD="1") as s:
        await with_agent(s.client)
        await evaluate(s.client)
        await evaluate(s.client, cache=False)
        usage = await call(s.client, "get_usage", days=1)
    today = datetime.now(UTC).date().isoformat()
    assert usage["days"] == [{"day": today, "model": "openai:gpt-fake", "requests": 2, "input_tokens": 22,
                              "output_tokens": 14, "cost_usd": 0.000184, "unpriced_requests": 0, "cache_hits": 0,
                              "saved_usd": 0.0}]
    assert (usage["today_cost_usd"], usage["daily_budget_usd"], usage["remaining_today_usd"]) == (
        0.000184, 1.0, 0.999816)


async def test_get_usage_counts_the_cached_replies_and_what_they_saved(tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES) as s:
        await with_agent(s.client)
        await evaluate(s.client)
        await evaluate(s.client)
        await evaluate(s.client)
        usage = await call(s.client, "get_usage", days=1)
    assert len(fake.requests) == 1
    assert [(d["requests"], d["cost_usd"], d["cache_hits"], d["saved_usd"]) for d in usage["days"]] == [
        (1, 0.000092, 2, 0.000184)]
    assert usage["today_cost_usd"] == 0.000092


async def test_a_call_past_the_daily_budget_is_refused_saying_the_budget_and_the_spend(
        tmp_path: Path, fake: FakeModelServer) -> None:
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES) as s:
        await with_agent(s.client)
        await evaluate(s.client)  # spent before the budget was set
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES,
                         JUDGE_MCP_DAILY_BUDGET_USD="0.00005") as s:
        refused = await error_of(s.client, "evaluate_image", brief="a blue square", images=[png_b64("blue")])
        agents = await call(s.client, "list_agents")  # tools that ask no model still answer
    today = datetime.now(UTC).date().isoformat()
    assert refused == (
        "Error executing tool evaluate_image: the daily budget of organization 'default' is spent: $0.000092 of "
        f"$0.00005 used today (UTC day {today}); calls that ask a model are refused until 00:00 UTC, and a running "
        "call stops before any request the budget cannot cover (raise JUDGE_MCP_DAILY_BUDGET_USD, or this "
        "organization's entry in JUDGE_MCP_ORG_BUDGETS_USD)")
    assert len(fake.requests) == 1 and len(agents["agents"]) == 1


async def test_a_request_the_budget_cannot_cover_is_not_sent_and_the_result_says_so(
        tmp_path: Path, fake: FakeModelServer) -> None:
    """Its estimate (the image, the prompt and all 2048 tokens it may write) is above the whole budget."""
    async with judge_mcp(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES, JUDGE_MCP_DAILY_BUDGET_USD="0.00005") as s:
        await with_agent(s.client)
        result = await evaluate(s.client)
    (evaluation,) = result["evaluations"]
    today = datetime.now(UTC).date().isoformat()
    assert (evaluation["status"], evaluation["score"], result["winner_index"]) == ("failed", None, None)
    assert re.fullmatch(
        r"budget_exceeded: the daily budget of organization 'default' cannot cover another request to "
        rf"openai:gpt-fake: \$0 of \$0.00005 spent today \(UTC day {today}\) and this request may cost up to "
        r"\$0.0\d+; it was not sent, nor is any later request of this call", evaluation["error"])
    assert (result["usage"]["budget_exceeded"], result["usage"]["refused_requests"]) == (True, 1)
    assert fake.requests == []


# --- two organizations over HTTP ----------------------------------------------------------------------------

@contextmanager
def http_server(home: Path, fake: FakeModelServer, **env: str) -> Iterator[str]:
    home.mkdir(parents=True, exist_ok=True)
    port = free_port()
    with (home / "stderr.log").open("w") as log:
        proc = subprocess.Popen([JUDGE_MCP, "--transport", "http", "--port", str(port)], env=server_env(
            home, JUDGE_MCP_TOKENS="tok-a=org-a,tok-b=org-b", JUDGE_MCP_MODEL="openai:gpt-fake",
            OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.openai_url, JUDGE_MCP_WARM_EMBEDDINGS="false", **env),
            stdout=subprocess.DEVNULL, stderr=log)
        try:
            assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
            yield f"http://127.0.0.1:{port}/mcp"
        finally:
            proc.terminate()
            proc.wait(timeout=10)


def http_client(url: str, token: str) -> Any:
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    return Client(streamable_http_client(url, http_client=httpx2.AsyncClient(
        headers={"Authorization": f"Bearer {token}"}, timeout=60)))


async def test_another_organization_does_not_hit_the_first_ones_cache(tmp_path: Path, fake: FakeModelServer) -> None:
    with http_server(tmp_path / "home", fake) as url:
        async with http_client(url, "tok-a") as a, http_client(url, "tok-b") as b:
            await with_agent(a)
            await with_agent(b)
            await evaluate(a)
            from_b = await evaluate(b)
            again_a = await evaluate(a)
    assert from_b["usage"]["cached"] is False and again_a["usage"]["cached"] is True
    assert len(fake.requests) == 2


async def test_one_organizations_budget_override_refuses_it_alone(tmp_path: Path, fake: FakeModelServer) -> None:
    with http_server(tmp_path / "home", fake, JUDGE_MCP_PRICES=PRICES,
                     JUDGE_MCP_ORG_BUDGETS_USD=json.dumps({"org-a": 0.00005})) as url:
        async with http_client(url, "tok-a") as a, http_client(url, "tok-b") as b:
            await with_agent(a)
            await with_agent(b)
            from_a = await evaluate(a)  # its one request may cost more than org-a's whole budget: not sent
            from_b = await evaluate(b)
            still = await evaluate(b, cache=False)
    assert from_a["evaluations"][0]["error"].startswith(
        "budget_exceeded: the daily budget of organization 'org-a' cannot cover another request")
    assert (from_b["usage"]["requests"], still["usage"]["requests"], len(fake.requests)) == (1, 1, 2)
