"""The host's own model through MCP sampling, chosen by `auto` when the client offers it."""

from __future__ import annotations

from typing import Any

import pytest
from mcp import Client
from mcp.server.mcpserver import Context
from mcp.types import CreateMessageResult, TextContent
from pydantic import BaseModel

from judges.models.protocol import Message, ModelRequest
from judges.reading.parsing import run_judge
from server.app import create_server
from server.context import app_of
from server.errors import tool_errors

pytestmark = pytest.mark.anyio


class Score(BaseModel):
    score: int


class Outcome(BaseModel):
    model: str
    score: int | None
    failure: str | None


def server_with_probe(settings: Any) -> Any:
    """The real server plus one test tool that judges through whatever model `auto` resolves."""
    mcp = create_server(settings)

    @mcp.tool()
    @tool_errors
    async def probe_judge(ctx: Context) -> Outcome:
        client = await (await app_of(ctx).judge_call(ctx)).client()
        judged = await run_judge(client, ModelRequest(system="Judge.", messages=[Message.user("Rate 1-10")]), Score)
        return Outcome(model=judged.model, score=judged.value.score if judged.value else None,
                       failure=judged.failure.kind if judged.failure else None)

    return mcp


async def test_auto_uses_the_hosts_model_when_sampling_is_offered(settings: Any) -> None:
    seen: list[Any] = []

    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        seen.append(params)
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text='{"score": 7}'),
                                   model="host-model", stop_reason="endTurn")

    async with Client(server_with_probe(settings), mode="legacy", sampling_callback=sampling) as c:
        result = await c.call_tool("probe_judge", {})
    assert result.structured_content == {"model": "host-model", "score": 7, "failure": None}
    assert seen[0].system_prompt.startswith("Judge.")
    assert '"score"' in seen[0].system_prompt  # the schema travels as instructions


async def test_sampling_reply_cut_at_max_tokens_is_truncated(settings: Any) -> None:
    async def sampling(context: Any, params: Any) -> CreateMessageResult:
        return CreateMessageResult(role="assistant", content=TextContent(type="text", text='{"sco'),
                                   model="host-model", stop_reason="maxTokens")

    async with Client(server_with_probe(settings), mode="legacy", sampling_callback=sampling) as c:
        result = await c.call_tool("probe_judge", {})
    assert result.structured_content["failure"] == "truncated"


async def test_no_backend_and_no_sampling_names_the_variables(settings: Any) -> None:
    async with Client(server_with_probe(settings)) as c:
        result = await c.call_tool("probe_judge", {})
    assert result.is_error
    assert "ANTHROPIC_API_KEY" in result.content[0].text and "OPENAI_API_KEY" in result.content[0].text
