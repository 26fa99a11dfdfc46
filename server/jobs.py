"""Progress and background jobs for long tools: `run_or_background` is the one helper every long tool calls.

A long tool's body builds `work(progress)` (the core call, with everything it needs from the request already
taken) and returns `await run_or_background(ctx, "tool_name", call, work)` (`call`: the call's JudgeCall,
which says whether it runs in the background). In the foreground the work
reports progress to the client (notifications/progress, and log notifications for clients that asked);
with background=true the call returns a `JobStarted` at once and the work runs in the server's task group,
its progress and its result stored by the JobStore, read with get_job. The tool's return annotation is
`Annotated[CallToolResult, or_job(ResultModel)]`: its output schema is the result or a JobStarted.

Resumable jobs: calibrate_judge, rank_texts and evaluate_image record each finished unit of work (an item, a
game, a judge x image; judges/units.py) in the job's record. When the process running one stops, another takes
it over (`JobRunner.take_over`: a replica whose lease check finds it expired, judges/store/leases.py, or a
single server restarted on the same home) and calls the tool again with the job's own arguments, as its
caller: the units recorded are read back, not asked of the model again.

The shapes map onto MCP's Tasks extension: job_id is the task id, the statuses are Tasks' (plus
interrupted), get_job/cancel_job/list_jobs are tasks/get, tasks/cancel and tasks/list, and get_job's
`result` is what tasks/result would return.
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Awaitable, Callable, Sequence
from contextvars import ContextVar
from types import SimpleNamespace
from typing import Annotated, Any, Literal, TypeVar

import anyio
import anyio.to_thread
from anyio.abc import TaskGroup
from mcp.server.mcpserver import Context
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import CallToolResult, ContentBlock, ResourceLink, TextContent, ToolAnnotations
from pydantic import BaseModel, ConfigDict, Field, RootModel

from judges.call import JudgeCall
from judges.errors import InputError
from judges.progress import Progress
from judges.store.jobs import Claimed, Job, JobStatus, JobStore
from judges.units import UNITS

from .client_log import client_log
from .declare import READ_ONLY, tool
from .errors import tool_errors
from .options import SHARED_OPTIONS

log = logging.getLogger("judge_mcp")
Background = Annotated[bool, Field(description=SHARED_OPTIONS["background"])]
Work = Callable[[Progress], Awaitable[Any]]
T = TypeVar("T")

# The tools whose background jobs are continued by another process when theirs stops (they record units).
RESUMABLE = ("calibrate_judge", "rank_texts", "evaluate_image")
# The arguments of the tools/call being served (set by JudgeServer.call_tool): a resumable job keeps them.
CALL_ARGUMENTS: ContextVar[dict[str, Any] | None] = ContextVar("judge_mcp_call_arguments", default=None)
# The job a tool called again is continuing (JobRunner.resume): run_or_background runs its work in that job.
RESUMING: ContextVar[Claimed | None] = ContextVar("judge_mcp_resuming", default=None)
CallAgain = Callable[[str, dict[str, Any], Any], Awaitable[Any]]


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


class JobUnits:
    """A job's record of finished units (judges/units.py UnitRecord), read once when its work starts."""

    def __init__(self, store: JobStore, job_id: str, recorded: dict[str, str | None]):
        self.store, self.job_id, self.recorded = store, job_id, recorded
        self.reused = 0

    def finished(self, key: str) -> str | None:
        found = self.recorded.get(key)
        if found is not None:
            self.reused += 1
        return found

    async def start(self, key: str) -> None:
        await self.store.db.run(self.store.unit_started, self.job_id, key)

    async def finish(self, key: str, result: str) -> None:
        await self.store.db.run(self.store.unit_finished, self.job_id, key, result)


