"""Fair share between organizations (issue 28, item 7) and a rejected key that does not stick (item 10): the pool
of model requests and the guard as units, then through real `judge-mcp` HTTP servers with two organizations."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anyio
import pytest

from judges.models.fairshare import ORGANIZATION, FairPool
from judges.models.guard import CallPolicy
from judges.models.protocol import Message, ModelRequest
from judges.models.registry import BackendConfig, ModelRegistry
from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import JUDGE_MCP, free_port, server_env, wait_for_port

pytestmark = pytest.mark.anyio

# --- the pool --------------------------------------------------------------------------------------


async def test_a_waiting_organization_is_served_before_the_rest_of_a_busy_ones_queue() -> None:
    pool = FairPool(2)
    served: list[str] = []
    release = anyio.Event()

    async def request(org: str) -> None:
        async with pool.slot(org):
            served.append(org)
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(request, "a")
        await anyio.sleep(0.05)
        tg.start_soon(request, "b")
        await anyio.sleep(0.05)
        assert (served, pool.waiting("a"), pool.waiting("b")) == (["a", "a"], 4, 1)
        release.set()
    assert served[:4] == ["a", "a", "a", "b"]  # b takes the first slot freed after it queued, not a's 4th request


async def test_one_organization_holds_at_most_its_share_while_another_finds_a_slot_free() -> None:
    pool = FairPool(4, per_org=3)
    release = anyio.Event()
    b_waited: list[float] = []

    async def request(org: str) -> None:
        started = time.monotonic()
        async with pool.slot(org):
            if org == "b":
                b_waited.append(time.monotonic() - started)
            await release.wait()

    async with anyio.create_task_group() as tg:
        for _ in range(10):
            tg.start_soon(request, "a")
        await anyio.sleep(0.05)
        assert (pool.in_flight("a"), pool.in_flight()) == (3, 3)
        tg.start_soon(request, "b")
        await anyio.sleep(0.05)
        assert (pool.in_flight("b"), pool.in_flight()) == (1, 4)
        release.set()
    assert b_waited[0] < 0.05 and pool.in_flight() == 0


async def test_a_cancelled_waiter_gives_up_its_place_and_leaks_no_slot() -> None:
    pool = FairPool(1)
    hold = anyio.Event()

    async def holder() -> None:
        async with pool.slot("a"):
            await hold.wait()

    async with anyio.create_task_group() as tg:
        tg.start_soon(holder)
        await anyio.sleep(0.02)
        with anyio.move_on_after(0.05):
            async with pool.slot("b"):
                pass
        assert pool.waiting() == 0
        hold.set()
    async with pool.slot("c"):
        assert pool.in_flight() == 1
    assert pool.in_flight() == 0


async def test_the_organization_is_the_requests_own_by_default() -> None:
    pool = FairPool(1)
    token = ORGANIZATION.set("acme")
    try:
        async with pool.slot():
            assert pool.in_flight("acme") == 1
    finally:
        ORGANIZATION.reset(token)


# --- a rejected key (unit) ----------------------------------------------------------------------------

def ask() -> ModelRequest:
    return ModelRequest(messages=[Message.user("judge")], max_tokens=16)


async def complete_all(client: Any, n: int) -> list[Any]:
    results: list[Any] = [None] * n

    async def one(i: int) -> None:
        try:
            results[i] = await client.complete(ask())
        except Exception as exc:
            results[i] = exc

    async with anyio.create_task_group() as tg:
        for i in range(n):
            tg.start_soon(one, i)
    return results


async def test_a_rejected_key_fails_at_once_then_one_call_tries_again_alone(fake_server: FakeModelServer) -> None:
    reg = ModelRegistry("openai:gpt-fake", BackendConfig(openai_api_key="sk-wrong", openai_base_url=fake_server.openai_url),
                        CallPolicy(key_rejected_s=0.5), concurrency=8)
    client = reg.resolve()
    fake_server.respond_with(lambda rec: Scripted(status=401, text="Incorrect API key provided"))
    first = await complete_all(client, 5)  # the first call goes alone: one request for all five
    assert len(fake_server.requests) == 1 and all("rejected" in str(e) for e in first)
    assert [getattr(e, "requests", None) for e in first].count(0) == 4

    await anyio.sleep(0.6)  # the window is over; the key is still refused: one more request, for five calls
    again = await complete_all(client, 5)
    assert len(fake_server.requests) == 2 and all("rejected" in str(e) for e in again)

    await anyio.sleep(0.6)  # the backend accepts the key again (a proxy's 401 passed, the key was rotated)
    fake_server.respond_with(lambda rec: Scripted(text="ok", delay_s=0.2))
    ok = await complete_all(client, 5)
    await reg.aclose()
    assert [r.text for r in ok] == ["ok"] * 5
    starts = sorted(r.at for r in fake_server.requests[2:])
    assert len(starts) == 5 and starts[1] - starts[0] >= 0.15  # the probe went alone; the rest after its answer


# --- through real servers ----------------------------------------------------------------------------

TOKENS = "tok-a=org-a:member,tok-b=org-b:member"
ACCEPT = {"accept": "application/json, text/event-stream", "mcp-protocol-version": "2025-06-18"}


def start(home: Path, fake: FakeModelServer, **env: str) -> tuple[Any, str]:
    import subprocess

    port = free_port()
    home.mkdir(parents=True, exist_ok=True)
    err = (home / "stderr.log").open("w")
    proc = subprocess.Popen(
        [JUDGE_MCP, "--transport", "http", "--port", str(port)], stdout=subprocess.DEVNULL, stderr=err,
        env=server_env(home, JUDGE_MCP_TOKENS=TOKENS, JUDGE_MCP_MODEL="openai:gpt-fake", OPENAI_API_KEY="sk-test",
                       OPENAI_BASE_URL=fake.openai_url, JUDGE_MCP_MAX_RETRIES="0", **env))
    assert wait_for_port(port, 30), "the HTTP server did not start within 30 s"
    return proc, f"http://127.0.0.1:{port}/mcp"


@pytest.fixture
def servers() -> Iterator[list[Any]]:
    started: list[Any] = []
    yield started
    for proc in started:
        proc.terminate()
        proc.wait(timeout=10)


async def rpc(url: str, token: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    """One JSON-RPC request over stateless HTTP (no session, no client-side extra requests): its response."""
    import httpx2

    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}", **ACCEPT}, timeout=120) as http:
        r = await http.post(url, json=body)
    text = r.text
    if text.startswith("event:") or "\ndata:" in text or text.startswith("data:"):
        text = [line[5:] for line in text.splitlines() if line.startswith("data:")][-1]
    answer: dict[str, Any] = json.loads(text)
    return answer


async def call(url: str, token: str, tool: str, **args: Any) -> dict[str, Any]:
    answer = await rpc(url, token, "tools/call", {"name": tool, "arguments": args})
    return answer["result"]  # type: ignore[no-any-return]


def pairwise(instruction: str, **extra: Any) -> dict[str, Any]:
    return {"instruction": instruction, "candidates": ["a", "b"], "candidate_type": "text", "cache": False, **extra}


async def until_minute_has(seconds: float) -> None:
    """Start a rate-limit test with at least `seconds` left in the current minute (its window)."""
    now = datetime.now(UTC)
    if now.second + now.microsecond / 1e6 > 60 - seconds:
        await anyio.sleep(60.5 - now.second - now.microsecond / 1e6)


@pytest.mark.usefixtures("on_engine")
async def test_the_job_over_an_organizations_cap_is_refused_while_another_organization_starts_one(
        tmp_path: Path, fake_server: FakeModelServer, servers: list[Any]) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="[[A]]", delay_s=3.0))
    proc, url = start(tmp_path / "home", fake_server, JUDGE_MCP_MAX_JOBS_PER_ORG="2")
    servers.append(proc)
    results: list[dict[str, Any]] = []

    async def start_job(i: int) -> None:
        results.append(await call(url, "tok-a", "pairwise_compare", **pairwise(f"job {i}", background=True)))

    async with anyio.create_task_group() as tg:  # six at once: the cap holds against a race
        for i in range(6):
            tg.start_soon(start_job, i)
    other = await call(url, "tok-b", "pairwise_compare", **pairwise("org b's job", background=True))
    started = [r for r in results if not r.get("isError")]
    refused = [r["content"][0]["text"] for r in results if r.get("isError")]
    assert len(started) == 2 and len(refused) == 4
    assert refused[0] == ("Error executing tool pairwise_compare: limit reached: organization 'org-a' already has 2 background jobs running, the most it may "
                          "have (JUDGE_MCP_MAX_JOBS_PER_ORG=2); wait for one to finish (list_jobs, get_job), cancel one "
                          "(cancel_job), or call the tool without background")
    assert not other.get("isError") and other["structuredContent"]["status"] == "working"


async def timed(url: str, token: str, instruction: str) -> float:
    started = time.monotonic()
    result = await call(url, token, "pairwise_compare", **pairwise(instruction, swap=False))
    assert not result.get("isError"), result
    return time.monotonic() - started


@pytest.mark.parametrize("share", ["4", "default"])
async def test_another_organizations_one_request_call_stays_within_twice_its_unloaded_time(
        tmp_path: Path, fake_server: FakeModelServer, servers: list[Any], share: str) -> None:
    """org-a floods the pool (4 slots) with 20 model requests of 1.5 s; org-b's one-request call waits at most for
    one of a's requests to end (round-robin; share 4: a may hold every slot), or finds a slot free (the default
    share, three quarters of the pool). First come first served made it wait behind all of a's queued requests
    (~6 s more). Meanwhile org-b's calls that ask no model answer at once."""
    fake_server.respond_with(lambda rec: Scripted(text="[[A]]", delay_s=1.5))
    env = {"JUDGE_MCP_CONCURRENCY": "4", **({"JUDGE_MCP_ORG_CONCURRENCY": share} if share != "default" else {})}
    proc, url = start(tmp_path / "home", fake_server, **env)
    servers.append(proc)
    unloaded = sorted([await timed(url, "tok-b", f"alone {i}") for i in range(3)])[1]
    loaded: list[float] = []

    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: call(url, "tok-a", "pairwise_compare", **pairwise("flood 0", samples=10)))
        await anyio.sleep(1.0)  # a's 20 requests: 3 or 4 in flight, the rest queued
        started = time.monotonic()
        assert "result" in await rpc(url, "tok-b", "tools/call", {"name": "list_agents", "arguments": {}})
        no_model = time.monotonic() - started
        loaded.append(await timed(url, "tok-b", "while flooded"))
        flood_sent = sum("flood 0" in r.text() for r in fake_server.requests)
        assert flood_sent < 20  # a's flood was still running when b's call was answered
    print(f"\n  org-b one-request call: unloaded {unloaded * 1000:.0f} ms, while org-a floods {loaded[0] * 1000:.0f} ms "
          f"(share {share}); list_agents {no_model * 1000:.0f} ms", end="")
    assert loaded[0] <= 2 * unloaded + 0.5
    assert no_model < 0.5


