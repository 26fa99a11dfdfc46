"""Builds the MCP server: lifespan, tools, prompts, and (over HTTP) bearer auth."""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError, UnexpectedToolError
from mcp.server.mcpserver.prompts.base import Prompt, PromptArgument
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, INVALID_REQUEST, Icon, ToolAnnotations
from mcp.types import Prompt as MCPPrompt
from mcp.types import Resource as MCPResource
from mcp.types import ResourceTemplate as MCPResourceTemplate
from mcp.types import Tool as MCPTool
from pydantic import ValidationError

import prompts
from judges.errors import SECRETS, ConfigError, JudgeError
from judges.inputs.caller_values import check_value, loads
from judges.store.access import TokenStore

from . import client_log, declare, health, resources, sdk
from .context import AppContext, analysis_categories, open_app, organization_of
from .errors import arguments_error, failure_of, log_call, tool_error, unknown_argument, unknown_tool
from .jobs import CALL_ARGUMENTS
from .options import instructions
from .roles import access_of, know, may_list, require_role, require_toolset
from .settings import Settings
from .startup import (
    Listing,
    ListingCache,
    Registrations,
    ToolCatalog,
    lean_schema,
    listed_description,
    listed_input,
    untitled,
)
from .views import apps as views_apps
from .views import pages as views_pages

log = logging.getLogger("judge_mcp")

INSTRUCTIONS = (
    "judge-mcp: a bench of judges. Create judge agents (create_agent, optionally from a template: "
    "brand_compliance, composition, product_accuracy, technical_quality), then judge with them. "
    + instructions()
)