class JobRunner:
    """Runs background jobs in the server's task group (they outlive the request) and keeps their cancel
    scopes; the JobStore holds what they report. A resumable job's units are recorded as they finish, and a
    job taken over from a stopped process is called again (`take_over`) once the server can call its tools
    (`attach`)."""

    def __init__(self, store: JobStore, task_group: TaskGroup, max_per_org: int | None = None):
        self.store = store
        self.task_group = task_group
        self.max_per_org = max_per_org  # background jobs one organization may have running (JUDGE_MCP_MAX_JOBS_PER_ORG)
        self._scopes: dict[str, anyio.CancelScope] = {}
        self._call_again: CallAgain | None = None
        self._server: Any = None
        self._pending: list[Claimed] = []

    async def _store(self, fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
        """Store work off the event loop on PostgreSQL (Database.run), as tools do with `app.store`."""
        return await self.store.db.run(functools.partial(fn, *args, **kwargs))

    async def start(self, ctx: Any, org: str, tool: str, work: Work) -> Job:
        resuming = RESUMING.get()
        if resuming is not None and resuming.tool == tool:  # a job taken over: its work continues in it
            self.task_group.start_soon(self._run, ctx, resuming.job_id, tool, work)
            return await self._store(self.store.get, org, resuming.job_id)
        arguments = CALL_ARGUMENTS.get() if tool in RESUMABLE else None
        caller = None
        if arguments is not None:
            from .roles import caller_role

            role = caller_role()
            # A superadmin acting for `org` is continued as that organization's admin: never more than the call had.
            caller = {"authenticated": role is not None, "role": "admin" if role == "superadmin" else role}
        job = await self._store(self.store.create, org, tool, self.max_per_org, arguments=arguments, caller=caller)
        self.task_group.start_soon(self._run, ctx, job.job_id, tool, work)
        return job

    def attach(self, server: Any, call_again: CallAgain) -> None:
        """The server can call its tools now: continue the jobs taken over meanwhile (at start, on SQLite)."""
        self._server, self._call_again = server, call_again
        pending, self._pending = self._pending, []
        self.take_over(pending)

    def take_over(self, claimed: Sequence[Claimed]) -> None:
        """Continue jobs this process took over (JobStore.claim): each tool called again in the background."""
        for job in claimed:
            if self._call_again is None:
                self._pending.append(job)
            else:
                log.warning("job %s (%s) of %s taken over; continuing it from its recorded units", job.job_id,
                            job.tool, job.previous)
                self.task_group.start_soon(self._resume, job)

    def _context(self) -> Any:
        """The context of a tool called again with no client: the server's state, no session, no HTTP request."""
        from mcp.server.mcpserver import Context
        from mcp.types import LATEST_PROTOCOL_VERSION

        app = getattr(self._server, "app", None)
        request = SimpleNamespace(lifespan_context=app, session=SimpleNamespace(client_capabilities=None),
                                  protocol_version=LATEST_PROTOCOL_VERSION, method="tools/call", params=None,
                                  request=None, request_id=None, meta=None, close_sse_stream=None,
                                  close_standalone_sse_stream=None)
        return Context(request_context=request, mcp_server=self._server,  # type: ignore[arg-type]
                       subscriptions=getattr(self._server, "_subscriptions", None))

    async def _resume(self, job: Claimed) -> None:
        """Call the job's tool again with its arguments, as its caller (organization and role), in the job."""
        from mcp.server.auth.middleware.auth_context import auth_context_var
        from mcp.server.auth.middleware.bearer_auth import AuthenticatedUser
        from mcp.server.auth.provider import AccessToken

        from judges.models.fairshare import ORGANIZATION

        assert self._call_again is not None
        if job.caller.get("authenticated"):
            role = job.caller.get("role")
            auth_context_var.set(AuthenticatedUser(AccessToken(token="", client_id=job.org,
                                                               scopes=[role] if role else [])))
        ORGANIZATION.set(job.org)
        RESUMING.set(job)
        try:
            result = await self._call_again(job.tool, {**job.arguments, "background": True}, self._context())
            if getattr(result, "is_error", False):  # refused before its work began (an agent deleted meanwhile)
                text = " ".join(getattr(c, "text", "") for c in result.content)
                await self._store(self.store.finish, job.job_id, "failed", error=text)
        except Exception as exc:
            log.error("job %s could not be continued after a takeover", job.job_id, exc_info=exc)
            cause = f" ({type(exc.__cause__).__name__}: {exc.__cause__})" if exc.__cause__ is not None else ""
            await self._store(self.store.finish, job.job_id, "failed",
                              error=f"the job could not be continued after a takeover: {exc}{cause}")

    async def _run(self, ctx: Any, job_id: str, tool: str, work: Work) -> None:
        async def progress(done: float, total: float | None, message: str) -> None:
            await self._store(self.store.progress, job_id, done, total, message)

        async def run(ctx: Any, job_id: str) -> Any:
            units = JobUnits(self.store, job_id, await self._store(self.store.units, job_id))
            UNITS.set(units)
            try:
                return await work(progress)
            finally:
                if units.reused:
                    with anyio.CancelScope(shield=True):
                        await self._store(self.store.reused, job_id, units.reused)

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
                        await self._store(self.store.stopped, job_id)  # interrupted, or left for a takeover
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


async def run_or_background(ctx: Any, tool: str, call: JudgeCall, work: Work,
                            links: Callable[[Any], Sequence[ResourceLink]] | None = None) -> CallToolResult:
    """Run `work` now, reporting progress to the client, or, when the call asks for background, as a background
    job (returns a JobStarted; refused first when a model the call would ask is the host's own: JudgeCall.ready).
    `links(result)`: resource links to add to a foreground result's content."""
    from .context import app_of, organization_of

    if not call.background:
        result = await work(report_to(ctx))
        # Off the event loop: the result's JSON text (indented, so Python's own encoder) of thousands of claims or
        # steps took 0.3 s.
        return await anyio.to_thread.run_sync(as_result, result, links(result) if links is not None else ())
    app = app_of(ctx)
    if app.jobs is None:
        raise InputError("background jobs are not available in this server; call the tool without background")
    await call.ready()
    runner = app.jobs
    job = await runner.start(ctx, organization_of(ctx), tool, work)
    await client_log(ctx, "notice", f"{tool} started as job {job.job_id}")
    return as_result(JobStarted(job_id=job.job_id, status=job.status, tool=tool),
                     [ResourceLink(type="resource_link", uri=f"judge://jobs/{job.job_id}", name=f"job {job.job_id}",
                                   mime_type="application/json", description=f"the {tool} job")])


class JobList(BaseModel):
    jobs: list[Job]


CANCELS = ToolAnnotations(read_only_hint=False, destructive_hint=True, idempotent_hint=True, open_world_hint=False)


def _runner(ctx: Context) -> JobRunner:
    from .context import app_of

    jobs = app_of(ctx).jobs
    if jobs is None:
        raise InputError("background jobs are not available in this server")
    return jobs


class GetJobInput(BaseModel):
    job_id: Annotated[str, Field(description="From a call with background=true.")]


@tool(role="member", toolset="jobs", annotations=READ_ONLY)
async def get_job(ctx: Context, args: GetJobInput) -> Job:
    """A background job's status, progress, last message and, once completed, its result or error."""
    from .context import app_of, organization_of

    jobs = _runner(ctx)
    return await app_of(ctx).store(jobs.store.get, organization_of(ctx), args.job_id)


class CancelJobInput(BaseModel):
    job_id: str


@tool(role="member", toolset="jobs", annotations=CANCELS)
async def cancel_job(ctx: Context, args: CancelJobInput) -> Job:
    """Cancel a working background job; a finished one is returned as it is."""
    from .context import organization_of

    return await _runner(ctx).cancel(organization_of(ctx), args.job_id)


class ListJobsInput(BaseModel):
    status: Annotated[Literal["working", "completed", "failed", "cancelled", "interrupted"] | None, Field(
        description="Only these; default: all.")] = None


@tool(role="member", toolset="jobs", annotations=READ_ONLY)
async def list_jobs(ctx: Context, args: ListJobsInput) -> JobList:
    """This organization's background jobs, newest first (at most 100), without results."""
    from .context import app_of, organization_of

    jobs = _runner(ctx)
    return JobList(jobs=await app_of(ctx).store(jobs.store.list, organization_of(ctx), args.status))


TOOLS = (get_job, cancel_job, list_jobs)
