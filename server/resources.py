"""Resources: agents, their guideline documents, runs (and their charts), jobs and prompt assets, as
`judge://` URIs. Everything but the prompt assets belongs to an organization: another organization's id
reads as not found. Prompt assets are listed (resources/list); the rest are templates
(resources/templates/list), and tool results carry links to the ones they create or mention.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceNotFoundError
from mcp.server.mcpserver.resources import FunctionResource, ResourceSecurity

import prompts
from judges.errors import InputError
from prompts import PromptError

from .context import app_of, organization_of

T = TypeVar("T")
JSON = "application/json"


def _found(read: Callable[[], T]) -> T:
    """A read whose not-found (or bad id) is the resource's not-found, with the store's message."""
    try:
        return read()
    except (InputError, PromptError) as exc:
        raise ResourceNotFoundError(str(exc)) from exc


async def _stored(ctx: Context, read: Callable[..., T], *args: Any) -> T:
    """A store read (`app.store`: off the event loop on PostgreSQL), its not-found the resource's not-found."""
    try:
        return await app_of(ctx).store(read, *args)
    except InputError as exc:
        raise ResourceNotFoundError(str(exc)) from exc


def prompt_uri(prompt_id: str) -> str:
    """judge://prompts/{id}/{version} of a prompt asset id such as 'image/judge@v1'."""
    name, version = prompt_id.split("@")
    return f"judge://prompts/{name}/{version}"


def register(mcp: MCPServer[Any]) -> None:
    @mcp.resource("judge://agents/{agent_id}", name="agent", mime_type=JSON,
                  description="A judge agent of your organization (as get_agent returns it).")
    async def agent(agent_id: str, ctx: Context) -> str:
        agent = await _stored(ctx, app_of(ctx).agents.get, organization_of(ctx), agent_id)
        return agent.model_dump_json(indent=2)

    @mcp.resource("judge://agents/{agent_id}/documents/{document_id}", name="guideline_document", mime_type=JSON,
                  description="One guideline document of an agent: its record (status, chunks, characters).")
    async def document(agent_id: str, document_id: str, ctx: Context) -> str:
        docs = await _stored(ctx, app_of(ctx).guidelines.documents, organization_of(ctx), agent_id)
        for doc in docs:
            if doc.id == document_id:
                return doc.model_dump_json(indent=2)
        raise ResourceNotFoundError(f"agent {agent_id!r} has no document {document_id!r} (list_guidelines shows them)")

    @mcp.resource("judge://runs/{run_id}", name="run", mime_type=JSON,
                  description="An evaluate_image run: brief, panel, iterations and plateau (as get_run returns it).")
    async def run(run_id: str, ctx: Context) -> str:
        report = await _stored(ctx, app_of(ctx).images.report, organization_of(ctx), run_id)
        return report.model_dump_json(indent=2)

    @mcp.resource("judge://runs/{run_id}/chart.png", name="run_chart", mime_type="image/png",
                  description="A run's chart: best and mean aggregate per iteration, the plateau marked.")
    async def chart(run_id: str, ctx: Context) -> bytes:
        from .image_tools import run_chart_png

        return run_chart_png(await _stored(ctx, app_of(ctx).images.report, organization_of(ctx), run_id))

    @mcp.resource("judge://calibrations/{calibration_id}", name="calibration", mime_type=JSON,
                  description="A calibrate_judge report (as get_calibration returns it).")
    async def calibration(calibration_id: str, ctx: Context) -> str:
        from judges.calibration.store import CalibrationStore

        report = await _stored(ctx, CalibrationStore(app_of(ctx).db).get, organization_of(ctx), calibration_id)
        return report.model_dump_json(indent=2)

    @mcp.resource("judge://calibrations/{calibration_id}/chart.png", name="calibration_chart", mime_type="image/png",
                  description="A calibration's chart: judge against human mean (scores) or the confusion matrix "
                              "(pairwise).")
    async def calibration_chart(calibration_id: str, ctx: Context) -> bytes:
        from judges.calibration.store import CalibrationStore

        from .calibration_tools import calibration_chart_png

        report = await _stored(ctx, CalibrationStore(app_of(ctx).db).get, organization_of(ctx), calibration_id)
        return calibration_chart_png(report)

    @mcp.resource("judge://jobs/{job_id}", name="job", mime_type=JSON,
                  description="A background job (as get_job returns it).")
    async def job(job_id: str, ctx: Context) -> str:
        runner = app_of(ctx).jobs
        if runner is None:
            raise ResourceNotFoundError("background jobs are not available in this server")
        found = await _stored(ctx, runner.store.get, organization_of(ctx), job_id)
        return found.model_dump_json(indent=2)

    @mcp.resource("judge://prompts/{+prompt_id}/{version}", name="prompt_asset", mime_type="text/plain",
                  description="A prompt asset's Jinja2 template, e.g. judge://prompts/image/judge/v1.",
                  security=ResourceSecurity(exempt_params={"prompt_id"}))
    async def prompt_asset(prompt_id: str, version: str) -> str:
        if ".." in prompt_id.split("/"):
            raise ResourceNotFoundError(f"no prompt asset {prompt_id!r}")
        return _found(lambda: prompts.source(f"{prompt_id}@{version}"))

    for prompt_id in prompts.list_templates():  # listed: global, the same for every organization
        mcp.add_resource(FunctionResource(
            uri=prompt_uri(prompt_id), name=prompt_id, mime_type="text/plain",
            description=prompts.load(prompt_id).description, fn=functools.partial(prompts.source, prompt_id)))
