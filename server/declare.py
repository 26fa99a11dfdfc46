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

`register(mcp, TOOLS)` registers a module's declarations with `MCPServer.add_tool` (public): the function it hands
the SDK has a generated `__signature__` (public Python) of the input model's fields, so the arguments stay
top-level and the SDK builds the same input schema it would from a hand-written signature; every call goes
through server/errors.py `tool_errors`.
"""

from __future__ import annotations

import inspect
import typing
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Annotated, Any

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations
from pydantic import BaseModel, Field, ValidationError
from pydantic.fields import FieldInfo

from judges.errors import InputError
from judges.store.access import Role

from .errors import arguments_error, tool_errors
from .roles import Toolset, know

# The modules of server/ that declare tools (each a TOOLS tuple), in listing order. Each is imported at start only
# when the data home has no cached listing for this code; otherwise on its tools' first use (server/startup.py).
TOOL_MODULES = ("agent_tools", "guideline_tools", "image_tools", "compare_tools", "patch_tools", "code_tools",
                "analysis_tools", "text_tools", "calibration_tools", "usage_tools", "jobs")

# The annotations most tools share.
READ_ONLY = ToolAnnotations(read_only_hint=True, idempotent_hint=True, open_world_hint=False)


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

    @property
    def description(self) -> str | None:
        return self.core.__doc__


def tool(*, role: Role, toolset: Toolset, annotations: ToolAnnotations | None = None, name: str | None = None,
         meta: dict[str, Any] | None = None) -> Callable[[Callable[..., Awaitable[Any]]], Declared]:
    """Declare the decorated `async def name(ctx: Context, args: SomeInput, [resolved...]) -> Result` as a tool."""

    def declare(core: Callable[..., Awaitable[Any]]) -> Declared:
        hints = typing.get_type_hints(core, include_extras=True)
        names = list(inspect.signature(core).parameters)
        if len(names) < 2 or names[0] != "ctx" or names[1] != "args":
            raise TypeError(f"{core.__name__}: a tool's function takes (ctx, args: Input, ...resolved)")
        model = hints["args"]
        if not (isinstance(model, type) and issubclass(model, BaseModel)):
            raise TypeError(f"{core.__name__}: args must be typed with the tool's input model")
        return Declared(name=name or core.__name__, core=core, input=model, result=hints.get("return", Any),
                        role=role, toolset=toolset, annotations=annotations, meta=meta,
                        resolved={n: hints[n] for n in names[2:]})

    return declare


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
    failure the caller's error naming the argument) and the declared function."""
    model, resolved = declared.input, declared.resolved

    async def call(ctx: Context, **arguments: Any) -> Any:
        given = {name: arguments.pop(name) for name in resolved}
        try:
            args = model.model_validate(arguments)
        except ValidationError as exc:
            raise InputError(arguments_error(model.model_json_schema(), exc).removeprefix("invalid input: ")) \
                from None
        return await declared.core(ctx, args, **given)

    parameters = [inspect.Parameter("ctx", inspect.Parameter.KEYWORD_ONLY, annotation=Context)]
    for name, info in model.model_fields.items():
        parameters.append(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=_annotation(info),
                                            default=inspect.Parameter.empty if info.is_required() else info.default))
    parameters.extend(inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, annotation=annotation)
                      for name, annotation in resolved.items())
    call.__name__ = call.__qualname__ = declared.name
    call.__doc__ = declared.description
    call.__module__ = declared.core.__module__
    call.__signature__ = inspect.Signature(parameters, return_annotation=declared.result)  # type: ignore[attr-defined]
    call.__annotations__ = {p.name: p.annotation for p in parameters} | {"return": declared.result}
    return tool_errors(call)


def _annotation(info: FieldInfo) -> Any:
    """A field's type with its constraints and its schema's description and extras, as a parameter's annotation
    (its default goes on the parameter)."""
    return Annotated[(info.annotation, *info.metadata, Field(
        description=info.description, examples=info.examples, json_schema_extra=info.json_schema_extra,
        discriminator=info.discriminator))]
