"""Several judge-mcp replicas behind one address, on real engines: a throwaway PostgreSQL cluster, a real
`chroma run` server and three HTTP replicas (each with its own data home), driven by a client that
round-robins its calls. Each replica is reached through its own MCP session (the HTTP transport keeps
sessions per process), so "a call on replica 2" is a call through replica 2's session."""

from __future__ import annotations

import os
import signal
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import anyio
import pytest

from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import call
from tests.replicas import Topology, chroma_command, start_topology
from tests.test_long_work import image_verdict, png_b64, replies
from tests.test_transports import client_with_token

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]

LEASE_S = 6.0
TOKEN = "tok-r"


@pytest.fixture(scope="module")
def topology(postgres: Any, fake_server_session: FakeModelServer,
             tmp_path_factory: pytest.TempPathFactory) -> Iterator[Topology]:
    if chroma_command() is None:
        pytest.skip("the chroma command is not installed")
    env = {"JUDGE_MCP_TOKENS": f"{TOKEN}=org-r", "JUDGE_MCP_LEASE_S": str(LEASE_S),
           "JUDGE_MCP_MODEL": "openai:gpt-fake", "OPENAI_API_KEY": "sk-test",
           "OPENAI_BASE_URL": fake_server_session.openai_url, "JUDGE_MCP_WARM_EMBEDDINGS": "false"}
    top = start_topology(postgres.create_database(), tmp_path_factory.mktemp("replicas"), env, replicas=3)
    try:
        yield top
    finally:
        top.stop()


@pytest.fixture
def fake(fake_server: FakeModelServer) -> FakeModelServer:
    fake_server.respond_with(replies)
    return fake_server


@asynccontextmanager
async def sessions(urls: list[str]) -> AsyncIterator[list[Any]]:
    """One client session per replica: calls round-robin over them by index."""
    async with AsyncExitStack() as stack:
        yield [await stack.enter_async_context(client_with_token(url, TOKEN)) for url in urls]


async def first_document(client: Any, agent: str, until: Callable[[dict[str, Any]], bool],
                         timeout_s: float) -> dict[str, Any]:
    """The agent's first document, polled until it exists and `until` holds."""
    with anyio.fail_after(timeout_s):
        while True:
            documents = (await call(client, "list_guidelines", agent_id=agent))["documents"]
            if documents and until(documents[0]):
                return documents[0]  # type: ignore[no-any-return]
            await anyio.sleep(0.1)


async def test_an_agent_created_on_one_replica_is_uploaded_to_and_searched_on_the_others(
        topology: Topology, fake: FakeModelServer) -> None:
    async with sessions([r.url for r in topology.replicas]) as (one, two, three):
        agent = (await call(one, "create_agent", name="Brand", system_prompt="You are judge Brand."))["id"]
        doc = await call(two, "upload_guideline", agent_id=agent, filename="brand.md",
                         text="Our brand blue is HEX#488EFF. Never stretch the logo.")
        found = await call(three, "search_guidelines", agent_id=agent, query="logo stretch", top_k=3,
                           similarity_threshold=0)
        listed = await call(one, "list_guidelines", agent_id=agent)
    assert doc["processing_status"] == "processed"
    assert [c["document_id"] for c in found["chunks"]] == [doc["id"]] * doc["chunk_count"]
    assert [d["id"] for d in listed["documents"]] == [doc["id"]]


async def test_evaluate_on_one_replica_reads_the_agents_of_another_with_the_fake_model(
        topology: Topology, fake: FakeModelServer) -> None:
    async with sessions([r.url for r in topology.replicas[:2]]) as (one, two):
        await call(two, "create_agent", name="Judge-E", system_prompt="You are judge A.")
        run = await call(one, "evaluate_image", brief="a red square", images=[png_b64()])
        again = await call(two, "get_run", run_id=run["run_id"])
    assert run["ranking"][0]["aggregate_score"] is not None
    assert again["run_id"] == run["run_id"]


async def test_a_job_started_on_one_replica_is_read_on_another_and_cancelled_from_a_third(
        topology: Topology, fake: FakeModelServer) -> None:
    fake.respond_with(lambda rec: Scripted(text=image_verdict(50), delay_s=30))
    async with sessions([r.url for r in topology.replicas]) as (one, two, three):
        await call(one, "create_agent", name="Judge-J", system_prompt="You are judge J.")
        job = await call(two, "evaluate_image", brief="a red square", images=[png_b64()], background=True)
        read = await call(three, "get_job", job_id=job["job_id"])
        cancelled = await call(one, "cancel_job", job_id=job["job_id"])
        await anyio.sleep(LEASE_S)  # the holder's next heartbeat sees the cancel and stops the work
        later = await call(two, "get_job", job_id=job["job_id"])
    assert read["status"] == "working" and read["tool"] == "evaluate_image"
    assert (cancelled["status"], cancelled["error"]) == ("cancelled", "cancelled with cancel_job")
    assert later["status"] == "cancelled"


async def test_an_upload_on_a_killed_replica_becomes_interrupted_after_the_lease_and_a_retry_succeeds(
        topology: Topology, fake: FakeModelServer) -> None:
    doomed = topology.start("doomed")
    text = " ".join(f"Rule {i}: the logo keeps clear space number {i}." for i in range(4_000))
    try:
        async with sessions([doomed.url, topology.replicas[0].url]) as (lost, one):
            agent = (await call(one, "create_agent", name="Lost", system_prompt="judge"))["id"]
            async with anyio.create_task_group() as tg:
                tg.start_soon(lost.call_tool, "upload_guideline", {"agent_id": agent, "text": text,
                                                                  "filename": "rules.md"})
                pending = await first_document(one, agent, lambda d: True, 60)
                os.kill(doomed.proc.pid, signal.SIGKILL)
                tg.cancel_scope.cancel()
    finally:
        doomed.proc.kill()
        doomed.proc.wait()
    async with sessions([r.url for r in topology.replicas[1:]]) as (two, three):
        doc = await first_document(three, agent, lambda d: d["processing_status"] != "pending", LEASE_S * 10)
        retried = await call(two, "upload_guideline", agent_id=agent, text=text, filename="rules.md")
    assert pending["processing_status"] == "pending"
    assert (doc["processing_status"], doc["error"]) == ("failed", "interrupted (server stopped during processing); "
                                                                   "upload again")
    assert (retried["id"], retried["processing_status"]) == (doc["id"], "processed")


async def test_two_hundred_concurrent_calls_across_replicas_have_no_errors(
        topology: Topology, fake: FakeModelServer) -> None:
    errors: list[str] = []
    async with sessions([r.url for r in topology.replicas] * 2) as clients:
        agent = (await call(clients[0], "create_agent", name="Busy", system_prompt="judge"))["id"]

        async def one_call(i: int) -> None:
            result = await clients[i % len(clients)].call_tool("get_agent", {"agent_id": agent})
            if result.is_error:
                errors.append(result.content[0].text)

        async with anyio.create_task_group() as tg:
            for i in range(200):
                tg.start_soon(one_call, i)
    assert errors == []