class JudgeServer(MCPServer[AppContext]):
    """MCPServer whose argument-validation errors read as sentences (which argument, what was wrong, an
    example) instead of pydantic's dump with internal class names; whose tools are declared through the
    public `add_tool` and built on first use (server/startup.py ToolCatalog); whose tools/list is answered from
    the data home's cache when this code version wrote one, and then whose tool modules are imported on first
    use too; and whose resources and prompts are registered when first listed or read. Only public SDK APIs;
    the one seam that is not lives in server/sdk.py."""

    def __init__(self, *args: Any, listing_cache: ListingCache | None = None, **kwargs: Any):
        # Our logging configured (server/cli.py): the SDK's own would only import rich (~60-120 ms of the start).
        with sdk.logging_left_alone(bool(logging.getLogger().handlers)):
            super().__init__(*args, **kwargs)
        self.catalog = ToolCatalog(self.settings.warn_on_duplicate_tools)
        self.resource_registrations = Registrations()
        self.prompt_registrations = Registrations()
        self.listing_cache = listing_cache
        # This code's tools/list answer: from the cache (create_server reads it), else once answered from the code.
        self.listing: Listing | None = None
        self._schemas: dict[str, dict[str, Any]] = {}  # each built tool's input schema, as the SDK validates it

    toolsets: list[str] | None = None  # JUDGE_MCP_TOOLSETS, set by create_server; None: all

    def add_tool(self, fn: Callable[..., Any], name: str | None = None, title: str | None = None,
                 description: str | None = None, annotations: ToolAnnotations | None = None,
                 icons: list[Icon] | None = None, meta: dict[str, Any] | None = None,
                 structured_output: bool | None = None) -> None:
        """Declare a tool (what `@mcp.tool()` calls): built on its first use, not at start."""
        self.catalog.add_tool(fn, name=name, title=title, description=description, annotations=annotations,
                              icons=icons, meta=meta, structured_output=structured_output)

    def remove_tool(self, name: str) -> None:
        self.catalog.remove_tool(name)
        self.listing = None

    async def list_tools(self) -> list[MCPTool]:
        """The tools this caller may call: those of the enabled toolsets (JUDGE_MCP_TOOLSETS) its role allows."""
        return [t for t in await self._all_tools() if may_list(t.name, self.toolsets)]

    async def _all_tools(self) -> list[MCPTool]:
        catalog = self.catalog
        listing = self.listing
        if catalog.stale and listing is not None:
            self.listing = listing = None
            if self.listing_cache is not None:
                self.listing_cache.drop()
        if listing is not None and [t.name for t in listing.tools] == catalog.names:
            return listing.tools
        built = await anyio.to_thread.run_sync(catalog.list_tools)  # imports and pydantic work: off the loop
        tools = [MCPTool(name=t.name, title=t.title, description=listed_description(t.description),
                         input_schema=listed_input(t.parameters),
                         output_schema=None if t.output_schema is None else lean_schema(untitled(t.output_schema)),
                         annotations=t.annotations, icons=t.icons, _meta=t.meta) for t in built]
        catalog.stale = False
        modules = catalog.modules()
        access = {t.name: access_of(t.name) for t in tools}
        if modules is not None and None not in access.values():  # every tool declared (a test may add its own)
            self.listing = Listing(tools, modules, {name: a for name, a in access.items() if a is not None})
            if self.listing_cache is not None:
                self.listing_cache.save(self.listing)
        return tools

    def load_tool_modules_later(self, delay_s: float) -> threading.Timer | None:
        """Import the tool modules not loaded yet, and build the tools, in the background after `delay_s` (after
        the host's handshake, as the warm-up), so that a first call finds its tool ready."""
        if not self.catalog.unloaded and all(self.catalog.ready(n) for n in self.catalog.names):
            return None
        timer = threading.Timer(delay_s, self._load_tool_modules)
        timer.daemon = True
        timer.start()
        return timer

    def _load_tool_modules(self) -> None:
        try:
            # Imported and built (~0.1-0.2 s of pydantic work, in this background thread): a tool's first call
            # after a start then costs what a later one does (issue 29: the first search after a restart).
            self.catalog.list_tools()
        except Exception:  # met again, and reported, by the first call of that module's tools
            log.exception("loading the tool modules failed")

    app: AppContext | None = None  # set by the lifespan: the token store and rate limiter read its database

    def input_schema(self, name: str) -> dict[str, Any] | None:
        """The input schema `name`'s arguments are validated against; None when there is no such tool."""
        schema = self._schemas.get(name)
        if schema is None:
            tool = self.catalog.get_tool(name)
            if tool is None:
                return None
            schema = self._schemas[name] = tool.parameters
        return schema

    async def call_tool(self, name: str, arguments: dict[str, Any],
                        context: Context[AppContext, Any] | None = None) -> Any:
        if not self.catalog.ready(name):
            # The tool's module imported and the tool built in a worker thread: the event loop keeps serving.
            await anyio.to_thread.run_sync(self.catalog.get_tool, name)
        tool = self.catalog.get_tool(name)
        if tool is None:
            raise ToolError(unknown_tool(name, self.catalog.names))
        await self.admit(name, context, arguments)
        if context is None:
            context = Context(mcp_server=self)
        called = CALL_ARGUMENTS.set(arguments)  # a resumable background job keeps them (server/jobs.py)
        try:
            return await tool.run(arguments, context, convert_result=True)
        except ToolError as exc:
            if isinstance(exc, UnexpectedToolError) or not isinstance(exc.__cause__, ValidationError):
                raise
            raise ToolError(f"Error executing tool {name}: {arguments_error(tool.parameters, exc.__cause__)}") \
                from exc.__cause__
        finally:
            CALL_ARGUMENTS.reset(called)

    async def call_again(self, name: str, arguments: dict[str, Any], context: Any) -> Any:
        """A background job's tool called again by the server itself (a job taken over, server/jobs.py): it was
        admitted when its caller first called it."""
        if not self.catalog.ready(name):
            await anyio.to_thread.run_sync(self.catalog.get_tool, name)
        tool = self.catalog.get_tool(name)
        if tool is None:
            raise ToolError(f"Unknown tool: {name}")
        return await tool.run(arguments, context, convert_result=True)

    async def list_resources(self) -> list[MCPResource]:
        await self._registered(self.resource_registrations)
        return await super().list_resources()

    async def list_resource_templates(self) -> list[MCPResourceTemplate]:
        await self._registered(self.resource_registrations)
        return await super().list_resource_templates()

    async def read_resource(self, uri: Any, context: Context[AppContext, Any] | None = None) -> Any:
        await self._registered(self.resource_registrations)
        return await super().read_resource(uri, context)

    async def list_prompts(self) -> list[MCPPrompt]:
        await self._registered(self.prompt_registrations)
        return await super().list_prompts()

    async def get_prompt(self, name: str, arguments: dict[str, Any] | None = None,
                         context: Context[AppContext, Any] | None = None) -> Any:
        await self._registered(self.prompt_registrations)
        return await super().get_prompt(name, arguments, context)

    @staticmethod
    async def _registered(registrations: Registrations) -> None:
        """The deferred registrations run (in a worker thread: templates are built then), once."""
        if registrations.pending:
            await anyio.to_thread.run_sync(registrations.run)

    async def admit(self, name: str, context: Context[AppContext, Any] | None,
                    arguments: dict[str, Any] | None = None) -> None:
        """Before any tool runs: the caller's role is enough for it (server/roles.py) and the tool is in the
        server's toolsets; its arguments hold no NUL byte and no JSON nested deeper than MAX_DEPTH (every tool, so
        no caller text reaches a store or a recursion unchecked) and no name the tool does not declare; and its
        organization is within its calls per minute (JUDGE_MCP_RATE_LIMIT_PER_MINUTE, counted in the database)."""
        schema = self.input_schema(name)
        if schema is None:
            return  # "unknown tool"
        try:
            require_role(name)
            require_toolset(name, self.toolsets)
            await check_arguments(arguments or {})
            if unknown := unknown_argument(schema, arguments or {}):
                log_call(name, (), {}, 0.0, "invalid_input", None)
                raise ToolError(f"Error executing tool {name}: {unknown}")  # a misspelt option is never ignored
            app = self.app
            if app is not None and app.limiter is not None and context is not None:
                organization = organization_of(context)
                await app.store(app.limiter.take, organization)
        except JudgeError as exc:
            log_call(name, (), {}, 0.0, failure_of(exc).kind, None)
            raise tool_error(failure_of(exc)) from exc


