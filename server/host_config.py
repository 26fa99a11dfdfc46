"""`judge-mcp config <host>`: a ready server block for a host's MCP configuration, with absolute
paths, so the host can start the server from any directory (hosts do not start it in the checkout)."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path
from typing import Any

from .settings import (
    Settings,
    is_secret,
    set_in_environment,
    unknown_in_environment,
    url_without_password,
    variable_names,
)

# Where each host keeps the block (printed with it, and in the README).
HOSTS: dict[str, dict[str, str]] = {
    "claude-desktop": {
        "key": "mcpServers",
        "where": "claude_desktop_config.json — macOS: ~/Library/Application Support/Claude/; "
                 "Windows: %APPDATA%\\Claude\\; Linux: ~/.config/Claude/",
    },
    "cursor": {
        "key": "mcpServers",
        "where": ".cursor/mcp.json in a project, or for all projects ~/.cursor/mcp.json (Windows: "
                 "%USERPROFILE%\\.cursor\\mcp.json)",
    },
    "vscode": {
        "key": "servers",
        "where": ".vscode/mcp.json in a workspace, or the user mcp.json ('MCP: Open User Configuration'; macOS: "
                 "~/Library/Application Support/Code/User/, Windows: %APPDATA%\\Code\\User\\, Linux: ~/.config/Code/User/)",
    },
    "claude-code": {
        "key": "mcpServers",
        "where": ".mcp.json at the project root (or: claude mcp add-json judge '<the inner object>')",
    },
}


def server_command() -> str:
    """The absolute path of this installation's `judge-mcp` script."""
    beside = Path(sys.executable).with_name("judge-mcp")
    if beside.exists():
        return str(beside.absolute())
    found = shutil.which("judge-mcp")
    if found:
        return str(Path(found).absolute())
    return str(Path(sys.argv[0]).absolute())


# Settings that name files or directories: written absolute, because hosts start the server from their own
# directory (often /), where a relative path would point elsewhere.
PATH_SETTINGS = ("home", "model_cache", "analysis_categories_dir")


def carried_env(settings: Settings) -> tuple[dict[str, str], list[str]]:
    """Every setting set in this environment, as the host should pass it, and the placeholders it holds.
    Credentials (API keys, bearer tokens, a database password) are never written: each becomes a placeholder
    such as `<your OPENAI_API_KEY>` for the person to fill in."""
    names = variable_names()
    env: dict[str, str] = {}
    placeholders: list[str] = []
    for var, value in set_in_environment().items():
        field = next(f for f, v in names.items() if v == var)
        if field in ("model", "allowed_roots"):
            continue  # always written, below
        if not value.strip():
            env[var] = value  # set empty: nothing to hide
        elif field == "tokens" and value.strip().startswith("@"):
            env[var] = "@" + str(Path(value.strip()[1:]).expanduser().resolve())  # a file's path, not a secret
        elif is_secret(var):
            env[var] = f"<your {var}>"
            placeholders.append(var)
        elif field in PATH_SETTINGS:
            env[var] = str(getattr(settings, field) if field == "home" else Path(value).expanduser().resolve())
        else:
            shown = url_without_password(value, f"<password for {var}>")
            if shown != value:
                placeholders.append(var)
            env[var] = shown
    return env, placeholders


def host_config(host: str, *, roots: list[str] | None, settings: Settings) -> tuple[dict[str, Any], list[str]]:
    """The configuration block `host` reads, holding one server named `judge`, and the variables in it that
    hold a placeholder. Roots: `roots` when given, else JUDGE_MCP_ALLOWED_ROOTS when set, else the current
    directory. The data home is always written, so the host's server opens the same data as this shell's."""
    if host not in HOSTS:
        raise ValueError(f"unknown host {host!r}; choose one of: {', '.join(HOSTS)}")
    if roots is None and settings.allowed_roots:
        resolved = list(settings.allowed_roots)
    else:
        defaulted = not roots
        roots = roots or ["."]
        resolved = [Path(r).expanduser().resolve() for r in roots]
        for given, path in zip(roots, resolved, strict=True):
            said = f"no --root given, so the current directory ({path})" if defaulted else f"--root {given}"
            if not path.is_dir():
                raise ValueError(f"{said}: no such directory (give a directory the tools may use, e.g. "
                                 "your project: --root ~/code/my-project)")
            if path == Path(path.anchor):
                raise ValueError(f"{said}: the whole filesystem is never a root; name a project directory, e.g. "
                                 "--root ~/code/my-project")
    carried, placeholders = carried_env(settings)
    env = {"JUDGE_MCP_MODEL": settings.model, "JUDGE_MCP_ALLOWED_ROOTS": os.pathsep.join(map(str, resolved)),
           "JUDGE_MCP_HOME": str(settings.home), **carried}
    entry: dict[str, Any] = {"command": server_command(), "args": [], "env": env}
    if host in ("vscode", "claude-code"):
        entry = {"type": "stdio", **entry}
    return {HOSTS[host]["key"]: {"judge": entry}}, placeholders


def print_host_config(host: str, roots: list[str] | None, settings: Settings) -> None:
    """The block on stdout (to paste or redirect); where it goes, and what to fill in, on stderr."""
    block, placeholders = host_config(host, roots=roots, settings=settings)
    print(f"# {host}: put this in {HOSTS[host]['where']}", file=sys.stderr)
    if placeholders:
        names = ", ".join(placeholders)
        print(f"# fill in the placeholders (<...>) of {names}: their values are never printed", file=sys.stderr)
    unknown = unknown_in_environment()
    if unknown:
        print(f"# left out, not settings of this version: {', '.join(unknown)}", file=sys.stderr)
    sys.stdout.write(json.dumps(block, indent=2) + "\n")  # a CLI command's output, not the stdio server
