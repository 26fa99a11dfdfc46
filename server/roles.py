"""The one table of which role each tool needs over HTTP with tokens, and the check made before every call.

A token's role rides in its AccessToken's scopes (server/auth.py). On stdio, and over HTTP without tokens
(loopback only), the caller is the server's owner: no check. Every registered tool must appear here (a test
checks), so a new tool is never callable by a role nobody decided on.
"""

from __future__ import annotations

from typing import Any

from judges.errors import ForbiddenError, InputError
from judges.store.access import ROLES, Role, role_rank

# `admin` manages the organization's judges and their documents; `member` uses them.
TOOL_ROLES: dict[str, Role] = {
    "create_agent": "admin", "update_agent": "admin", "delete_agent": "admin",
    "upload_guideline": "admin", "delete_guideline": "admin",
    "align_judge": "admin",  # keeps its revision as a new agent
    **{name: "member" for name in (
        "list_agents", "get_agent", "list_guidelines", "search_guidelines",
        "evaluate_image", "optimize_prompt", "get_run", "list_runs", "pairwise_compare",
        "score_text", "compare_to_reference", "rank_texts", "evaluate_rag_answer", "evaluate_trajectory",
        "evaluate_analysis", "judge_code", "propose_patch", "validate_patch", "apply_patch",
        "get_job", "list_jobs", "cancel_job", "get_usage", "calibrate_judge", "get_calibration",
        "certify_judge",
    )},
}

# The toolsets (JUDGE_MCP_TOOLSETS): groups of tools a host may list and call; each tool is in exactly one.
TOOLSETS: dict[str, tuple[str, ...]] = {
    "agents": ("create_agent", "list_agents", "get_agent", "update_agent", "delete_agent",
               "upload_guideline", "list_guidelines", "delete_guideline", "search_guidelines"),
    "images": ("evaluate_image", "optimize_prompt", "get_run", "list_runs"),
    "compare": ("pairwise_compare",),
    "code": ("judge_code", "propose_patch"),
    "patches": ("validate_patch", "apply_patch"),
    "analysis": ("evaluate_analysis",),
    "text": ("score_text", "compare_to_reference", "rank_texts", "evaluate_rag_answer", "evaluate_trajectory"),
    "calibration": ("calibrate_judge", "get_calibration", "certify_judge", "align_judge"),
    "jobs": ("get_job", "list_jobs", "cancel_job", "get_usage"),
}
TOOLSET_OF: dict[str, str] = {tool: name for name, tools in TOOLSETS.items() for tool in tools}


def check_toolsets(names: list[str]) -> list[str]:
    """The toolset names, checked: ValueError naming an unknown one, the closest known one and every known one."""
    import difflib

    for name in names:
        if name not in TOOLSETS:
            close = difflib.get_close_matches(name, list(TOOLSETS), n=1)
            raise ValueError(f"unknown toolset {name!r}" + (f" (did you mean {close[0]!r}?)" if close else "")
                             + f"; choose from: {', '.join(TOOLSETS)}")
    return names


def may_list(tool: str, toolsets: list[str] | None) -> bool:
    """Whether `tool` is shown to this request's caller: in an enabled toolset, and callable with its role."""
    if toolsets is not None and TOOLSET_OF.get(tool) not in toolsets:
        return False
    role = caller_role()
    return role is None or role_rank(role) >= role_rank(TOOL_ROLES.get(tool, "admin"))


def require_toolset(tool: str, toolsets: list[str] | None) -> None:
    """InputError for a tool outside the server's toolsets: it is not listed, so it is not callable either."""
    if toolsets is None or TOOLSET_OF.get(tool) in toolsets:
        return
    raise InputError(f"{tool} is in the toolset {TOOLSET_OF.get(tool)!r}, which this server does not enable "
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
    needed = TOOL_ROLES.get(tool, "admin")
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