# The requests counted by the rate limit besides tool calls (JudgeServer.admit counts those, as a tool error).
RATED_METHODS = frozenset({"resources/read", "prompts/get", "tools/list", "resources/list", "resources/templates/list",
                           "prompts/list", "completion/complete"})


class RequestMiddleware:
    """Around every MCP request: the organization it runs for (fairshare.ORGANIZATION: the model pool serves
    organizations in turn, and the background jobs a call starts inherit it); the rate limit for the methods
    other than tools/call (resource reads, prompts, lists), refused as a JSON-RPC error saying when to retry;
    and no secret in an error message (judges/errors.py SECRETS)."""

    def __init__(self, server: JudgeServer):
        self.server = server

    async def __call__(self, ctx: Any, call_next: Any) -> Any:
        from types import SimpleNamespace

        from judges.models.fairshare import ORGANIZATION

        try:
            organization: str | None = organization_of(SimpleNamespace(request_context=ctx))
        except Exception:  # no lifespan yet (initialize before the app is up)
            organization = None
        token = ORGANIZATION.set(organization) if organization is not None else None
        try:
            app = self.server.app
            if ctx.method in RATED_METHODS and app is not None and app.limiter is not None and organization:
                try:
                    await app.store(app.limiter.take, organization)
                except JudgeError as exc:
                    log_call(ctx.method.replace("/", "_"), (), {}, 0.0, failure_of(exc).kind, None)
                    raise MCPError(INVALID_REQUEST, str(tool_error(failure_of(exc)))) from exc
            return await call_next(ctx)
        except MCPError as exc:
            message = SECRETS.scrub(exc.message)
            if message == exc.message:
                raise
            raise MCPError(exc.code, message, exc.data) from exc
        finally:
            if token is not None:
                ORGANIZATION.reset(token)


async def check_arguments(arguments: dict[str, Any]) -> None:
    """No NUL byte and no nesting deeper than MAX_DEPTH in any argument: checked here on the event loop while it is
    quick (a usual call's arguments), and in a worker thread when they are large, so a megabyte of JSON costs the
    loop no more than a small call."""
    if not all(check_value(value, argument, budget=2000) for argument, value in arguments.items()):
        def whole() -> None:
            for argument, value in arguments.items():
                check_value(value, argument)

        await anyio.to_thread.run_sync(whole)


def prompt_argument(template: prompts.PromptTemplate, name: str, value: Any) -> Any:
    """An MCP prompt argument (always text) as the template uses it: JSON where the asset declares a JSON
    argument (`{# arg_<name>: JSON ... #}`), the text itself otherwise."""
    declared = template.meta.get(f"arg_{name}", "")
    if not declared.startswith("JSON") or not isinstance(value, str):
        return value
    try:
        return loads(value, f"argument {name} of prompt {template.id}")
    except JudgeError as exc:
        raise prompts.PromptError(str(exc)) from None
    except ValueError:
        raise prompts.PromptError(f"argument {name} of prompt {template.id} must be {declared}") from None


def _prompt_asset(prompt_id: str) -> Prompt:
    template = prompts.load(prompt_id)

    def render(**variables: Any) -> str:
        try:
            return template.render(**{k: prompt_argument(template, k, v) for k, v in variables.items()})
        except prompts.PromptError as exc:  # the caller's arguments: said as such, not "Internal server error"
            raise MCPError(INVALID_PARAMS, str(exc)) from exc

    return Prompt(
        name=prompt_id,
        title=None,
        description=template.description,
        arguments=[PromptArgument(name=v, description=template.meta.get(f"arg_{v}"), required=True)
                   for v in template.variables],
        fn=render,
        context_kwarg=None,
    )


def _cached_listing(cache: ListingCache | None) -> Listing | None:
    """The data home's listing for this code, when it names the tool modules (server/declare.py); each of its tools'
    role and toolset then known without importing its module."""
    listing = cache.read() if cache is not None else None
    if listing is None or set(listing.modules) != set(declare.TOOL_MODULES):
        return None
    for name, (role, toolset) in listing.access.items():
        know(name, role, toolset)
    return listing


