"""What a host pays for judge-mcp's tools/list: the bytes of each tool's name, description and input schema
(what hosts put into their model's context), compact JSON as sent, for all tools and for each toolset; and
the whole listing with output schemas. A real `judge-mcp` over stdio and the real MCP client."""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
from pathlib import Path


async def sizes(toolsets: str | None) -> tuple[int, int, int]:
    from mcp import Client, StdioServerParameters
    from mcp.client.stdio import stdio_client

    env = {**os.environ, "JUDGE_MCP_HOME": tempfile.mkdtemp(), "JUDGE_MCP_MODEL": "demo",
           "JUDGE_MCP_WARM_EMBEDDINGS": "false", **({"JUDGE_MCP_TOOLSETS": toolsets} if toolsets else {})}
    params = StdioServerParameters(command=str(Path(sys.executable).with_name("judge-mcp")), args=[], env=env)
    quiet = open(os.devnull, "w")  # noqa: ASYNC230 (a benchmark's set-up, not the server's loop)
    async with Client(stdio_client(params, errlog=quiet)) as client:
        tools = (await client.list_tools()).tools
    quiet.close()

    def size(value: object) -> int:
        return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())

    shown = sum(size({"name": t.name, "description": t.description, "inputSchema": t.input_schema}) for t in tools)
    whole = sum(size(t.model_dump(mode="json", by_alias=True, exclude_none=True)) for t in tools)
    return len(tools), shown, whole


async def main() -> None:
    from server.roles import TOOLSETS

    for toolsets in [None, "code,patches", *TOOLSETS]:
        n, shown, whole = await sizes(toolsets)
        print(f"{toolsets or 'all':14} tools={n:2}  name+description+input={shown / 1000:5.1f} KB  "
              f"with output schemas={whole / 1000:6.1f} KB")


if __name__ == "__main__":
    asyncio.run(main())
