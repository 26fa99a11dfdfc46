"""Two real `judge-mcp` processes started at once on one data home: a tool that is listed is always callable
(two such starts answered "Unknown tool: create_agent" to 2 of 48 calls), and each sees every agent the other
made. Twice: on a fresh home (both build the listing from the code), then on that home again (both list from
the cached listing and import the tool modules on first use while the background warm-up imports them too)."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import anyio
import pytest

from tests.mcp_helpers import server_env

REPO = Path(__file__).resolve().parents[1]
CALLS = 24  # per process, all at once, right after initialize


class Round:
    def __init__(self, label: str) -> None:
        self.label = label
        self.made: dict[int, list[Any]] = {}
        self.listed: dict[int, tuple[set[str], Any]] = {}
        self.both_made = anyio.Event()

    def names(self) -> set[str]:
        return {f"{self.label}-{i}-{n}" for i in (0, 1) for n in range(CALLS)}


async def _session(home: Path, index: int, round_: Round) -> None:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    params = StdioServerParameters(command=sys.executable, args=["-m", "server"], cwd="/", env=server_env(
        home, PYTHONPATH=str(REPO), JUDGE_MCP_WARM_EMBEDDINGS="false", JUDGE_MCP_WARM_DELAY_S="0"))
    with (home.parent / f"{home.name}-{round_.label}-{index}.stderr").open("w") as errlog:
        async with Client(stdio_client(params, errlog=errlog)) as client:
            tools = {t.name for t in (await client.list_tools()).tools}
            results: list[Any] = []

            async def create(n: int) -> None:
                results.append(await client.call_tool(
                    "create_agent", {"name": f"{round_.label}-{index}-{n}", "template_id": "brand_compliance"}))

            async with anyio.create_task_group() as group:
                for n in range(CALLS):
                    group.start_soon(create, n)
            round_.made[index] = results
            if len(round_.made) == 2:
                round_.both_made.set()
            await round_.both_made.wait()  # the other process has made its agents too
            round_.listed[index] = (tools, await client.call_tool("list_agents", {}))


async def _round(home: Path, label: str) -> Round:
    round_ = Round(label)
    with anyio.fail_after(240):
        async with anyio.create_task_group() as group:
            for index in (0, 1):
                group.start_soon(_session, home, index, round_)
    return round_


@pytest.mark.anyio
async def test_two_processes_started_at_once_on_one_home_answer_every_listed_tool_and_see_every_agent(
        tmp_path: Path) -> None:
    fresh = await _round(tmp_path, "fresh")
    cached = await _round(tmp_path, "cached")
    for round_, expected in ((fresh, fresh.names()), (cached, fresh.names() | cached.names())):
        errors = [r.content[0].text for results in round_.made.values() for r in results if r.is_error]
        assert errors == [] and sum(len(r) for r in round_.made.values()) == 2 * CALLS
        for index in (0, 1):
            tools, agents = round_.listed[index]
            assert "create_agent" in tools and not agents.is_error
            assert {a["name"] for a in agents.structured_content["agents"]} == expected
