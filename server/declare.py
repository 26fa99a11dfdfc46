"""Each tool declared once, and the one adapter that serves every declaration through the SDK's public API.

A tool is one decorated function, its body the few lines that call the core:

    class GetUsageInput(BaseModel):
        days: Annotated[int, Field(ge=1, le=366, description="UTC days back, today included (1-366).")] = 7

    @tool(role="member", toolset="jobs", annotations=READ_ONLY)
    async def get_usage(ctx: Context, args: GetUsageInput) -> UsageReport:
        \"\"\"What the tool is for (its description in tools/list).\"\"\"
        return await ...

The declaration holds everything about the tool: its input model (the second parameter's type: every argument,
with its bounds and choices, which are the listed input schema and validated before the body runs), its result
(the return type: the output schema), its description (the docstring), its annotations, the role a token needs to
call it and its toolset (server/roles.py derives both tables from here). A parameter after `args` is one the SDK
resolves, not a caller's argument (e.g. `client_roots: ClientRoots`).

A judging tool is declared with `@judge` instead: its function returns a `Judging` (the work, given the call's
JudgeCall and a progress callback), and the one adapter does what every judge shares: the samples checked, the
JudgeCall built from the shared options (`models`, `samples`, `cache`, `background`: judges/call.py), the work run
now or as a background job (server/jobs.py), its result listed as `Result` or a JobStarted.

An argument's size limit (the settings' JUDGE_MCP_MAX_* values, not the schema's, as they are the operator's) is a
marker in its type: `Annotated[str, Field(...), TEXT]`; every declared tool checks them before its body runs.

`register(mcp, TOOLS)` registers a module's declarations with `MCPServer.add_tool` (public): the function it hands
the SDK has a generated `__signature__` (public Python) of the input model's fields, so the arguments stay
top-level and the SDK builds the same input schema it would from a hand-written signature; every call goes
through server/errors.py `tool_errors`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Annotated, Any, Generic, Literal, TypeVar

import anyio.to_thread
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, ResourceLink, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo

from judges.call import JudgeCall
from judges.errors import InputError
from judges.inputs.sizes import SizeLimits
from judges.progress import Progress
from judges.store.access import Role

from .errors import arguments_error, tool_errors
from .roles import Toolset, know

# The modules of server/ that declare tools (each a TOOLS tuple), in listing order. Each is imported at start only
# when the data home has no cached listing for this code; otherwise on its tools' first use (server/startup.py).
TOOL_MODULES = ("agent_tools", "guideline_tools", "image_tools", "compare_tools", "patch_tools", "code_tools",
                "analysis_tools", "text_tools", "calibration_tools", "usage_tools", "jobs")

# The annotations most tools share.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)
JUDGES = ToolAnnotations(read_only_hint=True, idempotent_hint=False, open_world_hint=True)

R = TypeVar("R")


@dataclass(frozen=True)
class Sized:
    """An argument's size limit, as a marker in its type (checked by the adapter before the tool's body, against the
    server's JUDGE_MCP_MAX_* settings: judges/inputs/sizes.py). `kind`: text (characters), texts (a list of texts),
    items (a list's entries; `example` says what to give instead), json (a JSON value's characters, measured in a
    worker thread: it may be large)."""

    kind: Literal["text", "texts", "items", "json"]
    example: str = ""

    async def check(self, sizes: SizeLimits, name: str, value: Any) -> None:
        if self.kind == "json":
            await anyio.to_thread.run_sync(sizes.json, name, value)
        elif self.kind == "items":
            sizes.items(name, value, self.example)
        else:
            getattr(sizes, self.kind)(name, value)


TEXT, TEXTS, JSON_VALUE = Sized("text"), Sized("texts"), Sized("json")


def items(example: str) -> Sized:
    """A list at most JUDGE_MCP_MAX_LIST_ITEMS long; `example` tells the caller what to give instead."""
    return Sized("items", example)


@dataclass(frozen=True)
class Judging(Generic[R]):
    """What a judging tool's function returns (`@judge`): its `work`, run with the call's JudgeCall now or as a
    background job; `agents`, the agents it judges with (their models decide whether it may run in the background);
    `resolve`: whether the call's models are resolved (and its budget checked) before the work starts, or when the
    judge first asks for them; `links(result)`: resource links added to a foreground result; `check(call)`: what
    the call is refused for before its work starts, now even for a background call (a refusal, not a failed job)."""

    work: Callable[[JudgeCall, Progress], Awaitable[R]]
    agents: Callable[[], Awaitable[Sequence[Any]]] | None = None
    resolve: bool = True
    links: Callable[[R], Sequence[ResourceLink]] | None = None
    check: Callable[[JudgeCall], Awaitable[Any]] | None = None


@dataclass(frozen=True)
class Declared:
    """One tool: what `@tool` makes of its function."""

    name: str
    core: Callable[..., Awaitable[Any]]
    input: type[BaseModel]
    result: Any
    role: Role
    toolset: Toolset
    annotations: ToolAnnotations | None = None
    meta: dict[str, Any] | None = None
    resolved: dict[str, Any] = field(default_factory=dict)  # parameter → its Annotated[T, Resolve(...)] type
    judging: bool = False  # declared with @judge: its function returns a Judging of `result`

    @property
    def description(self) -> str | None:
        return self.core.__doc__


def tool(*, role: Role, toolset: Toolset, annotations: ToolAnnotations | None = None, name: str | None = None,
         meta: dict[str, Any] | None = None) -> Callable[[Callable[..., Awaitable[Any]]], Declared]:
    """Declare the decorated `async def name(ctx: Context, args: SomeInput, [resolved...]) -> Result` as a tool."""
    return lambda core: _declared(core, role=role, toolset=toolset, annotations=annotations, name=name, meta=meta)


def judge(*, toolset: Toolset, role: Role = "member", annotations: ToolAnnotations | None = JUDGES,
          name: str | None = None, meta: dict[str, Any] | None = None
          ) -> Callable[[Callable[..., Awaitable[Any]]], Declared]:
    """Declare the decorated `async def name(ctx: Context, args: SomeInput, [resolved...]) -> Judging[Result]` as a
    judging tool: the adapter builds its JudgeCall from the input's shared options and runs its work now or in the
    background; the tool's result is `Result`, or a JobStarted."""
    return lambda core: _declared(core, role=role, toolset=toolset, annotations=annotations, name=name, meta=meta,
                                  judging=True)


