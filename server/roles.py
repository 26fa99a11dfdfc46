"""Which role each tool needs over HTTP with tokens and which toolset it is in (both from its one declaration,
server/declare.py), and the checks made before every call.

A token's role rides in its AccessToken's scopes (server/auth.py). On stdio, and over HTTP without tokens
(loopback only), the caller is the server's owner: no check. A tool whose declaration was never seen needs admin
and is in no toolset, so a tool is never callable by a role nobody decided on.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

from judges.errors import ForbiddenError, InputError
from judges.store.access import ROLES, Role, role_rank

# The toolsets (JUDGE_MCP_TOOLSETS): groups of tools a host may list and call; each tool is in exactly one, named
# by its declaration (server/declare.py).
Toolset = Literal["agents", "images", "compare", "code", "patches", "analysis", "text", "calibration", "jobs"]
TOOLSET_NAMES: tuple[Toolset, ...] = get_args(Toolset)

# Each tool's role and toolset, as its declaration says (server/declare.py `register`, when its module is loaded) or
# as the cached listing of this code says (server/startup.py ListingCache, so a server started from it lists and
# role-filters tools without importing their modules). `admin` manages the organization's judges and their
# documents; `member` uses them.
_ACCESS: dict[str, tuple[Role, Toolset]] = {}


def know(tool: str, role: Role, toolset: Toolset) -> None:
    """Record `tool`'s role and toolset (from its declaration, or from a cached listing of this code)."""
    _ACCESS[tool] = (role, toolset)


def access_of(tool: str) -> tuple[Role, Toolset] | None:
    """`tool`'s role and toolset; None for a tool neither declared nor in a cached listing (it needs admin, and is
    in no toolset)."""
    return _ACCESS.get(tool)


def role_of(tool: str) -> Role:
    access = access_of(tool)
    return "admin" if access is None else access[0]


def toolset_of(tool: str) -> Toolset | None:
    access = access_of(tool)
    return None if access is None else access[1]


def __getattr__(name: str) -> Any:
    """TOOL_ROLES (tool → role) and TOOLSETS (toolset → its tools, in listing order), derived from every tool
    module's declarations (importing them all: for tests, benchmarks and tools, not the server's start)."""
    if name not in ("TOOL_ROLES", "TOOLSETS", "TOOLSET_OF"):
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    from .declare import declared

    tools = {d.name: (d.role, d.toolset) for d in declared()}
    if name == "TOOL_ROLES":
        return {tool: role for tool, (role, _) in tools.items()}
    if name == "TOOLSET_OF":
        return {tool: toolset for tool, (_, toolset) in tools.items()}
    return {toolset: tuple(tool for tool, (_, its) in tools.items() if its == toolset) for toolset in TOOLSET_NAMES}


def check_toolsets(names: list[str]) -> list[str]:
    """The toolset names, checked: ValueError naming an unknown one, the closest known one and every known one."""
    import difflib

    for name in names:
        if name not in TOOLSET_NAMES:
            close = difflib.get_close_matches(name, list(TOOLSET_NAMES), n=1)
            raise ValueError(f"unknown toolset {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                             + f"; choose from: {', '.join(TOOLSET_NAMES)}")
    return names


def may_list(tool: str, toolsets: list[str] | None) -> bool:
    """Whether `tool` is shown to this request's caller: in an enabled toolset, and callable with its role."""
    if toolsets is not None and toolset_of(tool) not in toolsets:
        return False
    role = caller_role()
    return role is None or role_rank(role) >= role_rank(role_of(tool))


def require_toolset(tool: str, toolsets: list[str] | None) -> None:
    """InputError for a tool outside the server's toolsets: it is not listed, so it is not callable either."""
    if toolsets is None or toolset_of(tool) in toolsets:
        return
    raise InputError(f"{tool} is in the toolset {toolset_of(tool)!r}, which this server does not enable "
                     f"(JUDGE_MCP_TOOLSETS={','.join(toolsets)}); add it there to use {tool}")


# The header a superadmin token names the organization it acts for with (else the token's own organization).
ORGANIZATION_HEADER = "x-judge-organization"


def caller_role() -> Role | None:
    """The role of this request's bearer token; None on stdio or an HTTP server without tokens."""
    from mcp.server.auth.middleware.auth_context import get_access_token

    token = get_access_token()
    if token is None:
        return None
    for scope in token.scopes:
        if scope in ROLES:
            return scope
    return "member"


def require_role(tool: str) -> None:
    """ForbiddenError naming the role `tool` needs when this request's token has a lower one."""
    role = caller_role()
    if role is None:
        return
    needed = role_of(tool)
    if role_rank(role) < role_rank(needed):
        raise ForbiddenError(f"{tool} needs the {needed} role; this token has the {role} role (ask an "
                             f"administrator of your organization for an {needed} token)")


def superadmin_organization(ctx: Any) -> str | None:
    """The organization a superadmin's request names in the X-Judge-Organization header, if any."""
    if caller_role() != "superadmin":
        return None
    try:
        request = ctx.request_context.request
    except (AttributeError, ValueError):
        return None
    headers = getattr(request, "headers", None)
    value = headers.get(ORGANIZATION_HEADER) if headers is not None else None
    return value.strip() or None if isinstance(value, str) else None
