"""The one calling contract (judges/call.py) as a host meets it: a real `judge-mcp` process started from /, the
real MCP client offering sampling, default settings (JUDGE_MCP_MODEL auto) and an API key for the fake server.
Whether a background call is accepted is decided from the model the call resolves to, not from
JUDGE_MCP_MODEL alone."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp.types import CreateMessageResult, TextContent

from tests.fake_model_server import FakeModelServer, Scripted
from tests.mcp_helpers import JUDGE_MCP, call, error_of, server_env
from tests.test_long_work import image_verdict, png_b64

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def host_with_sampling(home: Path, fake: FakeModelServer, asked: list[Any]) -> AsyncIterator[Any]:
    """A host that offers its own model (sampling) to a judge-mcp whose model is `auto` (the default)."""
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        asked.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text=image_verdict(20)),
                                   model="host-model", stop_reason="endTurn")

    params = StdioServerParameters(command=JUDGE_MCP, args=[], cwd="/", env=server_env(
        home, OPENAI_API_KEY="sk-test", OPENAI_BASE_URL=fake.openai_url, JUDGE_MCP_WARM_EMBEDDINGS="false"))
    with (home.parent / f"{home.name}.stderr").open("a") as err:
        async with Client(stdio_client(params, errlog=err), mode="legacy", sampling_callback=sampling) as client:
            yield client


async def finished(client: Any, job_id: str, timeout_s: float = 60) -> dict[str, Any]:
    deadline = time.monotonic() + timeout_s
    while True:
        job = await call(client, "get_job", job_id=job_id)
        if job["status"] != "working" or time.monotonic() > deadline:
            return job
        await anyio.sleep(0.1)




async def test_a_background_call_is_accepted_when_the_agents_model_is_an_api_backend(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    fake_server.respond_with(lambda rec: Scripted(text=image_verdict(70)))
    asked: list[Any] = []
    async with host_with_sampling(tmp_path / "home", fake_server, asked) as client:
        agent = await call(client, "create_agent", name="Brand", system_prompt="You judge brand fit.",
                           model="openai:gpt-fake")
        started = await call(client, "evaluate_image", brief="a red square", images=[png_b64()],
                             agent_ids=[agent["id"]], background=True)
        job = await finished(client, started["job_id"])
    assert (started["status"], job["status"]) == ("working", "completed")
    evaluation = job["result"]["evaluations"][0]
    assert (evaluation["status"], evaluation["score"], evaluation["model"]) == ("ok", 70.0, "gpt-fake")
    assert asked == []  # the host's model was never asked


async def test_a_background_call_is_refused_when_an_agent_without_a_model_would_use_the_hosts(
        tmp_path: Path, fake_server: FakeModelServer) -> None:
    asked: list[Any] = []
    async with host_with_sampling(tmp_path / "home", fake_server, asked) as client:
        api = await call(client, "create_agent", name="Api", system_prompt="You judge.", model="openai:gpt-fake")
        host = await call(client, "create_agent", name="Host", system_prompt="You judge.")
        message = await error_of(client, "evaluate_image", brief="a red square", images=[png_b64()],
                                 agent_ids=[api["id"], host["id"]], background=True)
        jobs = await call(client, "list_jobs")
    assert "cannot run as a background job. Call it without background, or set JUDGE_MCP_MODEL to an API " \
           "backend" in message
    assert jobs["jobs"] == [] and asked == [] and fake_server.requests == []