def _register_tools(mcp: JudgeServer, name: str, settings: Settings) -> None:
    """Import the tool module server.`name` and register its tools."""
    # __import__ rather than importlib.import_module: the import statement's path, which -X importtime reports.
    module = __import__(f"{__package__}.{name}", fromlist=["TOOLS"])
    if name == "code_tools":
        module.probe_gate_sandbox(settings)  # logs which sandbox gates use; a required one missing stops the server
    declare.register(mcp, module.TOOLS)


def create_server(settings: Settings, *, http_auth: bool = False, base_url: str | None = None,
                  client_roots: bool = True, roots_owner: str | None = None) -> JudgeServer:
    """The judge-mcp server; with http_auth, bearer tokens from settings decide the organization.
    client_roots: without JUDGE_MCP_ALLOWED_ROOTS, paths may lie in the client's MCP roots (stdio only:
    an HTTP client's roots name its own machine, not this one). roots_owner: with http_auth, the one
    organization JUDGE_MCP_ALLOWED_ROOTS serves (server/roots.py); None: no organization has them."""

    try:
        categories = analysis_categories(settings)  # refused here, at start, not at the first call
    except ConfigError as exc:
        raise SystemExit(f"judge-mcp: {exc}") from None
    assets = Path(prompts.__file__).resolve().parent
    for root in settings.allowed_roots:  # e.g. an editable install served with its own checkout as a root
        if assets.is_relative_to(root):
            log.warning("the prompt assets (%s) lie inside the allowed root %s: a caller can edit the judges' prompts "
                        "(they render sandboxed, so never run code); serve an installed copy, or narrow "
                        "JUDGE_MCP_ALLOWED_ROOTS", assets, root)

    @asynccontextmanager
    async def lifespan(_: MCPServer[AppContext]) -> AsyncIterator[AppContext]:
        async with open_app(settings, client_roots=client_roots, roots_owner=roots_owner,
                            categories=categories) as app:
            mcp.app = app
            if app.jobs is not None:
                app.jobs.attach(mcp, mcp.call_again)  # jobs taken over are continued from here on
            loading = mcp.load_tool_modules_later(settings.warm_delay_s)
            try:
                yield app
            finally:
                mcp.app = None
                if loading is not None:
                    loading.cancel()

    def token_store() -> TokenStore | None:
        return TokenStore(mcp.app.db) if mcp.app is not None else None

    auth_kwargs: dict[str, Any] = {}
    if http_auth:
        from mcp.server.auth.settings import AuthSettings

        from .auth import StaticTokenVerifier

        url = base_url or "http://127.0.0.1"
        auth_kwargs = {
            "token_verifier": StaticTokenVerifier(settings.tokens, token_store),
            # Static tokens, no OAuth: no resource server URL, so 401s carry a plain Bearer challenge
            # (not a resource-metadata URL that does not exist) and the SDK has nothing to warn about.
            "auth": AuthSettings(issuer_url=url, resource_server_url=None),  # type: ignore[arg-type]
        }
    from importlib.metadata import PackageNotFoundError, version

    try:
        server_version = version("judge-mcp")
    except PackageNotFoundError:
        server_version = "0"
    mcp = JudgeServer(
        "judge-mcp",
        instructions=INSTRUCTIONS,
        version=server_version,
        lifespan=lifespan,
        log_level=settings.log_level,
        listing_cache=ListingCache(settings.home / "cache"),
        extensions=[views_apps.extension()],  # MCP Apps: the ui:// views (server/views/)
        **auth_kwargs,
    )
    mcp.toolsets = settings.toolsets
    mcp.listing = listing = _cached_listing(mcp.listing_cache)
    for name in declare.TOOL_MODULES:
        listed = listing.modules.get(name) if listing is not None else None
        if name == "code_tools" and settings.gate_sandbox == "bwrap":
            listed = None  # loaded now: its registration stops a server whose required gate sandbox is missing
        mcp.catalog.add_module(name, functools.partial(_register_tools, mcp, name, settings), listed)
    mcp.resource_registrations.later(functools.partial(resources.register, mcp))  # on first use
    mcp.resource_registrations.later(functools.partial(views_apps.register, mcp))
    mcp.middleware.append(RequestMiddleware(mcp))
    client_log.register(mcp)
    health.register(mcp)
    views_pages.register(mcp)  # /ui/ on the HTTP transports
    mcp.prompt_registrations.later(functools.partial(_add_prompts, mcp))
    return mcp


def _add_prompts(mcp: MCPServer[AppContext]) -> None:
    for prompt_id in prompts.list_templates():
        mcp.add_prompt(_prompt_asset(prompt_id))