async def test_the_rate_limit_counts_each_model_request_a_call_sends(
        tmp_path: Path, fake_server: FakeModelServer, servers: list[Any]) -> None:
    fake_server.respond_with(lambda rec: Scripted(text="[[A]]"))
    proc, url = start(tmp_path / "home", fake_server, JUDGE_MCP_RATE_LIMIT_PER_MINUTE="5")
    servers.append(proc)
    await until_minute_has(15)
    result = await call(url, "tok-a", "pairwise_compare", **pairwise("count me", samples=5))  # 10 requests asked
    refused = await call(url, "tok-a", "list_agents")
    other = await call(url, "tok-b", "list_agents")
    assert len(fake_server.requests) == 4  # the call counted one, its model requests the other four
    failures = result["structuredContent"]["failures"]
    assert failures and failures[0]["kind"] == "rate_limited"
    assert failures[0]["message"].startswith("a model request was not sent: organization 'org-a' has made its 5 "
                                             "requests this minute")
    assert refused["isError"] and refused["content"][0]["text"].startswith("limit reached: organization 'org-a'")
    assert not other.get("isError")


async def test_the_rate_limit_covers_lists_reads_and_prompts(
        tmp_path: Path, fake_server: FakeModelServer, servers: list[Any]) -> None:
    proc, url = start(tmp_path / "home", fake_server, JUDGE_MCP_RATE_LIMIT_PER_MINUTE="4")
    servers.append(proc)
    await until_minute_has(15)
    prompts = await rpc(url, "tok-a", "prompts/list")
    name = prompts["result"]["prompts"][0]["name"]
    within = [prompts, await rpc(url, "tok-a", "tools/list"), await rpc(url, "tok-a", "resources/list"),
              await rpc(url, "tok-a", "resources/templates/list")]
    over = [await rpc(url, "tok-a", "resources/read", {"uri": "judge://jobs/none"}),
            await rpc(url, "tok-a", "prompts/get", {"name": name, "arguments": {}}),
            await rpc(url, "tok-a", "tools/list")]
    other = await rpc(url, "tok-b", "tools/list")
    assert all("result" in answer for answer in within)
    assert [answer.get("error", {}).get("message", "")[:47] for answer in over] == [
        "limit reached: organization 'org-a' has made it"] * 3
    assert "result" in other


