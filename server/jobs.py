"""Progress and background jobs for long tools: `run_or_background` is the one helper every long tool calls.

A long tool's body builds `work(progress)` (the core call, with everything it needs from the request already
taken) and returns `await run_or_background(ctx, "tool_name", background, work)`. In the foreground the work
reports progress to the client (notifications/progress, and log notifications for clients that asked);
with background=true the call returns a `JobStarted` at once and the work runs in the server's task group,
its progress and its result stored by the JobStore, read with get_job. The tool's return annotation is
`Annotated[CallToolResult, or_job(ResultModel)]`: its output schema is the result or a JobStarted.

The shapes map onto MCP's Tasks extension: job_id is the task id, the statuses are Tasks' (plus
interrupted), get_job/cancel_job/list_jobs are tasks/get, tasks/cancel and tasks/list, and get_job's
`result` is what tasks/result would return.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ContentBlock, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, RootModel

from judges.errors import InputError
from judges.progress import Progress
from judges.store.jobs import Job, JobStatus, JobStore

from .client_log import client_log
from .errors import tool_errors
from .options import SHARED_OPTIONS

log = logging.getLogger("judge_mcp")
Background = Annotated[bool, Field(description=SHARED_OPTIONS["background"])]
Work = Callable[[Progress], Awaitable[Any]]
T = TypeVar("T")


class JobStarted(BaseModel):
    """What a tool called with background=true returns at once."""

    job_id: str
    status: JobStatus
    tool: str
    message: str = "running in the background; poll get_job(job_id) for progress and the result"


@functools.cache
def or_job(model: type[BaseModel]) -> type[RootModel[Any]]:
    """The output type of a tool that may run in the background: its result model, or a JobStarted."""

    class ResultOrJob(RootModel[model | JobStarted]):  # type: ignore[valid-type]
        model_config = ConfigDict(json_schema_extra={"type": "object"})  # an outputSchema has an object root

    ResultOrJob.__name__ = ResultOrJob.__qualname__ = f"{model.__name__}OrJob"
    return ResultOrJob


def report_to(ctx: Any) -> Progress:
    """The foreground progress callback: MCP progress notifications (and log notifications for clients
    that set a level). A client that went away does not stop the work."""

    async def progress(done: float, total: float | None, message: str) -> None:
        try:
            await ctx.report_progress(done, total, message)
        except Exception as exc:
            log.debug("progress notification not sent: %s", exc)
        await client_log(ctx, "info", message)

    return progress


def as_result(result: Any, links: Sequence[ResourceLink] = ()) -> CallToolResult:
    """A tool's return value as a CallToolResult with structured content, plus resource links."""
    if isinstance(result, CallToolResult):
        if links:
            result.content = [*result.content, *links]
        return result
    data = result.model_dump(mode="json", by_alias=True) if isinstance(result, BaseModel) else result
    content: list[ContentBlock] = [TextContent(type="text", text=json.dumps(data, indent=2, ensure_ascii=False))]
    # A result with nothing usable in it (no verdict read, no document processed) is an error result that keeps
    # every detail, so an agent loop that checks isError does not take it for a verdict.
    reason = result.no_result() if callable(getattr(result, "no_result", None)) else None
    if reason:
        content.insert(0, TextContent(type="text", text=f"No usable result: {reason}. The details follow."))
    return CallToolResult(content=[*content, *links], structured_content=data, is_error=bool(reason))


async def resource_updated(ctx: Any, *uris: str) -> None:
    """Tell subscribers (subscriptions/listen) that these resources changed; never fails the work."""
    for uri in uris:
        try:
            await ctx.notify_resource_updated(uri)
        except Exception as exc:
            log.debug("resource update for %s not sent: %s", uri, exc)


def _structured(result: Any) -> dict[str, Any]:
    if isinstance(result, CallToolResult):
        return dict(result.structured_content or {})
    if isinstance(result, BaseModel):
        return result.model_dump(mode="json", by_alias=True)
    return dict(result)


