"""Which directories a call may touch: its organization's own roots.

- JUDGE_MCP_ORG_ROOTS set: each organization's own roots (stdio and HTTP alike); an organization it does not
  name has no file access.
- Else JUDGE_MCP_ALLOWED_ROOTS, for the one organization the server serves: stdio's, an HTTP server's without
  tokens, or, over HTTP with tokens, the one organization every token names (fixed at start, so a token
  created later for another organization gets no roots). An HTTP server whose tokens name several
  organizations (or a superadmin, who may act for any) does not start with roots every organization would
  share (`shared_roots_owner`).
- Else, on stdio, the client's MCP roots; else none.

The data home is never reachable through a root: settings refuse a configured root that holds it or lies in
it, and a client's root that does is ignored here (with a warning).
"""

from __future__ import annotations

import logging
import os
import urllib.parse
from collections.abc import Iterable
from pathlib import Path

from judges.inputs.paths import NO_ROOTS, Roots, inside

from .auth import split_role
from .settings import Settings

log = logging.getLogger("judge_mcp")


def no_org_roots(org: str) -> str:
    return (f"no file access for organization {org!r}: on a server with several organizations each organization "
            "has its own roots, and none are configured for this one. Whoever runs the server sets "
            f"JUDGE_MCP_ORG_ROOTS, e.g. JUDGE_MCP_ORG_ROOTS='{org}=/srv/{org}' (several organizations: "
            "'acme=/srv/acme:/srv/acme-docs;globex=/srv/globex'); or pass the content inline instead")


def shared_roots_owner(settings: Settings, stored: Iterable[tuple[str, str]]) -> str | None:
    """The one organization an HTTP server with tokens serves (the owner of JUDGE_MCP_ALLOWED_ROOTS), from the
    configured tokens and the live stored ones (organization, role); None when there are several. SystemExit
    when JUDGE_MCP_ALLOWED_ROOTS is set and would be shared by several organizations."""
    owners = [split_role(value) for value in settings.tokens.values()] + list(stored)
    orgs = sorted({org for org, _ in owners})
    superadmin = any(role == "superadmin" for _, role in owners)
    if len(orgs) == 1 and not superadmin:
        return orgs[0]
    if settings.allowed_roots and not settings.org_roots:
        who = "a superadmin token, who may act for any organization" if superadmin else \
            "tokens of several organizations (" + ", ".join(orgs) + ")"
        example = ";".join(f"{org}=/srv/{org}" for org in (orgs if len(orgs) > 1 else [*orgs, "other"])[:3])
        raise SystemExit(
            f"judge-mcp: JUDGE_MCP_ALLOWED_ROOTS would be shared by every organization of this HTTP server (it has "
            f"{who}): one organization could read and overwrite another's files. Give each organization its own "
            f"roots with JUDGE_MCP_ORG_ROOTS instead, e.g. JUDGE_MCP_ORG_ROOTS='{example}', and unset "
            "JUDGE_MCP_ALLOWED_ROOTS")
    return None


def warn_shared_org_roots(settings: Settings) -> None:
    """A warning at start for each pair of organizations whose JUDGE_MCP_ORG_ROOTS overlap (allowed: a shared
    directory may be meant, but each then reads and writes the other's files there)."""
    items = [(org, root) for org, roots in settings.org_roots.items() for root in roots]
    for i, (org, root) in enumerate(items):
        for other, other_root in items[i + 1:]:
            if org != other and (inside(root, other_root) or inside(other_root, root)):
                log.warning("JUDGE_MCP_ORG_ROOTS: organizations %r (%s) and %r (%s) share files: each can read and "
                            "overwrite the other's there", org, root, other, other_root)


def call_roots(settings: Settings, org: str, *, authenticated: bool, owner: str | None,
               client: Iterable[str] = ()) -> Roots:
    """The roots of one call by `org` (see the module docstring); `client` the client's root URIs (stdio)."""
    if settings.org_roots:
        return Roots(settings.org_roots.get(org, []), none=no_org_roots(org),
                     outside=f"the roots of organization {org!r} are set by JUDGE_MCP_ORG_ROOTS")
    if authenticated and org != owner:
        return Roots(none=no_org_roots(org))
    if settings.allowed_roots:
        return Roots(settings.allowed_roots)
    return Roots(client_roots(client, settings.home), none=NO_ROOTS,
                 outside="add it to the client's roots, or set JUDGE_MCP_ALLOWED_ROOTS to allow it")


def client_roots(uris: Iterable[str], home: Path) -> list[Path]:
    """The client's file:// roots as directories of this machine; never '/', nor one that holds the data home
    or lies in it (the server's database and cached tool listing are never a caller's files)."""
    home = Path(os.path.realpath(home))
    roots: list[Path] = []
    for text in uris:
        uri = urllib.parse.urlsplit(text)
        if uri.scheme != "file" or uri.netloc not in ("", "localhost"):
            continue
        path = Path(os.path.realpath(urllib.parse.unquote(uri.path)))
        if path == Path(path.anchor):
            log.warning("ignoring the client's root %s: it would open the whole filesystem", text)
            continue
        if inside(home, path) or inside(path, home):
            log.warning("ignoring the client's root %s: it holds the server's data home %s (or lies in it); "
                        "set JUDGE_MCP_HOME outside it", text, home)
            continue
        roots.append(path)
    return roots
