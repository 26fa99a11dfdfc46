"""One line per tool call on stderr, from a real `judge-mcp` process."""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path

import pytest
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client

pytestmark = [pytest.mark.anyio, pytest.mark.e2e]
JUDGE_MCP = str(Path(sys.executable).with_name("judge-mcp"))


async def test_each_tool_call_logs_one_line_with_its_organization_duration_and_outcome(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("JUDGE_MCP_")}
    env.update(JUDGE_MCP_HOME=str(tmp_path / "home"), JUDGE_MCP_ORG="acme", JUDGE_MCP_WARM_EMBEDDINGS="false")
    log = tmp_path / "stderr.log"
    with log.open("w") as err:
        params = StdioServerParameters(command=JUDGE_MCP, env=env, cwd="/")
        async with stdio_client(params, errlog=err) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            created = await session.call_tool("create_agent", {"name": "Brand", "system_prompt": "Judge the brand."})
            missing = await session.call_tool("get_agent", {"agent_id": "no-such-agent"})
    assert not created.is_error and missing.is_error
    lines = [line for line in log.read_text().splitlines() if "tool=" in line]
    assert len(lines) == 2
    assert re.search(r"judge_mcp: tool=create_agent org=acme duration_ms=\d+ outcome=ok$", lines[0])
    assert re.search(r"judge_mcp: tool=get_agent org=acme duration_ms=\d+ outcome=invalid_input$", lines[1])