def _declared(core: Callable[..., Awaitable[Any]], *, judging: bool = False, name: str | None,
              **declared: Any) -> Declared:
    hints = typing.get_type_hints(core, include_extras=True)
    names = list(inspect.signature(core).parameters)
    if len(names) < 2 or names[0] != "ctx" or names[1] != "args":
        raise TypeError(f"{core.__name__}: a tool's function takes (ctx, args: Input, ...resolved)")
    model = hints["args"]
    if not (isinstance(model, type) and issubclass(model, BaseModel)):
        raise TypeError(f"{core.__name__}: args must be typed with the tool's input model")
    result = hints.get("return", Any)
    if judging:
        if typing.get_origin(result) is not Judging:
            raise TypeError(f"{core.__name__}: a judging tool returns Judging[Result]")
        from .jobs import or_job

        result = Annotated[CallToolResult, or_job(typing.get_args(result)[0])]
    return Declared(name=name or core.__name__.removesuffix("_tool"), core=core, input=model, result=result,
                    resolved={n: hints[n] for n in names[2:]}, judging=judging, **declared)


def register(mcp: MCPServer, tools: Iterable[Declared]) -> None:
    """Register each declared tool with the server (the SDK's public `add_tool`), and its role and toolset."""
    for declared in tools:
        know(declared.name, declared.role, declared.toolset)
        mcp.add_tool(function_of(declared), name=declared.name, annotations=declared.annotations,
                     meta=declared.meta)


