"""get_usage: the caller's organization's model use and cost per day and model, and its daily budget."""

from __future__ import annotations

from typing import Annotated

from mcp.server.mcpserver import Context
from pydantic import BaseModel, Field

from judges.errors import ConfigError
from judges.store.usage import UsageReport

from .context import app_of, organization_of
from .declare import READ_ONLY, tool


class UsageInput(BaseModel):
    days: Annotated[int, Field(description="UTC days back, today included (1-366).")] = 7


@tool(role="member", toolset="jobs", annotations=READ_ONLY)
async def get_usage(ctx: Context, args: UsageInput) -> UsageReport:
    """This organization's model requests, tokens and cost per day and model, and today's budget left."""
    app = app_of(ctx)
    if app.metering is None:
        raise ConfigError("usage is not recorded by this server")
    return await app.store(app.metering.ledger.report, organization_of(ctx), args.days)


TOOLS = (get_usage,)