async def test_a_rejected_key_recovers_after_the_window_with_exactly_one_probe(
        tmp_path: Path, fake_server: FakeModelServer, servers: list[Any]) -> None:
    fake_server.respond_with(lambda rec: Scripted(status=401, text="Incorrect API key provided"))
    proc, url = start(tmp_path / "home", fake_server, JUDGE_MCP_KEY_REJECTED_S="2")
    servers.append(proc)
    first = await call(url, "tok-a", "pairwise_compare", **pairwise("one"))  # two requests asked, one sent
    at_once = await call(url, "tok-b", "pairwise_compare", **pairwise("two"))  # every organization: none sent
    assert len(fake_server.requests) == 1
    assert "the API key was rejected" in first["structuredContent"]["failures"][0]["message"]
    assert "fail without a request" in at_once["structuredContent"]["failures"][0]["message"]
    await anyio.sleep(2.2)  # the window is over, the key still refused: of the call's two orders one probes
    still = await call(url, "tok-a", "pairwise_compare", **pairwise("three"))
    assert len(fake_server.requests) == 2 and len(still["structuredContent"]["failures"]) == 2
    await anyio.sleep(2.2)
    fake_server.respond_with(lambda rec: Scripted(text="[[A]]"))
    recovered = await call(url, "tok-b", "pairwise_compare", **pairwise("four"))
    assert not recovered.get("isError") and recovered["structuredContent"]["failures"] == []
    assert len(fake_server.requests) == 4  # one probe, then the call's other order