class JobRunner:
    """Runs background jobs in the server's task group (they outlive the request) and keeps their cancel
    scopes; the JobStore holds what they report."""

    def __init__(self, store: JobStore, task_group: TaskGroup, max_per_org: int | None = None):
        self.store = store
        self.task_group = task_group
        self.max_per_org = max_per_org  # background jobs one organization may have running (JUDGE_MCP_MAX_JOBS_PER_ORG)
        self._scopes: dict[str, anyio.CancelScope] = {}

    async def _store(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Store work off the event loop on PostgreSQL (Database.run), as tools do with `app.store`."""
        return await self.store.db.run(functools.partial(fn, *args, **kwargs))

    async def start(self, ctx: Any, org: str, tool: str, work: Work) -> Job:
        job = await self._store(self.store.create, org, tool, self.max_per_org)
        self.task_group.start_soon(self._run, ctx, job.job_id, tool, work)
        return job

    async def _run(self, ctx: Any, job_id: str, tool: str, work: Work) -> None:
        async def progress(done: float, total: float | None, message: str) -> None:
            await self._store(self.store.progress, job_id, done, total, message)

        async def run(ctx: Any, job_id: str) -> Any:
            return await work(progress)

        run.__name__ = tool
        mapped = tool_errors(run)  # the same error texts and the same log line (with job=) as a foreground call
        with anyio.CancelScope() as scope:
            self._scopes[job_id] = scope
            try:
                result = await mapped(ctx=ctx, job_id=job_id)
                await self._store(self.store.finish, job_id, "completed", result=_structured(result))
            except ToolError as exc:
                await self._store(self.store.finish, job_id, "failed", error=str(exc))
            finally:
                self._scopes.pop(job_id, None)
                if not scope.cancel_called:
                    with anyio.CancelScope(shield=True):  # the server is stopping: still record it
                        await self._store(self.store.finish, job_id, "interrupted",
                                          error="the server stopped before the job finished; call the tool again")
        await resource_updated(ctx, f"judge://jobs/{job_id}")  # completed, failed or cancelled

    async def cancel(self, org: str, job_id: str) -> Job:
        job = await self._store(self.store.get, org, job_id)
        if job.status != "working":
            return job
        scope = self._scopes.get(job_id)
        if scope is None:  # held by another replica (or process): it stops the work on its next heartbeat
            return await self._store(self.store.request_cancel, org, job_id)
        await self._store(self.store.finish, job_id, "cancelled", error="cancelled with cancel_job")
        scope.cancel()
        return await self._store(self.store.get, org, job_id)

    def cancel_here(self, job_id: str) -> None:
        """A job held here was cancelled on another replica: stop its work (its record says cancelled)."""
        scope = self._scopes.get(job_id)
        if scope is not None:
            scope.cancel()


def uses_sampling(ctx: Any, model: str) -> bool:
    """Whether the default model resolves to the host's sampling for this client (as the registry does)."""
    from judges.models.registry import parse_model_string

    from .sampling import sampling_offered

    return parse_model_string(model)[0] in ("sampling", "auto") and sampling_offered(ctx)


async def run_or_background(ctx: Any, tool: str, background: bool, work: Work,
                            links: Callable[[Any], Sequence[ResourceLink]] | None = None) -> CallToolResult:
    """Run `work` now, reporting progress to the client, or as a background job (returns a JobStarted).
    `links(result)`: resource links to add to a foreground result's content."""
    from .context import app_of, organization_of

    if not background:
        result = await work(report_to(ctx))
        # Off the event loop: the result's JSON text (indented, so Python's own encoder) of thousands of claims or
        # steps took 0.3 s.
        return await anyio.to_thread.run_sync(as_result, result, links(result) if links is not None else ())
    app = app_of(ctx)
    if app.jobs is None:
        raise InputError("background jobs are not available in this server; call the tool without background")
    if uses_sampling(ctx, app.settings.model):
        raise InputError(
            "background: the model here is the host's own (MCP sampling), which can only answer while the call is "
            "open, so this call cannot run as a background job. Call it without background, or set "
            "JUDGE_MCP_MODEL to an API backend (e.g. anthropic:<model>) for background jobs.")
    runner = app.jobs
    job = await runner.start(ctx, organization_of(ctx), tool, work)
    await client_log(ctx, "notice", f"{tool} started as job {job.job_id}")
    return as_result(JobStarted(job_id=job.job_id, status=job.status, tool=tool),
                     [ResourceLink(type="resource_link", uri=f"judge://jobs/{job.job_id}", name=f"job {job.job_id}",
                                   mime_type="application/json", description=f"the {tool} job")])


class JobList(BaseModel):
    jobs: list[Job]


READ = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


def register(mcp: MCPServer[Any]) -> None:
    from .context import app_of, organization_of

    def runner(ctx: Context) -> JobRunner:
        jobs = app_of(ctx).jobs
        if jobs is None:
            raise InputError("background jobs are not available in this server")
        return jobs

    @mcp.tool(annotations=READ)
    @tool_errors
    async def get_job(ctx: Context, job_id: Annotated[str, Field(
            description="From a call with background=true.")]) -> Job:
        """A background job's status, progress, last message and, once completed, its result or error."""
        jobs = runner(ctx)
        return await app_of(ctx).store(jobs.store.get, organization_of(ctx), job_id)

    @mcp.tool(annotations=ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True,
                                          open_world_hint=False))
    @tool_errors
    async def cancel_job(ctx: Context, job_id: str) -> Job:
        """Cancel a working background job; a finished one is returned as it is."""
        return await runner(ctx).cancel(organization_of(ctx), job_id)

    @mcp.tool(annotations=READ)
    @tool_errors
    async def list_jobs(
        ctx: Context,
        status: Annotated[Literal["working", "completed", "failed", "cancelled", "interrupted"] | None, Field(
            description="Only these; default: all.")] = None,
    ) -> JobList:
        """This organization's background jobs, newest first (at most 100), without results."""
        jobs = runner(ctx)
        return JobList(jobs=await app_of(ctx).store(jobs.store.list, organization_of(ctx), status))
