"""get_usage: the caller's organization's model use and cost per day and model, and its daily budget."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import Field

from judges.errors import ConfigError
from judges.store.usage import UsageReport

from .context import app_of, organization_of
from .errors import tool_errors


def register(mcp: MCPServer) -> None:
    @mcp.tool(annotations=ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False))
    @tool_errors
    async def get_usage(
        ctx: Context,
        days: Annotated[int, Field(description="UTC days back, today included (1-366).")] = 7,
    ) -> UsageReport:
        """This organization's model requests, tokens and cost per day and model, and today's budget left."""
        app = app_of(ctx)
        if app.metering is None:
            raise ConfigError("usage is not recorded by this server")
        return await app.store(app.metering.ledger.report, organization_of(ctx), days)