def declared() -> list[Declared]:
    """Every tool module's declarations, in listing order (imports every tool module)."""
    tools: list[Declared] = []
    for module in TOOL_MODULES:
        tools.extend(getattr(__import__(f"{__package__}.{module}", fromlist=["TOOLS"]), "TOOLS", ()))
    return tools


def function_of(declared: Declared) -> Callable[..., Awaitable[Any]]:
    """The function the SDK builds the tool from: keyword arguments named and typed as the input model's fields
    (a generated signature), which it validates; then the input model (its checks across fields run here, a
    failure the caller's error naming the argument), the arguments' size limits, and the declared function (for a
    judging tool, through `judged`)."""
    model, resolved = declared.input, declared.resolved
    # (field, argument name, its size limit); a field's alias is its argument's name (`schema_` for "schema", which
    # would shadow BaseModel.schema)
    sized = [(name, info.alias or name, marker) for name, info in model.model_fields.items()
             for marker in info.metadata if isinstance(marker, Sized)]

    async def call(ctx: Context, **arguments: Any) -> Any:
        given = {name: arguments.pop(name) for name in resolved}
        try:
            args = model.model_validate(arguments)
        except ValidationError as exc:
            own = [e["ctx"]["error"] for e in exc.errors() if isinstance(e.get("ctx", {}).get("error"), InputError)]
            if own:  # the input model's own check (a validator raising InputError): its message names the argument
                raise own[0] from None
            raise InputError(arguments_error(model.model_json_schema(), exc).removeprefix("invalid input: ")) \
                from None
        if sized:
            from .context import app_of

            sizes = app_of(ctx).settings.size_limits()
            for name, argument, marker in sized:
                await marker.check(sizes, argument, getattr(args, name))
        if declared.judging:
            return await judged(ctx, declared.name, args, lambda: declared.core(ctx, args, **given))
        return await declared.core(ctx, args, **given)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, info in model.model_fields.items():
        parameters.append(inspect.Parameter(info.alias or name, inspect.Parameter.KEYWORD_ONLY,
                                            annotation=_annotation(info),
                                            default=inspect.Parameter.empty if info.is_required() else info.default))
    parameters.extend(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
                      for name, annotation in resolved.items())
    call.__name__ = call.__qualname__ = declared.name
    call.__doc__ = declared.description
    call.__module__ = declared.core.__module__
    call.__signature__ = inspect.Signature(parameters, return_annotation=declared.result)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": declared.result}
    return tool_errors(call)


async def judged(ctx: Context, tool: str, args: BaseModel,
                 prepare: Callable[[], Awaitable[Judging[Any]]]) -> CallToolResult:
    """What every judging tool shares, once: the samples checked (before the tool's own preparation, which may
    search guidelines), the call's JudgeCall built from its shared options (`models`, `samples`, `cache`,
    `background`; judges/call.py owns model resolution, the jury × samples fan-out and the background decision),
    and the work run now or as a background job."""
    from judges.reading.samples import check_samples

    from .context import app_of
    from .jobs import run_or_background

    app = app_of(ctx)
    samples: int = getattr(args, "samples", 1)
    if "samples" in type(args).model_fields:
        check_samples(samples, app.settings.max_samples)
    judging = await prepare()
    call = await app.judge_call(ctx, getattr(args, "models", None), samples=samples,
                                cache=getattr(args, "cache", True), background=getattr(args, "background", False),
                                agents=judging.agents, resolve=judging.resolve)
    if judging.check is not None and call.background:  # a foreground work makes its own checks first
        await judging.check(call)
    return await run_or_background(ctx, tool, call, lambda progress: judging.work(call, progress), judging.links)


def _annotation(info: FieldInfo) -> Any:
    """A field's type with its constraints and its schema's description and extras, as a parameter's annotation
    (its default goes on the parameter)."""
    return Annotated[(info.annotation, *info.metadata, Field(
        description=info.description, examples=info.examples, json_schema_extra=info.json_schema_extra,
        discriminator=info.discriminator))]
